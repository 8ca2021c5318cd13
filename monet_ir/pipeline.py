"""The training step, built one way by every tool.

`monet report`, `monet explore`, `sweep` and `plan`, the explorer's `Evaluator`, `monet-opt`'s
`monet-step{...}` pass and the Python API all build a training step here:

- `StepOptions`: every option that shapes the step, one field each. A field's `option(...)`
  metadata gives its command-line flag and help, the `monet` commands that take it and whether
  `monet-step{...}` takes it; the command-line options (`add_step_arguments`), the options of the
  `monet-step` pass (`step_pass_fields`) and the command line that rebuilds a step
  (`StepOptions.command_line`) are generated from the fields.
- `resolve(options) -> ResolvedStep`: checks the options and loads what they name (the target
  and the number formats chosen on it, the core allocation, the parallel plan and its system)
  once, before any work: a bad option fails before the model is imported.
- `step_passes(resolved, training=...)`: the pass pipeline, in one order:

      autodiff, insert-optimizer        (a forward model, unless --inference)
      activation-checkpoint             (--checkpoint other than store-all)
      quantize                          (an MX precision policy)
      fuse-layers                       (--fusion)
      parallelize                       (--system: the plan)
      the user's passes                 (-p PIPELINE)
      annotate-cost, schedule           (--target: the costing)

- `build_step(options)`: imports the model, records the resolved options on the module
  (`record`) and runs the pipeline; `BuiltStep` keeps the module, the resolution, the passes
  that ran and the `Schedule` when the pipeline scheduled.

**Adding an option** is one field of `StepOptions` (with its `option(...)` metadata); it then
exists on the command line of the commands named, in `monet-step{...}`, in the explorer's
reproducing command line and in `monet.step` on the module. Where it acts is `resolve` (if it
names something to load or check) and `step_passes` (the pass it configures).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass, PassPipeline

from monet_ir.errors import UsageError
from monet_ir.options import StepOptions, add_step_arguments

__all__ = ["StepOptions", "add_step_arguments", "ResolvedStep", "resolve", "step_passes", "step_pipeline",
           "build_step", "BuiltStep", "record", "step_pass_class"]

def step_pass_fields() -> list[tuple[str, Any, Any]]:
    """(name, type, dataclasses field) of the `monet-step` pass's options: the `StepOptions`
    fields it takes (a float option also takes an integer, as xDSL's pass specs spell 1e-3 as
    0.001 but 1 as an integer)."""
    import typing

    hints = typing.get_type_hints(StepOptions)
    fields = []
    for f, opt in StepOptions.options():
        if opt.in_pass:
            kind = hints[f.name]
            fields.append((f.name, float | int if kind is float else kind, field(default=f.default)))
    return fields


# ---------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class ResolvedStep:
    """The options and what they name, loaded and checked once: `target` (None with a system or
    in a sweep, which brings its own), `precision` (the `PrecisionChoice` on the target or the
    system's chip), `allocation` (`--mapping`), `plan` and `system` (`--system`), `pipeline`
    (the user's `-p` passes)."""

    options: StepOptions
    target: Any = None
    precision: Any = None
    allocation: Any = None
    system: Any = None
    plan: Any = None
    pipeline: tuple[ModulePass, ...] = ()

    @property
    def bits(self):
        """What the cost adapters take (`PrecisionChoice.bits`; None: the tensors' own types)."""
        return self.precision.bits if self.precision is not None else None

    @property
    def mx_policy(self) -> str | None:
        """The MX policy `quantize` inserts casts for, as text (None: no MX format)."""
        policy = self.precision.policy if self.precision is not None else None
        return policy.spec() if policy is not None and policy.has_mx else None


def resolve(options: StepOptions, *, plans_searched: bool = False) -> ResolvedStep:
    """Check `options` and load the target (or system), the precision chosen on it, the core
    allocation, the parallel plan and the user's passes; every problem a one-line error before
    any work. `plans_searched`: a search over parallel plans (`monet plan`) gives each plan
    itself (no `plan` resolved)."""
    from monet_ir.options import parse_dims
    from targets.loader import resolve_target

    precision = options.precision or None
    if precision:
        from monet_ir.precision import PrecisionError, parse_precision

        try:
            parse_precision(precision)
        except PrecisionError as e:
            raise UsageError(str(e)) from None
    parse_dims(list(options.dims))
    check_checkpoint(options.checkpoint)
    check_fusion(options.fusion, options.tiles)
    if options.checkpoint != "store-all" and options.inference:
        raise UsageError(f"--checkpoint {options.checkpoint}: checkpointing needs a training step (not --inference)")
    user_passes = parse_user_pipeline(options.pipeline)
    if options.system:
        return _resolve_system(options, user_passes, plans_searched)
    if options.parallel:
        raise UsageError(f"--parallel {options.parallel}: a parallel plan needs --system")
    if not options.target:
        return ResolvedStep(options, pipeline=user_passes)
    target, choice = resolve_target(options.target, precision, options.offchip, mapper_of(options))
    allocation = None
    if options.mapping:
        from monet_ir.schedule.mapping import load_allocation

        allocation = load_allocation(options.mapping)
        allocation.check_cores(len(target.cores))
    return ResolvedStep(options, target, choice, allocation, pipeline=user_passes)


def mapper_of(options: StepOptions):
    """The `MapperOptions` of the step's --mapper, --mapper-objective and --grad-dataflow."""
    from targets.model import MapperOptions

    try:
        return MapperOptions(options.mapper, options.mapper_objective, options.grad_dataflow)
    except ValueError as e:
        raise UsageError(str(e)) from None


def check_checkpoint(policy: str) -> None:
    """`--checkpoint`'s policy, and its plan file, read before the model is."""
    from passes.activation_checkpoint import parse_policy

    try:
        parsed = parse_policy(policy)
    except ValueError as e:
        raise UsageError(f"--checkpoint {policy}: {e}") from None
    if parsed.kind == "plan":
        from monet_ir.analysis.paging_plan import PlanError, read_plan_file

        try:
            read_plan_file(parsed.path)
        except PlanError as e:
            raise UsageError(f"--checkpoint {policy}: {e}") from None


def check_fusion(fusion: str, tiles: int) -> None:
    """`--fusion`'s form (none, auto or FIRST:LAST stacks; the node names are checked once the
    model is read) and `--tiles`, before the model is read."""
    from monet_ir.errors import did_you_mean

    if tiles < 0:
        raise UsageError(f"--tiles {tiles}: expected 0 (from memory) or a positive number of tiles")
    if fusion in ("none", "auto"):
        return
    for spec in fusion.split(","):
        first, sep, last = spec.strip().removeprefix("backward:").partition(":")
        if not (first and sep and last):
            hint = did_you_mean(fusion, ("none", "auto"))
            raise UsageError(f"--fusion {fusion}: stack '{spec}': expected none, auto or FIRST:LAST (ONNX node names; "
                             f"backward:FIRST:LAST for a backward stack), several separated by commas{hint}")


def _resolve_system(options: StepOptions, user_passes: tuple[ModulePass, ...], plans_searched: bool) -> ResolvedStep:
    from monet_ir.parallel.plan import parse_plan
    from targets.precision_choice import choose_precision
    from targets.system import get_system

    for name in ("mapping", "fusion", "inference", "target"):
        value = getattr(options, name)
        if value and value != "none":
            raise UsageError(f"--{name} does not go with --system (not supported on multi-chip steps yet)")
    precision = options.precision or None
    if precision and ("=" in precision or precision.lower().startswith("mx") or ";" in precision):
        raise UsageError(f"--precision {precision}: per-class and MX precision policies do not go with --system yet "
                         "(give one plain format: fp32, bf16, fp16, fp8, int8)")
    plan = None if plans_searched else parse_plan(options.parallel or "dp=1")
    system = get_system(options.system, precision=precision)
    if plan is not None and plan.chips != system.chips:
        raise UsageError(f"--parallel {plan.spec()}: dp x tp x pp = {plan.chips} chips, system "
                         f"'{system.name}' has {system.chips}")
    choice = choose_precision(system.chip, precision)
    return ResolvedStep(options, None, choice, None, system, plan, user_passes)


def parse_user_pipeline(spec: str) -> tuple[ModulePass, ...]:
    """The passes of a `-p` pipeline, from MONET's, xDSL's and installed plugins' passes."""
    if not spec.strip():
        return ()
    from monet_ir.registry import all_passes

    try:
        return PassPipeline.parse_spec(all_passes(), spec).passes
    except Exception as e:  # xDSL reports an unknown pass or a bad option as ValueError and others
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"-p {spec}: {message}") from None


# ---------------------------------------------------------------------- the pipeline

COSTING = ("annotate-cost", "schedule")
STAGES = ("train", "checkpoint", "quantize", "fuse", "parallelize", "user", "cost")
"""The pipeline's stages, in order: autodiff and insert-optimizer; activation-checkpoint;
quantize; fuse-layers; parallelize; the user's `-p` passes; annotate-cost and schedule."""


def step_passes(resolved: ResolvedStep, *, training: bool = True, stages: Sequence[str] = STAGES) -> list[ModulePass]:
    """The passes that build the step of `resolved` from an imported model, in order (module
    docstring), those of `stages` only. `training=False`: the model already holds its backward
    and optimizer ops (an ONNX Runtime training graph), costed as imported. Without a target
    (a system, or a sweep, which brings its own targets) there is no costing stage."""
    from passes.activation_checkpoint import ActivationCheckpointPass
    from passes.annotate_cost import AnnotateCostPass
    from passes.autodiff import AutodiffPass
    from passes.fuse_layers import FuseLayersPass
    from passes.insert_optimizer import InsertOptimizerPass
    from passes.parallelize import ParallelizePass
    from passes.quantize import QuantizePass
    from passes.schedule import SchedulePass

    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown pipeline stage(s) {unknown}; the stages are {', '.join(STAGES)}")
    o = resolved.options
    passes: list[ModulePass] = []
    if "train" in stages and training and not o.inference:
        passes += [AutodiffPass(loss=o.loss, labels=o.labels), InsertOptimizerPass(kind=o.optimizer, lr=o.lr)]
    if "checkpoint" in stages and o.checkpoint != "store-all":
        passes.append(ActivationCheckpointPass(policy=o.checkpoint))
    if "quantize" in stages and resolved.mx_policy and training:
        passes.append(QuantizePass(policy=resolved.mx_policy))
    if "fuse" in stages and o.fusion != "none":
        mode = "auto" if o.fusion == "auto" else "explicit"
        stacks = () if mode == "auto" else tuple(p for p in o.fusion.split(",") if p)
        passes.append(FuseLayersPass(mode=mode, tiles=o.tiles, target=o.target, stacks=stacks))
    if "parallelize" in stages and resolved.plan is not None:
        p = resolved.plan
        passes.append(ParallelizePass(dp=p.dp, tp=p.tp, pp=p.pp, zero=p.zero, bucket=p.bucket, algorithm=p.algorithm))
    if "user" in stages:
        passes += resolved.pipeline
    if "cost" in stages and resolved.target is not None:
        mapper = dict(mapper=o.mapper, mapper_objective=o.mapper_objective, grad_dataflow=o.grad_dataflow)
        passes += [AnnotateCostPass(target=o.target, precision=o.precision, offchip=o.offchip, **mapper),
                   SchedulePass(target=o.target, mapping=o.mapping, precision=o.precision, offchip=o.offchip, **mapper)]
    return passes


def stage_passes(resolved: ResolvedStep, stage: str, training: bool = True, **changes: Any) -> list[ModulePass]:
    """The passes of one stage for the options changed by `changes` (a search's candidate: its
    checkpoint policy, fusion, tiles), with nothing loaded again."""
    options = dataclasses.replace(resolved.options, **changes)
    return step_passes(dataclasses.replace(resolved, options=options), training=training, stages=(stage,))


def step_pipeline(resolved: ResolvedStep, *, training: bool = True, stages: Sequence[str] = STAGES) -> PassPipeline:
    """`step_passes` as xDSL's `PassPipeline`."""
    return PassPipeline(tuple(step_passes(resolved, training=training, stages=stages)))


def record(module: ModuleOp, resolved: ResolvedStep) -> None:
    """Write the resolved options on the module: `monet.step` (the `monet-step{...}` pass that
    builds this step again), `monet.target` and `monet.precision` (what later passes read when
    not given theirs)."""
    o = resolved.options
    module.attributes["monet.step"] = StringAttr(str(step_pass(o)))
    if o.target:
        module.attributes["monet.target"] = StringAttr(o.target)
    if o.mapping:
        module.attributes["monet.mapping"] = StringAttr(o.mapping)
    if o.offchip:
        module.attributes["monet.offchip"] = StringAttr(o.offchip)
    if resolved.precision is not None and resolved.precision.name:
        module.attributes["monet.precision"] = StringAttr(resolved.precision.name)


def step_pass(options: StepOptions) -> ModulePass:
    """The `monet-step{...}` pass of these options."""
    return step_pass_class()(**options.pass_options())


@dataclass(frozen=True)
class _StepPass(ModulePass):
    """What the `monet-step` pass does; its options are generated (`step_pass_class`)."""

    name = "monet-step"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from monet_ir import graph

        options = StepOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        resolved = resolve(options)
        training = not graph.holds_training_ops(graph.step_function(op))
        built = BuiltStep(op, resolved, [], training)
        run_passes(built, step_passes(resolved, training=training))


@functools.cache
def step_pass_class() -> type[ModulePass]:
    """The `monet-step` pass class: one option per `StepOptions` field it takes (made once)."""
    doc = "The training step of `monet report`, as one pass. Options (as `monet report`'s):\n" + "\n".join(
        f"- `{f.name}` (default {f.default!r}): {opt.help}" for f, opt in StepOptions.options() if opt.in_pass)
    return dataclasses.make_dataclass("MonetStepPass", step_pass_fields(), bases=(_StepPass,), frozen=True,
                                      namespace={"__doc__": doc, "__module__": "passes.monet_step"})


@dataclass
class BuiltStep:
    """A step `build_step` built: the module, the resolution, the passes that ran (`ran`) and
    the `Schedule` when the pipeline scheduled (else None)."""

    module: ModuleOp
    resolved: ResolvedStep
    ran: list[ModulePass]
    training: bool
    schedule: Any = None

    @property
    def shaping(self) -> list[ModulePass]:
        """The passes that ran, but the costing (what `report.json`'s `pipeline` names)."""
        return [p for p in self.ran if p.name not in COSTING]


def build_step(options: StepOptions | ResolvedStep, *, stages: Sequence[str] = STAGES,
               progress: Callable[[str], None] | None = None) -> BuiltStep:
    """Import the model and run the step's pipeline on it (see the module docstring)."""
    from monet_ir import graph
    from monet_ir.frontend.onnx_import import import_onnx
    from monet_ir.options import parse_dims

    resolved = options if isinstance(options, ResolvedStep) else resolve(options)
    o = resolved.options
    say = progress or (lambda _text: None)
    say(f"importing {o.model}")
    module = import_onnx(o.model, dims=parse_dims(list(o.dims)), frozen=tuple(o.frozen))
    training = not graph.holds_training_ops(graph.step_function(module))
    if not training:
        check_imported_training_graph(o)
        say("the model already holds backward/optimizer ops: costing it as imported")
    built = BuiltStep(module, resolved, [], training)
    run_passes(built, step_passes(resolved, training=training, stages=stages), say)
    return built


# the options that build the training step around a forward model, and what each does
TRAINING_OPTIONS = {"loss": "--loss", "labels": "--labels", "optimizer": "--optimizer", "lr": "--lr",
                    "inference": "--inference"}


def check_imported_training_graph(options: StepOptions) -> None:
    """A model that already holds its backward pass (an ONNX Runtime training graph) is costed as
    imported: the options that would build the step around a forward model cannot apply, and
    one given is an error rather than silently ignored."""
    given = [flag + ("" if isinstance(getattr(options, name), bool) else f" {getattr(options, name)}")
             for name, flag in TRAINING_OPTIONS.items()
             if getattr(options, name) != StepOptions.__dataclass_fields__[name].default]
    if given:
        raise UsageError(f"{options.model}: {', '.join(given)}: this model already holds its backward pass and "
                         "optimizer (an ONNX Runtime training graph, costed as imported); "
                         f"{', '.join(TRAINING_OPTIONS.values())} apply to forward models (export the model without "
                         "generate_artifacts to choose them)")


def run_passes(built: BuiltStep, passes: Sequence[ModulePass], say: Callable[[str], None] = lambda _t: None) -> None:
    """Run `passes` on the built step's module (recording the options first), keeping the
    `Schedule` the `schedule` pass computes."""
    from passes.schedule import SchedulePass

    record(built.module, built.resolved)
    ctx = Context()
    for p in passes:
        say(_describe(p, built.resolved))
        if isinstance(p, SchedulePass):
            built.schedule = p.schedule(built.module)
        else:
            p.apply(ctx, built.module)
        built.ran.append(p)


def _describe(p: ModulePass, resolved: ResolvedStep) -> str:
    o = resolved.options
    if p.name == "schedule":
        return f"scheduling on the {len(resolved.target.cores)} cores of {resolved.target.name}"
    if p.name == "annotate-cost":
        return f"costing every op on {resolved.target.name}"
    detail = {"activation-checkpoint": o.checkpoint, "fuse-layers": o.fusion, "quantize": resolved.mx_policy,
              "parallelize": resolved.plan.spec() if resolved.plan is not None else ""}.get(p.name)
    return f"{p.name} ({detail})" if detail else p.name
