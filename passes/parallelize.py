"""`parallelize`: the training step of one chip of a data-parallel group, with its collectives.

    parallelize{dp=8 tp=2 pp=4 zero=0|1|2|3 bucket=25000000 algorithm=ring|tree|hierarchical}

Options:
- `tp` (default 1): tensor-parallel chips. Megatron's column/row splits of the step's products,
  found by sharding propagation (`monet_ir.parallel.tensor`): the first product(s) of a region
  split by output features (QKV, the first MLP product, a convolution's output channels, with
  their biases and batch norms), attention heads/tp, the closing product split by input
  features with a `collective.all_reduce {group = "tp"}` of its partial sum in forward, and
  the all-reduce of the region's input gradient in backward. Split parameters, their gradients
  and optimizer state hold 1/tp per chip. Applied first (before `pp` and `dp`); a model with
  nothing to split, or a tp that does not divide a split axis (heads, widths), is an error.
- `dp` (default 1): data-parallel replicas. The step function describes one replica's batch
  (the ONNX model's batch is the per-chip micro-batch; the global batch is `dp` times it).
- `pp` (default 1): pipeline stages. The step function becomes `pp` functions
  `@<name>_stage<s>` (`monet.stage = s`): a balanced partition of the forward ops by the FLOPs
  of their nodes in every phase, the backward and optimizer ops with their forward nodes, and
  `collective.send`/`collective.recv` (`group = "pp"`) for every value one stage computes and
  another reads (`monet_ir.parallel.stages`). Data parallelism and ZeRO then apply to each
  stage function. Micro-batches and the pipeline schedule (GPipe, 1F1B) are the evaluator's
  (`monet_ir.parallel.pipeline`): each stage function is one micro-batch's step.
- `zero` (default 0): ZeRO stage. 0: every chip holds the whole parameters, gradients and
  optimizer state; 1: optimizer state sharded; 2: gradients too; 3: parameters too.
- `bucket` (default 25000000, PyTorch DDP's 25 MB): gradient bytes (at the IR's element types)
  per bucket; a bucket's collective starts as soon as its last gradient is computed, so
  communication overlaps the rest of the backward pass. `0`: one collective per gradient.
- `algorithm` (default `ring`): the collectives' algorithm attribute.

Rewriting (the ops get `group = "dp"`, `size = dp`):
- `zero=0`: gradients are grouped into buckets in the order they are computed; one variadic
  `collective.all_reduce` per bucket, right after the bucket's last gradient, and the optimizer
  reads the reduced gradients.
- `zero=1`: optimizer state arguments of a parameter's shape become this chip's flat shard
  (`tensor<ceil(E/dp)>`); the gradients are reduce-scattered, all buckets at once after the
  whole backward pass (the full gradients are kept until then, as ZeRO-1 keeps its gradient
  buffers); the optimizer updates `collective.shard` of the parameter with the gradient shard
  and the state shards, and one `collective.all_gather` per bucket after its optimizer steps
  gives every chip the updated parameters.
- `zero=2`: as 1, but each bucket is reduce-scattered as soon as its gradients exist (the full
  gradients die then: only shards are kept).
- `zero=3`: as 2, and the parameter arguments become shards too: each is all-gathered before
  its first forward use (`phase = "forward"`) and again before its first backward use, the
  optimizer updates the shard in place, and no all-gather follows the optimizer.

The module records the plan as `monet.parallel = {dp = 8 : i64, tp = 1 : i64, pp = 1 : i64, zero = 2 : i64}`.
`dp=1 tp=1 pp=1 zero=0` changes nothing but that attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, FunctionType, IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


@dataclass(frozen=True)
class ParallelizePass(ModulePass):
    """Shard the training step over data-parallel chips and insert its collectives (module
    docstring)."""

    name = "parallelize"

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0
    bucket: int = 25_000_000
    algorithm: str = "ring"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from dialects import train
        from dialects.collective import ALGORITHMS
        from monet_ir import graph
        from monet_ir.errors import MonetError

        if self.dp < 1:
            raise PassFailedException(f"parallelize: dp must be at least 1, got {self.dp}")
        if self.tp < 1:
            raise PassFailedException(f"parallelize: tp must be at least 1, got {self.tp}")
        if self.pp < 1:
            raise PassFailedException(f"parallelize: pp must be at least 1, got {self.pp}")
        if self.zero not in (0, 1, 2, 3):
            raise PassFailedException(f"parallelize: zero must be 0, 1, 2 or 3, got {self.zero}")
        if self.bucket < 0:
            raise PassFailedException(f"parallelize: bucket must be non-negative, got {self.bucket}")
        if self.algorithm not in ALGORITHMS[:3]:
            raise PassFailedException(f"parallelize: algorithm must be ring, tree or hierarchical, got '{self.algorithm}'")
        if "monet.parallel" in op.attributes:
            raise PassFailedException("parallelize: the step is already parallelized")
        fn = graph.step_function(op)
        if not any(isinstance(o, train.OptimizerOp) for o in fn.body.block.ops):
            raise PassFailedException("parallelize: the step has no optimizer ops (run autodiff and insert-optimizer first)")
        op.attributes["monet.parallel"] = DictionaryAttr({"dp": IntegerAttr(self.dp, 64), "tp": IntegerAttr(self.tp, 64),
                                                          "pp": IntegerAttr(self.pp, 64), "zero": IntegerAttr(self.zero, 64)})
        if self.tp > 1:
            from monet_ir.parallel.tensor import tensor_parallel

            try:
                tensor_parallel(fn, self.tp)
            except MonetError as e:
                raise PassFailedException(f"parallelize: {e}") from None
        fns = [fn]
        if self.pp > 1:
            from monet_ir.parallel.stages import split_stages

            try:
                fns = split_stages(op, self.pp)
            except MonetError as e:
                raise PassFailedException(f"parallelize: {e}") from None
        if self.dp == 1 and self.zero == 0:
            return
        for stage_fn in fns:
            if any(isinstance(o, train.OptimizerOp) for o in stage_fn.body.block.ops):
                _Rewriter(stage_fn, self).run()


def _elements(t) -> int:
    n = 1
    for d in t.get_shape():
        n *= d
    return n


def _bytes(t) -> int:
    from monet_ir.types import tensor_bytes

    return tensor_bytes(t)


class _Rewriter:
    def __init__(self, fn: func.FuncOp, options: ParallelizePass):
        from dialects import train

        self.fn = fn
        self.block: Block = fn.body.block
        self.o = options
        self.position = {o: i for i, o in enumerate(self.block.ops)}
        self.updates = [o for o in self.block.ops if isinstance(o, train.OptimizerOp)]

    def make(self, cls, operands, *, phase: str | None, result_types=None, node: str = ""):
        from dialects.collective import AllGatherOp, ShardOp

        kw = {"group": "dp", "size": self.o.dp}
        if cls is ShardOp:
            new = ShardOp(operands[0], **kw)
        elif cls is AllGatherOp:
            new = AllGatherOp(operands, result_types, algorithm=self.alg(), **kw)
        else:
            new = cls(operands, algorithm=self.alg(), **kw)
        new.set_origin(node or None, phase)
        return new

    def alg(self) -> str | None:
        return None if self.o.algorithm == "ring" else self.o.algorithm

    def buckets(self, values: list[SSAValue]) -> list[list[SSAValue]]:
        out: list[list[SSAValue]] = []
        size = 0
        for v in values:
            if not out or (self.o.bucket and size >= self.o.bucket) or not self.o.bucket:
                out.append([])
                size = 0
            out[-1].append(v)
            size += _bytes(v.type)
        return out

    def ready_order(self, values: list[SSAValue]) -> list[SSAValue]:
        def pos(v: SSAValue) -> int:
            owner = v.owner
            return self.position.get(owner, -1) if isinstance(owner, Operation) else -1

        return sorted(dict.fromkeys(values), key=pos)

    def after(self, values: list[SSAValue]) -> Operation | None:
        owners = [v.owner for v in values if isinstance(v.owner, Operation)]
        return max(owners, key=lambda o: self.position[o]) if owners else None

    def insert_after(self, anchor: Operation | None, new: Operation) -> None:
        if anchor is None:
            self.block.insert_op_before(new, self.block.first_op)
        else:
            self.block.insert_op_after(new, anchor)

    def last_backward(self) -> Operation:
        from monet_ir import graph

        last = None
        for o in self.block.ops:
            if graph.op_phase(o) in ("backward", "recompute"):
                last = o
        if last is None:
            raise PassFailedException("parallelize: the step has no backward ops")
        return last

    def run(self) -> None:
        from dialects.collective import AllGatherOp, AllReduceOp, ReduceScatterOp

        zero, dp = self.o.zero, self.o.dp
        grads = self.ready_order([u.grad for u in self.updates])
        by_grad: dict[SSAValue, list] = {}
        for u in self.updates:
            by_grad.setdefault(u.grad, []).append(u)
        reduced: dict[SSAValue, SSAValue] = {}
        buckets = self.buckets(grads)
        end_of_backward = self.last_backward()
        anchor_all = end_of_backward
        for bucket in buckets:
            if zero == 0:
                new = self.make(AllReduceOp, bucket, phase="backward")
            else:
                new = self.make(ReduceScatterOp, bucket, phase="backward")
            if zero == 1:
                # ZeRO-1 reduces after the whole backward pass, buckets one after another
                self.insert_after(anchor_all, new)
                anchor_all = new
            else:
                self.insert_after(self.after(bucket), new)
            self.position[new] = self.position.get(self.after(bucket), -1)
            for g, r in zip(bucket, new.results, strict=True):
                reduced[g] = r
        for u in self.updates:
            u.operands[1] = reduced[u.grad]
        if zero == 0:
            return
        self.shard_state()
        if zero == 3:
            self.shard_params()
            return
        # ZeRO 1/2: update this chip's shard of each parameter, then gather the parameters
        param_buckets: list[list] = []
        for bucket in buckets:
            param_buckets.append([u for g in bucket for u in by_grad[g]])
        for updates in param_buckets:
            shards, fulls = [], []
            for u in updates:
                from dialects.collective import ShardOp

                param = u.operands[0]
                shard = self.make(ShardOp, [param], phase="optimizer", node=u.get_node())
                self.block.insert_op_before(shard, u)
                u.operands[0] = shard.results[0]
                shards.append(shard.results[0])
                fulls.append(param.type)
            gather = self.make(AllGatherOp, shards, phase="optimizer", result_types=fulls)
            last = max(updates, key=lambda x: list(self.block.ops).index(x))
            self.block.insert_op_after(gather, last)

    def replace_arg(self, arg: BlockArgument, new_type) -> BlockArgument:
        index = arg.index
        new = self.block.insert_arg(new_type, index)
        arg.replace_all_uses_with(new)
        self.block.erase_arg(arg)
        return new

    def fix_signature(self) -> None:
        fn = self.fn
        fn.properties["function_type"] = FunctionType.from_lists(
            [a.type for a in self.block.args], list(fn.function_type.outputs.data))

    def shard_state(self) -> None:
        from dialects.collective import shard_elements

        dp = self.o.dp
        done: set[SSAValue] = set()
        for u in self.updates:
            param_type = u.param.type
            for state in u.state_operands():
                if state in done or not isinstance(state, BlockArgument):
                    continue
                if state.type.get_shape() != param_type.get_shape():
                    continue  # the step counter: a scalar every chip keeps
                done.add(state)
                t = TensorType(state.type.get_element_type(), [shard_elements(_elements(state.type), dp)])
                self.replace_arg(state, t)
        self.fix_signature()

    def shard_params(self) -> None:
        from dialects.collective import AllGatherOp, shard_elements
        from monet_ir import graph

        dp = self.o.dp
        params = []
        for u in self.updates:
            p = u.operands[0]
            if isinstance(p, BlockArgument) and p not in params:
                params.append(p)
        for p in params:
            full = p.type
            shard_t = TensorType(full.get_element_type(), [shard_elements(_elements(full), dp)])
            new = self.replace_arg(p, shard_t)
            uses = [use for use in list(new.uses)]
            ops = list(self.block.ops)
            index = {o: i for i, o in enumerate(ops)}
            groups: dict[str, list] = {"forward": [], "backward": []}
            for use in uses:
                phase = graph.op_phase(use.operation)
                if phase == "optimizer":
                    continue
                groups["forward" if phase == "forward" else "backward"].append(use)
            for phase, group in groups.items():
                if not group:
                    continue
                first = min(group, key=lambda use: index[use.operation]).operation
                gather = self.make(AllGatherOp, [new], phase=phase, result_types=[full], node=graph.op_node(first))
                self.block.insert_op_before(gather, first)
                for use in group:
                    use.operation.operands[use.index] = gather.results[0]
        self.fix_signature()
