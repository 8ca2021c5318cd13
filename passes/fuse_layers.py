"""`fuse-layers`: group consecutive layers into fused stacks that run tile by tile.

    fuse-layers{mode=auto|explicit|none tiles=N memory=BYTES target=NAME backward=true|false
                stacks="first:last","backward:first:last",...}

Options:
- `mode` (default `auto`): `auto` grows stacks along producer–consumer chains of fusable
  forward ops (convolutions, pooling, element-wise ops, normalizations over other axes, matrix
  products on their rows, reshapes and transposes that keep the tiled axis); a stack ends at an
  op that cannot be tiled along its axis (global pooling, a flatten, a loss), batch
  normalization with batch statistics starts a new stack (it needs every row of its input
  before any output row), and with a memory size a convolution or product whose weight takes
  more than a quarter of it is left unfused (each tile would read the whole weight again). With
  `backward` (the default), the backward pass's ops are grouped the same way, in their program
  order: element-wise gradients (ReLU, GELU, tanh, dropout, softmax over another axis, the
  `nn` ops autodiff emits), the gradient of a product's left operand (rows of dy times the whole
  weight), reshapes and transposes; weight, bias and normalization gradients reduce over the
  rows: they are not tiled, and a stack steps over them (they read its results whole). `explicit` fuses exactly the `stacks` given; `none` removes fusion.
- `tiles` (default 0 = from memory): tiles per layer along the stack's axis (output rows of a
  convolution, the sequence of a transformer layer).
- `memory` (default 0 = the smallest top memory of the target's cores, or 4 tiles without a
  target): with `tiles=0`, the tile count makes the largest layer's per-tile operands fit in half
  of this many bytes.
- `target`: the accelerator whose memories size the tiles (a built-in name or a quoted path).
- `backward` (default true): `mode=auto` also fuses backward stacks.
- `stacks` (with `mode=explicit`): each `"first:last"` names the ONNX nodes of a stack's first and
  last op; the forward ops between them in program order form the stack. `"backward:first:last"`
  names a backward stack: from the first backward op of node `first` to the last backward op of
  node `last` that can be tiled (backward ops carry their forward op's node), leaving out the
  weight, bias and normalization gradients in between.

Each fused op gets `monet.tiling = #hw.tiling<stack = s, tiles = t, axis = a>`. The scheduler
then runs it as `t` tiles; a tile reads only the operand rows it needs (with the convolution
halo), and the tiles of a stack go depth-first so that intermediates stay on chip. The pass is
training-aware without special cases: a forward value the backward pass reads stays alive until
that use (and spills to DRAM if it does not fit), so fusion saves only what is not saved for
backward, unless `activation-checkpoint` recomputes it. Recompute copies are not tiled.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dialects import nn
from dialects.interfaces import LoopNestOp
from dialects.base import shape_of
from monet_ir import graph


@dataclass(frozen=True)
class FuseLayersPass(ModulePass):
    name = "fuse-layers"

    mode: Literal["auto", "explicit", "none"] = "auto"
    tiles: int = 0
    memory: int = 0
    target: str = ""
    backward: bool = True
    stacks: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ops = list(graph.compute_ops(graph.step_function(op)))
        for o in ops:
            o.attributes.pop("monet.tiling", None)
        for o, attr in self.plan(ops).items():
            o.attributes["monet.tiling"] = attr

    def plan(self, ops: list[Operation], memo: dict | None = None) -> dict[Operation, Attribute]:
        """The `monet.tiling` each op of the step (`ops`, in program order) gets (ops not named
        are not fused), without touching the IR (`monet explore` hands the plan to the
        task-graph extractor). `memo`: a dict a caller planning many stack lists over the same
        `ops` (and target) passes every time; it keeps the phase split and, per stack, its ops,
        axis and tile count (explicit mode)."""
        from dialects.hw import TilingAttr

        if self.mode == "none":
            return {}
        if self.tiles < 0 or self.memory < 0:
            raise PassFailedException("fuse-layers: tiles and memory must be non-negative")
        budget = self.memory or self._target_memory()
        if memo is not None and self.mode == "explicit":
            return self._explicit_plan(ops, budget, memo)
        forward, backward = phase_ops(ops)
        if self.mode == "explicit":
            groups = explicit_stacks(forward, self.stacks, backward)
        else:
            groups = auto_stacks(forward, budget) + (auto_stacks(backward, budget, backward=True) if self.backward else [])
        tiling: dict[Operation, Attribute] = {}
        for number, (axis, ops) in enumerate(groups):
            tiles = self.tiles or tiles_for(ops, axis, budget)
            tiles = min(tiles, min(shape_of(o.results[0].type)[axis] for o in ops))
            if tiles < 2:
                continue
            attr = TilingAttr(number, tiles, axis)
            for o in ops:
                tiling[o] = attr
        return tiling

    def _explicit_plan(self, ops: list[Operation], budget: int, memo: dict) -> dict[Operation, Attribute]:
        """`plan` in explicit mode, each stack resolved once per `memo` (the same stacks, axes,
        tile counts and attributes as without it)."""
        from dialects.hw import TilingAttr

        if not self.stacks:
            raise PassFailedException("fuse-layers{mode=explicit}: give stacks=\"first:last\",...")
        phases = memo.get("phases")
        if phases is None:
            phases = memo["phases"] = phase_ops(ops)
        forward, backward = phases
        tiling: dict[Operation, Attribute] = {}
        for number, spec in enumerate(self.stacks):
            key = ("stack", spec, self.tiles, budget)
            stack = memo.get(key)
            if stack is None:
                # raises for a bad stack, as `explicit_stacks` does for the whole list (in order)
                (axis, stack_ops), = explicit_stacks(forward, (spec,), backward)
                tiles = self.tiles or tiles_for(stack_ops, axis, budget)
                tiles = min(tiles, min(shape_of(o.results[0].type)[axis] for o in stack_ops))
                stack = memo[key] = (axis, stack_ops, tiles)
            axis, stack_ops, tiles = stack
            if tiles < 2:
                continue
            attr = memo.get(("attr", number, tiles, axis))
            if attr is None:
                attr = memo[("attr", number, tiles, axis)] = TilingAttr(number, tiles, axis)
            for o in stack_ops:
                tiling[o] = attr
        return tiling

    def _target_memory(self) -> int:
        if not self.target:
            return 0
        import os

        # the explorer applies this pass for every fused candidate: read the target once (a file
        # target again only when it changed)
        stamp = None
        if os.path.isfile(self.target):
            info = os.stat(self.target)
            stamp = (info.st_mtime_ns, info.st_size)
        return _mac_array_memory(self.target, stamp)


@functools.lru_cache(maxsize=32)
def _mac_array_memory(target_name: str, stamp: tuple[int, int] | None) -> int:
    """The smallest top memory of the target's MAC-array cores, or of all its cores when none is
    a MAC array (a target of vector cores): the fusion budget."""
    from monet_ir.schedule.scheduler import top_memory
    from targets import get_target

    target = get_target(target_name)
    cores = [c for c in target.cores if c.kind == "mac_array"] or target.cores
    return int(min(top_memory(c)[1] for c in cores) or 0)


def preferred_axis(op: Operation) -> int | None:
    from monet_ir.schedule.tiling import tiled_axes

    axes = tiled_axes(op)
    if not axes:
        return None
    rank = len(shape_of(op.results[0].type))
    if rank == 4:
        return 2 if 2 in axes else None
    return rank - 2 if rank >= 2 and rank - 2 in axes else axes[0]


def joins(op: Operation, axis: int, members: set[Operation]) -> bool:
    """`op` can extend a stack tiled along `axis` whose ops are `members`: it is fusable along
    `axis` and reads a member's result along that same axis."""
    from monet_ir.schedule.tiling import fusable, operand_rows

    if isinstance(op, nn.BatchNormOp) or not fusable(op, axis):
        return False
    size = shape_of(op.results[0].type)[axis]
    linked = False
    for index, operand in enumerate(op.operands):
        owner = operand.owner
        if owner in members:
            needed = operand_rows(op, index, axis, 0, max(size, 1))
            if needed is None or needed[0] != axis:
                return False
            linked = True
    return linked


