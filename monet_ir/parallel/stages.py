"""Pipeline stages: a balanced partition of a training step into functions joined by send/recv.

`split_stages(module, stages)` replaces the module's step function by `stages` functions
`@<name>_stage<s>` (attribute `monet.stage = s`), in stage order:

- **Balance.** The forward ops, in program order, are cut into `stages` contiguous runs that
  minimize the largest run's cost, where an op's cost is the FLOPs of its ONNX node in every
  phase (forward, backward, recompute: `monet_ir.analysis.accounting.op_flops`) shared among
  the node's forward ops. The cut is the classic linear partition: the smallest bottleneck
  for which a greedy pass needs at most `stages` runs (bisection), runs split further if
  fewer.
- **The other ops** go where their node's forward ops went (backward and recompute ops carry
  the forward node); ops whose node has no forward op (optimizer steps are named after their
  parameter, gradient sums) go with the latest stage among their operands' producers.
  Constants are cloned into every stage that uses them.
- **Edges.** A value one stage computes and another reads leaves by `collective.send` right
  after it is computed and arrives by `collective.recv` right before its first reader
  (`group = "pp"`, `size = stages`, `peer` = the other stage; the phase of the value's
  producer). Arguments go to every stage that reads them (a parameter two stages read, as a
  tied embedding, is in both; its optimizer step in one, which receives the other's gradient).
- The loss is returned by the stage that computes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from monet_ir.errors import MonetError


class StageError(MonetError):
    """The step cannot be cut into that many pipeline stages."""


def linear_partition(costs: Sequence[float], parts: int) -> list[int]:
    """Start indices of `parts` contiguous runs of `costs` minimizing the largest run's sum."""
    n = len(costs)
    if parts > n:
        raise StageError(f"{parts} pipeline stages for {n} forward ops")

    def greedy(limit: float) -> list[int]:
        starts, run = [0], 0.0
        for i, c in enumerate(costs):
            if run + c > limit and i > starts[-1]:
                starts.append(i)
                run = 0.0
            run += c
        return starts

    lo, hi = max(costs, default=0.0), sum(costs)
    for _ in range(100):
        if hi - lo <= 1e-9 * max(hi, 1.0):
            break
        mid = (lo + hi) / 2
        if len(greedy(mid)) <= parts:
            hi = mid
        else:
            lo = mid
    starts = greedy(hi)
    while len(starts) < parts:  # split the costliest run that can be split
        bounds = list(zip(starts, starts[1:] + [n], strict=True))
        splittable = [(sum(costs[a:b]), a, b) for a, b in bounds if b - a > 1]
        _, a, b = max(splittable)
        half, run, cut = sum(costs[a:b]) / 2, 0.0, a + 1
        for i in range(a, b - 1):
            run += costs[i]
            if run >= half:
                cut = i + 1
                break
        starts = sorted(starts + [cut])
    return starts


def assign_stages(fn: func.FuncOp, stages: int) -> dict[Operation, int]:
    """The stage of every op of the step (constants: -1, they go where they are used)."""
    from dialects import nn
    from monet_ir import graph
    from monet_ir.analysis.accounting import op_flops

    ops = list(graph.compute_ops(fn))
    node_cost: dict[str, float] = {}
    forward = []
    for op in ops:
        f = op_flops(op)
        node = graph.op_node(op)
        node_cost[node] = node_cost.get(node, 0.0) + f["matmul_conv"] + f["other"]
        if graph.op_phase(op) == "forward" and not isinstance(op, nn.ConstantOp):
            forward.append(op)
    per_node: dict[str, int] = {}
    for op in forward:
        node = graph.op_node(op)
        per_node[node] = per_node.get(node, 0) + 1
    costs = [node_cost.get(graph.op_node(op), 0.0) / per_node[graph.op_node(op)] + 1e-9 for op in forward]
    starts = linear_partition(costs, stages)
    stage_of: dict[Operation, int] = {}
    node_stage: dict[str, int] = {}
    s = 0
    for i, op in enumerate(forward):
        while s + 1 < len(starts) and i >= starts[s + 1]:
            s += 1
        stage_of[op] = s
        node_stage.setdefault(graph.op_node(op), s)
    for op in ops:
        if op in stage_of:
            continue
        if isinstance(op, nn.ConstantOp):
            stage_of[op] = -1
            continue
        node = graph.op_node(op)
        if node in node_stage and node:
            stage_of[op] = node_stage[node]
            continue
        producers = [stage_of.get(v.owner, -1) for v in op.operands if isinstance(v.owner, Operation)]
        stage_of[op] = max([p for p in producers if p >= 0], default=stages - 1)
    return stage_of


