"""`fuse-layers`: group consecutive forward layers into fused stacks that run tile by tile.

    fuse-layers{mode=auto|explicit|none tiles=N memory=BYTES target=NAME stacks="first:last","..."}

Options:
- `mode` (default `auto`): `auto` grows stacks along producer–consumer chains of fusable
  forward ops (convolutions, pooling, element-wise ops, normalizations over other axes, matrix
  products on their rows, reshapes and transposes that keep the tiled axis); a stack ends at an
  op that cannot be tiled along its axis (global pooling, a flatten, a loss), batch
  normalization with batch statistics starts a new stack (it needs every row of its input
  before any output row), and with a memory size a convolution or product whose weight takes
  more than a quarter of it is left unfused (each tile would read the whole weight again). `explicit` fuses exactly the `stacks` given; `none` removes fusion.
- `tiles` (default 0 = from memory): tiles per layer along the stack's axis (output rows of a
  convolution, the sequence of a transformer layer).
- `memory` (default 0 = the smallest top memory of the target's cores, or 4 tiles without a
  target): with `tiles=0`, the tile count makes the largest layer's per-tile operands fit in half
  of this many bytes.
- `target`: the accelerator whose memories size the tiles (a built-in name or a quoted path).
- `stacks` (with `mode=explicit`): each `"first:last"` names the ONNX nodes of a stack's first and
  last op; the forward ops between them in program order form the stack.

Each fused op gets `monet.tiling = #hw.tiling<stack = s, tiles = t, axis = a>`. The scheduler
then runs it as `t` tiles; a tile reads only the operand rows it needs (with the convolution
halo), and the tiles of a stack go depth-first so that intermediates stay on chip. The pass is
training-aware without special cases: a forward value the backward pass reads stays alive until
that use (and spills to DRAM if it does not fit), so fusion saves only what is not saved for
backward, unless `activation-checkpoint` recomputes it. Backward ops are not tiled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dialects import nn
from dialects.base import shape_of
from monet_ir import graph


@dataclass(frozen=True)
class FuseLayersPass(ModulePass):
    name = "fuse-layers"

    mode: Literal["auto", "explicit", "none"] = "auto"
    tiles: int = 0
    memory: int = 0
    target: str = ""
    stacks: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = graph.step_function(op)
        forward = [o for o in graph.compute_ops(fn) if graph.op_phase(o) == "forward"]
        for o in forward:
            o.attributes.pop("monet.tiling", None)
        for o, attr in self.plan(forward).items():
            o.attributes["monet.tiling"] = attr

    def plan(self, forward: list[Operation]) -> dict[Operation, Attribute]:
        """The `monet.tiling` each forward op gets (ops not named are not fused), without
        touching the IR (`monet explore` hands the plan to the task-graph extractor)."""
        from dialects.hw import TilingAttr

        if self.mode == "none":
            return {}
        if self.tiles < 0 or self.memory < 0:
            raise PassFailedException("fuse-layers: tiles and memory must be non-negative")
        budget = self.memory or self._target_memory()
        groups = explicit_stacks(forward, self.stacks) if self.mode == "explicit" else auto_stacks(forward, budget)
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

    def _target_memory(self) -> int:
        if not self.target:
            return 0
        from monet_ir.schedule.scheduler import top_memory
        from targets import get_target

        target = get_target(self.target)
        return int(min(top_memory(c)[1] for c in target.cores if c.kind == "mac_array") or 0)


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


def weights_fit(op: Operation, memory: int) -> bool:
    """A tiled convolution or product reads its whole weight once per tile: fusing it pays only
    when the weight stays on chip across tiles (a quarter of the memory at most)."""
    if memory <= 0 or not isinstance(op, nn.ConvOp | nn.MatMulOp | nn.GemmOp):
        return True
    from monet_ir.types import tensor_bytes

    return tensor_bytes(op.operands[1].type) <= memory / 4


def auto_stacks(forward: list[Operation], memory: int = 0) -> list[tuple[int, list[Operation]]]:
    from monet_ir.schedule.tiling import fusable

    stacks: list[tuple[int, list[Operation]]] = []
    current: list[Operation] = []
    axis: int | None = None
    for op in forward:
        if isinstance(op, nn.ConstantOp | nn.ReshapeOp) and not current:
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


def explicit_stacks(forward: list[Operation], specs: tuple[str, ...]) -> list[tuple[int, list[Operation]]]:
    from monet_ir.schedule.tiling import fusable

    if not specs:
        raise PassFailedException("fuse-layers{mode=explicit}: give stacks=\"first:last\",...")
    position = {graph.op_node(o): i for i, o in reversed(list(enumerate(forward)))}
    stacks = []
    for spec in specs:
        first, sep, last = spec.partition(":")
        if not sep or first not in position or last not in position:
            raise PassFailedException(f"fuse-layers: stack '{spec}': expected \"first:last\" with two forward node names")
        ops = [o for o in forward[position[first]: position[last] + 1] if not isinstance(o, nn.ConstantOp)]
        axis = preferred_axis(ops[0])
        bad = [graph.op_node(o) for o in ops if axis is None or not fusable(o, axis)]
        if bad:
            raise PassFailedException(f"fuse-layers: stack '{spec}': node '{bad[0]}' cannot be tiled along the stack's axis")
        stacks.append((axis, ops))
    return stacks


def tiles_for(ops: list[Operation], axis: int, memory: int) -> int:
    """Tiles so that the largest op's per-tile operands and result fit in half of `memory`."""
    if memory <= 0:
        return 4
    from monet_ir.types import tensor_bytes

    largest = max(sum(tensor_bytes(v.type) for v in (*o.operands, *o.results)) for o in ops)
    return max(2, math.ceil(largest / (memory / 2)))
