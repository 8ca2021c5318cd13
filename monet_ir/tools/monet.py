"""`monet`: the whole pipeline in one process.

    monet report MODEL.onnx --target NAME|file.yaml --out DIR
                 [--loss cross-entropy|mse|sum|none] [--optimizer sgd|momentum|adam|adamw] [--lr LR]
                 [--mapping alloc.yaml] [--precision NAME|CLASS=NAME,...] [--mx-block K]
                 [--mx-group vector|square:RxC] [--inference]
                 [--fusion none|auto|FIRST:LAST,...] [--tiles N]
                 [--checkpoint store-all|recompute-all|sqrt|memory-budget=BYTES|list=NODE,...|plan=FILE.json]
                 [--dim NAME=N] [--freeze NAME] [--no-plots] [--plot-format svg|png]
    monet report MODEL.onnx --system NAME|system.yaml --parallel dp=N,tp=N,pp=N[,zero=S][,microbatches=M] --out DIR
    monet explore MODEL.onnx --target NAME|file.yaml --out DIR [--objective schedule|checkpoint|energy]
                 [--memory-budget BYTES] [--time-budget CYCLES]
                 [--population 64] [--generations 50] [--seed 0] [--jobs N] [--budget BYTES] [--exact]
                 [--search checkpoint|fusion|allocation|precision|all[,...]] [--precisions ...] [step options of report]
                 [--backend local|ray] [--ray-address auto|ray://HOST:PORT] [--resume DIR]
    monet sweep MODEL.onnx --target-template file.yaml [--set PATH=v1,v2,...]... --out DIR
                 [--jobs N] [--backend local|ray] [--ray-address ADDR] [--resume DIR]
    monet plan MODEL.onnx --system NAME|system.yaml --out DIR [--microbatches 1,2,4,8] [--zero 0,1,2,3]
    monet targets                      # list the built-in targets and systems

`report` imports the model, differentiates it and inserts the optimizer (unless `--inference`),
prices every op on every core of the target, schedules the step and writes `report.json`,
`report.txt`, `trace.json` (Perfetto / chrome://tracing), `gantt.svg`, `memory.svg` and
`energy.svg` (`.png` with `--plot-format png`) to DIR, printing the summary. Nothing goes through text IR.

`explore` searches checkpointing, core allocation and layer fusion with NSGA-II (and, with
`--exact`, solves the checkpoint choice, or with `--objective energy` the paging plan, as a MILP); `sweep` runs the step on a grid of hardware
parameters. See docs/explore.md.
"""

from __future__ import annotations

import os

# OpenBLAS's idle threads spin on the other core while this single-threaded tool works (and in
# the plot and explore worker processes, which inherit the environment): one thread, unless the
# user chose otherwise. Set before anything imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from monet_ir.errors import UsageError, run_reporting_errors  # noqa: E402

from monet_ir.options import add_step_arguments  # noqa: E402


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("monet")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """`--version`, reading the installed version only when asked (importlib.metadata costs
    start-up time on every run otherwise)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the program's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        sys.stdout.write(f"monet {package_version()}\n")
        parser.exit()


COST_CACHE_HELP = ("price every op afresh: neither read nor write the persistent cost cache "
                   "(~/.cache/monet/costs.sqlite; same as MONET_COST_CACHE=off)")


def build_parser() -> argparse.ArgumentParser:
    """The `monet` commands. The options that shape the training step come from
    `monet_ir.options.StepOptions` (declared there once); the others are the commands' own."""
    from monet_ir.options import ArgumentParser

    parser = ArgumentParser(prog="monet", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="latency, energy and memory of one training step")
    add_step_arguments(report, "report")
    report.add_argument("--out", required=True, help="output directory")
    _plot_options(report, "in a second process (about a second of CPU)")
    report.add_argument("--no-cost-cache", action="store_true", help=COST_CACHE_HELP)
    targets_cmd = sub.add_parser("targets", help="list the built-in targets, or show what MONET reads from some")
    targets_cmd.add_argument("target", nargs="*", help="built-in name or target file (ours, Stream's, ZigZag's): "
                             "print its cores, memories, DRAM and links as MONET reads them")
    plan = sub.add_parser("plan", help="the fastest parallel plan (dp x tp x pp x ZeRO x micro-batches) that fits a system")
    add_step_arguments(plan, "plan", required=("system",))
    plan.add_argument("--out", required=True, help="output directory (plans.json, plans.txt)")
    _plan_options(plan)
    add_explore_parsers(sub)
    return parser


