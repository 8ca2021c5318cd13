"""The other side of bench/bench_poet_vs_poet.py and bench/bench_checkmate.py: runs POET's and
Checkmate's own code, in a separate environment that has them (never a dependency of MONET):

    python3 -m venv /work/venvs/poet && /work/venvs/poet/bin/pip install pulp numpy pandas toposort loguru \\
        matplotlib graphviz gurobipy
    /work/venvs/poet/bin/pip install --no-deps -e POET_CHECKOUT -e CHECKMATE_CHECKOUT

(POET: github ShishirPatil/poet; Checkmate: github parasj/checkmate.) Commands, each printing
one JSON object on stdout:

    export --model resnet18_cifar --platform m4 --out FILE.json
        POET's architecture on POET's platform as a layer list with POET's per-layer costs
        (`get_net_costs`), in the order of the DFGraph POET builds (its stages)
    solve FILE.json --ram-budget BYTES [--runtime-budget X] [--paging 0|1] [--remat 0|1] [--time-limit S]
        POET's MILP (`POETSolver`, PuLP + CBC) on that graph; X multiplies the graph's total
        runtime, as in POET's `solve`
    check FILE.json SCHEDULE.json --ram-budget BYTES [--runtime-budget X]
        whether POET's own formulation accepts a schedule (its R, SRam, SSd, MIn, MOut fixed to the
        schedule's stages, as `monet_ir.explore.staged.Schedule.as_json` writes them by node name)
    checkmate FILE.json --budget BYTES [--time-limit S] [--solver gurobi|cbc]
        Checkmate's MILP: its own Gurobi solver (`solve_ilp_gurobi`, exact: no objective noise,
        no approximation; Gurobi's size-limited licence takes graphs of about 13 nodes) or
        its formulation on CBC (POET's solver with paging off and the compute cost as objective)

The graph files are those `monet_ir.explore.graph_files` reads (POET layers or Checkmate DFGraph
JSON), so both sides solve the very same problem.
"""

from __future__ import annotations

import argparse
import fractions
import json
import math
import sys
import time

import numpy as np

# Checkmate and POET were written for older Python and numpy
np.int = int  # type: ignore[attr-defined]
np.float = float  # type: ignore[attr-defined]
fractions.gcd = math.gcd  # type: ignore[attr-defined]


def export(model: str, platform: str, out: str) -> dict:
    from poet.power_computation import get_net_costs
    from poet.util import get_chipset_and_net, make_dfgraph_costs

    chipset, net = get_chipset_and_net(platform=platform, model=model, batch_size=1)
    g, cpu, page_in, page_out = make_dfgraph_costs(net=net, device=chipset)
    specs = get_net_costs(net, chipset)
    param_bytes = {"layer{}_{}".format(i, layer.__class__.__name__): specs["param_memory_bytes"][i]
                   for i, layer in enumerate(net)}
    layers = []
    for v in range(g.size):
        name = g.node_names[v]
        layers.append({"name": name, "depends_on": [g.node_names[u] for u in g.args[v]],
                       "backward": v in g.backward_nodes, "runtime_ms": float(g.cost_cpu[v]),
                       "memory_bytes": float(g.cost_ram[v]), "param_memory_bytes": float(param_bytes[name]),
                       "compute_cost_joules": float(cpu[v, 0]), "pagein_cost_joules": float(page_in[v, 0]),
                       "pageout_cost_joules": float(page_out[v, 0])})
    data = {"model": model, "platform": platform, "layers": layers}
    with open(out, "w") as f:
        json.dump(data, f, indent=1)
    return {"nodes": g.size, "forward": len(g.vfwd), "edges": len(g.edge_list),
            "total_runtime": float(sum(g.cost_cpu.values())), "forward_ram": float(sum(g.cost_ram[i] for i in g.vfwd))}


def finished(problem, solution) -> bool:
    """Whether CBC proved its answer (POET's `finished` trusts PuLP's status, which says Optimal
    for a run stopped at the time limit with a solution in hand: `sol_status` tells them apart)."""
    import pulp as pl

    if not solution.finished:
        return False
    return problem.status == pl.LpStatusInfeasible or problem.sol_status == pl.LpSolutionOptimal


