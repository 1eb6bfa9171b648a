"""Precision presets as data: a name -> operand dtype, accumulation, XLA precision, quantisation.

=========  ==============  ===============  ==============================  ============
preset     operands        accumulate in    XLA precision / quantisation    peak (table)
=========  ==============  ===============  ==============================  ============
fp64       float64         float64          HIGHEST, under scoped x64       fp64
fp32       float32         float32          HIGHEST (true fp32 everywhere)  fp32
tf32       float32         float32          "tensorfloat32" (HIGH): TF32    tf32
                                            Tensor Cores on Ampere/Hopper;
                                            plain fp32 on CPU
bf16       bfloat16        float32          DEFAULT                         bf16
fp16       float16         float32          DEFAULT                         fp16
fp8_e4m3   float8_e4m3fn   float32          per-tensor scale to fp8 range   fp8
fp8_e5m2   float8_e5m2     float32          per-tensor scale to fp8 range   fp8
int8       int8            int32            symmetric per-channel scale     int8
=========  ==============  ===============  ==============================  ============

XLA's DEFAULT precision for an fp32 matmul on Ampere/Hopper GPUs is TF32, which is why
``fp32`` says HIGHEST explicitly and every record states the precision it ran with.

This module is the table alone and imports no JAX, so reports and views can name the
presets; ``jaxgpu.ground.precision`` applies them.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes  # registers bfloat16 and the float8 types with numpy; their finfo
import numpy as np


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named precision: operand dtype, accumulator dtype, XLA precision, and how it is quantised."""

    name: str
    operand_dtype: str
    accum_dtype: str
    precision: str  # a jax.lax.Precision name: "highest", "tensorfloat32", "default"
    quantized: bool  # operands are scaled into the format's range (int8, fp8)
    hardware_dtype: str  # key into jaxgpu.ground.hardware.Hardware.tflops
    tolerance: float  # rel_error vs float64 accepted on random normal inputs (k up to a few thousand)

    @property
    def bytes_per_element(self) -> int:
        return np.dtype(self.operand_dtype).itemsize

    @property
    def needs_x64(self) -> bool:
        return self.operand_dtype == "float64"


# Tolerances: fp32 sums k roundings of 2^-24; TF32 and fp16 keep 10 mantissa bits
# (about 1e-3 after accumulation), bf16 keeps 7 (about 1e-2 worst case); quantised
# formats are bounded by their step: int8 per-channel about 1%, fp8 e4m3 (3 bits)
# about 5%, e5m2 (2 bits) about 10%, each with a factor two of room.
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("fp64", "float64", "float64", "highest", False, "fp64", 1e-12),
    Preset("fp32", "float32", "float32", "highest", False, "fp32", 1e-5),
    Preset("tf32", "float32", "float32", "tensorfloat32", False, "tf32", 5e-3),
    Preset("bf16", "bfloat16", "float32", "default", False, "bf16", 2e-2),
    Preset("fp16", "float16", "float32", "default", False, "fp16", 5e-3),
    Preset("fp8_e4m3", "float8_e4m3fn", "float32", "default", True, "fp8", 0.1),
    Preset("fp8_e5m2", "float8_e5m2", "float32", "default", True, "fp8", 0.2),
    Preset("int8", "int8", "int32", "default", True, "int8", 3e-2),
)}


# ---------------------------------------------------------------- number formats


@dataclasses.dataclass(frozen=True)
class Format:
    """One number format's properties, computed from ml_dtypes' finfo / iinfo (what jnp.finfo reads)."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    eps: float
    max: float
    min_normal: float
    decimal_digits: float


def formats() -> list[Format]:
    """Every format the presets use, plus TF32 (fp32 storage, a 10-bit mantissa in the Tensor Core)."""
    out = []
    for name in ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"):
        fi = ml_dtypes.finfo(np.dtype(name))
        out.append(Format(name, int(fi.bits), int(fi.nexp), int(fi.nmant), float(fi.eps), float(fi.max),
                          float(fi.smallest_normal), float(np.log10(2.0) * (fi.nmant + 1))))
        if name == "float32":
            # TF32 keeps fp32's 8-bit exponent and fp16's 10-bit mantissa: 19 bits used.
            out.append(Format("tf32", 19, 8, 10, 2.0**-10, float(fi.max), float(fi.smallest_normal),
                              float(np.log10(2.0) * 11)))
    ii = ml_dtypes.iinfo(np.int8)
    out.append(Format("int8", 8, 0, 7, 1.0, float(ii.max), 1.0, float(np.log10(2.0) * 7)))
    return out
