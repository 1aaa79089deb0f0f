# TensorFlow: its GPU devices appear only when it could open the CUDA
# libraries it dlopen's (it logs "Could not load dynamic library" or "Cannot
# dlopen some GPU libraries" and goes on without them).
import tensorflow as tf

step("import tensorflow", lambda: tf.__version__)

if not tf.test.is_built_with_cuda():
    print("ok: TensorFlow is a CPU build: no GPU steps", flush=True)
elif not has_gpu():
    skip(["GPU devices"])
else:
    def gpus():
        d = tf.config.list_physical_devices("GPU")
        if not d:
            raise RuntimeError("no GPU device: TensorFlow could not open its CUDA libraries (see the log above)")
        return ", ".join(x.name for x in d)

    step("GPU devices", gpus)

finish()
