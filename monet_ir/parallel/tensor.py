"""Tensor parallelism: Megatron's column/row splits, found by sharding propagation.

`tensor_parallel(fn, tp)` rewrites a training step (after `autodiff` and `insert-optimizer`) into
the step of one of `tp` chips that share every split product. Each value of the step gets a
*sharding*: replicated (every chip holds it whole), split along one axis (each chip holds
1/tp of it: `S(axis)`), or a partial sum (each chip holds a whole tensor, the value is the sum
over the chips: `P`). Every op describes its loop indices (an einsum-like map of its operand
and result axes: its `Sharding` interface, `dialects.sharding`); a split index flows from operands to results, a split index the op sums over
(a contraction) gives a partial sum.

**Choosing the splits (forward ops only).** A *candidate* is a product (`nn.matmul`, `nn.gemm`,
`nn.conv` with one group) whose weight is a parameter argument no other forward op reads. In
program order, a candidate whose activation is replicated is a *column* product: its weight is
split along its output features (a matmul's N, a convolution's output channels), so its result
is split. The split flows through the ops that follow: element-wise ops (a bias, GELU, ReLU),
per-channel and per-row normalizations that do not normalize over the split axis (softmax over
keys, batch normalization's channels), reshapes that cut the split axis into an outer split
factor (features into heads) or merge it back, transposes, splits along it (a fused QKV
projection: each of Q, K, V keeps its 1/tp), and batched products over it (attention's
per-head products). A parameter such an op reads whole along the split index (a bias, a
batch-norm scale) is split with it. The region ends at a *row* product: a candidate whose
activation arrives split along its contraction index; its weight is split along its input
features and its result is a partial sum, all-reduced before its first non-additive use
(Megatron's g). A region that reaches anything else with its split (a residual add with a
replicated value, a layer norm or softmax over the split axis, the loss, the step's results, a
parameter read elsewhere) is dropped with every candidate that fed it, and the choice is
repeated until every region closes. For a transformer block this is Megatron's split: the QKV
projection(s) and the first MLP product by columns, heads/tp per chip, the attention output
projection and the second MLP product by rows; for a residual convolution block the first
convolution by output channels (with its batch norm) and the second by input channels.

**Rewriting the whole step.** The same rules then run over every op of the step (forward,
backward, recompute, optimizer) in program order, with the chosen parameters split (and their
optimizer state with them). A partial sum may only be accumulated (`nn.add`, `nn.sum` of
partial sums); any other use reads it through one `collective.all_reduce {group = "tp"}`
inserted right after it is computed. In the backward pass this is Megatron's f: the input
gradient of a column product is a partial sum, all-reduced where the gradients of its
consumers have been summed. The product and bias of a row `nn.gemm` or `nn.conv` with a bias
are split in two (the bias is added once, after the all-reduce). Where an op cannot run on the
shardings it receives, the operands are converted (`collective.all_gather` along the axis for a
split operand, a local `collective.shard` along the axis for a replicated one); in a
transformer or convolution block the propagation needs none. Finally every split value's type
is divided by tp along its axis, so costs, FLOPs, memory and the schedule follow.

Per transformer layer this gives two all-reduces of b·s·h elements in forward and two in
backward; per split product 1/tp of its FLOPs; per split parameter 1/tp of its bytes, gradient
and optimizer state. Embeddings, layer norms, residual adds and the loss stay replicated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import FunctionType, TensorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dialects.sharding import IndexMap, Sharding
from dialects.sharding import shape as _shape
from monet_ir.errors import MonetError

PARTIAL = "P"


class TensorParallelError(MonetError):
    """The step has nothing tensor parallelism can split, or tp does not divide a split axis."""


def index_map(op: Operation) -> IndexMap | None:
    """The op's loop indices (its `Sharding` interface, `dialects.sharding`), or None when the
    op is opaque to sharding (its operands are gathered whole and its results replicated)."""
    return op.index_map() if isinstance(op, Sharding) else None


def reshape_axis(src: tuple[int, ...], dst: tuple[int, ...], axis: int) -> tuple[int | None, str]:
    """The axis of `dst` a reshape maps split axis `axis` of `src` to (its outer factor), or
    None and why not."""
    import math

    prefix = math.prod(src[:axis])
    run = 1
    for j, d in enumerate(dst):
        if run == prefix and d == 1 and src[axis] != 1:
            continue  # a unit axis inserted before the split one
        if run == prefix:
            if d == src[axis]:
                return j, ""
            if d > src[axis]:  # merged with the following axes: the split axis is the outer factor
                if math.prod(src[axis:axis + _merged(src, axis, d)]) == d:
                    return j, ""
                return None, "merges the split axis with axes before it"
            # cut into d x ...: the outer factor d carries the split
            inner = 1
            for k in range(j, len(dst)):
                inner *= dst[k]
                if inner == src[axis]:
                    return j, ""
                if inner > src[axis]:
                    break
            return None, "cuts the split axis across other axes"
        run *= d
        if run > prefix:
            break
    return None, "moves the split axis"


def _merged(src, axis, d) -> int:
    n, p = 0, 1
    for k in range(axis, len(src)):
        p *= src[k]
        n += 1
        if p >= d:
            break
    return n


@dataclass
class Failure:
    op: Operation
    why: str


@dataclass
class _Prop:
    """One propagation of shardings over ops (see the module docstring)."""

    tp: int
    selecting: bool  # forward-only choice of the splits (failures drop regions)
    state: dict[SSAValue, Any] = field(default_factory=dict)
    origins: dict[SSAValue, frozenset] = field(default_factory=dict)
    split_params: dict[BlockArgument, int] = field(default_factory=dict)
    param_origins: dict[BlockArgument, frozenset] = field(default_factory=dict)
    columns: list[Operation] = field(default_factory=list)
    failures: list[tuple[frozenset, Failure]] = field(default_factory=list)
    divisibility: list[tuple[frozenset, str]] = field(default_factory=list)
    splittable: set = field(default_factory=set)  # parameter arguments a region may split
    blocks: dict[BlockArgument, int] = field(default_factory=dict)
    cache: dict = field(default_factory=dict)

    def get(self, v: SSAValue):
        return self.state.get(v)

    def org(self, v: SSAValue) -> frozenset:
        return self.origins.get(v, frozenset())

    def index_map(self, op: Operation) -> IndexMap | None:
        if op not in self.cache:
            self.cache[op] = index_map(op)
        return self.cache[op]


def _is_product(op: Operation) -> bool:
    """A forward product whose contraction can be split (a matmul, a gemm, a convolution of one
    group): its index map sums over a contraction index."""
    m = index_map(op)
    return m is not None and m.contraction is not None


def _param_args(fn) -> dict[BlockArgument, Any]:
    from monet_ir import graph

    return {arg: info for arg, info in zip(fn.body.block.args, graph.arg_infos(fn), strict=True) if info.role == "param"}


def candidates(fn) -> tuple[dict[Operation, tuple[int, int]], set[BlockArgument]]:
    """Products whose weight is a trainable parameter no other forward op reads, with the
    weight's operand index and the product's output-feature index; and every parameter
    argument exactly one forward op reads (a region may split those)."""
    from monet_ir import graph

    params = _param_args(fn)
    splittable = {a for a in params if sum(1 for use in a.uses if graph.op_phase(use.operation) == "forward") == 1}
    out: dict[Operation, tuple[int, int]] = {}
    for op in graph.compute_ops(fn):
        if graph.op_phase(op) != "forward" or not _is_product(op):
            continue
        m = index_map(op)
        if m is None:
            continue
        for w in (1, 0):
            v = op.operands[w]
            if not (isinstance(v, BlockArgument) and v in splittable and params[v].trainable):
                continue
            other = set(m.operands[1 - w])
            feats = [lab for lab in m.operands[w] if lab is not None and lab != m.contraction and lab not in m.norm
                     and lab not in other and all(lab in r for r in m.results)]
            if len(feats) == 1:
                out[op] = (w, feats[0])
            break
    return out, splittable


def propagate(fn, tp: int, seeds: dict[Operation, tuple[int, int]], splittable: set) -> _Prop:
    """The forward ops' shardings when the `seeds` start column splits (selection)."""
    from dialects import nn
    from monet_ir import graph

    prop = _Prop(tp, True, splittable=splittable)
    for op in graph.compute_ops(fn):
        if graph.op_phase(op) != "forward" or isinstance(op, nn.ConstantOp):
            continue
        _step(prop, op, seeds, None)
    ret = fn.body.block.last_op
    if ret is not None:
        _sink(prop, ret, None)
    return prop


