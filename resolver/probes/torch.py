# torch: what its first CUDA operations open lazily. cuDNN's sub-libraries
# (convolution), cuFFT (torch.fft), cuSOLVER (torch.linalg), cuSPARSE
# (sparse @ dense), NVRTC and its builtins (jiterator, through
# libcaffe2_nvrtc.so), libcuda.so.1 (CUDA init).
import torch

step("import torch", lambda: torch.__version__)

if torch.version.cuda is None:
    print("ok: torch is a CPU build: no CUDA steps", flush=True)
elif not has_gpu():
    skip(["CUDA init", "cuDNN version", "conv2d (cuDNN)", "matmul (cuBLAS)", "fft (cuFFT)",
          "linalg (cuSOLVER)", "sparse (cuSPARSE)", "jiterator (NVRTC)"])
else:
    def cuda_init():
        torch.cuda.init()
        return torch.cuda.get_device_name(0)

    def cudnn_version():
        # Raises "cuDNN version incompatibility" when the loaded libcudnn is
        # not the one torch was built against.
        v = torch.backends.cudnn.version()
        if v is None:
            raise RuntimeError("cuDNN not available: torch.backends.cudnn.version() is None")
        return v

    def conv():
        x = torch.randn(1, 3, 16, 16, device="cuda")
        w = torch.randn(4, 3, 3, 3, device="cuda")
        y = torch.nn.functional.conv2d(x, w)
        torch.cuda.synchronize()
        return tuple(y.shape)

    def matmul():
        a = torch.randn(16, 16, device="cuda")
        (a @ a).sum().item()

    def fft():
        torch.fft.fft(torch.randn(64, device="cuda")).abs().sum().item()

    def linalg():
        a = torch.randn(8, 8, device="cuda", dtype=torch.float64)
        spd = a @ a.T + 8 * torch.eye(8, device="cuda", dtype=torch.float64)
        torch.linalg.cholesky(spd)
        torch.linalg.eigh(spd)
        torch.cuda.synchronize()

    def sparse():
        s = torch.eye(8, device="cuda").to_sparse_csr()
        (s @ torch.randn(8, 8, device="cuda")).sum().item()

    def jiterator():
        fn = torch.cuda.jiterator._create_jit_fn(
            "template <typename T> T probe_add(T x, T y) { return x + y; }")
        a = torch.ones(4, device="cuda")
        return fn(a, a).sum().item()

    if step("CUDA init", cuda_init) is not None:
        step("cuDNN version", cudnn_version)
        step("conv2d (cuDNN)", conv)
        step("matmul (cuBLAS)", matmul)
        step("fft (cuFFT)", fft)
        step("linalg (cuSOLVER)", linalg)
        step("sparse (cuSPARSE)", sparse)
        step("jiterator (NVRTC)", jiterator)

finish()
