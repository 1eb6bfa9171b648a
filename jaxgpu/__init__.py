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
"""

from jaxgpu.data import Dataset, digits
from jaxgpu.devices import BackendError, configure, fingerprint, resolve
from jaxgpu.fit import MemoryEstimate, transformer_inference, transformer_train
from jaxgpu.fit import mlp_train as estimate_mlp_train
from jaxgpu.hardware import GPUS, Hardware, cpu_estimate, for_device, gpu_spec
from jaxgpu.matmul import (MamfResult, MatmulResult, bench_jax, bench_numpy, bench_torch, mamf_search, operands,
                           worked_example)
from jaxgpu.memory import bench_fma, bench_stream, bench_transfer, stream_arrays
from jaxgpu.distributed import DistributedFailure, DistributedResult
from jaxgpu.distributed import launch as launch_distributed
from jaxgpu.mlp import MLP, LossScale, TrainResult, make_infer_step, make_train_step, train
from jaxgpu.parallel import (CollectiveResult, DataParallel, TensorParallel, bench_collective, data_parallel,
                             make_mesh, tensor_parallel)
from jaxgpu.precision import PRESETS, Format, Preset, formats, quantize
from jaxgpu.precision import matmul as precision_matmul
from jaxgpu.precision import use as use_precision
from jaxgpu.results import DoesNotFit, Record, ResultsError, Run, Unsupported, merge, read_run
from jaxgpu.stack import op_flops
from jaxgpu.timing import Timing, time_host, time_jitted

__all__ = [
    "Dataset", "digits",
    "MemoryEstimate", "estimate_mlp_train", "transformer_inference", "transformer_train",
    "bench_fma", "bench_stream", "bench_transfer", "stream_arrays",
    "MLP", "LossScale", "TrainResult", "make_infer_step", "make_train_step", "train",
    "op_flops",
    "DistributedFailure", "DistributedResult", "launch_distributed",
    "CollectiveResult", "DataParallel", "TensorParallel", "bench_collective", "data_parallel", "make_mesh",
    "tensor_parallel",
    "BackendError", "configure", "fingerprint", "resolve",
    "GPUS", "Hardware", "cpu_estimate", "for_device", "gpu_spec",
    "MamfResult", "MatmulResult", "bench_jax", "bench_numpy", "bench_torch", "mamf_search", "operands",
    "worked_example",
    "PRESETS", "Format", "Preset", "formats", "quantize", "precision_matmul", "use_precision",
    "DoesNotFit", "Record", "ResultsError", "Run", "Unsupported", "merge", "read_run",
    "Timing", "time_host", "time_jitted",
]
