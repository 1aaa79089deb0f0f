"""Real GPU work in one framework, in this (new) process, one line per
library family: "ok   FRAMEWORK FAMILY" or "FAIL FRAMEWORK FAMILY: error".
Then the CUDA libraries the process mapped, with their real files, so a
reader sees which copy and version ran. Exit status: the number of
failures (0 = all passed).

Usage: python3 gpu_work.py torch|jax|cupy
"""
import os
import sys
import traceback

failures = []


def check(framework, family, fn):
    try:
        fn()
        print(f"ok   {framework} {family}", flush=True)
    except BaseException as e:  # a framework may raise anything
        msg = " ".join(str(e).split())[:400]
        print(f"FAIL {framework} {family}: {type(e).__name__}: {msg}", flush=True)
        if os.environ.get("GPU_WORK_TRACE"):
            traceback.print_exc()
        failures.append(family)


def mapped_cuda_libraries():
    seen = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                continue
            p = parts[5]
            base = os.path.basename(p)
            if any(base.startswith(x) for x in ("libcu", "libnv", "libcudnn", "libnccl")) and p not in seen:
                seen[p] = os.path.realpath(p)
    for p in sorted(seen):
        real = seen[p]
        print(f"     mapped {p}" + (f" -> {real}" if real != p else ""))


def torch_work():
    import torch

    dev = "cuda"
    print(f"     torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    a = torch.randn(256, 256, device=dev)

    def sync(x):
        torch.cuda.synchronize()
        return x

    check("torch", "cuBLAS matmul", lambda: sync(a @ a))

    def cudnn_conv():
        v = torch.backends.cudnn.version()  # raises on a version mismatch
        print(f"     cudnn version {v}")
        conv = torch.nn.Conv2d(3, 8, 3).to(dev)
        sync(conv(torch.randn(2, 3, 32, 32, device=dev)))

    check("torch", "cuDNN conv2d", cudnn_conv)
    check("torch", "cuDNN LSTM", lambda: sync(torch.nn.LSTM(16, 32).to(dev)(torch.randn(5, 3, 16, device=dev))))
    check("torch", "cuFFT", lambda: sync(torch.fft.fft(torch.randn(4096, device=dev))))
    check("torch", "cuSOLVER", lambda: sync(torch.linalg.eigh(a @ a.T + torch.eye(256, device=dev))))
    check("torch", "cuSPARSE", lambda: sync(torch.sparse.mm(torch.eye(64, device=dev).to_sparse(), torch.randn(64, 8, device=dev))))

    def sparselt():
        from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured

        SparseSemiStructuredTensor._FORCE_CUTLASS = False  # cuSPARSELt, not CUTLASS
        w = torch.tensor([0, 0, 1, 1], dtype=torch.float16, device=dev).tile((128, 32))
        x = torch.rand(128, 128, dtype=torch.float16, device=dev)
        ws = to_sparse_semi_structured(w)
        y = sync(torch.mm(ws, x))
        assert torch.allclose(y, torch.mm(w, x), rtol=1e-2, atol=1e-2), "2:4 product differs from the dense one"

    check("torch", "cuSPARSELt 2:4", sparselt)

    def jiterator():
        fn = torch.cuda.jiterator._create_jit_fn("template <typename T> T fma1(T x, T y) { return x * y + T(1); }")
        y = sync(fn(a, a))
        assert torch.allclose(y, a * a + 1)

    check("torch", "NVRTC jiterator", jiterator)


def jax_work():
    import jax
    import jax.numpy as jnp

    devs = jax.devices()
    print(f"     jax {jax.__version__} devices {devs}")
    if devs[0].platform != "gpu":
        check("jax", "GPU backend", lambda: (_ for _ in ()).throw(RuntimeError(f"JAX runs on {devs[0].platform}, not the GPU")))
        return
    x = jnp.ones((256, 256), dtype=jnp.float32)
    check("jax", "cuBLAS matmul", lambda: jax.jit(lambda m: m @ m)(x).block_until_ready())
    check("jax", "cuFFT", lambda: jnp.fft.fft(jnp.ones(4096)).block_until_ready())
    check("jax", "cuDNN conv", lambda: jax.lax.conv(jnp.ones((1, 3, 32, 32)), jnp.ones((8, 3, 3, 3)), (1, 1), "SAME").block_until_ready())
    check("jax", "cuSOLVER eigh", lambda: jnp.linalg.eigh(x @ x.T + jnp.eye(256))[0].block_until_ready())


def cupy_work():
    import cupy as cp

    print(f"     cupy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}")
    sync = cp.cuda.Device().synchronize
    check("cupy", "cuRAND", lambda: (cp.random.rand(256, 256), sync()))
    a = cp.random.rand(256, 256)
    check("cupy", "cuBLAS matmul", lambda: (a @ a, sync()))
    check("cupy", "cuFFT", lambda: (cp.fft.fft(a), sync()))
    check("cupy", "cuSOLVER eigh", lambda: (cp.linalg.eigh(a @ a.T), sync()))

    def nvrtc():
        k = cp.RawKernel(r'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }', "twice")
        x = cp.ones(32, dtype=cp.float32)
        k((1,), (32,), (x,))
        sync()
        assert float(x.sum()) == 64.0

    check("cupy", "NVRTC kernel", nvrtc)


work = {"torch": torch_work, "jax": jax_work, "cupy": cupy_work}[sys.argv[1]]
try:
    work()
except BaseException as e:
    print(f"FAIL {sys.argv[1]} import: {type(e).__name__}: {' '.join(str(e).split())[:400]}")
    failures.append("import")
mapped_cuda_libraries()
print(f"{sys.argv[1]}: {len(failures)} failure(s)")
sys.exit(min(len(failures), 100))
