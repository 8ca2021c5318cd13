"""Element types: ONNX and numpy correspondences, and storage sizes in bytes.

Sizes count storage as an allocator sees it: a boolean takes one byte, as in PyTorch and numpy.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

# onnx.TensorProto.DataType values (kept numeric so that onnx need not be imported here)
_ONNX_TO_ELEM: dict[int, Attribute] = {
    1: f32,
    2: IntegerType(8, Signedness.UNSIGNED),
    3: i8,
    5: i16,
    6: i32,
    7: i64,
    9: i1,
    10: f16,
    11: f64,
    16: bf16,
}
_ONNX_FLOATS = {1, 10, 11, 16}


def element_type_from_onnx(onnx_elem: int) -> Attribute | None:
    return _ONNX_TO_ELEM.get(onnx_elem)


def onnx_elem_of(elem: Attribute) -> int | None:
    """The onnx.TensorProto.DataType of an element type (None when ONNX has no such type)."""
    for code, e in _ONNX_TO_ELEM.items():
        if e == elem:
            return code
    return None


def is_float_onnx(onnx_elem: int) -> bool:
    return onnx_elem in _ONNX_FLOATS


@lru_cache(maxsize=4096)
def bits_of(elem: Attribute) -> int:
    if isinstance(elem, IntegerType):
        return max(8, elem.width.data) if elem.width.data == 1 else elem.width.data
    if isinstance(elem, (Float16Type, BFloat16Type)):
        return 16
    if isinstance(elem, Float32Type):
        return 32
    if isinstance(elem, Float64Type):
        return 64
    width = getattr(elem, "bitwidth", None)
    if isinstance(width, int):
        return width
    raise ValueError(f"unknown storage size of element type {elem}")


def bytes_per_element(elem: Attribute) -> float:
    return bits_of(elem) / 8


@lru_cache(maxsize=65536)
def tensor_bytes(t: Attribute) -> int:
    """Storage bytes of a ranked tensor type (memoized: types are immutable and shared)."""
    if not isinstance(t, TensorType):
        return 0
    n = 1
    for d in t.get_shape():
        n *= d
    return int(n * bits_of(t.get_element_type()) + 7) // 8


def numpy_dtype_of(elem: Attribute) -> Any:
    import numpy as np

    if elem == i1:
        return np.bool_
    if isinstance(elem, IntegerType):
        unsigned = elem.signedness.data == Signedness.UNSIGNED
        return np.dtype(f"{'u' if unsigned else ''}int{elem.width.data}")
    if isinstance(elem, Float16Type):
        return np.float16
    if isinstance(elem, Float32Type):
        return np.float32
    if isinstance(elem, Float64Type):
        return np.float64
    raise ValueError(f"no numpy dtype for element type {elem}")


def element_type_from_numpy(dtype: Any) -> Attribute:
    import numpy as np

    dtype = np.dtype(dtype)
    table = {
        np.dtype(np.bool_): i1,
        np.dtype(np.int8): i8,
        np.dtype(np.int16): i16,
        np.dtype(np.int32): i32,
        np.dtype(np.int64): i64,
        np.dtype(np.uint8): IntegerType(8, Signedness.UNSIGNED),
        np.dtype(np.float16): f16,
        np.dtype(np.float32): f32,
        np.dtype(np.float64): f64,
    }
    if dtype not in table:
        raise ValueError(f"no element type for numpy dtype {dtype}")
    return table[dtype]
