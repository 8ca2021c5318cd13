"""How an op's loop indices map onto its operands and results: what tensor parallelism reads to
propagate a split through the step (`monet_ir.parallel.tensor`).

An op that implements `Sharding` gives its `IndexMap`: per operand and per result, the loop
index of each axis. A split index flows from operands to results; an index the op sums over (a
contraction) turns a split into a partial sum; a `norm` index must not be split. The default is
an element-wise op's map (operands aligned with the result from the right, broadcasting); an
op that is not `Sharding` is opaque: its operands are gathered whole and its results
replicated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue


@dataclass
class IndexMap:
    """Loop indices of an op: per operand and per result, the index of each axis (None: a
    broadcast axis of size 1). `norm` indices must not be split (the op normalizes or selects
    along them); an index absent from a result is summed for it (linear), unless it is `norm`.
    `additive`: operands added to the product (a gemm's or conv's bias)."""

    operands: list[list[int | None]]
    results: list[list[int | None]]
    norm: set[int] = field(default_factory=set)
    additive: tuple[int, ...] = ()
    weight_operand: int | None = None  # a product's weight (the other operand is the activation)
    features: int | None = None  # a product's output-feature index (its weight's non-contracted index)
    contraction: int | None = None


def shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


class Sharding:
    """An op whose loop indices tensor parallelism can follow (see the module docstring)."""

    def index_map(self) -> IndexMap | None:
        """The op's loop indices (an element-wise op's by default), or None when the op is
        opaque on the operands it has (e.g. a grouped convolution)."""
        return elementwise_map(self)


def elementwise_map(op: Operation) -> IndexMap:
    """Operands and results aligned from the right; a broadcast axis (size 1 against a larger
    one) has no index."""
    shapes = [shape(v) for v in op.operands] + [shape(r) for r in op.results]
    rank = max((len(s) for s in shapes), default=0)
    ref = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            axis = i + rank - len(s)
            if d != 1:
                ref[axis] = d

    def axes(s: tuple[int, ...]) -> list[int | None]:
        off = rank - len(s)
        return [i + off if (d == ref[i + off] and (d != 1 or ref[i + off] == 1)) else None for i, d in enumerate(s)]

    return IndexMap([axes(shape(v)) for v in op.operands], [axes(shape(r)) for r in op.results])


def normalizing_map(op: Operation, axes: set[int]) -> IndexMap:
    """An element-wise map whose indices `axes` must not be split (softmax over an axis)."""
    m = elementwise_map(op)
    m.norm = set(axes)
    return m


def matmul_maps(trans_a: bool, trans_b: bool, a_shape, b_shape, out_shape):
    """(A's indices, B's, the product's, M, N, K) of a batched product Y = op(A) op(B)."""
    nb = len(out_shape) - 2
    M, N, K = nb, nb + 1, nb + 2

    def batch(s):
        off = nb - (len(s) - 2)
        return [(i + off) if s[i] == out_shape[i + off] and (s[i] != 1 or out_shape[i + off] == 1) else None
                for i in range(len(s) - 2)]

    a = batch(a_shape) + ([K, M] if trans_a else [M, K])
    b = batch(b_shape) + ([N, K] if trans_b else [K, N])
    out = list(range(nb)) + [M, N]
    return a, b, out, M, N, K


def broadcast_onto(s: tuple[int, ...], out_shape: tuple[int, ...], out_labels: list[int]) -> list[int | None]:
    """The indices of an operand of shape `s` broadcast onto a result with `out_labels`."""
    off = len(out_shape) - len(s)
    return [out_labels[i + off] if d == out_shape[i + off] and d != 1 else None for i, d in enumerate(s)]


def conv_maps(spatial: int) -> tuple[list[int], list[int], list[int], set[int], int, int]:
    """(x's indices, w's, y's, the window indices, C, M) of a convolution with `spatial` axes:
    N, C, M, then the input, kernel and output positions (never split)."""
    N, C, M = 0, 1, 2
    xs, ws, ys = ([3 + i for i in range(spatial)], [3 + spatial + i for i in range(spatial)],
                  [3 + 2 * spatial + i for i in range(spatial)])
    return [N, C] + xs, [M, C] + ws, [N, M] + ys, set(xs + ws + ys), C, M


def joined_axis_map(op: Operation) -> IndexMap:
    """Concat or split: the same indices on every operand and result; `features` is the axis
    the op joins or cuts (a split along it keeps each piece's share)."""
    from dialects.base import int_of, normalize_axis

    rank = len(shape(op.results[0]))
    m = IndexMap([list(range(rank)) for _ in op.operands], [list(range(rank)) for _ in op.results])
    m.features = normalize_axis(int_of(op.axis), rank)
    return m


def pool_map(op: Operation, gradient: bool) -> IndexMap:
    """Pooling (or its gradient): batch and channels follow, the window positions are never
    split (a gradient's first operand is on the output positions, its result on the input's)."""
    rank = len(shape(op.operands[0]))
    sp_in = list(range(2, rank))
    sp_out = [rank + i for i in range(rank - 2)]
    ins = [[0, 1] + (sp_out if gradient and k == 0 else sp_in) for k, _ in enumerate(op.operands)]
    res = [[0, 1] + (sp_in if gradient else sp_out) for _ in op.results]
    return IndexMap(ins, res, norm=set(sp_in + sp_out))
