"""What the passes, the cost adapter, the scheduler and the parallelizer know about an op, on
the op's class (xDSL's way: traits for facts, interface classes for behaviour).

**Cost** (`monet_ir.analysis.ir_signatures.signature_of` reads these; an op with none of them
is an error, "nn.foo has no cost interface", never a silent default):

- `CostFree()` (trait): the op moves no data and does no arithmetic (views, constants).
- `VectorWork(ops_per_element, kind)` (trait): a vector unit runs the op; `kind` is the
  targets' op kind (`elementwise`, `softmax`, `norm`, `reduction`, `pool`, `loss`, `optimizer`,
  `data_movement`), `ops_per_element` the arithmetic per output element (multiply, add,
  compare, exp... each 1; a transcendental function the handful of ops a vector unit spends on
  it). Subclasses say how many elements and which window when it is not the first result's:
  `PoolWork`, `ReductionWork`, `LossWork`, and whose work depends on the op (`CollectiveWork`).
- `LoopNestOp` (interface): a convolution- or matrix-product-like op, the same loop nest in
  forward and backward with the output in another role. It gives its nest (`loop_nest`, in its
  tensors' own element widths), the values in the roles W, I, O (`nest_values`), the role of
  each operand and of its result (`NEST_ROLES`, for the scheduler's memory roles), the axis each
  operand reduces along (`reduction_axes`, for `quantize`'s MX casts), its MACs at any spatial
  rank (`direct_macs`) and the nest of a tile of its result rows (`tile_nest`).

**Tiling** (`fuse-layers` and the task graph's tiles, `monet_ir.schedule.tiling`): `Tiling`
(interface, with defaults) says along which result axes the op runs as tiles, whether it can
join a fused stack along one, which rows of each operand a tile reads and whether every tile
waits for its whole input. An op that is not `Tiling` is never fused.

**Sharding** (tensor parallelism): `dialects.sharding.Sharding`, the op's loop indices.

**Other facts**: `OnnxNames(...)` (trait): the ONNX (and ONNX Runtime gradient) op types an
allocation file may name the op by; `InPlaceUpdate` (interface): the operands an op without
results updates (optimizer steps, gradient accumulation).

"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from xdsl.ir import Operation, SSAValue
from xdsl.traits import OpTrait

if TYPE_CHECKING:
    from monet_ir.cost.signature import LoopNestSig


# ---------------------------------------------------------------------- cost


@dataclass(frozen=True)
class CostFree(OpTrait):
    """The op moves no data and does no arithmetic: it has no cost signature (views, constants)."""


@dataclass(frozen=True)
class VectorWork(OpTrait):
    """A vector op's work: `ops_per_element` arithmetic operations per output element, of the
    targets' op kind `kind` (see the module docstring)."""

    ops_per_element: float
    kind: str = "elementwise"

    def work(self, op: Operation) -> float:
        """Operations per element of this op (the class's figure unless its attributes change it)."""
        return self.ops_per_element

    def elements(self, op: Operation) -> int | None:
        """The elements the work is counted over; None: the first result's (the updated operand's
        of an op without results)."""
        return None

    def window(self, op: Operation, elements: int) -> tuple[int, tuple[int, ...]]:
        """(elements each output element reads, the window's shape) of a window op; (1, ())."""
        return 1, ()


def _elements_of(value: SSAValue) -> int:
    from dialects.base import num_elements, shape_of

    return num_elements(shape_of(value.type))


@dataclass(frozen=True)
class PoolWork(VectorWork):
    """Pooling and its gradients: a window per output element (`kernel_shape`, or the whole
    spatial extent of a global pooling)."""

    kind: str = "pool"
    global_window: bool = False

    def window(self, op: Operation, elements: int) -> tuple[int, tuple[int, ...]]:
        from dialects.base import ints_of, num_elements, shape_of

        shape = tuple(shape_of(op.operands[0].type)[2:]) if self.global_window else tuple(ints_of(op.kernel_shape))
        return num_elements(shape), shape


