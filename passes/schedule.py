"""`schedule`: assign every op to a core and a time, with transfers and memory occupancy.

    schedule{target=NAME|path.yaml mapping=alloc.yaml precision=fp32|bf16|fp16|fp8|int8
             mapper=fast|exhaustive mapper_objective=latency|energy|edp grad_dataflow=auto|literal|translate}

Options:
- `target` (default: the module's `monet.target`, set by `annotate-cost`): the accelerator.
- `mapping` (default: none): a core allocation file or a ZigZag mapping file
  (`monet_ir.schedule.mapping`).
- `mapper`, `mapper_objective`, `grad_dataflow` (defaults fast, latency, auto, or the module's
  `monet.mapper` set by `annotate-cost`): how loop nests are mapped (`targets.model.MapperOptions`).
- `precision` (default: the module's `monet.precision`, else each tensor's element type).
- `offchip` (default: the module's `monet.offchip`): a Stream system or off-chip core file whose
  DRAM a target without one takes.

Every op gets `monet.schedule = #hw.sched<core = c, start = s, end = e>` (cycles of the target's
reference clock); an op fused by `fuse-layers` gets one per tile, `[#hw.sched<...>, ...]`. The module records the target, mapping and precision, plus
`monet.latency_cycles` and `monet.energy_pj`; `-t monet-report` turns it into the full report.
The scheduler itself is `monet_ir.schedule.scheduler`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, ModuleOp, StringAttr, f64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from monet_ir import graph


@dataclass(frozen=True)
class SchedulePass(ModulePass):
    name = "schedule"

    target: str = ""
    mapping: str = ""
    precision: str = ""
    offchip: str = ""
    mapper: str = ""
    mapper_objective: str = ""
    grad_dataflow: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.schedule(op)

    def schedule(self, op: ModuleOp):
        """Schedule the module's step, write the schedule on it and return the `Schedule`."""
        from dialects.hw import SchedAttr

        target, mapping, precision = resolved_options(op, self.target, self.mapping, self.precision)
        offchip = self.offchip or _recorded(op, "monet.offchip")
        mapper = pass_mapper_options("schedule", op, self.mapper, self.mapper_objective, self.grad_dataflow)
        s = run_schedule(op, target, mapping, precision, offchip=offchip, mapper=mapper)
        fn = graph.step_function(op)
        by_op: dict[int, list] = {}
        for placed in s.tasks:
            by_op.setdefault(s.graph.tasks[placed.task].op_index, []).append(
                SchedAttr(placed.core, placed.start, placed.end))
        for position, operation in enumerate(graph.compute_ops(fn)):
            tiles = by_op.get(position, [])
            # a fused op runs as tiles: one entry per tile
            operation.attributes["monet.schedule"] = tiles[0] if len(tiles) == 1 else ArrayAttr(tiles)
        op.attributes["monet.target"] = StringAttr(target)
        if mapping:
            op.attributes["monet.mapping"] = StringAttr(mapping)
        if precision:
            op.attributes["monet.precision"] = StringAttr(precision)
        record_mapper_options(op, mapper)
        op.attributes["monet.latency_cycles"] = FloatAttr(float(round(s.latency_cycles)), f64)
        op.attributes["monet.energy_pj"] = FloatAttr(float(sum(s.energy_breakdown_pj().values())), f64)
        return s


def resolved_options(module: ModuleOp, target: str, mapping: str, precision: str) -> tuple[str, str, str]:
    """Options given to the pass, else those recorded on the module by earlier passes."""
    def recorded(key: str) -> str:
        attr = module.attributes.get(key)
        return attr.data if isinstance(attr, StringAttr) else ""

    target = target or recorded("monet.target")
    if not target:
        raise PassFailedException("schedule: no target: give target=NAME|file.yaml or run annotate-cost first")
    return target, mapping or recorded("monet.mapping"), precision or recorded("monet.precision")


def _recorded(module: ModuleOp, key: str) -> str:
    attr = module.attributes.get(key)
    return attr.data if isinstance(attr, StringAttr) else ""


def pass_mapper_options(pass_name: str, module: ModuleOp, search: str, objective: str, grad_dataflow: str):
    """The `MapperOptions` of a pass's options, else those an earlier pass recorded on the module
    (`monet.mapper`: "search,objective,grad_dataflow"); a bad value fails the pass in one line."""
    from targets.model import MapperOptions

    attr = module.attributes.get("monet.mapper")
    recorded = attr.data.split(",") if isinstance(attr, StringAttr) else ["fast", "latency", "auto"]
    try:
        return MapperOptions(search or recorded[0], objective or recorded[1], grad_dataflow or recorded[2])
    except ValueError as e:
        raise PassFailedException(f"{pass_name}: {e}") from None


def record_mapper_options(module: ModuleOp, mapper) -> None:
    """Keep non-default mapper options on the module for the passes that follow."""
    from targets.model import DEFAULT_MAPPER

    if mapper != DEFAULT_MAPPER:
        module.attributes["monet.mapper"] = StringAttr(f"{mapper.search},{mapper.objective},{mapper.grad_dataflow}")


def run_schedule(module: ModuleOp, target_name: str, mapping: str, precision: str, offchip: str = "", mapper=None):
    from monet_ir.schedule.mapping import load_allocation
    from monet_ir.schedule.scheduler import schedule
    from monet_ir.schedule.taskgraph import extract
    from targets.loader import resolve_target

    if mapper is None:
        mapper = pass_mapper_options("schedule", module, "", "", "")
    target, choice = resolve_target(target_name, precision, offchip, mapper)
    bits = choice.bits
    allocation = load_allocation(mapping) if mapping else None
    if allocation is not None:
        allocation.check_cores(len(target.cores))
    task_graph = extract(graph.step_function(module), bits=bits)
    if allocation is not None:
        allocation.check_names(task_graph.tasks)  # an entry naming nothing of the step is an error
        allocation.apply_nest_mappings(task_graph)  # a ZigZag mapping file's loop-nest mappings
        if not allocation.entries:
            allocation = None
    return schedule(task_graph, target, allocation)
