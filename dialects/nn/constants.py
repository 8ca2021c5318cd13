"""Constants of the `nn` dialect: `nn.constant` and the raw tensor data attribute `#nn.data`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import base, irdl_attr_definition, opt_prop_def, prop_def, result_def, traits_def
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import Pure

from dialects.base import MonetOp, expect, float_of, irdl_op_definition, num_elements, str_of
from dialects.interfaces import CostFree, VectorWork


@irdl_attr_definition
class TensorDataAttr(ParametrizedAttribute):
    """Raw little-endian bytes of a constant tensor, printed as hex:
    `#nn.data<tensor<2xf32>, "0x0000803F000080FF">`.

    Used instead of a builtin `dense` attribute for large constants (printing and parsing a
    hex string is fast) and for floats that are not finite (xDSL's generic printer writes them
    in a form its parser reads back as integers).
    """

    name = "nn.data"
    type: TensorType
    data: BytesAttr

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            t = parser.parse_type()
            parser.parse_punctuation(",")
            text = parser.parse_str_literal()
        if not isinstance(t, TensorType) or not text.startswith("0x"):
            parser.raise_error("expected a tensor type and a \"0x...\" hex string")
        return (t, BytesAttr(bytes.fromhex(text[2:])))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.type)
            printer.print_string(f', "0x{self.data.data.hex().upper()}"')


@irdl_op_definition
class ConstantOp(MonetOp):
    """A constant tensor that is not a parameter: a scale, a mask, position indices.

    `%c = nn.constant dense<1.250000e-01> : tensor<f32> {node = "/attn/Constant_10"}`

    Large constants, and constants holding infinities or NaNs, are held as `#nn.data` and print
    their bytes as a hex string (`dense<"0x000080FF"> : tensor<f32>`), which re-parses exactly.
    """

    name = "nn.constant"
    value = prop_def(base(DenseIntOrFPElementsAttr) | base(TensorDataAttr))
    result = result_def(TensorType)
    traits = traits_def(Pure(), CostFree())

    def verify_semantics(self) -> None:
        expect(self.value.type == self.result.type, self,
               f"value type {self.value.type} differs from result type {self.result.type}")
        if isinstance(self.value, TensorDataAttr):
            want = tensor_storage_bytes(self.value.type)
            expect(len(self.value.data.data) == want, self,
                   f"value holds {len(self.value.data.data)} bytes, {self.value.type} needs {want}")

    def raw_bytes(self) -> bytes:
        return self.value.data.data

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        if isinstance(self.value, TensorDataAttr):
            printer.print_string(f'dense<"0x{self.value.data.data.hex().upper()}"> : ')
            printer.print_attribute(self.value.type)
        else:
            printer.print_attribute(self.value)
        others = {k: v for k, v in self.properties.items() if k != "value"}
        others.update(self.attributes)
        if others:
            printer.print_string(" ")
            printer.print_attr_dict(others)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr | TensorDataAttr):
            parser.raise_error("nn.constant expects a dense elements attribute")
        extra = parser.parse_optional_attr_dict()
        props: dict[str, Attribute] = {"value": constant_data(value.type, value.data.data)}
        attrs: dict[str, Attribute] = {}
        for key, attr_value in extra.items():
            (props if key in ("node", "phase") else attrs)[key] = attr_value
        return cls.create(properties=props, attributes=attrs, result_types=[value.type])


CONSTANT_HEX_ABOVE = 16


def constant_data(t: TensorType, raw: bytes) -> DenseIntOrFPElementsAttr | TensorDataAttr:
    """The value attribute for a constant: readable `dense` when small and finite, else hex data."""
    elem = t.get_element_type()
    count = num_elements(t.get_shape())
    if count <= CONSTANT_HEX_ABOVE and len(raw) == tensor_storage_bytes(t):
        dense = DenseIntOrFPElementsAttr(t, BytesAttr(raw))
        if isinstance(elem, IntegerType) or all(math.isfinite(v) for v in dense.get_values()):
            return dense
    return TensorDataAttr(t, BytesAttr(raw))


def tensor_storage_bytes(t: TensorType) -> int:
    from monet_ir.types import bits_of

    bits = bits_of(t.get_element_type())
    return num_elements(t.get_shape()) * max(bits, 8) // 8


@irdl_op_definition
class RandomOp(MonetOp):
    """Random numbers of the result's type (ONNX RandomUniform, RandomNormal and their `*Like`
    forms, from which PyTorch's exporters build dropout and stochastic-depth masks):
    `distribution = "uniform"` draws from [low, high), `"normal"` from N(mean, scale).
    Not pure: two draws differ, so it is never merged or folded.

    `%r = nn.random {distribution = "uniform", low = 0.000000e+00 : f64, high = 1.000000e+00 : f64} : tensor<2x16xf32>`
    """

    name = "nn.random"
    traits = traits_def(VectorWork(3))
    distribution = prop_def(StringAttr)
    low = opt_prop_def(FloatAttr)
    high = opt_prop_def(FloatAttr)
    mean = opt_prop_def(FloatAttr)
    scale = opt_prop_def(FloatAttr)
    seed = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    assembly_format = "attr-dict `:` type($result)"

    def verify_semantics(self) -> None:
        kind = str_of(self.distribution)
        expect(kind in ("uniform", "normal"), self, f"distribution must be uniform or normal, not '{kind}'")
        if kind == "uniform":
            expect(float_of(self.low, 0.0) <= float_of(self.high, 1.0), self, "low must not exceed high")
        else:
            expect(float_of(self.scale, 1.0) >= 0.0, self, "scale must not be negative")
        elem = self.result.type.get_element_type()
        expect(not isinstance(elem, IntegerType), self, "result must be a float tensor")
