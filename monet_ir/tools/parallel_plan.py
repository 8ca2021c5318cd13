"""`monet plan MODEL --system SYS`: the fastest parallel plan that fits, by exhaustive search.

Plans: every dp x pp with dp * pp = the system's chips (tensor parallelism is not implemented
yet, tp = 1), the ZeRO stages of `--zero` (0 only when dp = 1), the micro-batch counts of
`--microbatches` with both pipeline schedules when pp > 1 (1 when pp = 1: there micro-batches
would be gradient accumulation, which does not change the time per sample). Each (dp, pp, zero) is built and scheduled once
(`stage_steps`); micro-batch counts and schedules only re-run the pipeline (`combine`). A plan
processes dp x microbatches x (the model's batch) samples per step; plans are ranked by time
per sample among those that fit every chip's DRAM, and the table lists every plan evaluated.
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


def search_plans(args: Any, progress: Any) -> dict[str, Any]:
    from monet_ir.emit.parallel_report import parallel_report
    from monet_ir.options import parse_dims
    from monet_ir.parallel.pipeline import combine, stage_steps
    from monet_ir.parallel.plan import Plan
    from monet_ir.parallel.stages import StageError
    from monet_ir.schedule.scheduler import ScheduleError
    from monet_ir.tools.parallel_report import build_parallel_step
    from targets.precision_choice import choose_precision
    from targets.system import get_system

    t0 = time.perf_counter()
    system = get_system(args.system, precision=args.precision)
    choice = choose_precision(system.chip, args.precision)
    try:
        counts = sorted({int(v) for v in args.microbatches.split(",") if v.strip()})
    except ValueError:
        raise UsageError(f"--microbatches {args.microbatches}: expected positive integers separated by commas") from None
    if not counts or counts[0] < 1:
        raise UsageError(f"--microbatches {args.microbatches}: expected positive integers separated by commas")
    try:
        zeros = sorted({int(v) for v in args.zero.split(",") if v.strip()})
    except ValueError:
        zeros = []
    if not zeros or not set(zeros) <= {0, 1, 2, 3}:
        raise UsageError(f"--zero {args.zero}: expected ZeRO stages 0, 1, 2 or 3 separated by commas")
    rows = []
    for pp in divisors(system.chips):
        dp = system.chips // pp
        for zero in (zeros if dp > 1 else [0]):
            base = Plan(dp=dp, pp=pp, zero=zero, bucket=args.bucket)
            progress.step(f"dp={dp} pp={pp} zero={zero}: building and scheduling")
            try:
                module, _ = build_parallel_step(args.model, base, dims=parse_dims(args.dim), loss=args.loss,
                                                labels=args.labels, optimizer=args.optimizer, lr=args.lr)
                steps = stage_steps(module, system, base, choice.bits)
            except (ScheduleError, StageError) as e:  # this plan does not fit or cannot be cut
                rows.append({"dp": dp, "pp": pp, "zero": zero, "microbatches": None, "schedule": None,
                             "fits": False, "error": str(e).splitlines()[0]})
                continue
            for m in (counts if pp > 1 else [1]):
                for schedule in (("1f1b", "gpipe") if pp > 1 else ("1f1b",)):
                    plan = Plan(dp=dp, pp=pp, zero=zero, microbatches=m, schedule=schedule, bucket=args.bucket)
                    report = parallel_report(combine(steps, system, plan, schedule))
                    samples = dp * m
                    mem = report["memory_per_device"]
                    rows.append({"dp": dp, "pp": pp, "zero": zero, "microbatches": m,
                                 "schedule": schedule if pp > 1 else "none",
                                 "step_s": report["latency_s"], "samples_per_step": samples,
                                 "s_per_sample": report["latency_s"] / samples,
                                 "bubble_fraction": report["bubble_fraction"],
                                 "exposed_comm_s": report["communication"]["exposed_s"],
                                 "network_energy_share": report["energy_breakdown_pj"]["network"] / report["energy_pj"],
                                 "memory_bytes": mem["total_bytes"], "dram_peak_bytes": mem["dram_peak_bytes"],
                                 "capacity_bytes": mem["capacity_bytes"], "fits": mem["fits"], "error": ""})
    fitting = [r for r in rows if r["fits"]]
    best = min(fitting, key=lambda r: (r["s_per_sample"], r["memory_bytes"])) if fitting else None
    return {"model": Path(args.model).name, "system": system.name, "chips": system.chips,
            "precision": choice.name, "search_s": time.perf_counter() - t0, "best": best, "plans": rows}


def plan_text(result: dict[str, Any]) -> str:
    lines = [f"MONET parallel plans: {result['model']} on {result['system']} ({result['chips']} chips, "
             f"{result['precision']}), {len(result['plans'])} plans in {result['search_s']:.1f} s"]
    lines.append(f"  {'dp':>3}{'pp':>4}{'zero':>5}{'mb':>4} {'sched':<6}{'step ms':>11}{'ms/sample':>11}{'bubble':>8}"
                 f"{'exposed ms':>11}{'memory MB':>11}  fits")
    ok = [r for r in result["plans"] if not r["error"]]
    for r in sorted(ok, key=lambda r: (not r["fits"], r["s_per_sample"])):  # the fitting plans first
        mark = " <- best" if r is result["best"] or r == result["best"] else ""
        lines.append(f"  {r['dp']:>3}{r['pp']:>4}{r['zero']:>5}{r['microbatches']:>4} {r['schedule']:<6}"
                     f"{r['step_s'] * 1e3:>11.4g}{r['s_per_sample'] * 1e3:>11.4g}{r['bubble_fraction'] * 100:>7.1f}%"
                     f"{r['exposed_comm_s'] * 1e3:>11.4g}{r['memory_bytes'] / 1e6:>11,.0f}  {'yes' if r['fits'] else 'no'}{mark}")
    for r in result["plans"]:
        if r["error"]:
            lines.append(f"  {r['dp']:>3}{r['pp']:>4}{r['zero']:>5}   -  does not run: {r['error']}")
    if result["best"] is None:
        lines.append("  no plan fits")
    return "\n".join(lines) + "\n"


def run_plan(args: Any, progress: Any) -> None:
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create directory: {e.strerror}") from None
    if args.precision and ("=" in args.precision or args.precision.lower().startswith("mx")):
        raise UsageError(f"--precision {args.precision}: per-class and MX precision policies do not go with --system yet")
    result = search_plans(args, progress)
    (out / "plans.json").write_text(json.dumps(result, indent=1) + "\n")
    text = plan_text(result)
    (out / "plans.txt").write_text(text)
    sys.stdout.write(text)