def _sink(prop: _Prop, op: Operation, rewrite) -> None:
    """An op that needs its operands whole (the step's return, an opaque op)."""
    bad = [v for v in op.operands if prop.get(v) is not None]
    for r in op.results:
        prop.state.pop(r, None)
    if prop.selecting:  # a partial sum is all-reduced there (Megatron's g); a split cannot go on
        bad = [v for v in bad if prop.get(v) != PARTIAL]
    if not bad:
        return
    if prop.selecting:
        prop.failures.append((frozenset().union(*(prop.org(v) for v in bad)),
                              Failure(op, f"{op.name} needs its operands whole")))
        return
    for i, v in enumerate(list(op.operands)):
        if prop.get(v) is not None:
            op.operands[i] = rewrite.whole(prop, v, op)


def _step(prop: _Prop, op: Operation, seeds: dict, rewrite) -> None:
    from dialects import nn

    states = [prop.get(v) for v in op.operands]
    origin = frozenset().union(*(prop.org(v) for v in op.operands if prop.get(v) is not None))
    m = None if isinstance(op, nn.ReshapeOp) else prop.index_map(op)
    if m is None and not isinstance(op, nn.ReshapeOp):
        _sink(prop, op, rewrite)
        return
    # partial sums: accumulate them, or all-reduce them first
    if any(s == PARTIAL for s in states):
        if isinstance(op, nn.AddOp | nn.SumOp) and all(s == PARTIAL for s in states):
            for r in op.results:
                prop.state[r] = PARTIAL
                prop.origins[r] = origin
            return
        if not prop.selecting:
            for i, v in enumerate(list(op.operands)):
                if prop.get(v) == PARTIAL:
                    op.operands[i] = rewrite.whole(prop, v, op)
        # (selecting: the region ends here; the whole-step pass all-reduces it: Megatron's g)
        states = [None if s == PARTIAL else s for s in states]
    if isinstance(op, nn.ReshapeOp):
        if states[0] is None:
            prop.state.pop(op.results[0], None)
        else:
            _reshape(prop, op, states[0], origin, rewrite)
        return
    # a seed whose activation is replicated is a column product: split its weight's features
    if prop.selecting and op in seeds:
        w, feats = seeds[op]
        if states[1 - w] is None and states[w] is None:
            weight = op.operands[w]
            axis = m.operands[w].index(feats)
            prop.state[weight] = axis
            prop.split_params[weight] = axis
            prop.origins[weight] = frozenset({op})
            prop.param_origins[weight] = frozenset({op})
            prop.columns.append(op)
            _check_divisible(prop, op, weight, axis, frozenset({op}))
            states[w] = axis
            origin = origin | {op}
    split = [(i, s) for i, s in enumerate(states) if s is not None]
    if not split:
        for r in op.results:
            prop.state.pop(r, None)
        return
    labels = [m.operands[i][s] if i < len(m.operands) else None for i, s in split]
    label = labels[0]
    if label is None or label in m.norm or any(lab != label for lab in labels):
        _fail_or_gather(prop, op, origin, f"{op.name} cannot run on a split along that axis", rewrite)
        return
    # replicated operands that read the split index whole
    for i, v in enumerate(list(op.operands)):
        if states[i] is not None or i >= len(m.operands) or label not in m.operands[i]:
            continue
        axis = m.operands[i].index(label)
        if prop.selecting:
            if isinstance(v, BlockArgument) and v in prop.splittable and v not in prop.split_params:
                prop.state[v] = axis
                prop.split_params[v] = axis
                prop.origins[v] = origin
                prop.param_origins[v] = origin
                _check_divisible(prop, op, v, axis, origin)
                continue
            prop.failures.append((origin, Failure(op, f"{op.name} reads a replicated operand whole along the split")))
            return
        op.operands[i] = rewrite.local_shard(prop, v, axis, op)
    summed = all(label not in r for r in m.results)
    if summed and prop.selecting:
        # only a product with a parameter weight may end a region (a row product)
        if not (_is_product(op) and any(op.operands[i] in prop.split_params for i in (0, 1))):
            prop.failures.append((origin, Failure(op, f"{op.name} sums over the split without a parameter weight")))
            return
        if m.additive:
            from dialects.base import float_of

            bias = [op.operands[i] for i in m.additive if i < len(op.operands)]
            if any(prop.get(b) is not None for b in bias) or float_of(getattr(op, "beta", None), 1.0) != 1.0:
                prop.failures.append((origin, Failure(op, "a row product's bias cannot be added once")))
                return
    if summed and m.additive and not prop.selecting and len(op.operands) > max(m.additive):
        op = rewrite.detach_bias(prop, op, m)
    if isinstance(op, nn.SplitOp) and label == m.features:
        _note_blocks(prop, op.operands[0], len(op.results))
    for j, r in enumerate(op.results):
        labs = m.results[j] if j < len(m.results) else []
        if label in labs:
            axis = labs.index(label)
            prop.state[r] = axis
            _check_divisible(prop, op, r, axis, origin)
        else:
            prop.state[r] = PARTIAL
        prop.origins[r] = origin


