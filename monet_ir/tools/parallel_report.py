"""`monet report MODEL --system SYS --parallel dp=8,...`: one training step on a multi-chip system.

Import, `autodiff`, `insert-optimizer`, optional `activation-checkpoint`, then `parallelize`
with the plan, and `monet_ir.parallel.step.run_step` on the system; writes `report.json`,
`report.txt` and `trace.json` (one process per chip, one track per link) to DIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError


class PlanError(UsageError):
    """The plan cannot be built for this model (tensor parallelism finds nothing to split, or tp
    does not divide a split axis; a pipeline cut that is impossible). `reason`: the message
    without the model and plan."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


def build_parallel_step(model: str, plan, *, dims=None, loss="cross-entropy", labels="labels", optimizer="adam",
                        lr=1e-3, checkpoint="store-all", progress=None, frozen=()):
    """The module of one chip's training step under `plan` (passes only, no schedule)."""
    from xdsl.context import Context

    from monet_ir.frontend.onnx_import import import_onnx
    from monet_ir import graph as step_graph
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass
    from passes.parallelize import ParallelizePass

    say = progress.step if progress is not None else (lambda _text: None)
    say(f"importing {model}")
    module = import_onnx(model, dims=dims or {}, frozen=tuple(frozen))
    fn = step_graph.step_function(module)
    if any(step_graph.op_phase(op) != "forward" for op in step_graph.compute_ops(fn)):
        raise UsageError(f"{model}: --system needs a forward model (the step autodiff builds), not a training graph")
    autodiff = AutodiffPass(loss=loss, labels=labels)
    opt = InsertOptimizerPass(kind=optimizer, lr=lr)
    say("autodiff, insert-optimizer")
    autodiff.apply(Context(), module)
    opt.apply(Context(), module)
    pipeline = [autodiff.pipeline_pass_spec(), opt.pipeline_pass_spec()]
    if checkpoint != "store-all":
        from passes.activation_checkpoint import ActivationCheckpointPass

        cp = ActivationCheckpointPass(policy=checkpoint)
        say(f"activation-checkpoint ({checkpoint})")
        cp.apply(Context(), module)
        pipeline.append(cp.pipeline_pass_spec())
    par = ParallelizePass(dp=plan.dp, tp=plan.tp, pp=plan.pp, zero=plan.zero, bucket=plan.bucket, algorithm=plan.algorithm)
    say(f"parallelize ({plan.spec()})")
    from xdsl.utils.exceptions import PassFailedException

    try:
        par.apply(Context(), module)
    except PassFailedException as e:
        reason = str(e).splitlines()[0].removeprefix("parallelize: ")
        raise PlanError(f"{model}: --parallel {plan.spec()}: {reason}", reason) from None
    pipeline.append(par.pipeline_pass_spec())
    return module, pipeline


def check_plan(plan, system) -> None:
    if plan.chips != system.chips:
        raise UsageError(f"--parallel {plan.spec()}: dp x tp x pp = {plan.chips} chips, system "
                         f"'{system.name}' has {system.chips}")


def make_parallel_report(args: Any, progress: Any) -> tuple[dict[str, Any], Any]:
    from monet_ir.analysis.accounting import flops_by_phase
    from monet_ir import graph as step_graph
    from monet_ir.emit.parallel_report import parallel_report
    from monet_ir.options import parse_dims
    from monet_ir.parallel.plan import parse_plan
    from monet_ir.parallel.pipeline import run_parallel
    from targets.precision_choice import choose_precision
    from targets.system import get_system

    for option in ("mapping", "fusion", "inference", "target"):
        value = getattr(args, option, None)
        if value and value != "none":
            raise UsageError(f"--{option} does not go with --system (not supported on multi-chip steps yet)")
    if args.precision and ("=" in args.precision or args.precision.lower().startswith("mx")):
        raise UsageError(f"--precision {args.precision}: per-class and MX precision policies do not go with --system yet "
                         "(give one plain format: fp32, bf16, fp16, fp8, int8)")
    plan = parse_plan(args.parallel)
    progress.step(f"loading system {args.system}")
    system = get_system(args.system, precision=args.precision)
    check_plan(plan, system)
    choice = choose_precision(system.chip, args.precision)
    if choice.source != "--precision":
        progress.step(f"precision: {choice.describe()}")
    module, pipeline = build_parallel_step(args.model, plan, dims=parse_dims(args.dim), loss=args.loss,
                                           labels=args.labels, optimizer=args.optimizer, lr=args.lr,
                                           checkpoint=args.checkpoint, progress=progress,
                                           frozen=tuple(args.freeze))
    from monet_ir.parallel.stages import stage_functions

    fns = stage_functions(module)
    fn = fns[0]
    progress.step(f"scheduling {len(fns)} stage step(s) on {system.chip.name}, the collectives on the "
                  f"{system.network.topology} network")
    result = run_parallel(module, system, plan, choice.bits, plan.schedule)
    report: dict[str, Any] = {
        "model": Path(args.model).name,
        "pipeline": ",".join(str(p) for p in pipeline),
        "precision": choice.name or step_graph.element_precision(fn),
        "precision_source": choice.source,
        "flops_per_device": [flops_by_phase(f) for f in fns] if len(fns) > 1 else flops_by_phase(fn),
    }
    report.update(parallel_report(result))
    return report, result


def run_parallel_report(args: Any, progress: Any) -> None:
    from monet_ir.emit.parallel_report import parallel_text, parallel_trace

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create directory: {e.strerror}") from None
    report, result = make_parallel_report(args, progress)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    summary = parallel_text(report)
    (out / "report.txt").write_text(summary)
    (out / "trace.json").write_text(json.dumps(parallel_trace(result)))
    progress.step(f"wrote {out}/report.json, report.txt, trace.json")
    sys.stdout.write(summary)
