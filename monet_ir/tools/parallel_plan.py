"""`monet plan MODEL --system SYS` (also `monet explore MODEL --system SYS --search parallel`):
the fastest parallel plan that fits, by exhaustive search.

Plans: every dp x tp x pp = the system's chips, tp from `--tp` (default: every divisor of the
chips of one node on a hierarchical network, of all chips otherwise: a tensor-parallel group
stays on the fast links), the ZeRO stages of `--zero` (0 only when dp = 1), the micro-batch
counts of `--microbatches` with both pipeline schedules when pp > 1 (1 when pp = 1: there
micro-batches would be gradient accumulation, which does not change the time per sample). Each
(dp, tp, pp, zero) is built and scheduled once (`stage_steps`); micro-batch counts and
schedules only re-run the pipeline (`combine`). A plan processes dp x microbatches x (the
model's batch) samples per step; plans are ranked by time per sample among those that fit
every chip's DRAM; the *front* is the fitting plans no other fitting plan beats in both time
per sample and memory per chip; the table lists every plan evaluated, and those that cannot
run (tp does not divide the heads, a stage cut is impossible, the chip's schedule does not fit)
with the reason.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _counts(text: str, option: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        values = []
    if not values or values[0] < 1:
        raise UsageError(f"{option} {text}: expected positive integers separated by commas")
    return values


def tp_degrees(args: Any, system: Any) -> list[int]:
    """The tensor-parallel degrees searched: `--tp`, else the divisors of a node's chips (of all
    chips without nodes)."""
    text = getattr(args, "tp", None)
    if text:
        values = _counts(text, "--tp")
        bad = [t for t in values if system.chips % t]
        if bad:
            raise UsageError(f"--tp {text}: {bad[0]} does not divide the {system.chips} chips of {system.name}")
        return values
    node = system.network.node_chips or system.chips
    return [t for t in divisors(system.chips) if node % t == 0]


def front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fitting plans no other fitting plan beats in time per sample and memory per chip."""
    fitting = sorted((r for r in rows if r.get("fits")), key=lambda r: (r["s_per_sample"], r["memory_bytes"]))
    out: list[dict[str, Any]] = []
    for r in fitting:
        if not out or r["memory_bytes"] < out[-1]["memory_bytes"]:
            out.append(r)
    return out


