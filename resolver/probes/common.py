# Shared part of every probe: each step prints one line, "ok: STEP",
# "FAILED: STEP: ERROR" or "no GPU: skipped STEP", and the probe exits 1
# when a step failed.
import glob
import os
import sys
import traceback

_failures = []


def has_gpu():
    # The driver's device nodes: present where a GPU can be used, without
    # asking any framework (a framework's own answer is what is under test).
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/dxg")


def step(name, fn):
    try:
        result = fn()
    except BaseException as e:  # noqa: BLE001 - a probe reports everything
        if isinstance(e, KeyboardInterrupt):
            raise
        _failures.append(name)
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        print("FAILED: %s: %s" % (name, detail), flush=True)
        return None
    print("ok: %s%s" % (name, "" if result is None else ": %s" % (result,)), flush=True)
    return result


def skip(names):
    for n in names:
        print("no GPU: skipped %s" % n, flush=True)


def finish():
    if _failures:
        print("probe failed: %s" % ", ".join(_failures), flush=True)
        sys.exit(1)
    print("probe passed", flush=True)
