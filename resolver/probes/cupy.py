# CuPy: it opens every CUDA library on first use, through CUDA Python's
# pathfinder. NVRTC compiles (and opens libnvrtc-builtins) without a GPU,
# so that step runs everywhere.
import cupy

step("import cupy", lambda: cupy.__version__)


def nvrtc_compile():
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram('extern "C" __global__ void probe(float *x) { x[0] = 1.0f; }',
                               "probe.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=compute_75"])
        return "%d bytes of PTX" % len(nvrtc.getPTX(prog))
    finally:
        nvrtc.destroyProgram(prog)


step("NVRTC compile", nvrtc_compile)

if not has_gpu():
    skip(["ElementwiseKernel (NVRTC)", "RawKernel (NVRTC)", "GEMM (cuBLAS)", "fft (cuFFT)",
          "linalg (cuSOLVER)", "random (cuRAND)", "sparse (cuSPARSE)"])
else:
    def elementwise():
        k = cupy.ElementwiseKernel("float32 x", "float32 y", "y = x * 2", "probe_double")
        return float(k(cupy.arange(4, dtype=cupy.float32)).sum())

    def raw():
        k = cupy.RawKernel(r'extern "C" __global__ void probe_fill(float *x) { x[threadIdx.x] = 1.0f; }',
                           "probe_fill")
        x = cupy.zeros(8, dtype=cupy.float32)
        k((1,), (8,), (x,))
        return float(x.sum())

    def gemm():
        a = cupy.ones((16, 16), dtype=cupy.float32)
        return float((a @ a).sum())

    def fft():
        cupy.fft.fft(cupy.arange(64, dtype=cupy.complex64))
        cupy.cuda.Device().synchronize()

    def linalg():
        a = cupy.eye(8, dtype=cupy.float64) * 2
        cupy.linalg.cholesky(a)
        cupy.linalg.solve(a, cupy.ones(8))
        cupy.cuda.Device().synchronize()

    def random():
        return float(cupy.random.rand(16).sum())

    def sparse():
        import cupyx.scipy.sparse as sp
        m = sp.csr_matrix(cupy.eye(8, dtype=cupy.float32))
        return float((m @ cupy.ones((8, 2), dtype=cupy.float32)).sum())

    step("ElementwiseKernel (NVRTC)", elementwise)
    step("RawKernel (NVRTC)", raw)
    step("GEMM (cuBLAS)", gemm)
    step("fft (cuFFT)", fft)
    step("linalg (cuSOLVER)", linalg)
    step("random (cuRAND)", random)
    step("sparse (cuSPARSE)", sparse)

finish()
