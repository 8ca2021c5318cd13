"""The `hw` dialect: hardware-level attributes that cost annotation and scheduling attach to ops.

- `#hw.cost<core = 0, latency = 1.2e+03, energy = 4.5e+04, mem = 65536>`: the price of the op on
  one core (latency in that core's cycles, energy in pJ, bytes the op holds at once).
  `annotate-cost` attaches `monet.costs = [#hw.cost<...>, ...]`, one per core able to run the
  op, and records the target on the module (`monet.target = "<name>"`).
- `#hw.sched<core = 2, start = 1.0e+02, end = 3.5e+02>`: where and when the op runs, in cycles of
  the target's reference clock; `schedule` attaches it as `monet.schedule`.
- `#hw.tiling<stack = 2, tiles = 4, axis = 2>`: the op belongs to fused stack 2 and runs as 4
  tiles along axis 2 of its result; `fuse-layers` attaches it as `monet.tiling`.

```mlir
%y = nn.relu %x {monet.costs = [#hw.cost<core = 5, latency = 4.000000e+00, energy = 1.200000e+01, mem = 64>]} : tensor<4x4xf32>
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import FloatAttr, IntAttr, f64
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


def _parse_fields(parser: AttrParser, names: Sequence[str]) -> dict[str, float]:
    values: dict[str, float] = {}
    with parser.in_angle_brackets():
        for i, name in enumerate(names):
            if i:
                parser.parse_punctuation(",")
            parser.parse_keyword(name)
            parser.parse_punctuation("=")
            values[name] = parser.parse_number()
    return values


def _print_fields(printer: Printer, fields: Sequence[tuple[str, int | float]]) -> None:
    with printer.in_angle_brackets():
        parts = []
        for name, value in fields:
            parts.append(f"{name} = {value}" if isinstance(value, int) else f"{name} = {value:.6e}")
        printer.print_string(", ".join(parts))


@irdl_attr_definition
class CostAttr(ParametrizedAttribute):
    """The cost of an op on one core: `#hw.cost<core = 0, latency = 1.0e+02, energy = 5.0e+03, mem = 4096>`."""

    name = "hw.cost"
    core: IntAttr
    latency: FloatAttr
    energy: FloatAttr
    mem: IntAttr

    def __init__(self, core: int, latency: float, energy: float, mem: int):
        super().__init__(IntAttr(core), FloatAttr(float(latency), f64), FloatAttr(float(energy), f64), IntAttr(int(mem)))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        v = _parse_fields(parser, ("core", "latency", "energy", "mem"))
        return (IntAttr(int(v["core"])), FloatAttr(float(v["latency"]), f64), FloatAttr(float(v["energy"]), f64),
                IntAttr(int(v["mem"])))

    def print_parameters(self, printer: Printer) -> None:
        _print_fields(printer, (("core", self.core.data), ("latency", self.latency.value.data),
                                ("energy", self.energy.value.data), ("mem", self.mem.data)))

    def verify(self) -> None:
        if self.core.data < 0 or self.latency.value.data < 0 or self.energy.value.data < 0 or self.mem.data < 0:
            raise VerifyException("hw.cost fields must be non-negative")


@irdl_attr_definition
class SchedAttr(ParametrizedAttribute):
    """Where and when an op runs: `#hw.sched<core = 1, start = 0.0e+00, end = 2.5e+02>`."""

    name = "hw.sched"
    core: IntAttr
    start: FloatAttr
    end: FloatAttr

    def __init__(self, core: int, start: float, end: float):
        super().__init__(IntAttr(core), FloatAttr(float(start), f64), FloatAttr(float(end), f64))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        v = _parse_fields(parser, ("core", "start", "end"))
        return (IntAttr(int(v["core"])), FloatAttr(float(v["start"]), f64), FloatAttr(float(v["end"]), f64))

    def print_parameters(self, printer: Printer) -> None:
        _print_fields(printer, (("core", self.core.data), ("start", self.start.value.data), ("end", self.end.value.data)))

    def verify(self) -> None:
        if self.end.value.data < self.start.value.data:
            raise VerifyException("hw.sched ends before it starts")


@irdl_attr_definition
class TilingAttr(ParametrizedAttribute):
    """Membership of an op in a fused layer stack, split into tiles along one axis of its
    result: `#hw.tiling<stack = 2, tiles = 4, axis = 2>` (set by `fuse-layers`)."""

    name = "hw.tiling"
    stack: IntAttr
    tiles: IntAttr
    axis: IntAttr

    def __init__(self, stack: int, tiles: int, axis: int):
        super().__init__(IntAttr(stack), IntAttr(tiles), IntAttr(axis))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        v = _parse_fields(parser, ("stack", "tiles", "axis"))
        return (IntAttr(int(v["stack"])), IntAttr(int(v["tiles"])), IntAttr(int(v["axis"])))

    def print_parameters(self, printer: Printer) -> None:
        _print_fields(printer, (("stack", self.stack.data), ("tiles", self.tiles.data), ("axis", self.axis.data)))

    def verify(self) -> None:
        if self.stack.data < 0 or self.tiles.data < 1 or self.axis.data < 0:
            raise VerifyException("hw.tiling needs stack >= 0, tiles >= 1 and axis >= 0")


HW = Dialect("hw", [], [CostAttr, SchedAttr, TilingAttr])
