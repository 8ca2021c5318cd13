"""Microscaling (OCP MX v1.0) quantization in numpy, element rounding by `ml_dtypes`.

A tensor is seen as a matrix: the reduction axis (`axis`) last, every other axis flattened into
rows. Groups are `group.rows x group.cols` tiles of that matrix (a vector group is 1 x k along
the reduction axis, a square group r x c; padding with zeros completes the last tiles). Each
group shares one E8M0 scale X = 2^e with

    e = clamp(floor(log2(amax)) - emax, -127, 127)      (amax = 0: e = -127)

where emax is the exponent of the element format's largest normal; each element is V / X
rounded to nearest-even into the element type (`ml_dtypes`), saturating at the element's
largest magnitude (MXINT8: round(V / X * 64) clamped to +-127, value / 64). A group whose amax
is NaN or infinite gets the NaN scale (E8M0 0xFF): all its values decode to NaN.

    q = quantize(x, "mxfp8_e4m3", MXGroup("vector", 1, 32), axis=0)
    y = dequantize(q)            # float, the shape and dtype of x
    y = quantize_dequantize(x, "mxfp4_e2m1", MXGroup("square", 8, 8))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from monet_ir.precision import MX_ELEMENTS, MXGroup, PrecisionError

INT8_IMPLICIT = 64  # MXINT8 elements carry an implicit 2^-6


def element_dtype(name: str) -> Any:
    if name not in MX_ELEMENTS:
        raise PrecisionError(f"'{name}' is not an MX format (choose from {', '.join(MX_ELEMENTS)})")
    element = MX_ELEMENTS[name]
    return np.dtype(np.int8) if element.is_int else np.dtype(getattr(ml_dtypes, element.dtype))


def element_max(name: str) -> float:
    """The largest element magnitude (448 for E4M3, 127/64 for MXINT8)."""
    if MX_ELEMENTS[name].is_int:
        return 127 / INT8_IMPLICIT
    return float(ml_dtypes.finfo(element_dtype(name)).max)


@dataclass
class MXTensor:
    """Encoded blocks: `scales` (E8M0, one per group: [row groups, col groups]) and `elements`
    ([row groups, col groups, rows*cols] in the element type); how to undo the layout."""

    name: str
    group: MXGroup
    scales: np.ndarray
    elements: np.ndarray
    shape: tuple[int, ...]
    axis: int
    dtype: Any

    def element_values(self) -> np.ndarray:
        values = self.elements.astype(np.float64)
        return values / INT8_IMPLICIT if MX_ELEMENTS[self.name].is_int else values


def _as_matrix(x: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(x, axis, -1) if x.ndim else x.reshape(1)
    return moved.reshape(-1, moved.shape[-1]) if moved.ndim > 1 else moved.reshape(1, -1)


def _blocks(matrix: np.ndarray, group: MXGroup) -> np.ndarray:
    r, c = group.rows, group.cols
    rows, cols = matrix.shape
    padded = np.zeros((-(-rows // r) * r, -(-cols // c) * c), dtype=np.float64)
    padded[:rows, :cols] = matrix
    nr, nc = padded.shape[0] // r, padded.shape[1] // c
    return padded.reshape(nr, r, nc, c).transpose(0, 2, 1, 3).reshape(nr, nc, r * c)


def quantize(x: Any, name: str, group: MXGroup, axis: int = -1) -> MXTensor:
    """Encode `x` in MX format `name` with groups `group` along reduction axis `axis`."""
    x = np.asarray(x)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.float32)
    axis = axis % x.ndim if x.ndim else 0
    blocks = _blocks(_as_matrix(x.astype(np.float64), axis), group)
    element = MX_ELEMENTS[name]
    with np.errstate(invalid="ignore"):
        amax = np.max(np.abs(blocks), axis=-1)
    finite = np.isfinite(amax)
    _, exponent = np.frexp(np.where(finite & (amax > 0), amax, 1.0))  # amax = m * 2^exponent, m in [0.5, 1)
    shared = np.where(finite & (amax > 0), exponent - 1 - element.emax, -127)
    shared = np.clip(shared, -127, 127)
    scale = np.ldexp(1.0, shared)
    scaled = np.where(finite[..., None], blocks / scale[..., None], 0.0)
    limit = element_max(name)
    if element.is_int:
        elements = np.clip(np.rint(scaled * INT8_IMPLICIT), -127, 127).astype(np.int8)
    else:
        elements = np.clip(scaled, -limit, limit).astype(element_dtype(name))
    scales = np.where(finite, scale, np.nan).astype(ml_dtypes.float8_e8m0fnu)
    return MXTensor(name, group, scales, elements, x.shape, axis, dtype)


def dequantize(q: MXTensor) -> np.ndarray:
    """The values `q` encodes, in the dtype and shape of the quantized tensor."""
    values = q.element_values() * q.scales.astype(np.float64)[..., None]
    nr, nc, _ = values.shape
    r, c = q.group.rows, q.group.cols
    matrix = values.reshape(nr, nc, r, c).transpose(0, 2, 1, 3).reshape(nr * r, nc * c)
    if not q.shape:
        return matrix[0, 0].astype(q.dtype)
    moved_shape = tuple(np.delete(np.array(q.shape), q.axis)) + (q.shape[q.axis],)
    rows = int(np.prod(moved_shape[:-1], dtype=np.int64))
    moved = matrix[:rows, :moved_shape[-1]].reshape(moved_shape)
    return np.moveaxis(moved, -1, q.axis).astype(q.dtype)


def quantize_dequantize(x: Any, name: str, group: MXGroup, axis: int = -1) -> np.ndarray:
    """`x` rounded through MX format `name` (what an MX datapath computes with)."""
    return dequantize(quantize(x, name, group, axis))