def split_stages(module: ModuleOp, stages: int) -> list[func.FuncOp]:
    from dialects.collective import RecvOp, SendOp
    from dialects import nn
    from monet_ir import graph

    fn = graph.step_function(module)
    stage_of = assign_stages(fn, stages)
    ops = list(graph.compute_ops(fn))
    ret = fn.body.block.last_op
    arg_attrs = list(fn.arg_attrs.data) if fn.arg_attrs is not None else []
    res_attrs = list(fn.res_attrs.data) if fn.res_attrs is not None else []
    # consumers per stage of every value produced by a (non-constant) op
    readers: dict[SSAValue, set[int]] = {}
    for op in ops:
        s = stage_of[op]
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and stage_of.get(owner, -1) >= 0 and stage_of[owner] != s:
                readers.setdefault(v, set()).add(s)
    new_fns = []
    for s in range(stages):
        block = Block()
        mapping: dict[SSAValue, SSAValue] = {}
        attrs: list = []

        def value(v: SSAValue, before_phase: str) -> SSAValue:
            got = mapping.get(v)
            if got is not None:
                return got
            if isinstance(v, BlockArgument):
                new = block.insert_arg(v.type, len(block.args))
                attrs.append(arg_attrs[v.index] if v.index < len(arg_attrs) else DictionaryAttr({}))
                new.name_hint = v.name_hint
                mapping[v] = new
                return new
            owner = v.owner
            if isinstance(owner, nn.ConstantOp):
                clone = owner.clone()
                block.add_op(clone)
                mapping[v] = clone.results[0]
                return clone.results[0]
            src = stage_of[owner]
            recv = RecvOp.create(result_types=[v.type], properties={
                "group": StringAttr("pp"), "size": IntegerAttr(stages, 64), "peer": IntegerAttr(src, 64)})
            recv.set_origin(graph.op_node(owner) or None, graph.op_phase(owner))
            block.add_op(recv)
            recv.results[0].name_hint = v.name_hint
            mapping[v] = recv.results[0]
            return recv.results[0]

        for op in ops:
            if stage_of[op] != s:
                continue
            operands = [value(v, graph.op_phase(op)) for v in op.operands]
            clone = op.clone()
            for i, v in enumerate(operands):
                clone.operands[i] = v
            block.add_op(clone)
            for old, new in zip(op.results, clone.results, strict=True):
                mapping[old] = new
                new.name_hint = old.name_hint
                for dest in sorted(readers.get(old, ())):
                    send = SendOp.create(operands=[new], properties={
                        "group": StringAttr("pp"), "size": IntegerAttr(stages, 64), "peer": IntegerAttr(dest, 64)})
                    send.set_origin(graph.op_node(op) or None, graph.op_phase(op))
                    block.add_op(send)
        results, result_attrs = [], []
        if isinstance(ret, func.ReturnOp):
            for i, v in enumerate(ret.operands):
                if v in mapping and not isinstance(v, BlockArgument) and stage_of.get(v.owner, -1) == s:
                    results.append(mapping[v])
                    result_attrs.append(res_attrs[i] if i < len(res_attrs) else DictionaryAttr({}))
        block.add_op(func.ReturnOp(*results))
        new_fn = func.FuncOp(f"{fn.sym_name.data}_stage{s}",
                             FunctionType.from_lists([a.type for a in block.args], [r.type for r in results]),
                             Region(block))
        new_fn.arg_attrs = ArrayAttr(attrs)
        if result_attrs:
            new_fn.res_attrs = ArrayAttr(result_attrs)
        new_fn.attributes["monet.stage"] = IntegerAttr(s, 64)
        new_fns.append(new_fn)
    parent = fn.parent_block()
    assert parent is not None
    for new_fn in new_fns:
        parent.insert_op_before(new_fn, fn)
    fn.detach()
    fn.erase()
    return new_fns


def stage_functions(module: ModuleOp) -> list[func.FuncOp]:
    """The stage functions of a split module, in stage order (the step function alone if not split)."""
    fns = [op for op in module.ops if isinstance(op, func.FuncOp)]
    staged = [f for f in fns if "monet.stage" in f.attributes]
    if not staged:
        return fns[:1]
    return sorted(staged, key=lambda f: f.attributes["monet.stage"].value.data)