def load(path: str):
    """The file as POET's DFGraph and cost vectors (the layer order is the stage order)."""
    from poet.utils.checkmate.core.dfgraph import DFGraph

    data = json.load(open(path))
    if "layers" in data:
        layers = data["layers"]
        index = {layer["name"]: v for v, layer in enumerate(layers)}
        args = {v: [index[d] for d in layer["depends_on"]] for v, layer in enumerate(layers)}
        g = DFGraph(args=args, v=list(range(len(layers))),
                    backward_nodes=[v for v, layer in enumerate(layers) if layer["backward"]],
                    cost_cpu={v: layer["runtime_ms"] for v, layer in enumerate(layers)},
                    cost_ram={v: layer["memory_bytes"] for v, layer in enumerate(layers)},
                    node_names={v: layer["name"] for v, layer in enumerate(layers)})
        column = lambda key: np.asarray([layer[key] for layer in layers], dtype=float).reshape((-1, 1))  # noqa: E731
        return g, column("compute_cost_joules"), column("pagein_cost_joules"), column("pageout_cost_joules")
    n = len(data["v"])
    table = lambda key: {int(k): v for k, v in data.get(key, {}).items()}  # noqa: E731
    cost_cpu = table("cost_cpu") or {v: 1 for v in range(n)}
    g = DFGraph(args={int(k): v for k, v in data["args"].items()}, v=list(range(n)),
                backward_nodes=data.get("backward_nodes", []), cost_cpu=cost_cpu,
                cost_ram=table("cost_ram") or {v: 1 for v in range(n)})
    cpu = np.asarray([cost_cpu[v] for v in range(n)], dtype=float).reshape((-1, 1))
    return g, cpu, np.zeros((n, 1)), np.zeros((n, 1))


def solve(path: str, ram_budget: float, runtime_budget: float | None, paging: int, remat: int,
          time_limit: float, energy_scale: float = 1.0) -> dict:
    from poet.poet_solver import POETSolver

    g, cpu, page_in, page_out = load(path)
    cpu, page_in, page_out = cpu * energy_scale, page_in * energy_scale, page_out * energy_scale
    total_runtime = float(sum(g.cost_cpu.values()))
    runtime_ms = None if runtime_budget is None else runtime_budget * total_runtime
    start = time.perf_counter()
    solver = POETSolver(g=g, cpu_power_cost_vec_joule=cpu, pagein_power_cost_vec_joule=page_in,
                        pageout_power_cost_vec_joule=page_out, ram_budget_bytes=ram_budget,
                        runtime_budget_ms=runtime_ms, paging=paging, remat=remat, solver="pulp-cbc",
                        time_limit_s=time_limit, solve_threads=1)
    build = time.perf_counter() - start
    solution = solver.solve()
    out = {"feasible": bool(solution.feasible), "finished": finished(solver.m, solution),
           "solve_seconds": solution.solve_time_s, "build_seconds": build, "runtime_budget": runtime_ms}
    if solution.feasible and solution.R is not None:
        R, Min, Mout = (np.asarray(x, dtype=float) for x in (solution.R, solution.Min, solution.Mout))
        cost_vec = np.asarray([g.cost_cpu[v] for v in range(g.size)], dtype=float)
        out.update({"energy": float(np.sum(R @ cpu) + np.sum(Min @ page_in) + np.sum(Mout @ page_out)) / energy_scale,
                    "compute_energy": float(np.sum(R @ cpu)) / energy_scale,
                    "page_energy": float(np.sum(Min @ page_in + Mout @ page_out)) / energy_scale,
                    "runtime": float(np.sum(R @ cost_vec)), "recomputations": int(R.sum() - g.size),
                    "page_ins": int(Min.sum()), "page_outs": int(Mout.sum())})
    return out


