"""Saved-activation analysis: which forward values a training step keeps for its backward pass.

A value is *saved* when it is defined in the forward phase and read by at least one op that
runs in the backward pass:

- defined in the forward phase: the result of an op whose phase is `forward`, or a function
  argument with role `monet.input` or `monet.param`;
- read in the backward pass: an operand of an op whose phase is `backward` or `recompute`
  (recomputation runs during the backward pass, so the checkpoints it starts from must be
  kept alive exactly like values a backward op reads directly).

Each saved value has a *kind*, PyTorch's split of `saved_for_backward` bytes: `input` and
`param` for values whose storage is a `monet.input` / `monet.param` argument, `activation` for
values a forward op computes. Storage is followed through `nn.reshape`, a free view (a saved
reshape of the input is input bytes, a reshape of a weight is parameter bytes, and a value
saved both directly and through a view is counted once). Constants (`nn.constant`, and views
of one) are part of the program, not saved by the forward pass: they are not reported.

- `saved_activations(fn) -> list[SavedValue]`: every saved SSA value in program order
  (arguments first, in argument order, then op results).
- `saved_bytes_by_kind(fn) -> {"activation": int, "input": int, "param": int}`: bytes per kind,
  each storage counted once.
- `mark_saved(fn)`: puts the discardable `monet.saved` unit attribute on every forward op whose
  result is saved, directly or through views (the view ops and the op owning the storage are
  both marked), and removes stale marks from other ops, so later passes can read the set
  without recomputing it. Returns the number of ops marked.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from dialects import nn
from monet_ir import graph
from monet_ir.types import tensor_bytes

SAVED_ATTR = "monet.saved"
KINDS = ("activation", "input", "param")
BACKWARD_PHASES = ("backward", "recompute")
VIEW_OPS = (nn.ReshapeOp,)


@dataclass(frozen=True, eq=False)
class SavedValue:
    """One SSA value kept from the forward to the backward pass.

    value: the saved SSA value (what the backward ops read).
    bytes: storage bytes of its type (`monet_ir.types.tensor_bytes`).
    producer: the `node` of the op defining it, or the role name of the argument.
    kind: "activation" | "input" | "param" (of the storage, see the module docstring).
    consumers: the backward/recompute ops reading it, in program order.
    storage: the value owning the storage (`value` itself unless it is a view).
    """

    value: SSAValue
    bytes: int
    producer: str
    kind: str
    consumers: tuple[Operation, ...]
    storage: SSAValue


def storage_of(value: SSAValue) -> SSAValue:
    """The value whose buffer `value` views (follows `nn.reshape`)."""
    while isinstance(value, OpResult) and isinstance(value.op, VIEW_OPS):
        value = value.op.operands[0]
    return value


def _forward_kind(value: SSAValue, infos: list[graph.ArgInfo], fn: func.FuncOp) -> str | None:
    """The kind of a value defined in the forward phase, or None if it is not one."""
    root = storage_of(value)
    if isinstance(root, BlockArgument):
        if root.block is not fn.body.block:
            return None
        role = infos[root.index].role
        return role if role in ("input", "param") else None
    if isinstance(root, OpResult):
        if isinstance(root.op, nn.ConstantOp) or graph.op_phase(root.op) != "forward":
            return None
        if isinstance(value, OpResult) and graph.op_phase(value.op) != "forward":
            return None  # a recompute/backward view of a forward value is not itself saved
        return "activation"
    return None


def _producer(value: SSAValue, infos: list[graph.ArgInfo]) -> str:
    if isinstance(value, BlockArgument):
        return infos[value.index].name
    assert isinstance(value, OpResult)
    return graph.op_node(value.op)


def saved_activations(fn: func.FuncOp) -> list[SavedValue]:
    """Every value of `fn` defined in the forward phase and read in the backward pass."""
    infos = graph.arg_infos(fn)
    block = fn.body.block
    candidates: list[SSAValue] = list(block.args)
    for op in block.ops:
        candidates.extend(op.results)
    order = {op: i for i, op in enumerate(fn.walk())}
    saved = []
    for value in candidates:
        kind = _forward_kind(value, infos, fn)
        if kind is None:
            continue
        consumers = {use.operation for use in value.uses if graph.op_phase(use.operation) in BACKWARD_PHASES}
        consumers = {op for op in consumers if op in order}
        if not consumers:
            continue
        saved.append(SavedValue(
            value=value,
            bytes=tensor_bytes(value.type),
            producer=_producer(value, infos),
            kind=kind,
            consumers=tuple(sorted(consumers, key=order.__getitem__)),
            storage=storage_of(value),
        ))
    return saved


def saved_bytes_by_kind(fn: func.FuncOp, saved: list[SavedValue] | None = None) -> dict[str, int]:
    """Saved bytes per kind (activation, input, param), each storage counted once."""
    totals = dict.fromkeys(KINDS, 0)
    seen: set[SSAValue] = set()
    for sv in saved if saved is not None else saved_activations(fn):
        if sv.storage in seen:
            continue
        seen.add(sv.storage)
        totals[sv.kind] += tensor_bytes(sv.storage.type)
    return totals


def mark_saved(fn: func.FuncOp) -> int:
    """Set `monet.saved` on the forward ops whose results are saved; clear it elsewhere."""
    marked: set[Operation] = set()
    for sv in saved_activations(fn):
        value = sv.value
        while isinstance(value, OpResult):
            marked.add(value.op)
            if not isinstance(value.op, VIEW_OPS):
                break
            value = value.op.operands[0]
    for op in fn.walk():
        if op in marked:
            op.attributes[SAVED_ATTR] = UnitAttr()
        elif SAVED_ATTR in op.attributes:
            del op.attributes[SAVED_ATTR]
    return len(marked)