def phase_ops(ops: list[Operation]) -> tuple[list[Operation], list[Operation]]:
    """The forward and the backward ops of a step, each in program order."""
    forward, backward = [], []
    for o in ops:
        phase = graph.op_phase(o)
        if phase == "forward":
            forward.append(o)
        elif phase == "backward":
            backward.append(o)
    return forward, backward


def weights_fit(op: Operation, memory: int) -> bool:
    """A tiled convolution or product reads its whole weight once per tile: fusing it pays only
    when the weight stays on chip across tiles (a quarter of the memory at most)."""
    if memory <= 0 or not isinstance(op, LoopNestOp):
        return True
    from monet_ir.types import tensor_bytes

    return tensor_bytes(op.nest_values()[0].type) <= memory / 4  # the W role


def auto_stacks(ops: list[Operation], memory: int = 0, backward: bool = False) -> list[tuple[int, list[Operation]]]:
    """Stacks grown along producer-consumer chains of `ops` (one phase, in program order). In
    the backward pass, the weight, bias and normalization gradients interleaved with a chain
    (they cannot be tiled) are stepped over, not a stack's end: they read the stack's results
    whole."""
    from monet_ir.schedule.tiling import fusable, tiled_axes

    stacks: list[tuple[int, list[Operation]]] = []
    current: list[Operation] = []
    axis: int | None = None
    for op in ops:
        if isinstance(op, nn.ConstantOp | nn.ReshapeOp) and not current:
            continue
        if backward and current and not tiled_axes(op):
            continue
        if current and axis is not None and weights_fit(op, memory) and joins(op, axis, set(current)):
            current.append(op)
            continue
        if len(current) > 1:
            stacks.append((axis, current))
        current, axis = [], None
        start_axis = preferred_axis(op)
        if start_axis is not None and fusable(op, start_axis) and weights_fit(op, memory):
            current, axis = [op], start_axis
    if len(current) > 1:
        stacks.append((axis, current))
    return stacks


