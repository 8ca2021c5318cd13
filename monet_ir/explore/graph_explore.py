"""`monet explore GRAPH.json --exact full`: the stage-expanded MILP (`monet_ir.explore.staged`)
on a Checkmate or POET graph file (`monet_ir.explore.graph_files`).

- `--objective checkpoint` (default): Checkmate's problem, the least compute cost
  (`cost_cpu` summed over every computation, recomputations included) with the memory U within
  `--budget` (bytes of node outputs, parameters excluded as in Checkmate); no paging. Without
  `--budget`, five budgets from the largest single node's needs to the store-all peak.
- `--objective energy`: POET's problem, the least energy (compute, page-in and page-out
  energies of the file) within `--memory-budget` and, with `--time-budget`, a compute time
  (`cost_cpu` units); `--search checkpoint|paging|all` as for ONNX models.

Writes `milp.json` (per budget: status, objective, schedule per stage, solver time and size) and
`milp.csv`, and prints a table.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError
from monet_ir.explore import staged
from monet_ir.explore.graph_files import load_graph, write_json
from monet_ir.files import write_atomic


def is_graph_file(path: str) -> bool:
    return Path(path).suffix.lower() == ".json"


def default_budgets(graph: staged.StagedGraph, count: int = 5) -> list[float]:
    """`count` budgets from the least any stage needs (a node with its arguments) to the
    store-all schedule's peak."""
    low = max(graph.memory[v] + sum(graph.memory[u] for u in set(graph.args[v])) for v in range(graph.size))
    high = staged.evaluate(graph, graph.store_all()).peak
    if count <= 1 or high <= low:
        return [high]
    return sorted({round(low + (high - low) * i / (count - 1)) for i in range(count)})


def run(args: Any, out: Path, parse_size) -> str:
    if args.exact not in (None, False, "full"):
        raise UsageError(f"--exact {args.exact}: a graph file ({args.model}) is solved with the stage-expanded "
                         f"formulation only (--exact full)")
    try:
        graph = load_graph(args.model)
    except staged.StagedError as e:
        raise UsageError(str(e)) from None
    objective = "energy" if args.objective == "energy" else "cost"
    if args.objective == "schedule" and args.budget is None and args.memory_budget is not None:
        raise UsageError("--memory-budget applies to --objective energy (use --budget with --objective checkpoint)")
    time_limit = float(getattr(args, "time_limit", None) or 60.0)
    if objective == "energy":
        if args.memory_budget is None:
            raise UsageError("--objective energy needs --memory-budget BYTES")
        if not graph.has_energy or graph.page_in_energy is None or graph.page_out_energy is None:
            raise UsageError(f"{args.model}: --objective energy needs per-node compute_cost_joules, "
                             f"pagein_cost_joules and pageout_cost_joules")
        budgets = [float(parse_size(args.memory_budget, "--memory-budget"))]
        time_budget = math.inf if args.time_budget is None else float(args.time_budget)
        names = {n.strip() for n in (args.search or "all").split(",") if n.strip()}
        unknown = sorted(names - {"checkpoint", "paging", "all"})
        if unknown or not names:
            raise UsageError(f"--search {args.search}: --objective energy searches checkpoint, paging or all")
        recompute = "all" in names or "checkpoint" in names
        paging = "all" in names or "paging" in names
    else:
        if args.memory_budget is not None or args.time_budget is not None:
            raise UsageError("--memory-budget and --time-budget apply to --objective energy (use --budget)")
        budgets = [float(parse_size(args.budget, "--budget"))] if args.budget is not None else default_budgets(graph)
        time_budget, recompute, paging = math.inf, True, False
    solutions = [staged.solve(graph, b, time_budget, objective=objective, paging=paging, recompute=recompute,
                              time_limit=time_limit) for b in budgets]
    base = staged.evaluate(graph, graph.store_all())
    write_json({"graph": str(args.model), "nodes": graph.size, "forward_nodes": graph.backward.count(False),
                "edges": len(graph.edges), "store_all": {"cost": base.cost, "peak": base.peak,
                                                          "energy": None if math.isnan(base.energy) else base.energy},
                "solutions": [s.as_json(graph) for s in solutions]}, out / "milp.json")
    fields = ["budget", "status", "objective", "cost", "energy", "peak", "recomputations", "page_ins", "page_outs",
              "solve_seconds", "variables", "constraints"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    for s in solutions:
        writer.writerow([s.memory_budget, s.status, s.objective, s.cost, s.energy, s.peak, s.recomputations,
                         s.page_ins, s.page_outs, round(s.seconds, 4), s.variables, s.constraints])
    write_atomic(out / "milp.csv", buffer.getvalue())
    lines = [f"MONET stage-expanded MILP (Checkmate/POET formulation, HiGHS): {Path(args.model).name}, "
             f"{graph.size} nodes ({graph.backward.count(False)} forward), {len(graph.edges)} edges",
             f"  store-all: cost {base.cost:g}, peak {base.peak:g} B"
             + ("" if math.isnan(base.energy) else f", energy {base.energy:.6g}"),
             f"  {'budget':>12} {'status':<28} {'cost':>12} {'energy':>12} {'peak':>12} {'recomp':>6} {'in/out':>7} "
             f"{'seconds':>8}"]
    for s in solutions:
        energy = "" if math.isnan(s.energy) else f"{s.energy:.6g}"
        lines.append(f"  {s.memory_budget:>12g} {s.status:<28} {s.cost:>12g} {energy:>12} {s.peak:>12g} "
                     f"{s.recomputations:>6} {f'{s.page_ins}/{s.page_outs}':>7} {s.seconds:>8.2f}")
    lines.append(f"  wrote {out}/ milp.json, milp.csv")
    return "\n".join(lines) + "\n"