def _note_blocks(prop: _Prop, v: SSAValue, blocks: int) -> None:
    """A split of a split axis into `blocks` parts: the parameters the axis comes from hold, on
    each chip, its 1/tp of each part (Megatron's QKV layout)."""
    seen = set()
    stack = [v]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if isinstance(x, BlockArgument):
            if x in prop.split_params:
                prop.blocks[x] = blocks
            continue
        if _is_product(x.owner):
            for o in x.owner.operands:
                if isinstance(o, BlockArgument) and o in prop.split_params:
                    prop.blocks[o] = blocks
            continue
        stack.extend(o for o in x.owner.operands if prop.get(o) is not None)


def _check_divisible(prop: _Prop, op: Operation, v: SSAValue, axis: int, origin: frozenset) -> None:
    shape = _shape(v)
    if shape[axis] % prop.tp:
        from monet_ir import graph

        where = graph.op_node(op) or op.name
        prop.divisibility.append((origin, f"tp={prop.tp} does not divide dimension {axis} ({shape[axis]}) of "
                                          f"{v.type} at {where}"))


def _reshape(prop: _Prop, op: Operation, axis, origin: frozenset, rewrite) -> None:
    src, dst = _shape(op.operands[0]), _shape(op.results[0])
    j, why = reshape_axis(src, dst, axis)
    if j is None:
        _fail_or_gather(prop, op, origin, f"the reshape {why}", rewrite)
        return
    r = op.results[0]
    prop.state[r] = j
    prop.origins[r] = origin
    if dst[j] % prop.tp:
        from monet_ir import graph

        prop.divisibility.append((origin, f"tp={prop.tp} does not divide the {dst[j]} groups (heads) that "
                                          f"{graph.op_node(op) or op.name} cuts {src[axis]} features into"))