def _step_options(p: argparse.ArgumentParser, command: str) -> None:
    """The options of `explore` and `sweep` that shape the training step, plots and the cost cache."""
    add_step_arguments(p, command)
    _plot_options(p, "(about a second of CPU)")
    p.add_argument("--no-cost-cache", action="store_true", help=COST_CACHE_HELP)


def _plot_options(p: argparse.ArgumentParser, png_cost: str) -> None:
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--plot-format", choices=["svg", "png"], default="svg",
                   help=f"plots as SVG written directly (default, milliseconds) or as PNG drawn by matplotlib {png_cost}")


def _plan_options(p: argparse.ArgumentParser) -> None:
    """The options of the parallel plan search (`monet plan`, `monet explore --search parallel`)."""
    p.add_argument("--microbatches", default="1,2,4,8", metavar="M,M,...", help="micro-batch counts tried with pp > 1")
    p.add_argument("--zero", default="0,1,2,3", metavar="S,S,...", help="ZeRO stages tried with dp > 1")
    p.add_argument("--tp", metavar="T,T,...", help="tensor-parallel degrees tried (default: the divisors of a node's chips)")
    p.add_argument("--bucket", type=int, default=25_000_000, help="gradient bucket bytes")


def add_explore_parsers(sub: Any) -> None:
    explore = sub.add_parser("explore", help="genetic search over checkpointing, core allocation and fusion")
    _step_options(explore, "explore")
    explore.add_argument("--out", help="output directory (required unless --resume DIR)")
    explore.add_argument("--objective", default="schedule", choices=["schedule", "checkpoint", "energy"],
                         help="schedule: latency, energy, peak memory of the scheduled step; checkpoint: "
                              "recompute cycles and saved-activation bytes (the MILP's model); energy: keep, "
                              "recompute or page each saved activation for the least energy under "
                              "--memory-budget and --time-budget (POET; writes plan.json)")
    explore.add_argument("--population", type=int, default=64)
    explore.add_argument("--generations", type=int, default=50)
    explore.add_argument("--seed", type=int, default=0)
    explore.add_argument("--jobs", type=int, default=None,
                         help="worker processes evaluating candidates (default: the local cores this process may use)")
    explore.add_argument("--budget", metavar="BYTES",
                         help="memory budget of the chosen point: peak memory (schedule) or saved bytes (checkpoint)")
    explore.add_argument("--memory-budget", metavar="BYTES",
                         help="--objective energy: peak of main memory (the report's memory.budgeted)")
    explore.add_argument("--time-budget", metavar="CYCLES", type=float,
                         help="--objective energy: latency of the step in cycles (default: none)")
    explore.add_argument("--exact", nargs="?", const="once", choices=["once", "full"],
                         help="also solve exactly as a MILP (HiGHS): with --objective energy, the keep/recompute/page "
                              "plan within --memory-budget and --time-budget (re-scheduled; the GA's gap "
                              "reported); otherwise the checkpoint choice under --budget (implies "
                              "--objective checkpoint). once (default): one decision per saved value, each "
                              "dropped value recomputed once per segment, as activation-checkpoint applies it; "
                              "full: the stage-expanded Checkmate/POET formulation (any number of "
                              "recomputations, paging in and out per stage), for graph files GRAPH.json "
                              "(Checkmate DFGraph, networkx node-link or POET layers)")
    explore.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS",
                         help="time limit of each --exact full solve (the best schedule found is returned at the limit)")
    _plan_options(explore)
    explore.add_argument("--search", default="all", metavar="checkpoint|paging|fusion|allocation|precision|all[,...]|parallel",
                         help="the decisions searched (default all; several separated by commas, e.g. "
                              "checkpoint,allocation for a layer-by-layer search; all does not include "
                              "precision); parallel: the dp x tp x pp x ZeRO x micro-batch plans of --system "
                              "(as monet plan)")
    explore.add_argument("--precisions", action="append", metavar="NAME,NAME,...|CLASS=NAME,...",
                         help="--search precision: the policies the gene picks from (format names, each for "
                              "every tensor class as --precision NAME; repeat the option for a per-class policy)")
    explore.add_argument("--mx-groups", metavar="vector|square:RxC[,...]",
                         help="--search precision: the MX group shapes each MX format is tried with "
                              "(default: --mx-group)")
    _dispatch_options(explore, "search")
    sweep = sub.add_parser("sweep", help="the training step on a grid of hardware parameters")
    _step_options(sweep, "sweep")
    sweep.add_argument("--target-template", required=True, help="target YAML in MONET's format, or a built-in target's name")
    sweep.add_argument("--set", action="append", default=[], metavar="PATH=V1,V2,...",
                       help="a swept parameter: a dotted path into the template and its values")
    sweep.add_argument("--out", help="output directory (required unless --resume DIR)")
    sweep.add_argument("--jobs", type=int, default=1, help="designs evaluated at once (local worker processes)")
    _dispatch_options(sweep, "sweep")