def search_plans(args: Any, progress: Any) -> dict[str, Any]:
    from monet_ir.parallel.pipeline import stage_steps
    from monet_ir.parallel.plan import Plan
    from monet_ir.parallel.stages import StageError
    from monet_ir.pipeline import StepOptions, resolve
    from monet_ir.schedule.scheduler import ScheduleError
    from monet_ir.tools.parallel_report import PlanError, build_parallel_step

    t0 = time.perf_counter()
    command = "explore" if getattr(args, "command", "plan") == "explore" else "plan"
    resolved = resolve(StepOptions.from_args(args, command), plans_searched=True)
    system, choice = resolved.system, resolved.precision
    counts = _counts(args.microbatches, "--microbatches")
    tps = tp_degrees(args, system)
    try:
        zeros = sorted({int(v) for v in args.zero.split(",") if v.strip()})
    except ValueError:
        zeros = []
    if not zeros or not set(zeros) <= {0, 1, 2, 3}:
        raise UsageError(f"--zero {args.zero}: expected ZeRO stages 0, 1, 2 or 3 separated by commas")
    rows = []
    unsplittable: dict[int, str] = {}  # tp -> why the model cannot be split that way
    for tp in tps:
        for pp in divisors(system.chips // tp):
            dp = system.chips // (tp * pp)
            for zero in (zeros if dp > 1 else [0]):
                base = Plan(dp=dp, tp=tp, pp=pp, zero=zero, bucket=args.bucket)
                if tp in unsplittable:
                    rows.append({"dp": dp, "tp": tp, "pp": pp, "zero": zero, "microbatches": None, "schedule": None,
                                 "fits": False, "error": unsplittable[tp]})
                    continue
                progress.step(f"dp={dp} tp={tp} pp={pp} zero={zero}: building and scheduling")
                try:
                    module = build_parallel_step(resolved, base).module
                    steps = stage_steps(module, system, base, choice.bits)
                except (ScheduleError, StageError, PlanError) as e:  # does not fit, cannot be cut or split
                    why = str(e).splitlines()[0]
                    if isinstance(e, PlanError):
                        why = e.reason
                        if why.startswith(f"tp={tp}"):  # the same for every plan with this tp
                            unsplittable[tp] = why
                    rows.append({"dp": dp, "tp": tp, "pp": pp, "zero": zero, "microbatches": None, "schedule": None,
                                 "fits": False, "error": why})
                    continue
                rows.extend(_rows(steps, system, dp, tp, pp, zero, counts, args.bucket))
    fitting = [r for r in rows if r["fits"]]
    best = min(fitting, key=lambda r: (r["s_per_sample"], r["memory_bytes"])) if fitting else None
    return {"model": Path(args.model).name, "system": system.name, "chips": system.chips,
            "precision": choice.name, "search_s": time.perf_counter() - t0, "best": best, "front": front(rows),
            "plans": rows}


def _rows(steps, system, dp: int, tp: int, pp: int, zero: int, counts: list[int], bucket: int) -> list[dict[str, Any]]:
    from monet_ir.emit.parallel_report import parallel_report
    from monet_ir.parallel.pipeline import combine
    from monet_ir.parallel.plan import Plan

    rows = []
    for m in (counts if pp > 1 else [1]):
        for schedule in (("1f1b", "gpipe") if pp > 1 else ("1f1b",)):
            plan = Plan(dp=dp, tp=tp, pp=pp, zero=zero, microbatches=m, schedule=schedule, bucket=bucket)
            report = parallel_report(combine(steps, system, plan, schedule))
            samples = dp * m
            mem = report["memory_per_device"]
            rows.append({"dp": dp, "tp": tp, "pp": pp, "zero": zero, "microbatches": m,
                         "schedule": schedule if pp > 1 else "none",
                         "step_s": report["latency_s"], "samples_per_step": samples,
                         "s_per_sample": report["latency_s"] / samples,
                         "bubble_fraction": report["bubble_fraction"],
                         "exposed_comm_s": report["communication"]["exposed_s"],
                         "network_energy_share": report["energy_breakdown_pj"]["network"] / report["energy_pj"],
                         "memory_bytes": mem["total_bytes"], "dram_peak_bytes": mem["dram_peak_bytes"],
                         "capacity_bytes": mem["capacity_bytes"], "fits": mem["fits"], "error": ""})
    return rows


def plan_text(result: dict[str, Any]) -> str:
    precision = result["precision"] or "the model's element types"  # None: no --precision, no target default
    lines = [f"MONET parallel plans: {result['model']} on {result['system']} ({result['chips']} chips, "
             f"{precision}), {len(result['plans'])} plans in {result['search_s']:.1f} s"]
    lines.append(f"  {'dp':>3}{'tp':>4}{'pp':>4}{'zero':>5}{'mb':>4} {'sched':<6}{'step ms':>11}{'ms/sample':>11}"
                 f"{'bubble':>8}{'exposed ms':>11}{'memory MB':>11}  fits")
    on_front = {id(r) for r in result.get("front", [])}
    ok = [r for r in result["plans"] if not r["error"]]
    for r in sorted(ok, key=lambda r: (not r["fits"], r["s_per_sample"])):  # the fitting plans first
        mark = " <- best" if r is result["best"] or r == result["best"] else (" front" if id(r) in on_front else "")
        lines.append(f"  {r['dp']:>3}{r.get('tp', 1):>4}{r['pp']:>4}{r['zero']:>5}{r['microbatches']:>4} {r['schedule']:<6}"
                     f"{r['step_s'] * 1e3:>11.4g}{r['s_per_sample'] * 1e3:>11.4g}{r['bubble_fraction'] * 100:>7.1f}%"
                     f"{r['exposed_comm_s'] * 1e3:>11.4g}{r['memory_bytes'] / 1e6:>11,.0f}  {'yes' if r['fits'] else 'no'}{mark}")
    for r in result["plans"]:
        if r["error"]:
            lines.append(f"  {r['dp']:>3}{r.get('tp', 1):>4}{r['pp']:>4}{r['zero']:>5}   -  does not run: {r['error']}")
    if result["best"] is None:
        lines.append("  no plan fits")
    return "\n".join(lines) + "\n"


def front_text(result: dict[str, Any]) -> str:
    """The front (fastest per sample first) and the command that reports the best plan."""
    lines = [f"front: {len(result['front'])} plan(s) no other fitting plan beats in both time per sample and memory per chip"]
    for r in result["front"]:
        spec = f"dp={r['dp']},tp={r.get('tp', 1)},pp={r['pp']},zero={r['zero']},microbatches={r['microbatches']}"
        spec += f",schedule={r['schedule']}" if r["pp"] > 1 else ""
        lines.append(f"  {spec:<52}{r['s_per_sample'] * 1e3:>10.4g} ms/sample{r['memory_bytes'] / 1e6:>10,.0f} MB per chip")
    return "\n".join(lines) + "\n"


def run_plan(args: Any, progress: Any, explore: bool = False) -> None:
    from monet_ir.files import begin_run, complete_run, write_atomic

    out = begin_run(args.out)
    result = search_plans(args, progress)
    write_atomic(out / "plans.json", json.dumps(result, indent=1) + "\n")
    text = plan_text(result)
    write_atomic(out / "plans.txt", text)
    files = ["plans.json", "plans.txt"]
    if explore:
        write_atomic(out / "front.json", json.dumps(result["front"], indent=1) + "\n")
        files.append("front.json")
    complete_run(out, "monet explore --search parallel" if explore else "monet plan", files)
    if explore:
        sys.stdout.write(front_text(result))
    sys.stdout.write(text)


def run_explore_parallel(args: Any, progress: Any) -> None:
    """`monet explore MODEL --system SYS --search parallel`: the plan search of `monet plan`,
    writing plans.json, plans.txt and front.json to --out and printing the front, then every
    plan tried."""
    if not getattr(args, "system", None):
        raise UsageError("--search parallel needs --system (a multi-chip system: built-in name or system YAML)")
    if getattr(args, "target", None):
        raise UsageError("--search parallel searches a --system, not a --target")
    if getattr(args, "resume", None) or getattr(args, "backend", "local") != "local":
        raise UsageError("--search parallel runs in this process (no --resume, no --backend ray)")
    if not args.out:
        raise UsageError("--out is required")
    run_plan(args, progress, explore=True)
