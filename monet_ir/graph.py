"""Conventions of a MONET training-step function, and small queries on it.

A module holds one `func.func` (the step). Its arguments carry one role attribute each:

| attribute | meaning |
|---|---|
| `monet.input = "x"` | a data input of the batch (images, token ids, labels) |
| `monet.param = "conv1.weight"` (+ `monet.trainable`) | a model parameter or buffer, by ONNX initializer name; persistent |
| `monet.state = "conv1.weight.exp_avg"` | persistent optimizer state (momentum buffer, Adam moments and step) |

Everything else is an SSA value computed inside the function. Ops carry `node` (the ONNX node
name) and `phase` properties (see `dialects.base.MonetOp`).

What the importer decided on the user's behalf is stated on the module, so that every tool and
report can say it: `monet.notices = {<topic> = ["...", ...]}` (topics `parameters`: which
initializers are trained and how that was decided; `routing`: the static bounds of
data-dependent counts; `export`: what the exporter changed, such as batch normalizations folded
into convolutions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation

INPUT = "monet.input"
PARAM = "monet.param"
STATE = "monet.state"
TRAINABLE = "monet.trainable"
ROLES = (INPUT, PARAM, STATE)
NOTICES = "monet.notices"


@dataclass(frozen=True)
class ArgInfo:
    """The role of one function argument."""

    index: int
    role: str  # "input" | "param" | "state" | "" (unannotated)
    name: str
    trainable: bool

    @property
    def persistent(self) -> bool:
        return self.role in ("param", "state")


def arg_attrs(role: str, name: str, trainable: bool = False) -> DictionaryAttr:
    entries: dict[str, Attribute] = {f"monet.{role}": StringAttr(name)}
    if trainable:
        entries[TRAINABLE] = UnitAttr()
    return DictionaryAttr(entries)


def step_function(module: ModuleOp) -> func.FuncOp:
    """The training-step function of a module: the first `func.func` in it."""
    for op in module.ops:
        if isinstance(op, func.FuncOp):
            return op
    raise ValueError("the module has no func.func")


def arg_infos(fn: func.FuncOp) -> list[ArgInfo]:
    attrs = fn.arg_attrs.data if fn.arg_attrs is not None else ()
    infos = []
    for i in range(len(fn.body.block.args)):
        d = attrs[i].data if i < len(attrs) else {}
        role, name = "", ""
        for key in ROLES:
            if key in d:
                role, name = key.split(".", 1)[1], d[key].data  # type: ignore[union-attr]
                break
        infos.append(ArgInfo(i, role, name, TRAINABLE in d))
    return infos


def arg_info(arg: BlockArgument) -> ArgInfo | None:
    owner = arg.block.parent_op()
    if not isinstance(owner, func.FuncOp):
        return None
    return arg_infos(owner)[arg.index]


def set_arg_infos(fn: func.FuncOp, infos: list[ArgInfo]) -> None:
    from xdsl.dialects.builtin import ArrayAttr

    fn.arg_attrs = ArrayAttr(
        [arg_attrs(i.role, i.name, i.trainable) if i.role else DictionaryAttr({}) for i in infos]
    )


def append_args(block: Block, types: Sequence[Attribute]) -> list[BlockArgument]:
    """New arguments at the end of `block`, one per type: what `block.insert_arg(t,
    len(block.args))` does for each, with one rebuild of the block's argument tuple instead of
    one per argument (an optimizer's state arguments, three per parameter of a deep model,
    made that quadratic). Relies on xDSL keeping them in `Block._args` (xDSL is pinned)."""
    start = len(block.args)
    new = [BlockArgument(t, block, start + i) for i, t in enumerate(types)]
    block._args = block._args + tuple(new)
    return new


def op_phase(op: Operation) -> str:
    get = getattr(op, "get_phase", None)
    return get() if get is not None else "forward"


def op_node(op: Operation) -> str:
    get = getattr(op, "get_node", None)
    return get() if get is not None else ""


def compute_ops(fn: func.FuncOp) -> Iterator[Operation]:
    """The ops of the step in program order, without the terminator."""
    for op in fn.body.block.ops:
        if not isinstance(op, func.ReturnOp):
            yield op


def holds_training_ops(fn: func.FuncOp) -> bool:
    """Whether the step already holds backward or optimizer ops (an imported ONNX Runtime
    training graph): then autodiff and insert-optimizer must not run again, it is costed as
    imported."""
    return any(op_phase(op) != "forward" for op in compute_ops(fn))


def element_precision(fn: func.FuncOp) -> str:
    """The number format of the step's parameters (fp32, fp16, bf16 or fp64) when no precision
    is imposed: the element type most parameters have."""
    from collections import Counter

    from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float64Type, TensorType

    names = Counter()
    for info, arg in zip(arg_infos(fn), fn.body.block.args, strict=False):
        if info.role == "param" and isinstance(arg.type, TensorType):
            elem = arg.type.element_type
            names["bf16" if isinstance(elem, BFloat16Type) else "fp16" if isinstance(elem, Float16Type)
                  else "fp64" if isinstance(elem, Float64Type) else "fp32"] += 1
    return names.most_common(1)[0][0] if names else "fp32"


def add_notices(module: ModuleOp, topic: str, lines: Sequence[str]) -> None:
    """Append notices of one topic to the module (see the module docstring)."""
    if not lines:
        return
    current = dict(module.attributes[NOTICES].data) if NOTICES in module.attributes else {}
    old = list(current[topic].data) if topic in current else []
    current[topic] = ArrayAttr(old + [StringAttr(line) for line in lines])
    module.attributes[NOTICES] = DictionaryAttr(current)


def notices(module: ModuleOp) -> dict[str, list[str]]:
    """The module's notices by topic."""
    attr = module.attributes.get(NOTICES)
    if not isinstance(attr, DictionaryAttr):
        return {}
    return {topic: [s.data for s in lines.data] for topic, lines in attr.data.items()}