@dataclass(frozen=True)
class ReductionWork(VectorWork):
    """A reduction: one operation per element it reads (its window: operand elements per output
    element)."""

    kind: str = "reduction"

    def window(self, op: Operation, elements: int) -> tuple[int, tuple[int, ...]]:
        return max(1, _elements_of(op.operands[0]) // max(1, elements)), ()


@dataclass(frozen=True)
class LossWork(VectorWork):
    """A loss (or its gradient) reduces scores to a scalar: the work is per score, operand
    `scores` (not per result element)."""

    kind: str = "loss"
    scores: int = 0

    def elements(self, op: Operation) -> int | None:
        return _elements_of(op.operands[self.scores])


@dataclass(frozen=True)
class CollectiveWork(VectorWork):
    """A collective's local work on one chip, over every tensor of its bucket: a reduction adds
    what it receives, (N-1)/N of the data; a gather, shard, send or receive copies it."""

    ops_per_element: float = 0.0
    kind: str = "data_movement"
    reduces: bool = False

    def work(self, op: Operation) -> float:
        if not self.reduces:
            return 0.0
        n = op.group_size()
        return (n - 1) / n if n > 1 else 0.0

    def elements(self, op: Operation) -> int | None:
        values = list(op.results) or list(op.operands)
        return max(1, sum(_elements_of(v) for v in values))


class LoopNestOp(ABC):
    """A convolution- or matrix-product-like op (see the module docstring)."""

    NEST_ROLES: ClassVar[tuple[tuple[str, ...], str]]
    """The loop-nest role (W, I or O) of each operand, in order, and of the result."""

    @abstractmethod
    def loop_nest(self) -> LoopNestSig:
        """The op's nest at its tensors' own element widths; `NotAConvNest` (a ValueError) when
        the nest cannot describe it (a 3-D convolution)."""

    @abstractmethod
    def nest_values(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        """The values in the roles W, I and O."""

    @abstractmethod
    def reduction_axes(self) -> list[tuple[int, int, int | None]]:
        """(operand index, axis it reduces along, the square partner axis) of each operand an MX
        cast may serve (operands of rank < 2 are left out)."""

    def direct_macs(self) -> int:
        """Multiply-accumulates, at any spatial rank (the nest's count by default)."""
        return self.loop_nest().macs

    def tile_nest(self, sig: LoopNestSig, rows: int, full: int) -> LoopNestSig:
        """The nest of one tile of `rows` of the result's `full` rows (a product: its rows)."""
        import math
        from dataclasses import replace

        return replace(sig, b=max(1, math.ceil(sig.b * rows / full)))


# ---------------------------------------------------------------------- tiling

Rows = tuple[int, int]


def result_rank(op: Operation) -> int:
    return len(op.results[0].type.get_shape()) if op.results else 0


def elementwise_rows(op: Operation, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
    """The rows of operand `index` that result rows [lo, hi) along `axis` read when operands
    align with the result from the right (element-wise, broadcasting): the same rows, or None
    (the whole operand) along a broadcast axis."""
    in_shape = tuple(op.operands[index].type.get_shape())
    out_shape = tuple(op.results[0].type.get_shape())
    own = axis - (len(out_shape) - len(in_shape))
    if own < 0 or in_shape[own] != out_shape[axis]:
        return None
    return own, (lo, hi)


class Tiling:
    """How an op runs as tiles along one axis of its result (a fused stack). The defaults are
    an element-wise op's: any axis, the same rows of every operand (a broadcast one whole)."""

    def tiled_axes(self) -> tuple[int, ...]:
        """Axes of the (first) result along which the op can run as tiles."""
        return tuple(range(result_rank(self)))

    def fuses_along(self, axis: int) -> bool:
        """Whether the op can join a stack tiled along `axis` (one of its `tiled_axes`)."""
        return True

    def operand_rows(self, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
        """(operand axis, rows) of operand `index` that result rows [lo, hi) along `axis` read,
        or None when a tile reads the whole operand."""
        return elementwise_rows(self, index, axis, lo, hi)

    def waits_for_all_rows(self) -> bool:
        """Whether every tile needs the whole input computed first (batch statistics)."""
        return False


class SameRowsOfFirst(Tiling):
    """A tile reads its own rows of operand 0 and the other operands whole (normalizations,
    softmax: their other operands are parameters)."""

    def operand_rows(self, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
        return (axis, (lo, hi)) if index == 0 else None


class ProductTiling(Tiling):
    """A product (or the gradient of its left operand) tiled along the rows of its left
    operand (of dy): those rows, the right operand whole."""

    def tiled_axes(self) -> tuple[int, ...]:
        from dialects.base import bool_of

        rank = result_rank(self)
        return (rank - 2,) if rank >= 2 and not bool_of(self.trans_a) else ()

    def operand_rows(self, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
        rank = len(self.operands[index].type.get_shape())
        return (rank - 2, (lo, hi)) if index == 0 and rank >= 2 else None


class WindowTiling(Tiling):
    """A 2-D sliding window (convolution, pooling) tiled along its output rows: a tile reads the
    input rows under its windows (strides, padding, dilation: neighbouring tiles overlap by the
    halo), the other operands whole."""

    def window_rows(self) -> tuple[int, int, int, int]:
        """(kernel, stride, begin padding, dilation) along the rows (axis 2)."""
        raise NotImplementedError

    def tiled_axes(self) -> tuple[int, ...]:
        return (2,) if result_rank(self) == 4 else ()

    def operand_rows(self, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
        if index != 0:
            return None
        kernel, stride, pad, dilation = self.window_rows()
        size = self.operands[0].type.get_shape()[2]
        first = lo * stride - pad
        last = (hi - 1) * stride - pad + (kernel - 1) * dilation + 1
        return 2, (max(first, 0), min(last, size))


class MovedAxisTiling(Tiling):
    """An op that moves or stacks data (transpose, concat, split, reshape): a tile reads the same
    rows of the operand axis the tiled axis comes from."""

    def source_axis(self, axis: int) -> int | None:
        """The operand axis result axis `axis` comes from, None when the op cuts across it."""
        return axis

    def fuses_along(self, axis: int) -> bool:
        return self.source_axis(axis) is not None

    def operand_rows(self, index: int, axis: int, lo: int, hi: int) -> tuple[int, Rows] | None:
        moved = self.source_axis(axis)
        return None if moved is None else (moved, (lo, hi))


# ---------------------------------------------------------------------- other facts


@dataclass(frozen=True, init=False)
class OnnxNames(OpTrait):
    """The ONNX (and ONNX Runtime gradient) op types an allocation file may name the op by:
    `OnnxNames("ReluGrad", "Relu")`."""

    names: tuple[str, ...]

    def __init__(self, *names: str):
        object.__setattr__(self, "names", names)


class InPlaceUpdate(ABC):
    """An op without results that updates operands in place (optimizer steps, accumulation)."""

    @abstractmethod
    def updated_operands(self) -> tuple[SSAValue, ...]:
        """The operands the op writes (the parameter or buffer first)."""


def matmul_loop_nest(kind: str, a: tuple[int, ...], b: tuple[int, ...], trans_a: bool, trans_b: bool, output: str,
                     bits: tuple[int, int, int]) -> LoopNestSig:
    """The nest of the product A B (batched, either transposed): A in the I role, B in W, the
    product in O; `output`: the role written (O forward, I or W for a gradient)."""
    from dialects.base import num_elements
    from monet_ir.cost.signature import LoopNestSig, psum_bits_for

    a, b = list(a), list(b)
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    if trans_a:
        a[-1], a[-2] = a[-2], a[-1]
    if trans_b:
        b[-1], b[-2] = b[-2], b[-1]
    m, k_red, n = a[-2], a[-1], b[-1]
    batch_a, batch_b = num_elements(a[:-2]), num_elements(b[:-2])
    if batch_b == 1:
        # a weight shared across the batch: the batch rows are more rows of the product
        m, groups = m * batch_a, 1
    else:
        groups = max(batch_a, batch_b)
    w_bits, i_bits, o_bits = bits
    return LoopNestSig(kind=kind, b=m, g=groups, k=n, c=k_red, w_bits=w_bits, i_bits=i_bits, o_bits=o_bits,
                       psum_bits=psum_bits_for(max(bits)), output_operand=output)


def element_bits(*values: SSAValue) -> tuple[int, ...]:
    """The element widths of these values' tensor types."""
    from monet_ir.types import bits_of

    return tuple(bits_of(v.type.get_element_type()) for v in values)


def matrix_axes(rank: int, swapped: bool) -> tuple[int, int]:
    """(first, second) matrix axis of an operand of rank >= 2, swapped when transposed."""
    first, second = rank - 2, rank - 1
    return (second, first) if swapped else (first, second)


def onnx_names(op: Operation | type[Operation]) -> tuple[str, ...]:
    """The ONNX op types of an op (or op class), () when it declares none."""
    trait = op.get_trait(OnnxNames) if hasattr(op, "get_trait") else None
    return trait.names if trait is not None else ()
