"""POET's own solver against ours on POET's own problems, side by side.

For each POET architecture x platform (POET's `architectures` and `chipsets.py`, exported by
`bench/poet_side.py export` with POET's per-layer costs, in the stage order of POET's DFGraph),
and each RAM budget (fractions of the graph's store-all peak, POET's memory measure: node
outputs, parameters excluded) x runtime budget (POET's multiplier of the graph's total
runtime), the very same graph file goes to

- POET's MILP (`POETSolver`, PuLP + CBC, run by `bench/poet_side.py solve` in POET's own
  environment: `--poet-python`, see that file), and
- ours (`monet_ir.explore.staged.solve`, the same formulation on HiGHS: what
  `monet explore GRAPH.json --exact full --objective energy` runs),

with the same time limit, and prints optimal energy (J), status and solve time of each, whether
feasibility agrees and whether ours is at most POET's. Our schedules are re-checked by
`staged.evaluate` (an independent pass over the schedule's rules).

    python bench/bench_poet_vs_poet.py [--models linear,vgg16_cifar,resnet18_cifar] [--platforms m4,a72]
        [--ram 0.7,0.4] [--runtime 1.5] [--time-limit 60] [--poet-python /work/venvs/poet/bin/python]
        [--work DIR] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SIDE = Path(__file__).resolve().parent / "poet_side.py"


def side(python: str, *argv: str, timeout: float) -> dict:
    run = subprocess.run([python, str(SIDE), *argv], capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise RuntimeError(f"poet_side {' '.join(argv[:2])}: {run.stderr.strip().splitlines()[-1:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def poet_status(result: dict) -> str:
    if result["finished"]:
        return "optimal" if result["feasible"] else "infeasible"
    return "time limit (best feasible)" if result["feasible"] else "time limit (none found)"


def main() -> None:
    from monet_ir.explore import graph_files, staged

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="linear,vgg16_cifar,resnet18_cifar")
    parser.add_argument("--platforms", default="m4,a72")
    parser.add_argument("--ram", default="0.7,0.4", help="RAM budgets as fractions of the store-all peak")
    parser.add_argument("--runtime", default="1.5", help="runtime budgets (POET's multiplier of the total runtime)")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--poet-python", default="/work/venvs/poet/bin/python")
    parser.add_argument("--work", help="folder for the exported graphs (default: a temporary one)")
    parser.add_argument("--json", help="write every row here")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="poet_vs_poet_"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    header = (f"| model | platform | nodes | RAM budget (B) | runtime x | POET energy (J) | POET status | POET s | "
              f"ours energy (J) | ours status | ours s | ours / POET | feasibility agrees | ours <= POET |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for model in args.models.split(","):
        for platform in args.platforms.split(","):
            path = work / f"{model}_{platform}.json"
            if not path.exists():
                side(args.poet_python, "export", "--model", model, "--platform", platform, "--out", str(path),
                     timeout=600)
            graph = graph_files.load_graph(path)
            peak = staged.evaluate(graph, graph.store_all()).peak
            total = sum(graph.cost)
            for fraction in (float(f) for f in args.ram.split(",")):
                budget = round(fraction * peak)
                for runtime in (float(r) for r in args.runtime.split(",")):
                    start = time.perf_counter()
                    try:
                        theirs = side(args.poet_python, "solve", str(path), "--ram-budget", str(budget),
                                      "--runtime-budget", str(runtime), "--time-limit", str(args.time_limit),
                                      timeout=args.time_limit * 10 + 600)
                        theirs["status"] = poet_status(theirs)
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        theirs = {"status": f"error: {e}", "feasible": False, "solve_seconds": math.nan}
                    theirs["wall_seconds"] = time.perf_counter() - start
                    ours = staged.solve(graph, budget, runtime * total, objective="energy", time_limit=args.time_limit)
                    if ours.feasible:
                        check = staged.evaluate(graph, ours.schedule)
                        assert check.peak <= budget + 1e-6 and check.cost <= runtime * total * (1 + 1e-9)
                    if ours.feasible and not theirs.get("feasible"):
                        # does POET's own formulation accept our schedule? (then its "infeasible" is wrong)
                        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                            json.dump(ours.schedule.as_json(graph), f)
                        try:
                            theirs["accepts_ours"] = side(args.poet_python, "check", str(path), f.name, "--ram-budget",
                                                          str(budget), "--runtime-budget", str(runtime),
                                                          timeout=1800)["accepted"]
                        finally:
                            Path(f.name).unlink()
                    e_theirs = theirs.get("energy", math.nan)
                    agree = ours.feasible == bool(theirs.get("feasible"))
                    if theirs["status"] == "infeasible" and theirs.get("accepts_ours"):
                        theirs["status"] = "reported infeasible; accepts ours"
                    both_done = ours.status in ("optimal", "infeasible") and theirs["status"] in ("optimal", "infeasible")
                    not_above = (not theirs.get("feasible")) or (ours.feasible and ours.energy <= e_theirs * (1 + 1e-6))
                    ratio = ours.energy / e_theirs if ours.feasible and theirs.get("feasible") else math.nan
                    row = {"model": model, "platform": platform, "nodes": graph.size, "ram_budget": budget,
                           "ram_fraction": fraction, "runtime": runtime, "poet": theirs,
                           "ours": {"status": ours.status, "energy": ours.energy, "seconds": ours.seconds,
                                    "build_seconds": ours.build_seconds, "recomputations": ours.recomputations,
                                    "page_ins": ours.page_ins, "page_outs": ours.page_outs},
                           "feasibility_agrees": agree if both_done else None, "ours_not_above": not_above}
                    rows.append(row)
                    show = lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.6g}"  # noqa: E731
                    print(f"| {model} | {platform} | {graph.size} | {budget:,} ({fraction:g}) | {runtime:g} | "
                          f"{show(e_theirs)} | {theirs['status']} | {theirs.get('solve_seconds', math.nan):.1f} | "
                          f"{show(ours.energy if ours.feasible else None)} | {ours.status} | {ours.seconds:.1f} | "
                          f"{show(ratio)} | {('yes' if agree else 'no') if both_done else 'n/a'} | "
                          f"{'yes' if not_above else 'NO'} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    settled = [r for r in rows if r["feasibility_agrees"] is not None]
    print(f"ours <= POET on {sum(r['ours_not_above'] for r in rows)} of {len(rows)}; feasibility agrees on "
          f"{sum(r['feasibility_agrees'] for r in settled)} of {len(settled)} where both finished")


if __name__ == "__main__":
    main()
