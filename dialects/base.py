"""Shared pieces of the MONET dialects: the op base class, property helpers and shape rules.

Every MONET op derives from `MonetOp`, which carries two optional properties printed in the
attribute dictionary:

- `node`: the ONNX node (layer) the op comes from; backward, optimizer and recompute ops carry
  the name of the forward node they derive from, so reports can be broken down per layer.
- `phase`: `forward`, `backward`, `optimizer` or `recompute`. When absent, the op has its
  dialect's default phase (`nn` ops: forward, `grad` ops: backward, `train` ops: optimizer).

The shape rules here are the single source of truth for result shapes: the verifiers use them
to check imported IR, and the passes use them to build new ops.

Ops are defined with this module's `irdl_op_definition` (xDSL's, with the declarative assembly
format compiled on the op's first parse or print instead of at import).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, opt_prop_def
from xdsl.irdl import irdl_op_definition as define_op
from xdsl.utils.exceptions import VerifyException

PHASES = ("forward", "backward", "optimizer", "recompute")
IRDLOperationT = TypeVar("IRDLOperationT", bound=IRDLOperation)


def irdl_op_definition(cls: type[IRDLOperationT]) -> type[IRDLOperationT]:
    """xDSL's `irdl_op_definition`, with the declarative assembly format (the op's own or an
    inherited one) compiled on the op's first parse or print instead of at import.

    xDSL compiles every op's `assembly_format` when the class is defined: about half the cost of
    importing MONET's dialects (~25 ms of every `monet report` and `monet-opt` run). The format
    text stays on the class and on its `OpDef`; `format_program()` compiles it (the test of every
    dialect's formats calls it, so a malformed format still fails the suite)."""
    fmt = cls.assembly_format
    if fmt is None:
        return define_op(cls)
    cls.assembly_format = None  # xDSL would compile it now
    try:
        cls = define_op(cls)
    finally:
        cls.assembly_format = fmt
    op_def = cls.get_irdl_definition()
    op_def.assembly_format = fmt
    compiled: list[Any] = []

    def format_program(_cls: type) -> Any:
        if not compiled:
            from xdsl.irdl.declarative_assembly_format import FormatProgram
            from xdsl.irdl.operations import PyRDLOpDefinitionError
            from xdsl.utils.exceptions import ParseError

            try:
                compiled.append(FormatProgram.from_str(fmt, op_def))
            except ParseError as e:
                raise PyRDLOpDefinitionError(f"{cls.__name__}: error in the assembly format: {e.args}") from e
        return compiled[0]

    def parse(op_cls: type[IRDLOperationT], parser: Any) -> IRDLOperationT:
        return op_cls.format_program().parse(parser, op_cls)

    def print_(self: IRDLOperation, printer: Any) -> None:
        return type(self).format_program().print(printer, self)

    cls.format_program = classmethod(format_program)
    cls.parse = classmethod(parse)
    cls.print = print_
    return cls


class MonetOp(IRDLOperation):
    """Base of every MONET op: origin node name and phase, properties in the attr-dict."""

    node = opt_prop_def(StringAttr)
    phase = opt_prop_def(StringAttr)

    DEFAULT_PHASE: ClassVar[str] = "forward"
    irdl_options = (ParsePropInAttrDict(),)

    def get_phase(self) -> str:
        return self.phase.data if self.phase is not None else self.DEFAULT_PHASE

    def get_node(self) -> str:
        return self.node.data if self.node is not None else ""

    def set_origin(self, node: str | None, phase: str | None = None) -> None:
        """Tag the op with the ONNX node it derives from and, if not default, its phase."""
        if node:
            self.properties["node"] = StringAttr(node)
        if phase is not None and phase != self.DEFAULT_PHASE:
            self.properties["phase"] = StringAttr(phase)

    def verify_(self) -> None:
        if self.phase is not None and self.phase.data not in PHASES:
            raise VerifyException(
                f"{self.name}: phase must be one of {', '.join(PHASES)}, got '{self.phase.data}'"
            )
        self.verify_semantics()

    def verify_semantics(self) -> None:
        """Op-specific shape and type checks; overridden by ops that have them."""


# ----------------------------------------------------------------------------- properties


def ints_attr(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def ints_of(attr: DenseArrayBase | None, default: Sequence[int] = ()) -> tuple[int, ...]:
    if attr is None:
        return tuple(default)
    return tuple(int(v) for v in attr.get_values())


def int_attr(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i64)


def int_of(attr: IntegerAttr | None, default: int = 0) -> int:
    return default if attr is None else int(attr.value.data)


def float_attr(value: float) -> FloatAttr:
    return FloatAttr(float(value), f64)


def float_of(attr: FloatAttr | None, default: float = 0.0) -> float:
    return default if attr is None else float(attr.value.data)


def bool_attr(value: bool) -> BoolAttr:
    return IntegerAttr(1 if value else 0, i1)


def bool_of(attr: IntegerAttr | None, default: bool = False) -> bool:
    return default if attr is None else bool(attr.value.data)


def str_of(attr: StringAttr | None, default: str = "") -> str:
    return default if attr is None else attr.data


# ----------------------------------------------------------------------------- types


def shape_of(value_or_type: Attribute) -> tuple[int, ...]:
    if not isinstance(value_or_type, TensorType):
        raise VerifyException(f"expected a ranked tensor type, got {value_or_type}")
    return tuple(value_or_type.get_shape())


def elem_of(tensor_type: Attribute) -> Attribute:
    if not isinstance(tensor_type, TensorType):
        raise VerifyException(f"expected a ranked tensor type, got {tensor_type}")
    return tensor_type.get_element_type()


def is_float(elem: Attribute) -> bool:
    return not isinstance(elem, IntegerType)


def is_float_type(tensor_type: Attribute) -> bool:
    return is_float(elem_of(tensor_type))


def expect(cond: bool, op: IRDLOperation, message: str) -> None:
    if not cond:
        raise VerifyException(f"{op.name}: {message}")


def expect_shape(op: IRDLOperation, what: str, got: Sequence[int], want: Sequence[int]) -> None:
    if tuple(got) != tuple(want):
        raise VerifyException(
            f"{op.name}: {what} has shape {list(got)}, expected {list(want)}"
        )


def expect_same_elem(op: IRDLOperation, *types: Attribute) -> None:
    elems = {elem_of(t) for t in types}
    if len(elems) > 1:
        raise VerifyException(
            f"{op.name}: element types differ ({', '.join(str(e) for e in elems)})"
        )


def expect_float(op: IRDLOperation, what: str, t: Attribute) -> None:
    if not is_float(elem_of(t)):
        raise VerifyException(f"{op.name}: {what} must have a float element type, got {elem_of(t)}")


# ----------------------------------------------------------------------------- shape rules


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy/ONNX multidirectional broadcasting; raises ValueError when incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        padded = [1] * (rank - len(s)) + list(s)
        for i, d in enumerate(padded):
            if d == 1:
                continue
            if out[i] not in (1, d):
                raise ValueError(f"shapes {[list(x) for x in shapes]} do not broadcast")
            out[i] = d
    return tuple(out)


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def window_output_size(
    size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, dilation: int, ceil_mode: bool
) -> int:
    """Output length of a sliding window (conv or pooling) along one axis, as ONNX defines it."""
    effective = dilation * (kernel - 1) + 1
    span = size + pad_begin + pad_end - effective
    if ceil_mode:
        out = -(-span // stride) + 1
        # ONNX/PyTorch drop a last window that would start entirely inside the end padding
        if (out - 1) * stride >= size + pad_begin:
            out -= 1
        return out
    return span // stride + 1


def conv_output_shape(
    x: Sequence[int],
    w: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
) -> tuple[int, ...]:
    nsp = len(x) - 2
    spatial = tuple(
        window_output_size(x[2 + i], w[2 + i], strides[i], pads[i], pads[nsp + i], dilations[i], False)
        for i in range(nsp)
    )
    return (x[0], w[0], *spatial)


def conv_transpose_output_shape(
    x: Sequence[int],
    w: Sequence[int],
    group: int,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    output_padding: Sequence[int],
) -> tuple[int, ...]:
    nsp = len(x) - 2
    spatial = tuple(
        strides[i] * (x[2 + i] - 1)
        + output_padding[i]
        + (w[2 + i] - 1) * dilations[i]
        + 1
        - pads[i]
        - pads[nsp + i]
        for i in range(nsp)
    )
    return (x[0], w[1] * group, *spatial)


def pool_output_shape(
    x: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    ceil_mode: bool,
) -> tuple[int, ...]:
    nsp = len(kernel)
    spatial = tuple(
        window_output_size(x[2 + i], kernel[i], strides[i], pads[i], pads[nsp + i], dilations[i], ceil_mode)
        for i in range(nsp)
    )
    return (x[0], x[1], *spatial)


def matmul_shape(a: Sequence[int], b: Sequence[int], trans_a: bool, trans_b: bool) -> tuple[int, ...]:
    """numpy.matmul result shape, with optional transposition of the last two axes."""
    a, b = list(a), list(b)
    if trans_a and len(a) >= 2:
        a[-1], a[-2] = a[-2], a[-1]
    if trans_b and len(b) >= 2:
        b[-1], b[-2] = b[-2], b[-1]
    a_vec, b_vec = len(a) == 1, len(b) == 1
    if a_vec:
        a = [1, *a]
    if b_vec:
        b = [*b, 1]
    if a[-1] != b[-2]:
        raise ValueError(f"contraction sizes differ ({a[-1]} vs {b[-2]})")
    batch = broadcast_shapes(a[:-2], b[:-2])
    out = [*batch, a[-2], b[-1]]
    if a_vec:
        out.pop(-2)
    if b_vec:
        out.pop(-1)
    return tuple(out)


def reduce_shape(x: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    rank = len(x)
    norm = {normalize_axis(a, rank) for a in axes} if axes else set(range(rank))
    if keepdims:
        return tuple(1 if i in norm else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in norm)


def num_elements(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


FUNCTIONAL = "attr-dict `:` functional-type(operands, results)"


def operands_format(*names: str) -> str:
    """Declarative format `$a, $b (, $c^)? attr-dict : (...) -> (...)`; `c?` marks optional."""
    parts: list[str] = []
    for i, name in enumerate(names):
        sep = "`,` " if i else ""
        if name.endswith("?"):
            parts.append(f"({sep}${name[:-1]}^)?")
        else:
            parts.append(f"{sep}${name}")
    return " ".join(parts) + " " + FUNCTIONAL


def raise_verify(op: MonetOp, message: str) -> None:
    expect(False, op, message)