BACKWARD_PREFIX = "backward:"


def explicit_stacks(forward: list[Operation], specs: tuple[str, ...],
                    backward: list[Operation] | tuple[()] = ()) -> list[tuple[int, list[Operation]]]:
    from monet_ir.schedule.tiling import fusable, tiled_axes

    if not specs:
        raise PassFailedException("fuse-layers{mode=explicit}: give stacks=\"first:last\",...")
    first_at = {graph.op_node(o): i for i, o in reversed(list(enumerate(forward)))}
    backward_first = {graph.op_node(o): i for i, o in reversed(list(enumerate(backward)))}
    stacks = []
    for spec in specs:
        is_backward = spec.startswith(BACKWARD_PREFIX)
        first, sep, last = spec.removeprefix(BACKWARD_PREFIX).partition(":")
        ops_in, start = (backward, backward_first) if is_backward else (forward, first_at)
        begin = start.get(first)
        end = _backward_end(backward, begin, last) if is_backward and begin is not None else first_at.get(last)
        if not sep or begin is None or end is None or end < begin:
            from monet_ir.errors import did_you_mean

            names = list(start) if is_backward else list(first_at)
            unknown = next((name for name in (first, last) if name not in first_at and name not in start), "")
            hint = did_you_mean(unknown, names) if unknown else ""
            raise PassFailedException(
                f"fuse-layers: stack '{spec}': expected \"{'backward:' if is_backward else ''}first:last\" with two "
                f"{'backward' if is_backward else 'forward'} node names, in program order"
                + (f" ('{unknown}' is no such node{hint})" if unknown else ""))
        ops = [o for o in ops_in[begin: end + 1] if not isinstance(o, nn.ConstantOp)]
        if is_backward:
            ops = [o for o in ops if tiled_axes(o)]  # the gradients reducing over rows stay whole
        if not ops:
            raise PassFailedException(f"fuse-layers: stack '{spec}': only constants between its first and last node")
        axis = preferred_axis(ops[0])
        bad = [graph.op_node(o) for o in ops if axis is None or not fusable(o, axis)]
        if bad:
            raise PassFailedException(f"fuse-layers: stack '{spec}': node '{bad[0]}' cannot be tiled along the stack's axis")
        stacks.append((axis, ops))
    return stacks


def _backward_end(backward: list[Operation], begin: int, last: str) -> int | None:
    """Where a backward stack from `backward[begin]` to node `last` ends: the last op of that node
    (a node's gradient is several ops) that can be tiled along the first op's axis, so that a
    stack can end before a node's bias gradient (`grad.unbroadcast`, a reduction)."""
    from monet_ir.schedule.tiling import fusable

    axis = preferred_axis(backward[begin])
    end = None
    for i in range(begin, len(backward)):
        o = backward[i]
        if graph.op_node(o) == last and (end is None or (axis is not None and fusable(o, axis))):
            end = i
    return end


def tiles_for(ops: list[Operation], axis: int, memory: int) -> int:
    """Tiles so that the largest op's per-tile operands and result fit in half of `memory`."""
    if memory <= 0:
        return 4
    from monet_ir.types import tensor_bytes

    largest = max(sum(tensor_bytes(v.type) for v in (*o.operands, *o.results)) for o in ops)
    return max(2, math.ceil(largest / (memory / 2)))
