"""Gemm and MatMul reference kernels (ONNX semantics) and their backward rules.

Backward rules follow ORT's gradient builder (training-semantics.md §2.1):
Gemm saves A and B, dA = alpha * dY @ op(B)^T and dB = alpha * op(A)^T @ dY
(transposed back when the forward used trans flags), dC = beta * dY summed
over C's broadcast axes.  MatMul reduces the batch-broadcast axes and handles
NumPy's 1-D promotion rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .kernels_common import reduce_to_shape

__all__ = [
    "gemm", "gemm_grad", "gemm_grad_a", "gemm_grad_b", "gemm_grad_c",
    "matmul", "matmul_grad", "matmul_grad_a", "matmul_grad_b",
]


def _op(m: np.ndarray, trans) -> np.ndarray:
    return m.T if trans else m


def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, trans_a=0, trans_b=0):
    """ONNX Gemm: alpha * op(A) @ op(B) + beta * C, C broadcast to (M, N)."""
    a, b = np.asarray(a), np.asarray(b)
    y = alpha * (_op(a, trans_a) @ _op(b, trans_b))
    if c is not None:
        y = y + beta * np.asarray(c)
    return y.astype(a.dtype, copy=False)


def gemm_grad_a(dy, b, *, alpha=1.0, trans_a=0, trans_b=0):
    """Gemm backward w.r.t. A (in A's stored layout): alpha * dY @ op(B)^T, transposed if trans_a."""
    dy = np.asarray(dy)
    ga = alpha * (dy @ _op(np.asarray(b), trans_b).T)
    return (ga.T if trans_a else ga).astype(dy.dtype, copy=False)


def gemm_grad_b(dy, a, *, alpha=1.0, trans_a=0, trans_b=0):
    """Gemm backward w.r.t. B (in B's stored layout): alpha * op(A)^T @ dY, transposed if trans_b."""
    dy = np.asarray(dy)
    gb = alpha * (_op(np.asarray(a), trans_a).T @ dy)
    return (gb.T if trans_b else gb).astype(dy.dtype, copy=False)


def gemm_grad_c(dy, c_shape: Sequence[int], *, beta=1.0):
    """Gemm backward w.r.t. C: beta * dY summed down to C's (broadcast) shape."""
    dy = np.asarray(dy)
    return (beta * reduce_to_shape(dy, c_shape)).astype(dy.dtype, copy=False)


def gemm_grad(dy, a, b, c_shape=None, *, alpha=1.0, beta=1.0, trans_a=0, trans_b=0):
    """Gemm backward -> (dA, dB, dC); dC is None when the forward had no C."""
    da = gemm_grad_a(dy, b, alpha=alpha, trans_a=trans_a, trans_b=trans_b)
    db = gemm_grad_b(dy, a, alpha=alpha, trans_a=trans_a, trans_b=trans_b)
    dc = None if c_shape is None else gemm_grad_c(dy, c_shape, beta=beta)
    return da, db, dc


def matmul(a, b):
    """ONNX MatMul: numpy.matmul semantics (batched, broadcast, 1-D promotion)."""
    return np.matmul(a, b)


def _promote(dy, a_shape, b_shape):
    """Undo MatMul's 1-D squeezes: dY as (..., M, N) and both operand shapes as >= 2-D."""
    dy = np.asarray(dy)
    a2, b2 = tuple(a_shape), tuple(b_shape)
    if len(b2) == 1:
        dy = dy[..., None]
        b2 = b2 + (1,)
    if len(a2) == 1:
        dy = dy[..., None, :]
        a2 = (1,) + a2
    return dy, a2, b2


def matmul_grad_a(dy, b, a_shape: Sequence[int]):
    """MatMul backward w.r.t. A: dY @ B^T, summed over A's broadcast batch axes."""
    b = np.asarray(b)
    dy2, a2, b2 = _promote(dy, a_shape, b.shape)
    da = dy2 @ np.swapaxes(b.reshape(b2), -1, -2)
    return reduce_to_shape(da, a2).reshape(tuple(a_shape))


def matmul_grad_b(dy, a, b_shape: Sequence[int]):
    """MatMul backward w.r.t. B: A^T @ dY, summed over B's broadcast batch axes."""
    a = np.asarray(a)
    dy2, a2, b2 = _promote(dy, a.shape, b_shape)
    db = np.swapaxes(a.reshape(a2), -1, -2) @ dy2
    return reduce_to_shape(db, b2).reshape(tuple(b_shape))


def matmul_grad(dy, a, b):
    """MatMul backward -> (dA, dB)."""
    a, b = np.asarray(a), np.asarray(b)
    return matmul_grad_a(dy, b, a.shape), matmul_grad_b(dy, a, b.shape)
