"""Microscaling (OCP MX v1.0) quantization in numpy, element rounding by `ml_dtypes`.

Groups run along the reduction axis (`axis`): a vector group is 1 x k elements of it, a square
group an r x c tile of the axes (`partner`, `axis`) (by default the two innermost), the same
tile whichever of the two is reduced; every other axis indexes independent groups; padding with
zeros completes the last groups. Each
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
    partner: int | None
    moved_shape: tuple[int, ...]

    def element_values(self) -> np.ndarray:
        values = self.elements.astype(np.float64)
        return values / INT8_IMPLICIT if MX_ELEMENTS[self.name].is_int else values


def _layout(x: np.ndarray, axis: int, partner: int | None) -> tuple[np.ndarray, tuple[int, ...]]:
    """x as [lead, P, C]: the reduction axis last (C), the square tile's other axis before it
    (P; 1 for vector groups), every other axis flattened in front; and the permuted shape."""
    order = [a for a in range(x.ndim) if a not in (axis, partner)] + ([partner] if partner is not None else []) + [axis]
    moved = np.transpose(x, order)
    p = moved.shape[-2] if partner is not None else 1
    return moved.reshape(-1, p, moved.shape[-1]), moved.shape


def _blocks(cube: np.ndarray, group: MXGroup) -> np.ndarray:
    r, c = group.rows, group.cols
    lead, rows, cols = cube.shape
    padded = np.zeros((lead, -(-rows // r) * r, -(-cols // c) * c), dtype=np.float64)
    padded[:, :rows, :cols] = cube
    nr, nc = padded.shape[1] // r, padded.shape[2] // c
    return padded.reshape(lead, nr, r, nc, c).transpose(0, 1, 3, 2, 4).reshape(lead, nr, nc, r * c)


def partner_axis(ndim: int, axis: int) -> int:
    """The other axis of a square tile by default: the other of the two innermost axes."""
    return ndim - 2 if axis == ndim - 1 else ndim - 1


def quantize(x: Any, name: str, group: MXGroup, axis: int = -1, partner: int | None = None) -> MXTensor:
    """Encode `x` in MX format `name` with groups `group` along reduction axis `axis`; a square
    group tiles axes (`partner`, `axis`), by default the two innermost."""
    x = np.asarray(x, dtype=None)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.float32)
    if x.ndim == 0:
        x = x.reshape(1)
    axis = axis % x.ndim
    if group.rows > 1:
        if x.ndim < 2:
            raise PrecisionError(f"a square MX group needs a tensor of rank 2 or more, got shape {list(x.shape)}")
        partner = partner_axis(x.ndim, axis) if partner is None else partner % x.ndim
        if partner == axis:
            raise PrecisionError(f"square MX group: partner axis {partner} is the reduction axis")
    else:
        partner = None
    cube, moved_shape = _layout(x.astype(np.float64), axis, partner)
    blocks = _blocks(cube, group)
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
    return MXTensor(name, group, scales, elements, x.shape, axis, dtype, partner, moved_shape)


def dequantize(q: MXTensor) -> np.ndarray:
    """The values `q` encodes, in the dtype and shape of the quantized tensor."""
    values = q.element_values() * q.scales.astype(np.float64)[..., None]
    lead, nr, nc, _ = values.shape
    r, c = q.group.rows, q.group.cols
    cube = values.reshape(lead, nr, nc, r, c).transpose(0, 1, 3, 2, 4).reshape(lead, nr * r, nc * c)
    rows = q.moved_shape[-2] if q.partner is not None else 1
    moved = cube[:, :rows, :q.moved_shape[-1]].reshape(q.moved_shape)
    ndim = len(q.moved_shape)
    order = [a for a in range(ndim) if a not in (q.axis, q.partner)] + ([q.partner] if q.partner is not None else []) + [q.axis]
    out = np.transpose(moved, np.argsort(order))
    return out.reshape(q.shape).astype(q.dtype)


def quantize_dequantize(x: Any, name: str, group: MXGroup, axis: int = -1, partner: int | None = None) -> np.ndarray:
    """`x` rounded through MX format `name` (what an MX datapath computes with)."""
    return dequantize(quantize(x, name, group, axis, partner))