def _fail_or_gather(prop: _Prop, op: Operation, origin: frozenset, why: str, rewrite) -> None:
    if prop.selecting:
        prop.failures.append((origin, Failure(op, why)))
        for r in op.results:
            prop.state.pop(r, None)
        return
    _sink(prop, op, rewrite)


@dataclass
class Selection:
    columns: list[Operation]
    split_params: dict[BlockArgument, int]
    blocks: dict[BlockArgument, int]
    dropped: list[Failure]


def select(fn, tp: int) -> Selection:
    """The column products and the parameters to split (module docstring), or
    TensorParallelError."""
    cands, splittable = candidates(fn)
    active = dict(cands)
    dropped: list[Failure] = []
    while True:
        prop = propagate(fn, tp, active, splittable)
        bad = set()
        for origin, failure in prop.failures:
            hit = {op for op in origin if op in active}
            if hit:
                bad |= hit
                dropped.append(failure)
        if not bad:
            break
        for op in bad:
            del active[op]
    if not prop.columns:
        raise TensorParallelError(
            f"tp={tp}: the model has nothing tensor parallelism can split (no product with a parameter weight "
            "starts a region that a second such product closes)")
    issues = [msg for origin, msg in prop.divisibility if origin & set(prop.columns)]
    if issues:
        raise TensorParallelError(issues[0])
    return Selection(list(prop.columns), dict(prop.split_params),
                     {a: b for a, b in prop.blocks.items() if a in prop.split_params}, dropped)


