"""`annotate-cost`: price every op on every core of a target that can run it.

    annotate-cost{target=NAME|path.yaml precision=fp32|bf16|fp16|fp8|int8}

Options:
- `target` (required): a built-in target name or a target YAML (ours, or a Stream system /
  ZigZag core file).
- `precision` (default: each tensor's own element type): the number format assumed for float
  tensors.

Each op with a cost (everything but views and constants) gets `monet.costs = [#hw.cost<core = c,
latency = L, energy = E, mem = M>, ...]`, one entry per core able to run it (latency in that
core's cycles, energy in pJ, bytes the op holds); the module records `monet.target` and
`monet.precision`. An op no core can run is an error naming the op and its node.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from monet_ir import graph


@dataclass(frozen=True)
class AnnotateCostPass(ModulePass):
    name = "annotate-cost"

    target: str = ""
    precision: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from dialects.hw import CostAttr
        from monet_ir.cost import can_run, cost_of
        from monet_ir.analysis.ir_signatures import signature_of
        from targets import get_target
        from targets.precision_choice import choose_precision

        if not self.target:
            raise PassFailedException("annotate-cost: the target option is required (a built-in name or a YAML file)")
        target = get_target(self.target, precision=self.precision or None)
        choice = choose_precision(target, self.precision or None)
        bits = choice.bits
        cache: dict[tuple, ArrayAttr] = {}
        for operation in graph.compute_ops(graph.step_function(op)):
            sig = signature_of(operation, bits)
            if sig is None:
                continue
            attr = cache.get(sig)
            if attr is None:
                costs = [cost_of(sig, core) for core in target.cores if can_run(sig, core)]
                if not costs:
                    raise PassFailedException(
                        f"annotate-cost: no core of target '{target.name}' can run {operation.name} "
                        f"(node '{graph.op_node(operation)}')"
                    )
                # identical ops (ResNet blocks, transformer layers) share one attribute instance
                attr = ArrayAttr([CostAttr(c.core, c.latency_cycles, c.energy_pj, c.mem_bytes) for c in costs])
                cache[sig] = attr
            operation.attributes["monet.costs"] = attr
        op.attributes["monet.target"] = StringAttr(self.target)
        if choice.name:
            op.attributes["monet.precision"] = StringAttr(choice.name)
