"""`annotate-cost`: price every op on every core of a target that can run it.

    annotate-cost{target=NAME|path.yaml precision=fp32|bf16|fp16|fp8|int8
                  mapper=fast|exhaustive mapper_objective=latency|energy|edp grad_dataflow=auto|literal|translate}

Options:
- `target` (required): a built-in target name or a target YAML (ours, or a Stream system /
  ZigZag core file).
- `precision` (default: each tensor's own element type): the number format assumed for float
  tensors.
- `offchip` (default: the module's `monet.offchip`, else none): a Stream system or off-chip core
  file whose DRAM a target without one takes.
- `mapper` (default fast), `mapper_objective` (default latency), `grad_dataflow` (default auto):
  how loop nests are mapped (`targets.model.MapperOptions`); recorded as `monet.mapper` for the
  `schedule` pass when not the defaults.

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
    offchip: str = ""
    mapper: str = ""
    mapper_objective: str = ""
    grad_dataflow: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from dialects.hw import CostAttr
        from monet_ir.analysis.ir_signatures import signature_of
        from targets.loader import resolve_target

        if not self.target:
            raise PassFailedException("annotate-cost: the target option is required (a built-in name or a YAML file)")
        from passes.schedule import pass_mapper_options, record_mapper_options

        offchip = self.offchip or _recorded(op, "monet.offchip")
        mapper = pass_mapper_options("annotate-cost", op, self.mapper, self.mapper_objective, self.grad_dataflow)
        target, choice = resolve_target(self.target, self.precision, offchip, mapper)
        bits = choice.bits
        cache: dict[tuple, ArrayAttr] = {}
        for operation in graph.compute_ops(graph.step_function(op)):
            sig = signature_of(operation, bits)
            if sig is None:
                continue
            attr = cache.get(sig)
            if attr is None:
                # identical ops (ResNet blocks, transformer layers) share one attribute instance
                attr = cache[sig] = ArrayAttr([CostAttr(c.core, c.latency_cycles, c.energy_pj, c.mem_bytes)
                                               for c in _costs(operation, sig, target)])
            operation.attributes["monet.costs"] = attr
        op.attributes["monet.target"] = StringAttr(self.target)
        if offchip:
            op.attributes["monet.offchip"] = StringAttr(offchip)
        record_mapper_options(op, mapper)
        if choice.name:
            op.attributes["monet.precision"] = StringAttr(choice.name)


def _recorded(module: ModuleOp, key: str) -> str:
    attr = module.attributes.get(key)
    return attr.data if isinstance(attr, StringAttr) else ""


def _costs(operation, sig, target) -> list:
    """The op's cost on every core that can run it, as the scheduler prices it: a core whose
    cost model refuses the op (e.g. no loop order fits its memories) cannot run it; no core at
    all is an error naming the op."""
    from monet_ir.cost import CostError, can_run, cost_of
    from monet_ir.errors import internal_errors_at

    costs, refusals = [], []
    with internal_errors_at(f"op {operation.name} (node '{graph.op_node(operation)}')"):
        for core in target.cores:
            if can_run(sig, core):
                try:
                    costs.append(cost_of(sig, core))
                except CostError as e:
                    refusals.append(str(e))
    if not costs:
        why = f": {refusals[0]}" if refusals else ""
        raise PassFailedException(f"annotate-cost: no core of target '{target.name}' can run {operation.name} "
                                  f"(node '{graph.op_node(operation)}'){why}")
    return costs
