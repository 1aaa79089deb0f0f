"""Answers the cases of cases.json with pypa/packaging, the reference.

Reads the case file named on the command line and prints, as JSON, the
packaging version and one answer per case, in order. A case's answer is
what packaging says, or "invalid"/"error" where it refuses.
"""
import json
import sys

import packaging
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

BASE_ENV = {
    "implementation_name": "cpython",
    "implementation_version": "3.12.3",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "6.8.0-45-generic",
    "platform_system": "Linux",
    "platform_version": "#45-Ubuntu SMP PREEMPT_DYNAMIC",
    "python_full_version": "3.12.3",
    "python_version": "3.12",
    "sys_platform": "linux",
    "extra": "",
}


def is_prerelease(text):
    try:
        return Version(text).is_prerelease
    except Exception:
        return False


def answer(case):
    kind = case["kind"]
    try:
        if kind == "version":
            return str(Version(case["in"]))
        if kind == "compare":
            a, b = Version(case["a"]), Version(case["b"])
            return (a > b) - (a < b)
        if kind == "contains":
            spec = SpecifierSet(case["spec"])
            # False asks for PEP 440's default: pre-releases only where a
            # specifier names one (packaging's filter; contains before 26).
            if case.get("pre"):
                return spec.contains(case["version"], prereleases=True)
            return bool(list(spec.filter([case["version"]], prereleases=None))) and (
                not is_prerelease(case["version"]) or bool(spec.prereleases)
            )
        if kind == "marker":
            env = dict(BASE_ENV)
            env.update(case.get("env", {}))
            return Marker(case["marker"]).evaluate(env)
        if kind == "requirement":
            r = Requirement(case["in"])
            return {
                "name": r.name,
                "extras": sorted(r.extras),
                "specifier": sorted(str(s) for s in r.specifier),
                "url": r.url or "",
                "marker": str(r.marker) if r.marker else "",
            }
    except Exception as e:  # packaging's refusal is an answer too
        return "invalid" if kind in ("version", "compare", "contains", "requirement") else "error"
    raise SystemExit("unknown case kind " + kind)


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    print(json.dumps({"version": packaging.__version__, "answers": [answer(c) for c in cases]}))


main()
