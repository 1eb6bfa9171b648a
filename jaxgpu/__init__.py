"""jaxgpu: what does a GPU really buy deep learning, and why? Measured through JAX and XLA.

The library measures and returns data (typed records, figures); it prints nothing and
writes no files. ``experiments`` drives it and writes reports. Quick tour::

    import jaxgpu
    jaxgpu.worked_example()                  # [[19, 22], [43, 50]] on the default device
    r = jaxgpu.bench_jax(jaxgpu.operands(1024, 1024, 1024), "bf16")   # any preset in jaxgpu.PRESETS
    r.gflops, r.timing.median_s, r.rel_error
    jaxgpu.cpu_estimate().peak_flops("fp32") # this CPU's estimated peak, FLOP/s
    with jaxgpu.use_precision("int8"):       # calls without a preset follow the scope
        jaxgpu.precision_matmul(a, b)
    jaxgpu.bench_collective("all_reduce", jax.devices(), 1 << 20).busbw   # bytes/s, NCCL-tests' definition

Names are imported when first used: ``import jaxgpu`` starts no JAX, so the parts that only
read results (records, reports, hardware tables) work where JAX is not installed.
"""

import importlib
import importlib.util

# public name -> (module, attribute)
_EXPORTS = {
    "Dataset": ("data", "Dataset"), "digits": ("data", "digits"),
    "MemoryEstimate": ("fit", "MemoryEstimate"), "estimate_mlp_train": ("fit", "mlp_train"),
    "transformer_inference": ("fit", "transformer_inference"), "transformer_train": ("fit", "transformer_train"),
    "bench_fma": ("memory", "bench_fma"), "bench_stream": ("memory", "bench_stream"),
    "bench_transfer": ("memory", "bench_transfer"), "stream_arrays": ("memory", "stream_arrays"),
    "MLP": ("mlp", "MLP"), "LossScale": ("mlp", "LossScale"), "TrainResult": ("mlp", "TrainResult"),
    "make_infer_step": ("mlp", "make_infer_step"), "make_train_step": ("mlp", "make_train_step"),
    "train": ("mlp", "train"),
    "op_flops": ("stack", "op_flops"),
    "predict": ("prediction", "predict"), "Prediction": ("prediction", "Prediction"),
    "on_gpus": ("sizing", "on_gpus"), "OnGpus": ("sizing", "OnGpus"), "GpuRow": ("sizing", "GpuRow"),
    "plan_model": ("sizing", "plan_model"), "ModelPlan": ("sizing", "ModelPlan"),
    "model_on_gpus": ("sizing", "model_on_gpus"),
    "find_gpu": ("hardware", "find_gpu"), "init_state": ("mlp", "init_state"), "synthetic": ("data", "synthetic"),
    "bench_matvec": ("memory", "bench_matvec"), "matmul_point": ("memory", "matmul_point"),
    "TRANSFORMERS": ("fit", "TRANSFORMERS"), "loss_trajectory": ("parallel", "loss_trajectory"),
    "trajectory_error": ("parallel", "trajectory_error"),
    "Table": ("report", "Table"), "Series": ("report", "Series"), "Limit": ("report", "Limit"),
    "line_plot": ("report", "line_plot"),
    "Roofs": ("prediction", "Roofs"), "roofs_for": ("prediction", "roofs_for"),
    "DistributedFailure": ("distributed", "DistributedFailure"),
    "DistributedResult": ("distributed", "DistributedResult"), "launch_distributed": ("distributed", "launch"),
    "CollectiveResult": ("parallel", "CollectiveResult"), "DataParallel": ("parallel", "DataParallel"),
    "TensorParallel": ("parallel", "TensorParallel"), "bench_collective": ("parallel", "bench_collective"),
    "data_parallel": ("parallel", "data_parallel"), "make_mesh": ("parallel", "make_mesh"),
    "tensor_parallel": ("parallel", "tensor_parallel"),
    "BackendError": ("devices", "BackendError"), "configure": ("devices", "configure"),
    "fingerprint": ("devices", "fingerprint"), "resolve": ("devices", "resolve"),
    "allocator_in_use": ("devices", "allocator_in_use"), "allocator_command": ("devices", "allocator_command"),
    "GPUS": ("hardware", "GPUS"), "Hardware": ("hardware", "Hardware"), "cpu_estimate": ("hardware", "cpu_estimate"),
    "for_device": ("hardware", "for_device"), "gpu_spec": ("hardware", "gpu_spec"),
    "MamfResult": ("matmul", "MamfResult"), "MatmulResult": ("matmul", "MatmulResult"),
    "bench_jax": ("matmul", "bench_jax"), "bench_numpy": ("matmul", "bench_numpy"),
    "bench_torch": ("matmul", "bench_torch"), "mamf_search": ("matmul", "mamf_search"),
    "operands": ("matmul", "operands"), "worked_example": ("matmul", "worked_example"),
    "PRESETS": ("presets", "PRESETS"), "Preset": ("presets", "Preset"), "Format": ("presets", "Format"),
    "formats": ("presets", "formats"), "quantize": ("precision", "quantize"),
    "precision_matmul": ("precision", "matmul"), "use_precision": ("precision", "use"),
    "DoesNotFit": ("results", "DoesNotFit"), "Record": ("results", "Record"), "ResultsError": ("results",
                                                                                               "ResultsError"),
    "Run": ("results", "Run"), "Unsupported": ("results", "Unsupported"), "merge": ("results", "merge"),
    "read_run": ("results", "read_run"),
    "Timing": ("timing", "Timing"), "time_host": ("timing", "time_host"), "time_jitted": ("timing", "time_jitted"),
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        if importlib.util.find_spec(f"jaxgpu.{name}") is None:  # jaxgpu.data, jaxgpu.mlp, ... as modules
            raise AttributeError(f"module 'jaxgpu' has no attribute {name!r}")
        return importlib.import_module(f"jaxgpu.{name}")
    module, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(f"jaxgpu.{module}"), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted([*globals(), *__all__])
