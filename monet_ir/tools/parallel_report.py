"""`monet report MODEL --system SYS --parallel dp=8,...`: one training step on a multi-chip system.

The pipeline of `monet_ir.pipeline` (import, `autodiff`, `insert-optimizer`, optional
`activation-checkpoint`, `parallelize` with the plan, the user's `-p` passes), then
`monet_ir.parallel.step.run_step` on the system; writes `report.json`, `report.txt`, `trace.json`
(one process per chip, one track per link) and the plots (`gantt.svg`: a lane per chip and per
link; `memory.svg`: a panel per stage; `energy.svg`: per phase, summed over the chips; PNGs with
`--plot-format png`) to DIR.
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


def build_parallel_step(resolved, plan=None, progress=None):
    """The built step (`monet_ir.pipeline.BuiltStep`) of one chip under `plan` (default: the
    resolved one): the pipeline's passes through `parallelize`, no schedule."""
    import dataclasses

    from xdsl.context import Context
    from xdsl.utils.exceptions import PassFailedException

    from monet_ir.pipeline import build_step, run_passes, stage_passes

    if plan is not None:
        resolved = dataclasses.replace(resolved, plan=plan)
    plan = resolved.plan
    model = resolved.options.model
    say = progress.step if progress is not None else (lambda _text: None)
    built = build_step(resolved, stages=("train", "checkpoint"), progress=say)
    if not built.training:
        raise UsageError(f"{model}: --system needs a forward model (the step autodiff builds), not a training graph")
    for par in stage_passes(resolved, "parallelize"):
        say(f"parallelize ({plan.spec()})")
        try:
            par.apply(Context(), built.module)
        except PassFailedException as e:
            reason = str(e).splitlines()[0].removeprefix("parallelize: ")
            raise PlanError(f"{model}: --parallel {plan.spec()}: {reason}", reason) from None
        built.ran.append(par)
    run_passes(built, stage_passes(resolved, "user"), say)
    return built


def make_parallel_report(args: Any, progress: Any) -> tuple[dict[str, Any], Any]:
    from monet_ir.analysis.accounting import flops_by_phase
    from monet_ir import graph as step_graph
    from monet_ir.emit.parallel_report import parallel_report
    from monet_ir.parallel.pipeline import run_parallel
    from monet_ir.pipeline import StepOptions, resolve

    resolved = resolve(StepOptions.from_args(args, "report"))
    system, plan, choice = resolved.system, resolved.plan, resolved.precision
    progress.step(f"loaded system {system.name}")
    if choice.source != "--precision":
        progress.step(f"precision: {choice.describe()}")
    built = build_parallel_step(resolved, progress=progress)
    module = built.module
    from monet_ir.parallel.stages import stage_functions

    fns = stage_functions(module)
    fn = fns[0]
    progress.step(f"scheduling {len(fns)} stage step(s) on {system.chip.name}, the collectives on the "
                  f"{system.network.topology} network")
    result = run_parallel(module, system, plan, choice.bits, plan.schedule)
    report: dict[str, Any] = {
        "model": Path(args.model).name,
        "pipeline": ",".join(str(p) for p in built.shaping),
        "precision": choice.name or step_graph.element_precision(fn),
        "precision_source": choice.source,
        "flops_per_device": [flops_by_phase(f) for f in fns] if len(fns) > 1 else flops_by_phase(fn),
    }
    report.update(parallel_report(result))
    return report, result


def run_parallel_report(args: Any, progress: Any) -> None:
    from monet_ir.emit.parallel_report import parallel_plot_data, parallel_text, parallel_trace

    from monet_ir.files import begin_run, complete_run, write_atomic

    out = begin_run(args.out)
    png = not getattr(args, "no_plots", False) and getattr(args, "plot_format", "svg") == "png"
    from monet_ir.emit.step_report import PlotWorker

    worker = PlotWorker(out) if png else None  # (matplotlib loads while the system is scheduled)
    try:
        report, result = make_parallel_report(args, progress)
        write_atomic(out / "report.json", json.dumps(report, indent=1) + "\n")
        summary = parallel_text(report)
        write_atomic(out / "report.txt", summary)
        write_atomic(out / "trace.json", json.dumps(parallel_trace(result)))
        files = ["report.json", "report.txt", "trace.json"]
        progress.step(f"wrote {out}/report.json, report.txt, trace.json")
        sys.stdout.write(summary)
        sys.stdout.flush()
        if getattr(args, "no_plots", False):
            complete_run(out, "monet report", files)
            return
        data = parallel_plot_data(result, report)
        if worker is not None:
            worker.draw(data)
            files += worker.drawn(out, files)  # (else everything else is written, the run incomplete)
            complete_run(out, "monet report", files)
            progress.step(f"wrote {out}/gantt.png, memory.png, energy.png")
        else:
            from monet_ir.emit.plots import write_plots

            files += [path.name for path in write_plots(data, out)]
            complete_run(out, "monet report", files)
            progress.step(f"wrote {out}/gantt.svg, memory.svg, energy.svg")
    finally:
        if worker is not None:
            worker.cancel()
