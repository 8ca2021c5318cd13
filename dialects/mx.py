"""The `mx` dialect: casts into microscaling (OCP MX v1.0) formats.

A cast keeps the tensor type (values stay `f32` tensors in the IR: what an MX datapath computes
with, quantized and dequantized) and names how the result is stored: `format` (one of
`mxint8`, `mxfp8_e4m3`, `mxfp8_e5m2`, `mxfp6_e2m3`, `mxfp6_e3m2`, `mxfp4_e2m1`), `axis` (the
reduction axis its groups run along) and `group = array<i64: R, C>` (1 x k: a vector group of
k elements along `axis`; R x C: a square tile of axes (`partner`, `axis`), which serves a
reduction along either). The `quantize` pass inserts them (`passes/quantize.py`); the cost
model prices them as vector work and sizes their results in their format, one E8M0 scale per
group included.

```mlir
func.func @step(%x: tensor<8x64xf32> {monet.input = "x"},
                %w: tensor<64x32xf32> {monet.param = "w", monet.trainable}) -> tensor<8x32xf32> {
  %xq = mx.quantize %x {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>}
      : tensor<8x64xf32>
  %wq = mx.quantize %w {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>}
      : tensor<64x32xf32>
  %y = nn.matmul %xq, %wq : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  // dX = dY . W^T reduces along W's axis 1: vector groups need W re-encoded along it
  %wt = mx.requantize %wq {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>,
                           phase = "backward"} : tensor<64x32xf32>
  func.return %y : tensor<8x32xf32>
}
```
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Dialect
from xdsl.irdl import VarConstraint, base, operand_def, opt_prop_def, prop_def, result_def, traits_def

from dialects.base import MonetOp, expect, int_of, ints_of, irdl_op_definition, is_float_type, shape_of, str_of
from dialects.interfaces import VectorWork

MX_FORMATS = ("mxint8", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1")


class CastOp(MonetOp):
    """A cast into an MX format (see the module docstring)."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    format = prop_def(StringAttr)
    axis = prop_def(IntegerAttr)
    group = prop_def(DenseArrayBase)
    partner = opt_prop_def(IntegerAttr)
    assembly_format = "$input attr-dict `:` type($input)"

    DEFAULT_PHASE: ClassVar[str] = "forward"

    def __init__(self, value, fmt: str, axis: int, group: tuple[int, int], partner: int | None = None):
        from dialects.base import int_attr, ints_attr

        props = {"format": StringAttr(fmt), "axis": int_attr(axis), "group": ints_attr(group)}
        if partner is not None:
            props["partner"] = int_attr(partner)
        super().__init__(operands=[value], result_types=[value.type], properties=props)

    def get_format(self) -> str:
        return str_of(self.format)

    def get_axis(self) -> int:
        return int_of(self.axis)

    def get_group(self) -> tuple[int, ...]:
        return ints_of(self.group)

    def get_partner(self) -> int | None:
        """The other axis of a square tile (default: the other of the two innermost axes)."""
        if self.partner is not None:
            return int_of(self.partner)
        rank = len(shape_of(self.input.type))
        return rank - 2 if self.get_axis() == rank - 1 else rank - 1

    def covers(self, axis: int) -> bool:
        """Whether this encoding serves a reduction along `axis`: its own axis, or for a
        square tile (R = C) its partner axis."""
        rows, cols = self.get_group()
        return axis == self.get_axis() or (rows > 1 and rows == cols and axis == self.get_partner())

    def mx_format(self, policy=None):
        """The stored format (`monet_ir.precision.NumberFormat`) of the result."""
        from monet_ir.precision import MXGroup, number_format

        rows, cols = self.get_group()
        return number_format(self.get_format(), MXGroup("vector" if rows == 1 else "square", rows, cols))

    def verify_semantics(self) -> None:
        shape = shape_of(self.input.type)
        expect(is_float_type(self.input.type), self, "the input must be a float tensor")
        expect(self.get_format() in MX_FORMATS, self,
               f"unknown MX format '{self.get_format()}' (expected one of {', '.join(MX_FORMATS)})")
        rank = len(shape)
        expect(0 <= self.get_axis() < max(rank, 1), self, f"axis {self.get_axis()} is out of range for rank {rank}")
        group = self.get_group()
        expect(len(group) == 2 and all(g > 0 for g in group), self,
               f"group must be two positive sizes [rows, cols], got {list(group)}")
        if group[0] > 1:
            expect(rank >= 2, self, "a square group needs a tensor of rank 2 or more")
            partner = self.get_partner()
            expect(0 <= partner < rank and partner != self.get_axis(), self,
                   f"partner axis {partner} must be another axis of the rank-{rank} tensor")
        else:
            expect(self.partner is None, self, "a vector group (1 x k) has no partner axis")


@irdl_op_definition
class QuantizeOp(CastOp):
    """Encode a high-precision tensor in an MX format.

    `%wq = mx.quantize %w {format = "mxfp4_e2m1", axis = 0 : i64, group = array<i64: 8, 8>} : tensor<64x32xf32>`
    """

    name = "mx.quantize"
    traits = traits_def(VectorWork(4))


@irdl_op_definition
class RequantizeOp(CastOp):
    """Re-encode an MX tensor with its groups along another axis (the transposed use of a
    vector-grouped tensor: W^T for dX, X^T and dY for dW). Its input is an MX cast whose
    encoding does not already serve `axis`.

    `%wt = mx.requantize %wq {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>} : tensor<64x32xf32>`
    """

    name = "mx.requantize"
    traits = traits_def(VectorWork(5))

    def verify_semantics(self) -> None:
        super().verify_semantics()
        source = self.input.owner
        expect(isinstance(source, CastOp), self, "the input must be the result of an mx cast")
        if isinstance(source, CastOp):
            expect(not source.covers(self.get_axis()), self,
                   f"the input's encoding already serves axis {self.get_axis()}: nothing to requantize")


MX = Dialect("mx", [QuantizeOp, RequantizeOp], [])
