"""`--exact full` against Checkmate's own MILP on graphs neither was tuned on.

Graphs (`monet_ir.explore.training_graphs`): Checkmate's linear chains (`gen_linear_graph`'s
shape, unit costs), U-nets (skip connections, sizes halving and doubling, random costs) and
random DAGs (random costs and bytes), each as a training graph. Budgets: `--budgets` points
from the least a node needs to the store-all peak. At each budget, the least compute cost of

- ours: `monet_ir.explore.staged.solve` (the formulation of `monet explore GRAPH.json --exact full`);
- Checkmate's: its own Gurobi solver (`solve_ilp_gurobi`, exact: no noise, no approximation;
  Gurobi's size-limited licence takes graphs up to about 13 nodes), and for larger graphs its
  formulation on CBC (POET's PuLP port of it with paging off), both run by `bench/poet_side.py
  checkmate` in a separate environment (`--poet-python`);

and whether ours is within 1 % (`--tolerance`) wherever Checkmate's solver reports a solution.

    python bench/bench_checkmate.py [--families linear,unet,dag] [--budgets 5] [--time-limit 60]
        [--poet-python /work/venvs/poet/bin/python] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SIDE = Path(__file__).resolve().parent / "poet_side.py"


def graphs(families: list[str]):
    from monet_ir.explore.training_graphs import linear_chain, random_dag, unet

    if "linear" in families:
        for n in (3, 4, 6, 8, 12, 16):
            yield linear_chain(n)
    if "unet" in families:
        for depth, seed in ((1, 0), (2, 1), (2, 2), (3, 3)):
            yield unet(depth, seed=seed)
    if "dag" in families:
        for forward, seed in ((4, 11), (5, 12), (6, 13), (8, 14), (10, 15), (12, 16)):
            yield random_dag(forward, seed)


def checkmate(python: str, path: Path, budget: float, time_limit: float, solver: str) -> dict:
    run = subprocess.run([python, str(SIDE), "checkmate", str(path), "--budget", str(budget), "--time-limit",
                          str(time_limit), "--solver", solver], capture_output=True, text=True,
                         timeout=time_limit * 10 + 300)
    if run.returncode != 0:
        return {"error": (run.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    from monet_ir.explore import graph_files, staged
    from monet_ir.explore.graph_explore import default_budgets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="linear,unet,dag")
    parser.add_argument("--budgets", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--poet-python", default="/work/venvs/poet/bin/python")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    print("| graph | nodes | budget | Checkmate solver | Checkmate cost | status | s | ours cost | status | s | "
          "within 1 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for graph in graphs(args.families.split(",")):
            path = Path(tmp) / f"{graph.source}.json"
            graph_files.write_json(graph_files.checkmate_json(graph), path)
            solver = "gurobi" if graph.size <= 13 else "cbc"
            for budget in default_budgets(graph, args.budgets):
                theirs = checkmate(args.poet_python, path, budget, args.time_limit, solver)
                if solver == "gurobi" and "error" in theirs and "too large" in theirs["error"]:
                    solver = "cbc"
                    theirs = checkmate(args.poet_python, path, budget, args.time_limit, solver)
                ours = staged.solve(graph, budget, paging=False, time_limit=args.time_limit)
                cost = theirs.get("cost")
                if "error" in theirs:
                    status = f"error: {theirs['error'][:60]}"
                elif solver == "cbc":
                    status = ("optimal" if theirs["feasible"] else "infeasible") if theirs["finished"] else \
                        ("time limit (best feasible)" if theirs["feasible"] else "time limit (none found)")
                else:
                    status = "optimal" if theirs["feasible"] else "infeasible"
                if cost is not None and ours.feasible:
                    within = ours.cost <= cost * (1 + args.tolerance) + 1e-9
                elif status == "infeasible" or (cost is not None and ours.status == "infeasible"):
                    within = status == "infeasible" and ours.status == "infeasible"  # must agree
                else:
                    within = None  # one side has no answer within the time limit: nothing to compare
                rows.append({"graph": graph.source, "nodes": graph.size, "budget": budget, "solver": solver,
                             "checkmate": theirs, "checkmate_status": status, "ours_cost": ours.cost if ours.feasible else None,
                             "ours_status": ours.status, "ours_seconds": ours.seconds, "within": within})
                show = lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:g}"  # noqa: E731
                print(f"| {graph.source} | {graph.size} | {budget:g} | {solver} | {show(cost)} | {status} | "
                      f"{theirs.get('solve_seconds', math.nan):.2f} | {show(ours.cost if ours.feasible else None)} | "
                      f"{ours.status} | {ours.seconds:.2f} | {'–' if within is None else ('yes' if within else 'NO')} |",
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    judged = [r for r in rows if r["within"] is not None]
    print(f"within {args.tolerance:.0%} of Checkmate's optimum (or both infeasible) on {sum(r['within'] for r in judged)} "
          f"of {len(judged)} (graph, budget) pairs")


if __name__ == "__main__":
    main()
