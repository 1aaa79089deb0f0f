# onnxruntime-gpu: the CUDA provider (libonnxruntime_providers_cuda.so, and
# through it cuBLAS, cuDNN, cuFFT, cuRAND) is opened only when a session
# asks for it; onnxruntime falls back to the CPU with a logged error, so the
# probe checks which providers the session really got.
import onnxruntime as ort

step("import onnxruntime", lambda: ort.__version__)
providers = step("available providers", ort.get_available_providers) or []


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len(field, payload):
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _int(field, n):
    return _varint(field << 3) + _varint(n)


def identity_model():
    # ModelProto { ir_version 8, graph { node Identity x->y, input x,
    # output y: float[1] }, opset_import { version 13 } }, in protobuf's
    # wire format, so the probe needs no onnx package.
    tensor = _len(1, _int(1, 1) + _len(2, _len(1, _int(1, 1))))
    def value(name):
        return _len(1, name) + _len(2, tensor)
    node = _len(1, b"x") + _len(2, b"y") + _len(4, b"Identity")
    graph = _len(1, node) + _len(2, b"probe") + _len(11, value(b"x")) + _len(12, value(b"y"))
    return _int(1, 8) + _len(7, graph) + _len(8, _int(2, 13))


def session(provider):
    def run():
        s = ort.InferenceSession(identity_model(), providers=[provider, "CPUExecutionProvider"])
        got = s.get_providers()
        if provider not in got:
            raise RuntimeError("%s did not load (the session got %s); its error is logged above" % (provider, got))
        return got
    return run


gpu_providers = [p for p in ("CUDAExecutionProvider", "TensorrtExecutionProvider") if p in providers]
if not gpu_providers:
    print("ok: no GPU execution provider in this build", flush=True)
elif not has_gpu():
    skip(["session with %s" % p for p in gpu_providers])
else:
    for p in gpu_providers:
        step("session with %s" % p, session(p))

finish()