def _dispatch_options(p: argparse.ArgumentParser, what: str) -> None:
    """Where the evaluations of a search or sweep run, and how an interrupted one continues."""
    p.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="local: --jobs worker processes on this machine; ray: Ray tasks (pip install -e '.[ray]')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --backend ray: auto or ray://HOST:PORT joins a running cluster (default: start a "
                        "local Ray runtime)")
    p.add_argument("--resume", metavar="DIR",
                   help=f"continue the interrupted {what} in DIR (its output folder; same options otherwise)")


class Progress:
    """One line per stage on stderr, with its wall time (the report itself goes to stdout)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def step(self, what: str) -> None:
        if self.enabled:
            print(f"[{time.perf_counter() - self.t0:6.2f} s] {what}", file=sys.stderr, flush=True)


# `optimizer_step` of a report whose imported training graph has backward ops but no optimizer op
NO_OPTIMIZER = ("none in the imported graph (ONNX Runtime's generate_artifacts writes it to optimizer_model.onnx): "
                "this step costs forward, backward and gradient accumulation only")


def make_report(args: argparse.Namespace, progress: Progress) -> tuple[dict[str, Any], Any]:
    from monet_ir.pipeline import StepOptions, build_step, resolve

    from targets import warn_missing_dram

    resolved = resolve(StepOptions.from_args(args, "report"))
    warn_missing_dram(resolved.target)
    if resolved.allocation is not None and resolved.allocation.nests:
        progress.step(f"loop-nest mappings from {resolved.options.mapping}: entries {', '.join(resolved.allocation.nests)}")
    choice = resolved.precision
    if choice.source != "--precision":
        progress.step(f"precision: {choice.describe()}")
    from monet_ir.schedule.scheduler import DramTooSmall

    try:
        built = build_step(resolved, progress=progress.step)
    except DramTooSmall as e:
        from monet_ir.tools.advice import fit_suggestions

        progress.step(f"the step needs {e.peak:,} bytes of {e.capacity:,}: trying what would make it fit")
        suggestions = fit_suggestions(resolved, e.peak, e.capacity, progress.step)
        if suggestions:
            print("monet: the step does not fit; what would help:", file=sys.stderr)
            for line in suggestions:
                print(f"  - {line}", file=sys.stderr)
        raise
    return step_report(built), built.schedule


def step_report(built) -> dict[str, Any]:
    """`report.json` of a step `build_step` built and scheduled."""
    from monet_ir.analysis.accounting import flops_by_phase, memory_summary, op_counts_by_phase
    from monet_ir.emit.step_report import schedule_report
    from monet_ir.graph import element_precision, step_function

    options, choice = built.resolved.options, built.resolved.precision
    fn = step_function(built.module)
    shaping = built.shaping
    report: dict[str, Any] = {
        "model": Path(options.model).name,
        "pipeline": ",".join(str(p) for p in shaping) if shaping else ("inference" if built.training else "as imported"),
        "precision": choice.name or element_precision(fn),
        "precision_source": choice.source,
        **({"precision_policy": choice.policy.as_dict()} if choice.policy is not None and choice.policy.has_mx else {}),
        "flops": flops_by_phase(fn),
        "ops": op_counts_by_phase(fn),
    }
    from targets import missing_dram_warning

    warning = missing_dram_warning(built.resolved.target) if built.resolved.target is not None else None
    if warning:
        report["warnings"] = [warning]
    allocation = built.resolved.allocation
    notes = allocation.nest_notes(built.schedule.graph) if allocation is not None else []
    if notes:
        report["mapping_notes"] = notes
    if not built.training and report["ops"].get("backward") and not report["ops"].get("optimizer"):
        report["optimizer_step"] = NO_OPTIMIZER
    memory = memory_summary(fn, built.resolved.bits)
    sched_part = schedule_report(built.schedule)
    memory.update(sched_part.pop("memory"))
    report.update(sched_part)
    report["memory"] = memory
    return report


def run_report(args: argparse.Namespace) -> None:
    from monet_ir.tools.gc_tuning import fewer_collections

    with fewer_collections():
        _run_report(args)


def _run_report(args: argparse.Namespace) -> None:
    import json

    if args.system:
        from monet_ir.tools.parallel_report import run_parallel_report

        run_parallel_report(args, Progress(enabled=True))
        return
    if not args.target:
        raise UsageError("report: give --target (one chip) or --system (several)")

    from monet_ir.emit.step_report import (
        PlotWorker,
        chrome_trace,
        plot_data,
        text_summary,
        write_json,
        write_layers_csv,
    )

    from monet_ir.files import begin_run, complete_run, write_atomic

    progress = Progress(enabled=True)
    out = begin_run(args.out)  # writable, before any work; the old manifest.json removed
    png = not args.no_plots and getattr(args, "plot_format", "svg") == "png"
    plots = PlotWorker(out) if png else None
    try:
        report, sched = make_report(args, progress)
        if plots is not None:
            plots.draw(plot_data(sched, report))
        write_json(report, out / "report.json")
        write_layers_csv(report, out / "layers.csv")
        summary = text_summary(report)
        write_atomic(out / "report.txt", summary)
        write_atomic(out / "trace.json", json.dumps(chrome_trace(sched)))
        files = ["report.json", "layers.csv", "report.txt", "trace.json"]
        progress.step(f"wrote {out}/report.json, layers.csv, report.txt, trace.json")
        # the summary is out while the plot process still draws
        sys.stdout.write(summary)
        sys.stdout.flush()
        if plots is not None:
            files += plots.drawn(out, files)  # (else everything else is written, the run incomplete)
            complete_run(out, "monet report", files)
            progress.step(f"wrote {out}/gantt.png, memory.png, energy.png")
        else:
            if not args.no_plots:
                from monet_ir.emit.plots import write_plots

                files += [path.name for path in write_plots(plot_data(sched, report), out)]
            complete_run(out, "monet report", files)
            if not args.no_plots:
                progress.step(f"wrote {out}/gantt.svg, memory.svg, energy.svg")
    finally:
        if plots is not None:
            plots.cancel()


def run_targets(names: Sequence[str] = ()) -> None:
    from targets import list_builtin_targets
    from targets.system import get_system, list_builtin_systems

    if names:
        from targets import get_target
        from targets.describe import describe_system, describe_target
        from targets.system import is_system_file

        systems = set(list_builtin_systems())

        def describe(name: str) -> str:
            if name in systems or (os.path.isfile(name) and is_system_file(name)):
                return describe_system(get_system(name))
            return describe_target(get_target(name))

        print("\n\n".join(describe(name) for name in names))
        return

    for name in list_builtin_targets():
        print(name)
    for name in list_builtin_systems():
        system = get_system(name)
        print(f"{name}  (system: {system.chips} x {system.chip.name}, {system.network.topology})")


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    from monet_ir.tools.applicability import check

    status = run_reporting_errors("monet", lambda: check(args), getattr(args, "model", ""))
    if status:
        sys.exit(status)
    if getattr(args, "no_cost_cache", False):
        from monet_ir.cost import disk_cache

        os.environ[disk_cache.ENV] = "off"  # inherited by worker processes
        disk_cache.reset()  # read again on first use
    if args.command == "explore" and args.search.strip() == "parallel":
        from monet_ir.tools.parallel_plan import run_explore_parallel

        sys.exit(run_reporting_errors("monet", lambda: run_explore_parallel(args, Progress(enabled=True)), args.model))
    if args.command == "explore" and not args.system and Path(args.model).suffix.lower() == ".json":
        from monet_ir.explore.cli import run_graph_explore  # a Checkmate/POET graph file: no target

        sys.exit(run_reporting_errors("monet", lambda: run_graph_explore(args), args.model))
    if args.command == "explore" and (not args.target or args.system):
        def refuse() -> None:
            raise UsageError("--system goes with --search parallel (alone: the plan search does not combine with "
                             "other searches)" if args.system else
                             "--target is required (or --system with --search parallel)")

        sys.exit(run_reporting_errors("monet", refuse, args.model))
    if args.command in ("explore", "sweep"):
        from monet_ir.explore.cli import run_explore, run_sweep

        runner = run_explore if args.command == "explore" else run_sweep
        sys.exit(run_reporting_errors("monet", lambda: runner(args), args.model))
    if args.command == "plan":
        from monet_ir.tools.parallel_plan import run_plan

        sys.exit(run_reporting_errors("monet", lambda: run_plan(args, Progress(enabled=True)), args.model))
    work = (lambda: run_report(args)) if args.command == "report" else (lambda: run_targets(args.target))
    sys.exit(run_reporting_errors("monet", work, getattr(args, "model", "")))


if __name__ == "__main__":
    main()
