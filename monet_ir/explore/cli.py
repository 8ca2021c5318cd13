"""The runners of `monet explore` and `monet sweep` (the argparse side is in monet_ir.tools.monet)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError
from monet_ir.explore.dispatch import local_cores
from monet_ir.options import parse_size


def step_config(args: argparse.Namespace):
    """The step options of `monet explore`'s arguments."""
    from monet_ir.options import StepOptions

    return StepOptions.from_args(args, "explore")


class Terminal:
    """stderr for a search: the progress bar redrawn on one line when stderr is a terminal (a
    line per update otherwise, as in a log), other messages on lines of their own."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.drawn = False

    def bar(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
            self.drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def live(self, line: str) -> None:
        """A redraw between bar lines: shown on a terminal only (nothing in a log)."""
        if self.tty:
            self.bar(line)

    def say(self, text: str) -> None:
        self.end()
        print(text, file=self.stream, flush=True)

    def end(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def output_folder(args: argparse.Namespace) -> Path:
    """--out, or the folder of --resume (they must agree when both are given); created, proved
    writable and marked incomplete (`monet_ir.files.begin_run`) before any work."""
    from monet_ir.files import begin_run

    if getattr(args, "resume", None):
        if args.out and Path(args.out).resolve() != Path(args.resume).resolve():
            raise UsageError(f"--out {args.out} and --resume {args.resume} name different folders (give one)")
        out = Path(args.resume)
        if not out.is_dir():
            raise UsageError(f"--resume {out}: no such folder")
    elif not args.out:
        raise UsageError("--out DIR is required (or --resume DIR to continue an interrupted run)")
    else:
        out = Path(args.out)
    return begin_run(out, "--resume" if getattr(args, "resume", None) else "--out")


def check_backend(args: argparse.Namespace) -> None:
    """Before any work: Ray importable for `--backend ray` (else one line saying how to install
    it); `--ray-address` only with it."""
    if args.backend == "ray":
        from monet_ir.explore import dispatch

        dispatch.import_ray()
    elif args.ray_address:
        raise UsageError("--ray-address needs --backend ray")


@contextmanager
def backend_session(args: argparse.Namespace, jobs_given: bool) -> Iterator[None]:
    """Ray started or joined for the block with `--backend ray` (`--jobs`, when given, is the
    local runtime's CPU count); nothing for the local backend."""
    if args.backend != "ray":
        yield
        return
    from monet_ir.explore import dispatch

    with dispatch.ray_session(args.ray_address, args.jobs if jobs_given else None):
        yield


SEARCHES = ("checkpoint", "fusion", "allocation", "precision", "paging")


def search_paging(text: str) -> bool:
    """Whether `--search` names `paging` (`all` does not include it)."""
    return "paging" in {name.strip() for name in text.split(",")}


def parse_search(text: str) -> tuple[bool, bool, bool]:
    """`--search`: (checkpointing, allocation, fusion) genes on or off (`precision` is read by
    `search_precisions`; `all` does not include it)."""
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(names - {*SEARCHES, "all"})
    if unknown or not names:
        raise UsageError(f"--search {text}: expected checkpoint, fusion, allocation, precision, paging or all (several "
                         f"separated by commas){', not ' + ', '.join(unknown) if unknown else ''}")
    if "all" in names:
        return True, True, True
    return "checkpoint" in names, "allocation" in names, "fusion" in names


def search_precisions(args: argparse.Namespace, objective: str) -> tuple[str, ...]:
    """The policies the precision gene picks from (`--search precision`), as specs: each
    `--precisions` item (a format name for every tensor class, as `--precision NAME`; an option
    value holding `=` is one whole per-class policy), an MX one once per `--mx-groups` shape
    (default: `--mx-group`), with `--mx-block`. Every policy is checked against the target
    first: one that some core cannot run is a one-line error before the search starts."""
    from monet_ir.precision import PrecisionError, parse_precision
    from targets import get_target
    from targets.precision_choice import choose_precision

    searched = "precision" in {name.strip() for name in args.search.split(",")}
    given = getattr(args, "precisions", None) or []
    if not searched:
        if given or getattr(args, "mx_groups", None):
            raise UsageError("--precisions and --mx-groups need --search ...,precision")
        return ()
    if not given:
        raise UsageError("--search precision needs --precisions NAME,NAME,... (the policies to try)")
    if args.precision:
        raise UsageError("--search precision picks the policy from --precisions; give no --precision")
    if objective != "schedule":
        raise UsageError("--search precision applies to --objective schedule")
    items: list[str] = []
    for value in given:
        items += [value.strip()] if "=" in value else [v.strip() for v in value.split(",") if v.strip()]
    groups = [g.strip() for g in (args.mx_groups or args.mx_group or "vector").split(",") if g.strip()]
    specs: list[str] = []
    for item in items:
        for group in groups:
            try:
                policy = parse_precision(item, args.mx_block, group)
            except PrecisionError as e:
                message = str(e).replace("--precision", "--precisions", 1).replace("--mx-group", "--mx-groups", 1)
                raise UsageError(message) from None
            if policy.spec() not in specs:
                specs.append(policy.spec())
    from monet_ir.errors import MonetError

    for spec in specs:
        try:
            choose_precision(get_target(args.target, precision=spec), spec)
        except MonetError as e:  # some core cannot run it: one line, before any candidate
            raise UsageError(f"--precisions: {e}") from None
    return tuple(specs)


def parse_energy_search(text: str) -> tuple[bool, bool]:
    """`--search` of `--objective energy`: (recompute, page) decisions on or off."""
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(names - {"checkpoint", "paging", "all"})
    if unknown or not names:
        raise UsageError(f"--search {text}: --objective energy searches checkpoint, paging or all (several separated "
                         f"by commas){', not ' + ', '.join(unknown) if unknown else ''}")
    if "all" in names:
        return True, True
    return "checkpoint" in names, "paging" in names


def refuse_full(args: argparse.Namespace) -> None:
    if args.exact == "full":
        raise UsageError(f"--exact full (the stage-expanded Checkmate/POET formulation) solves graph files "
                         f"(GRAPH.json, docs/poet.md); on an ONNX step ({args.model}) activation-checkpoint applies "
                         f"one recomputation per segment: use --exact")


def run_energy_explore(args: argparse.Namespace) -> None:
    from monet_ir.explore import energy
    from monet_ir.explore.evaluate import Evaluator
    from monet_ir.files import complete_run

    refuse_full(args)
    if args.memory_budget is None:
        raise UsageError("--objective energy needs --memory-budget BYTES (the peak of main memory)")
    memory_budget = parse_size(args.memory_budget, "--memory-budget")
    time_budget = math.inf if args.time_budget is None else float(args.time_budget)
    if time_budget <= 0:
        raise UsageError(f"--time-budget {args.time_budget}: expected a positive number of cycles")
    if args.population < 2:
        raise UsageError("--population must be at least 2")
    if args.generations < 0:
        raise UsageError("--generations must be non-negative")
    recompute, page = parse_energy_search(args.search)
    if getattr(args, "resume", None):
        raise UsageError("--resume applies to the genetic searches of --objective schedule and checkpoint")
    out = output_folder(args)
    config = step_config(args)
    _say(f"[{0.0:6.2f} s] building the training step of {args.model} for {args.target}")
    evaluator = Evaluator(config)
    if page and evaluator.target.storage is None:
        if "paging" in args.search:
            raise UsageError(f"--search paging: target '{evaluator.target.name}' has no storage level to page to")
        page = False
    files: list[str] = []
    try:
        text = energy.run(evaluator, out, memory_budget, time_budget, recompute=recompute, page=page,
                          exact=args.exact, population=args.population, generations=args.generations, seed=args.seed,
                          report_args=config.report_args(), progress=_say, files=files)
    except energy.NoPlanFound as e:  # (the files written so far stay, without a manifest: no plan was chosen)
        sys.stdout.write(e.summary)
        sys.stdout.flush()
        raise
    complete_run(out, "monet explore --objective energy", files)
    sys.stdout.write(text)


def run_graph_explore(args: argparse.Namespace) -> None:
    """`monet explore GRAPH.json`: the stage-expanded MILP on a Checkmate/POET graph file."""
    from monet_ir.explore import graph_explore

    for option, given in (("--target", args.target), ("--resume", getattr(args, "resume", None))):
        if given:
            raise UsageError(f"{option} does not apply to a graph file ({args.model}): its costs are in the file")
    if args.time_limit is not None and args.time_limit <= 0:
        raise UsageError(f"--time-limit {args.time_limit}: expected a positive number of seconds")
    from monet_ir.files import complete_run

    out = output_folder(args)
    text = graph_explore.run(args, out, parse_size)
    complete_run(out, "monet explore --exact full", ["milp.json", "milp.csv"])
    sys.stdout.write(text)


def run_explore(args: argparse.Namespace) -> None:
    from monet_ir.explore import ga, milp, outputs
    from monet_ir.explore import state as saved
    from monet_ir.explore.evaluate import Evaluator
    from monet_ir.files import complete_run

    check_backend(args)
    if getattr(args, "objective", None) == "energy":
        if args.backend != "local":
            raise UsageError("--backend ray applies to --objective schedule and checkpoint (the energy search runs "
                             "in this process)")
        run_energy_explore(args)
        return
    if getattr(args, "memory_budget", None) is not None or getattr(args, "time_budget", None) is not None:
        raise UsageError("--memory-budget and --time-budget apply to --objective energy (use --budget otherwise)")

    if args.population < 2:
        raise UsageError("--population must be at least 2")
    if args.generations < 0:
        raise UsageError("--generations must be non-negative")
    jobs_given = args.jobs is not None
    if args.jobs is None:
        args.jobs = local_cores()
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    checkpointing, allocation, fusion = parse_search(args.search)
    budget = parse_size(args.budget, "--budget") if args.budget is not None else None
    refuse_full(args)
    objective = "checkpoint" if args.exact else args.objective
    precisions = search_precisions(args, objective)
    out = output_folder(args)
    resume = saved.load(out) if args.resume else None
    config = step_config(args)
    terminal = Terminal()
    start = time.perf_counter()
    terminal.say(f"[{0.0:6.2f} s] building the training step of {args.model} for {args.target}")
    evaluator = Evaluator(config)
    from targets import warn_missing_dram

    warn_missing_dram(evaluator.target)
    paging = search_paging(args.search)
    if paging and objective != "schedule":
        raise UsageError("--search paging applies to --objective schedule and energy")
    if paging and evaluator.target.storage is None:
        raise UsageError(f"--search paging: target '{evaluator.target.name}' has no storage level to page to")
    spec = ga.GenomeSpec.of(evaluator, objective, checkpointing, allocation, fusion, precisions, paging)
    where = "Ray tasks" if args.backend == "ray" else f"{args.jobs} job(s)"
    terminal.say(f"[{time.perf_counter() - start:6.2f} s] genes: {len(spec.checkpoint)} checkpoint, "
                 f"{len(spec.allocation)} allocation, {len(spec.fusion)} fusion stacks"
                 f"{' + tiles' if spec.fusion else ''}"
                 f"{f', precision ({len(spec.precisions)} policies)' if spec.precisions else ''}"
                 f"{f', {len(spec.paging)} paging' if spec.paging else ''}; objective {objective}; population {args.population}, "
                 f"{args.generations} generations, {where}"
                 + (f"; resuming after generation {resume.generation}" if resume is not None else ""))
    try:
        with backend_session(args, jobs_given):
            result = ga.run_search(
                evaluator, objective=objective, population=args.population, generations=args.generations,
                seed=args.seed, jobs=args.jobs, budget=budget, checkpointing=checkpointing, allocation=allocation,
                fusion=fusion, precisions=precisions, paging=paging, progress=terminal.bar, backend=args.backend, checkpoint=out, resume=resume,
                log=out / "search.log", live=terminal.live,
            )
    except KeyboardInterrupt:
        terminal.say(f"interrupted: the state after the last complete generation is in {out}/{saved.STATE_FILE}; "
                     f"continue with the same command and --resume {out}")
        raise
    finally:
        terminal.end()
    written = [saved.STATE_FILE, "search.log"]
    chosen = outputs.write_search(result, config, out, budget, plots=None if args.no_plots else args.plot_format,
                                  files=written)
    lines = [f"MONET exploration: {Path(args.model).name} on {evaluator.target.name} ({objective} objectives)",
             f"  {result.evaluations} evaluations in {result.seconds:.1f} s "
             f"({result.eval_seconds / max(1, result.evaluations) * 1e3:.1f} ms each), "
             f"{len(result.front)} Pareto points", "", outputs.front_table(result), ""]
    failures = outputs.failure_summary(result.results.values())
    if failures:
        lines.append(failures)
    if chosen["point"] is None:
        lines.append(f"  chosen: none ({chosen['message']})")
    else:
        p = chosen["point"]
        if objective == "schedule":
            lines.append(f"  chosen: latency {p['latency_cycles']:,} cycles, energy {p['energy_pj'] / 1e9:.4f} mJ, "
                         f"peak {p['peak_memory_bytes']:,} bytes; {len(p['recompute'])} recomputed, "
                         f"{len(p['allocation'])} pinned, {len(p.get('fusion', []))} fused stacks"
                         + (f", {len(p['paged'])} paged, {len(p['stored'])} tensors kept in storage" if 'paged' in p else "")
                         + (f"; precision {p['precision']}" if p.get("precision") else ""))
        else:
            lines.append(f"  chosen: recompute {p['recompute_cycles']:,.0f} cycles, saved {p['saved_bytes']:,} bytes, "
                         f"{len(p['recompute'])} recomputed")
        lines.append(f"  reproduce: {chosen['command_line']}")
    if args.exact:
        lines.append("")
        lines.append(exact_comparison(evaluator, result, budget, out, milp, outputs, args))
        written += ["milp.json", "milp.csv"]
    complete_run(out, "monet explore", written)
    files = (f"front.csv, front.json, evaluated.csv, chosen.json, {saved.STATE_FILE}, search.log"
             + ("" if args.no_plots else f", pareto.{args.plot_format}"))
    lines.append("")
    lines.append(f"  wrote {out}/ {files}" + (", milp.json, milp.csv" if args.exact else ""))
    sys.stdout.write("\n".join(lines) + "\n")


def exact_comparison(evaluator, result, budget: int | None, out: Path, milp, outputs, args=None) -> str:
    """At each budget: the MILP optimum, the GA focused on that budget (fitness (recompute
    cycles, bytes over the budget), without the greedy seed), the main search's best point
    within the budget, and the greedy `memory-budget` policy of `activation-checkpoint`."""
    from monet_ir.explore import ga

    model = milp.build_model(evaluator)
    budgets = [budget] if budget is not None else milp.default_budgets(model, 5)
    spec = ga.GenomeSpec.of(evaluator, "checkpoint")
    rows: list[dict[str, Any]] = []
    for b in budgets:
        sol = milp.solve(model, b)
        row: dict[str, Any] = {"budget": b, "milp_status": sol.status, "milp_optimal": sol.optimal,
                               "milp_recompute_cycles": sol.recompute_cycles, "milp_saved_bytes": sol.saved_bytes,
                               "milp_recompute": list(sol.recompute), "milp_seconds": sol.seconds,
                               "milp_variables": sol.variables, "milp_constraints": sol.constraints}
        if sol.optimal:
            measured = evaluator.checkpoint_cost(sol.recompute)
            row["measured_recompute_cycles"] = measured.recompute_cycles
            row["measured_saved_bytes"] = measured.saved_bytes
        if args is not None and args.generations > 0:
            focused = ga.run_search(evaluator, objective="checkpoint", population=args.population,
                                    generations=args.generations, seed=args.seed, jobs=args.jobs, budget=b,
                                    greedy_seed=False)
            best = focused.best(b)
            if best is not None:
                p = focused.point(best)
                row.update({"ga_recompute_cycles": p["recompute_cycles"], "ga_saved_bytes": p["saved_bytes"],
                            "ga_recompute": p["recompute"], "ga_evaluations": focused.evaluations,
                            "gap": gap(p["recompute_cycles"], sol.recompute_cycles) if sol.optimal else math.nan})
        best = result.best(b) if result.objective == "checkpoint" else None
        if best is not None:
            p = result.point(best)
            row["front_recompute_cycles"] = p["recompute_cycles"]
            row["front_gap"] = gap(p["recompute_cycles"], sol.recompute_cycles) if sol.optimal else math.nan
        greedy = ga.seed_genomes(evaluator, spec, b, "checkpoint").get("memory-budget")
        if greedy is not None:
            cost = evaluator.checkpoint_cost(spec.decode(greedy).recompute)
            row["greedy_recompute_cycles"] = cost.recompute_cycles
            row["greedy_saved_bytes"] = cost.saved_bytes
            row["greedy_gap"] = gap(cost.recompute_cycles, sol.recompute_cycles) if sol.optimal else math.nan
        rows.append(row)
    head = (f"  exact checkpoint choice (MILP, HiGHS): {len(model.genes)} genes, {len(model.ops)} recomputable "
            f"forward ops; GA = a search focused on each budget; front = the main search's best point within it; "
            f"greedy = activation-checkpoint's memory-budget policy")
    return head + "\n" + outputs.write_milp(rows, out)


def gap(found: float, optimum: float) -> float:
    """Relative excess of `found` over `optimum` (0 when both are 0)."""
    if optimum == 0:
        return 0.0 if found == 0 else math.inf
    return (found - optimum) / optimum


def run_sweep(args: argparse.Namespace) -> None:
    from monet_ir.explore import sweep
    from monet_ir.files import complete_run

    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    check_backend(args)
    out = output_folder(args)
    files: list[str] = []
    with backend_session(args, jobs_given=args.jobs > 1):
        rows = sweep.run(args, out, progress=_say, files=files)
    complete_run(out, "monet sweep", files)
    sys.stdout.write(sweep.table(rows) + "\n")
    files = "sweep.csv, sweep.json" + ("" if args.no_plots else f", sweep.{args.plot_format}")
    sys.stdout.write(f"  wrote {out}/ {files}, designs/\n")
    failed = sweep.all_failed(rows)
    if failed:
        sys.stdout.flush()
        from monet_ir.explore.evaluate import ExploreError

        raise ExploreError(failed)

