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

The library lives in four rooms: ``jaxgpu.ground`` (devices, timing, precision, the hardware table, HLO
counts), ``jaxgpu.kernels`` (what is measured), ``jaxgpu.pricing`` (XLA's plans priced for a GPU, memory fit) and
``jaxgpu.records`` (results, labels, figures); every name below is also ``jaxgpu.<name>``.

Names are imported when first used: ``import jaxgpu`` starts no JAX, so the parts that only
read results (records, reports, hardware tables) work where JAX is not installed.
"""

import importlib
import importlib.util

# public name -> (module, attribute): each module's names, then the names that differ from the attribute's
_NAMES = {
    "ground.devices": ("BackendError", "configure", "fingerprint", "resolve", "allocator_in_use", "allocator_command"),
    "ground.timing": ("Timing", "time_host", "time_jitted"),
    "ground.presets": ("PRESETS", "Preset", "Format", "formats"),
    "ground.precision": ("quantize",),
    "ground.hardware": ("find_gpu", "GPUS", "Hardware", "cpu_estimate", "for_device", "gpu_spec"),
    "ground.data": ("Dataset", "digits", "synthetic"),
    "ground.stack": ("op_flops",),
    "ground.decoders": ("Decoder", "MODELS", "StepSettings", "from_hf_config"),
    "kernels.matmul": ("MamfResult", "MatmulResult", "bench_jax", "bench_numpy", "bench_torch", "mamf_search",
                       "operands", "worked_example"),
    "kernels.stream": ("bench_stream", "bench_transfer", "stream_arrays"),
    "kernels.chains": ("bench_fma", "bench_matvec", "matmul_point"),
    "kernels.mlp": ("MLP", "LossScale", "TrainResult", "make_infer_step", "make_train_step", "train", "init_state"),
    "kernels.parallel": ("loss_trajectory", "trajectory_error", "CollectiveResult", "DataParallel", "TensorParallel",
                         "bench_collective", "data_parallel", "make_mesh", "tensor_parallel"),
    "kernels.distributed": ("DistributedFailure", "DistributedResult"),
    "pricing.roofline": ("predict", "Prediction", "Roofs", "roofs_for"),
    "pricing.sizing": ("on_gpus", "OnGpus", "GpuRow"),
    "pricing.planner": ("plan_model", "ModelPlan", "model_on_gpus", "NotPriced", "fewest", "fewest_on_gpus",
                        "formula_vs_plan"),
    "pricing.knobs": ("Fit", "fit_on_gpus"),
    "pricing.layouts": ("best_layouts", "Search", "Candidate"),
    "pricing.anystep": ("price_step", "StepPlan", "gpu_mesh"),
    "kernels.encoders": ("vit", "t5", "vit_train_step", "t5_train_step"),
    "pricing.fit": ("MemoryEstimate", "transformer_inference", "transformer_prefill", "transformer_train"),
    "records.results": ("DoesNotFit", "Record", "ResultsError", "Run", "Unsupported", "merge", "read_run"),
    "records.figures": ("Table", "Series", "Limit", "line_plot"),
}
_RENAMED = {
    "estimate_mlp_train": ("pricing.fit", "mlp_train"),
    "fit_with_knobs": ("pricing.knobs", "fit"),
    "largest_that_fits": ("pricing.knobs", "largest"),
    "launch_distributed": ("kernels.distributed", "launch"),
    "precision_matmul": ("ground.precision", "matmul"),
    "use_precision": ("ground.precision", "use"),
}
_EXPORTS = {**{n: (m, n) for m, names in _NAMES.items() for n in names}, **_RENAMED}
__all__ = list(_EXPORTS)


_ROOMS = ("ground", "kernels", "pricing", "records")


def _module(name: str):
    """``jaxgpu.<room>``, or a module of a room by its own name (``jaxgpu.matmul`` is ``jaxgpu.kernels.matmul``)."""
    if name in _ROOMS:
        return importlib.import_module(f"jaxgpu.{name}")
    for room in _ROOMS:
        if importlib.util.find_spec(f"jaxgpu.{room}.{name}") is not None:
            return importlib.import_module(f"jaxgpu.{room}.{name}")
    raise AttributeError(f"module 'jaxgpu' has no attribute {name!r}")


# Public names that moved, found with a warning: name -> (what it is now, how to get it)
_MOVED = {"TRANSFORMERS": ("the classic shapes of jaxgpu.MODELS (jaxgpu.pricing.fit.CLASSIC names them)",
                           lambda: importlib.import_module("jaxgpu.pricing.fit").classic())}


def __getattr__(name: str):
    if name in _MOVED:
        import warnings

        now, get = _MOVED[name]
        warnings.warn(f"jaxgpu.{name} is now {now}", DeprecationWarning, stacklevel=2)
        return get()
    if name not in _EXPORTS:
        return _module(name)
    module, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(f"jaxgpu.{module}"), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted([*globals(), *__all__])
