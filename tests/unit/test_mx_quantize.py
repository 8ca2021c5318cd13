"""The MX quantizer against an independent per-block computation (python floats, the element
value grids built from their bit layouts) on random tensors with zeros, denormals, saturation
and NaN/inf blocks."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from monet_ir.interp.mx import dequantize, quantize, quantize_dequantize
from monet_ir.precision import MX_ELEMENTS, MXGroup, PrecisionError, parse_group

# (exponent bits, mantissa bits, codes at the top that are not finite numbers)
LAYOUTS = {"mxfp8_e4m3": (4, 3, 1), "mxfp8_e5m2": (5, 2, 4), "mxfp6_e2m3": (2, 3, 0),
           "mxfp6_e3m2": (3, 2, 0), "mxfp4_e2m1": (2, 1, 0)}


def value_grid(name: str) -> list[float]:
    """Non-negative values of the element format, in code order (code parity = mantissa LSB)."""
    if name == "mxint8":
        return [i / 64 for i in range(128)]
    e_bits, m_bits, invalid = LAYOUTS[name]
    bias = 2 ** (e_bits - 1) - 1
    values = []
    for code in range(2 ** (e_bits + m_bits) - invalid):
        e, m = divmod(code, 2 ** m_bits)
        values.append(m / 2 ** m_bits * 2.0 ** (1 - bias) if e == 0 else (1 + m / 2 ** m_bits) * 2.0 ** (e - bias))
    return values


def round_to_grid(v: float, grid: list[float]) -> float:
    """Nearest grid value, ties to the even code; magnitudes past the grid saturate."""
    a = min(abs(v), grid[-1])
    best = min(range(len(grid)), key=lambda i: (abs(grid[i] - a), i % 2))
    return math.copysign(grid[best], v)


def reference_block(values: list[float], name: str) -> list[float]:
    grid = value_grid(name)
    if any(math.isnan(v) or math.isinf(v) for v in values):
        return [math.nan] * len(values)
    amax = max(abs(v) for v in values)
    emax = math.frexp(grid[-1])[1] - 1
    if amax == 0:
        e = -127
    else:
        e = max(-127, min(127, math.frexp(amax)[1] - 1 - emax))
    scale = 2.0 ** e
    return [round_to_grid(v / scale, grid) * scale for v in values]


def reference(x: np.ndarray, name: str, group: MXGroup, axis: int) -> np.ndarray:
    """Per block, in python: blocks are index sets of the 2-D tensor."""
    out = np.empty_like(x, dtype=np.float64)
    m = x if axis == 1 else x.T
    o = out if axis == 1 else out.T
    rows, cols = m.shape
    for r0 in range(0, rows, group.rows):
        for c0 in range(0, cols, group.cols):
            idx = [(r, c) for r in range(r0, min(rows, r0 + group.rows)) for c in range(c0, min(cols, c0 + group.cols))]
            values = reference_block([float(m[i]) for i in idx], name)
            for i, v in zip(idx, values):
                o[i] = v
    return out


def random_tensor(rng, shape) -> np.ndarray:
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 6, size=shape))
    x = x.astype(np.float32)
    flat = x.reshape(-1)
    flat[:40] = 0.0                                   # an all-zero block
    flat[40:50] = np.float32(1e-40) * rng.integers(1, 50, 10)   # float32 denormals
    flat[60] = 3e4                                    # one huge value: the block's others underflow
    flat[100:104] = [1e-38, -3e-39, 5e-41, 0.0]       # a block of tiny values
    return x


@pytest.mark.parametrize("name", list(MX_ELEMENTS))
@pytest.mark.parametrize("group,axis", [(MXGroup("vector", 1, 32), 1), (MXGroup("vector", 1, 32), 0),
                                        (MXGroup("vector", 1, 16), 1), (MXGroup("square", 8, 8), 0)])
def test_quantizer_matches_the_per_block_reference(name, group, axis):
    rng = np.random.default_rng(hash((name, group.cols, axis)) % 2 ** 32)
    x = random_tensor(rng, (13, 70))
    ours = quantize_dequantize(x, name, group, axis=axis)
    ref = reference(x, name, group, axis)
    assert ours.dtype == np.float32 and ours.shape == x.shape
    np.testing.assert_array_equal(ours, ref.astype(np.float32))


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8"])
def test_a_nan_or_inf_block_decodes_to_nan_and_only_that_block(name):
    x = np.ones((2, 64), np.float32)
    x[0, 3] = np.nan
    x[1, 40] = np.inf
    q = quantize(x, name, MXGroup("vector", 1, 32), axis=1)
    codes = q.scales.view(np.uint8).reshape(2, 2)  # [rows, blocks per row]
    emax = MX_ELEMENTS[name].emax
    assert codes.tolist() == [[255, 127 - emax], [127 - emax, 255]]  # 1 = 1.0 * 2^0: scale 2^-emax
    y = dequantize(q)
    assert np.isnan(y[0, :32]).all() and np.isnan(y[1, 32:]).all()
    assert (y[0, 32:] == 1).all() and (y[1, :32] == 1).all()


def test_a_nan_scale_decodes_the_whole_block_to_nan():
    q = quantize(np.arange(64, dtype=np.float32).reshape(1, 64), "mxfp6_e3m2", MXGroup("vector", 1, 32))
    q.scales.reshape(-1)[1] = ml_dtypes.float8_e8m0fnu(np.nan)
    y = dequantize(q)
    assert np.isnan(y[0, 32:]).all() and not np.isnan(y[0, :32]).any()


def test_saturation_and_scale_choice():
    # amax 1000 = 1.95 * 2^9; E4M3 emax 8: scale 2, 1000/2 = 500 saturates to 448 -> 896
    y = quantize_dequantize(np.array([1000.0, 1.0], np.float32), "mxfp8_e4m3", MXGroup("vector", 1, 32))
    assert y.tolist() == [896.0, 1.0]
    # FP4: amax 6 -> scale 1 (6 = 1.5 * 2^2), 5 rounds to 4 (tie -> even code), 0.25 to 0
    y = quantize_dequantize(np.array([6.0, 5.0, 0.25, -2.5], np.float32), "mxfp4_e2m1", MXGroup("vector", 1, 32))
    assert y.tolist() == [6.0, 4.0, 0.0, -2.0]


def test_square_groups_encode_w_and_its_transpose_alike():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    square = MXGroup("square", 8, 8)
    for name in MX_ELEMENTS:
        np.testing.assert_array_equal(quantize_dequantize(w, name, square, axis=0),
                                      quantize_dequantize(w.T, name, square, axis=1).T)
    vector = MXGroup("vector", 1, 32)
    assert not np.array_equal(quantize_dequantize(w, "mxfp4_e2m1", vector, axis=0),
                              quantize_dequantize(w, "mxfp4_e2m1", vector, axis=1))


def test_higher_dimensional_tensors_keep_shape_and_axis():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5, 7)).astype(np.float32)
    y = quantize_dequantize(x, "mxfp8_e5m2", MXGroup("vector", 1, 32), axis=1)
    assert y.shape == x.shape
    # along axis 1 each (i, :, k, l) fibre is one block of 3 elements
    fibre = reference_block([float(v) for v in x[2, :, 4, 6]], "mxfp8_e5m2")
    np.testing.assert_array_equal(y[2, :, 4, 6], np.array(fibre, np.float32))


def test_group_parsing():
    assert parse_group("vector", 16) == MXGroup("vector", 1, 16)
    assert parse_group("square:4x4") == MXGroup("square", 4, 4)
    for bad in ("square:8", "cube", "square:0x8"):
        with pytest.raises(PrecisionError, match="--mx-group"):
            parse_group(bad)
    with pytest.raises(PrecisionError, match="--mx-block"):
        parse_group("vector", 0)


def test_square_groups_give_one_encoding_for_either_reduction_axis():
    rng = np.random.default_rng(11)
    square = MXGroup("square", 8, 8)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    conv = rng.standard_normal((16, 12, 3, 3)).astype(np.float32)  # [K, C, fy, fx]: tiles over (K, C)
    for name in ("mxfp8_e4m3", "mxfp4_e2m1", "mxint8"):
        np.testing.assert_array_equal(quantize_dequantize(w, name, square, axis=0),
                                      quantize_dequantize(w, name, square, axis=1))
        np.testing.assert_array_equal(quantize_dequantize(conv, name, square, axis=1, partner=0),
                                      quantize_dequantize(conv, name, square, axis=0, partner=1))
        # each (fy, fx) position is its own 16 x 12 matrix of tiles
        np.testing.assert_array_equal(quantize_dequantize(conv, name, square, axis=1, partner=0)[:, :, 2, 1],
                                      quantize_dequantize(conv[:, :, 2, 1], name, square, axis=1))
