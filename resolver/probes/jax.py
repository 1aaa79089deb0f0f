# JAX with its CUDA plugin: the plugin's PJRT library and what it opens
# when the GPU backend starts (cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE,
# NVRTC, nvJitLink, libcuda.so.1).
import jax

step("import jax", lambda: jax.__version__)

if not has_gpu():
    skip(["GPU devices", "jitted matmul", "fft", "linalg (cuSOLVER)"])
else:
    import jax.numpy as jnp

    def devices():
        # Raises with the plugin's own error ("Unable to initialize backend
        # 'cuda': ...") when the backend cannot start.
        d = jax.devices("gpu")
        return ", ".join(str(x) for x in d)

    def matmul():
        x = jnp.ones((16, 16), dtype=jnp.float32)
        return float(jax.jit(lambda a: a @ a)(x).block_until_ready().sum())

    def fft():
        jnp.fft.fft(jnp.arange(64, dtype=jnp.float32)).block_until_ready()

    def linalg():
        a = jnp.eye(8, dtype=jnp.float32) * 2
        jnp.linalg.cholesky(a).block_until_ready()

    if step("GPU devices", devices) is not None:
        step("jitted matmul", matmul)
        step("fft", fft)
        step("linalg (cuSOLVER)", linalg)

finish()