class _Rewrite:
    """Inserts the conversions the whole-step propagation asks for."""

    def __init__(self, fn, tp: int):
        self.fn = fn
        self.block: Block = fn.body.block
        self.tp = tp
        self.reduced: dict[SSAValue, SSAValue] = {}
        self.gathered: dict[SSAValue, SSAValue] = {}
        self.sharded: dict[tuple[SSAValue, int], SSAValue] = {}
        self.counts = {"all_reduce": 0, "all_gather": 0, "shard": 0}

    def _after(self, v: SSAValue, new: Operation) -> None:
        if isinstance(v, BlockArgument):
            self.block.insert_op_before(new, self.block.first_op)
        else:
            self.block.insert_op_after(new, v.owner)

    def whole(self, prop: _Prop, v: SSAValue, user: Operation) -> SSAValue:
        """v (a partial sum or a split value) whole on every chip."""
        from dialects.collective import AllGatherOp, AllReduceOp
        from monet_ir import graph

        s = prop.get(v)
        owner = v.owner if isinstance(v.owner, Operation) else user
        if s == PARTIAL:
            if v not in self.reduced:
                new = AllReduceOp([v], group="tp", size=self.tp)
                new.set_origin(graph.op_node(owner) or None, graph.op_phase(owner))
                self._after(v, new)
                self.reduced[v] = new.results[0]
                self.counts["all_reduce"] += 1
            return self.reduced[v]
        if v not in self.gathered:
            new = AllGatherOp([v], [v.type], group="tp", size=self.tp, axis=s)
            new.set_origin(graph.op_node(owner) or None, graph.op_phase(owner))
            self._after(v, new)
            self.gathered[v] = new.results[0]
            self.counts["all_gather"] += 1
        return self.gathered[v]

    def local_shard(self, prop: _Prop, v: SSAValue, axis: int, user: Operation) -> SSAValue:
        from dialects.collective import ShardOp
        from monet_ir import graph

        key = (v, axis)
        if key not in self.sharded:
            new = ShardOp(v, group="tp", size=self.tp, axis=axis)
            new.results[0]._type = v.type  # noqa: SLF001 (`_retype` divides it with every split value)
            new.set_origin(graph.op_node(user) or None, graph.op_phase(user))
            self.block.insert_op_before(new, user)
            prop.state[new.results[0]] = axis
            self.sharded[key] = new.results[0]
            self.counts["shard"] += 1
        return self.sharded[key]

    def detach_bias(self, prop: _Prop, op: Operation, m: IndexMap) -> Operation:
        """A row product with a bias: the product without it (a partial sum), and the bias added
        after the all-reduce. Returns the new product."""
        from dialects import nn
        from monet_ir import graph

        bias = op.operands[m.additive[0]]
        props = dict(op.properties)
        product = type(op).build(operands=[op.operands[0], op.operands[1], []], result_types=[op.results[0].type],
                                 properties=props, attributes=dict(op.attributes))
        self.block.insert_op_before(product, op)
        node, phase = graph.op_node(op) or None, graph.op_phase(op)
        y = product.results[0]
        prop.state[y] = PARTIAL
        reduce_to = self.whole(prop, y, product)
        b = bias
        if isinstance(op, nn.ConvOp):
            rank = len(_shape(op.results[0]))
            shape = [_shape(bias)[0]] + [1] * (rank - 2)
            reshape = nn.ReshapeOp.build(operands=[bias], result_types=[TensorType(bias.type.get_element_type(), shape)])
            reshape.set_origin(node, phase)
            self.block.insert_op_after(reshape, reduce_to.owner)
            b = reshape.results[0]
        add = nn.AddOp.build(operands=[reduce_to, b], result_types=[op.results[0].type])
        add.set_origin(node, phase)
        self.block.insert_op_after(add, b.owner if b is not bias else reduce_to.owner)
        op.results[0].replace_all_uses_with(add.results[0])
        op.detach()
        op.erase()
        return product