def check(path: str, schedule_path: str, ram_budget: float, runtime_budget: float | None) -> dict:
    import pulp as pl
    from poet.poet_solver import POETSolver

    g, cpu, page_in, page_out = load(path)
    index = {name: v for v, name in g.node_names.items()} if g.node_names else {}
    stages = json.load(open(schedule_path))
    total_runtime = float(sum(g.cost_cpu.values()))
    solver = POETSolver(g=g, cpu_power_cost_vec_joule=cpu, pagein_power_cost_vec_joule=page_in,
                        pageout_power_cost_vec_joule=page_out, ram_budget_bytes=ram_budget,
                        runtime_budget_ms=None if runtime_budget is None else runtime_budget * total_runtime,
                        paging=1, remat=1, solver="pulp-cbc", time_limit_s=600, solve_threads=1)
    for t, stage in enumerate(stages):
        for key, var in (("computed", solver.R), ("kept", solver.SRam), ("stored", solver.SSd),
                         ("page_in", solver.MIn), ("page_out", solver.MOut)):
            on = {index.get(n, n) if isinstance(n, str) else n for n in stage.get(key, [])}
            for i in range(g.size):
                solver.m += var[t][i] == (1 if i in on else 0)
    solution = solver.solve()
    return {"accepted": bool(solution.feasible), "status": pl.LpStatus[solver.m.status]}


def checkmate(path: str, budget: float, time_limit: float, solver: str) -> dict:
    g, cpu, _, _ = load(path)
    if solver == "cbc":
        result = solve_cbc_checkmate(g, cpu, budget, time_limit)
        return result
    from checkmate.core.dfgraph import DFGraph
    from checkmate.core.solvers.gurobi_solver import solve_ilp_gurobi

    cg = DFGraph(args=dict(g.args), v=g.v, backward_nodes=g.backward_nodes, cost_cpu=g.cost_cpu, cost_ram=g.cost_ram)
    start = time.perf_counter()
    result = solve_ilp_gurobi(cg, budget, print_to_console=False, approx=False, eps_noise=0, time_limit=time_limit,
                              solver_cores=1)
    seconds = time.perf_counter() - start
    out = {"feasible": bool(result.feasible), "solve_seconds": result.solve_time_s or seconds, "solver": "gurobi"}
    if result.feasible:
        out["cost"] = float(result.schedule_aux_data.cpu)
    return out


def solve_cbc_checkmate(g, cpu, budget: float, time_limit: float) -> dict:
    from poet.poet_solver import POETSolver

    zeros = np.zeros_like(cpu)
    solver = POETSolver(g=g, cpu_power_cost_vec_joule=cpu, pagein_power_cost_vec_joule=zeros,
                        pageout_power_cost_vec_joule=zeros, ram_budget_bytes=budget, runtime_budget_ms=None,
                        paging=0, remat=1, solver="pulp-cbc", time_limit_s=time_limit, solve_threads=1)
    solution = solver.solve()
    out = {"feasible": bool(solution.feasible), "finished": finished(solver.m, solution),
           "solve_seconds": solution.solve_time_s, "solver": "cbc"}
    if solution.feasible and solution.R is not None:
        out["cost"] = float(np.sum(np.asarray(solution.R, dtype=float) @ cpu))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--model", required=True)
    p.add_argument("--platform", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("solve")
    p.add_argument("graph")
    p.add_argument("--ram-budget", type=float, required=True)
    p.add_argument("--runtime-budget", type=float)
    p.add_argument("--paging", type=int, default=1)
    p.add_argument("--remat", type=int, default=1)
    p.add_argument("--time-limit", type=float, default=600)
    p.add_argument("--energy-scale", type=float, default=1.0,
                   help="multiply the energies handed to the solver (reported in J again)")
    p = sub.add_parser("checkmate")
    p.add_argument("graph")
    p.add_argument("--budget", type=float, required=True)
    p.add_argument("--time-limit", type=float, default=600)
    p.add_argument("--solver", default="gurobi", choices=["gurobi", "cbc"])
    p = sub.add_parser("check")
    p.add_argument("graph")
    p.add_argument("schedule")
    p.add_argument("--ram-budget", type=float, required=True)
    p.add_argument("--runtime-budget", type=float)
    args = parser.parse_args()
    if args.command == "check":
        result = check(args.graph, args.schedule, args.ram_budget, args.runtime_budget)
    elif args.command == "export":
        result = export(args.model, args.platform, args.out)
    elif args.command == "solve":
        result = solve(args.graph, args.ram_budget, args.runtime_budget, args.paging, args.remat, args.time_limit,
                       args.energy_scale)
    else:
        result = checkmate(args.graph, args.budget, args.time_limit, args.solver)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