def tensor_parallel(fn, tp: int) -> dict[str, Any]:
    """Rewrite `fn` into one tensor-parallel chip's step (module docstring). Returns a summary:
    the split parameters and the inserted collectives."""
    from dialects import train
    from dialects.base import shape_of
    from monet_ir import graph

    sel = select(fn, tp)
    preset = dict(sel.split_params)
    # the optimizer state of a split parameter is split with it
    for op in graph.compute_ops(fn):
        if isinstance(op, train.OptimizerOp) and op.operands[0] in preset:
            axis = preset[op.operands[0]]
            for s in op.state_operands():
                if isinstance(s, BlockArgument) and shape_of(s.type) == shape_of(op.operands[0].type):
                    preset[s] = axis
    rewrite = _Rewrite(fn, tp)
    prop = _whole_step(fn, tp, preset, rewrite)
    _retype(fn, prop, tp)
    names = {graph.arg_info(a).name if graph.arg_info(a) else a.name_hint: ax for a, ax in sel.split_params.items()}
    return {"columns": [graph.op_node(op) for op in sel.columns], "split_params": names,
            "blocks": {graph.arg_info(a).name: b for a, b in sel.blocks.items() if graph.arg_info(a)},
            **rewrite.counts}


def _whole_step(fn, tp: int, preset: dict, rewrite: _Rewrite) -> _Prop:
    from dialects import nn
    from monet_ir import graph

    prop = _Prop(tp, False)
    for arg, axis in preset.items():
        prop.state[arg] = axis
    for op in list(graph.compute_ops(fn)):
        if isinstance(op, nn.ConstantOp):
            continue
        _step(prop, op, {}, rewrite)
    ret = fn.body.block.last_op
    if ret is not None:
        _sink(prop, ret, rewrite)
    return prop


def _retype(fn, prop: _Prop, tp: int) -> None:
    """Divide every split value's type by tp along its axis."""
    block = fn.body.block

    def split_type(t, axis: int):
        shape = list(t.get_shape())
        if shape[axis] % tp:
            raise TensorParallelError(f"tp={tp} does not divide dimension {axis} of {t}")
        shape[axis] //= tp
        return TensorType(t.get_element_type(), shape)

    for v, s in prop.state.items():
        if s is None or s == PARTIAL:
            continue
        if isinstance(v, BlockArgument) and v.block is not block:
            continue
        if not isinstance(v, BlockArgument) and v.owner.parent_block() is not block:
            continue
        v._type = split_type(v.type, s)  # noqa: SLF001 (xDSL keeps the type in _type)
    fn.properties["function_type"] = FunctionType.from_lists([a.type for a in block.args],
                                                             list(fn.function_type.outputs.data))
