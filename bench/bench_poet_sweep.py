"""Energy against the main-memory budget with recompute only, paging only and both (POET's
figure), by the exact MILP of monet_ir/explore/poet.py, each answer re-scheduled by the real
scheduler (`poet.solve_measured`).

    python bench/bench_poet_sweep.py [--models DIR] [--out DIR] [--time-factor 2.0]
        [--workload NAME=MODEL.onnx ...] [--targets cortex_m_mcu] [--capacity-fractions 1.0]

Workloads: ResNet-18 at batch 8 (the shared resnet18_b1.onnx with its batch set to 8) and
GPT-2 small at batch 1, Adam, on `cortex_a_board` and `cortex_m_mcu`. Budgets: on a target
whose main memory holds the store-all step, fractions of that step's main-memory peak, from 1.0
down; on one where it does not (the MCU: 256 KiB of SRAM against hundreds of MB), fractions of
main memory's capacity. Latency budget: `--time-factor` times store-all's (scheduled with main
memory's capacity lifted when it does not fit). Paging covers the saved activations (page,
keep in storage) and every other tensor the model may keep in storage (parameters, Adam state,
the batch, gradients). Writes poet_sweep.json and one energy-vs-budget plot per workload and
target, and prints a table (model energy; the schedule's energy, peak and latency of the
MILP's answer).

The curves: the MILP's model is an estimate off chains, so each answer is scheduled, and the
energy at a budget is the least scheduled energy among the plans of that decision space that
the scheduler found within the budgets (store-all, every answer at this or a smaller budget, and
for "both" the answers of the two narrower spaces too, which are plans of its space): what a
user running the solver at each budget and keeping the best scheduled plan gets.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from shared_path import SHARED

FRACTIONS = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]  # of the store-all peak
CAPACITY_FRACTIONS = [1.0, 0.875, 0.75, 0.625, 0.5]  # of main memory, when store-all does not fit
MODES = {"recompute only": (True, False), "paging only": (False, True), "both": (True, True)}


def resnet18_b8(models: Path, folder: Path) -> Path:
    import onnx

    model = onnx.load(models / "resnet18_b1.onnx", load_external_data=False)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 8
    for output in model.graph.output:
        output.type.tensor_type.shape.dim[0].dim_value = 8
    del model.graph.value_info[:]
    path = folder / "resnet18_b8.onnx"
    onnx.save(model, path)
    return path


def main() -> None:
    from monet_ir.explore import poet
    from monet_ir.explore.evaluate import Evaluator, StepConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(SHARED / "models"))
    parser.add_argument("--out", default="poet_sweep")
    parser.add_argument("--time-factor", type=float, default=10.0)
    parser.add_argument("--only", default="", help="workload:target pairs to run, comma-separated")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workload", action="append", default=[], metavar="NAME=MODEL.onnx",
                        help="run these workloads instead of the default two (repeat the option)")
    parser.add_argument("--targets", default="cortex_a_board,cortex_m_mcu")
    parser.add_argument("--capacity-fractions", default=",".join(map(str, CAPACITY_FRACTIONS)),
                        help="budgets, as fractions of main memory, where store-all does not fit it")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = Path(args.models)
    tmp = Path(tempfile.mkdtemp())
    if args.workload:
        workloads = dict(w.split("=", 1) for w in args.workload)
    else:
        workloads = {"resnet18_b8": resnet18_b8(models, tmp), "gpt2_small_b1": models / "gpt2_small_b1.onnx"}
    results = []
    only = {tuple(pair.split(":")) for pair in args.only.split(",") if pair}
    for name, path in workloads.items():
        for target in args.targets.split(","):
            if only and (name, target) not in only:
                continue
            start = time.perf_counter()
            try:
                evaluator = Evaluator(StepConfig(model=str(path), target=target))
                base = poet.measure(evaluator, {})
                capacity = evaluator.target.dram.capacity_bytes
                fits = base["peak_bytes"] <= capacity
                # where the step does not fit main memory every tensor streams through it: the
                # tile trades main memory (a buffer per operand) against re-reads (energy)
                page = evaluator.target.storage.page_bytes or 1
                tiles = [None] if fits else [int(capacity // k) // page * page for k in (8, 16)]
                models = [poet.build_model(evaluator, tile) for tile in tiles]
                model = models[0]
            except Exception as e:  # noqa: BLE001 (a step the target cannot run: recorded)
                reason = str(e).strip().splitlines()[0]
                print(f"{name} on {target}: no store-all schedule: {reason}")
                results.append({"model": name, "target": target, "error": reason})
                continue
            reference = base["peak_bytes"] if fits else capacity
            fractions = FRACTIONS if fits else [float(f) for f in args.capacity_fractions.split(",")]
            time_budget = args.time_factor * base["latency_cycles"]
            print(f"\n{name} on {target}: store-all {base['energy_pj'] / 1e9:.1f} mJ, "
                  f"{base['latency_cycles']:,.0f} cycles, '{model.budgeted}' peak {base['peak_bytes']:,.0f} B; "
                  f"latency budget {time_budget:,.0f} cycles; {len(model.genes)} genes, {len(model.homes)} tensor names "
                  f"that may be kept in storage, {model.points} ops" + (f"; tiles {[m.tile for m in models]}" if len(models) > 1 else ""))
            print(f"  {'budget':>7} {'mode':<15} {'status':<12} {'model mJ':>10} {'measured mJ':>12} "
                  f"{'peak B':>13} {'latency':>15} {'paged B':>12} {'s':>6}")
            rows = []
            for fraction in fractions:
                budget = fraction * reference
                for (mode, (recompute, page)), model in ((m, t) for m in MODES.items() for t in models):
                    if not page and model is not models[0]:
                        continue  # the tile matters only to tensors kept in storage
                    t0 = time.perf_counter()
                    sol = poet.solve_measured(evaluator, model, budget, time_budget, recompute=recompute, page=page,
                                              time_limit=args.time_limit)
                    seconds = time.perf_counter() - t0
                    meets = bool(sol.measured) and sol.measured["peak_bytes"] <= budget and \
                        sol.measured["latency_cycles"] <= time_budget
                    row = {"fraction": fraction, "budget": budget, "time_budget": time_budget, "mode": mode,
                           "status": sol.status,
                           "model_energy_pj": sol.energy_pj if sol.decisions else None,
                           "measured": sol.measured, "meets_budgets": meets, "plan": sol.plan(),
                           "storage": model.stored_names(sol.decisions, sol.stored) if sol.decisions else [],
                           "tile_bytes": model.tile if page else None, "seconds": seconds, "rounds": sol.rounds}
                    rows.append(row)
                    m = sol.measured
                    print(f"  {fraction:>7.3f} {mode + (f' t{model.tile >> 10}K' if len(models) > 1 and page else ''):<15} "
                          f"{sol.status.split(';')[0][:12]:<12} "
                          f"{(sol.energy_pj / 1e9 if sol.decisions else math.nan):>10.1f} "
                          f"{(m['energy_pj'] / 1e9 if m else math.nan):>12.1f} "
                          f"{(m['peak_bytes'] if m else math.nan):>13,.0f} {(m['latency_cycles'] if m else math.nan):>15,.0f} "
                          f"{(m['paged_bytes'] if m else math.nan):>12,.0f} {seconds:>6.1f}")
                    sys.stdout.flush()
            curves = best_scheduled(rows, base, fractions, reference)
            print(f"  least scheduled energy within each budget (mJ; '-' = no plan found), budgets as fractions of "
                  f"{'the store-all peak' if fits else 'main memory'} ({reference:,.0f} B):")
            print(f"  {'budget':>7} " + " ".join(f"{mode:>15}" for mode in MODES))
            for fraction in fractions:
                cells = [curves[mode].get(fraction) for mode in MODES]
                print(f"  {fraction:>7.4f} " + " ".join(f"{'-' if c is None else f'{c / 1e9:.1f}':>15}" for c in cells))
            results.append({"model": name, "target": target, "base": base, "time_budget": time_budget,
                            "reference_bytes": reference, "store_all_fits": fits,
                            "rows": rows, "curves": {m: {str(f): e for f, e in c.items()} for m, c in curves.items()},
                            "seconds": time.perf_counter() - start})
            plot(out / f"poet_sweep_{name}_{target}.png", name, target, base, curves, reference, fits)
            (out / "poet_sweep.json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    (out / "poet_sweep.json").write_text(json.dumps(results, indent=1, default=float) + "\n")


def best_scheduled(rows: list[dict], base: dict, fractions: list[float], reference: float) -> dict[str, dict[float, float]]:
    """Per mode and budget fraction: the least scheduled energy of a plan of that space within
    the budgets (see the module docstring)."""
    spaces = {"recompute only": ("recompute only",), "paging only": ("paging only",),
              "both": ("recompute only", "paging only", "both")}
    curves: dict[str, dict[float, float]] = {}
    for mode, sources in spaces.items():
        plans = [(base["peak_bytes"], base["energy_pj"])]  # store-all
        plans += [(r["measured"]["peak_bytes"], r["measured"]["energy_pj"]) for r in rows
                  if r["mode"] in sources and r["measured"] and r["measured"]["latency_cycles"] <= r.get("time_budget", math.inf)]
        curve = {}
        for fraction in fractions:
            budget = fraction * reference
            fitting = [e for peak, e in plans if peak <= budget]
            if fitting:
                curve[fraction] = min(fitting)
        curves[mode] = curve
    return curves


def plot(path: Path, name: str, target: str, base: dict, curves: dict[str, dict[float, float]], reference: float,
         fits: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for mode, marker in zip(MODES, ("o", "s", "^")):
        points = [(f * reference / 1e6, e / 1e12) for f, e in curves[mode].items()]
        if points:
            xs, ys = zip(*sorted(points))
            ax.plot(xs, ys, marker=marker, label=mode)
        else:
            ax.plot([], [], marker=marker, label=f"{mode}: no budget met")
    ax.axvline(reference / 1e6, color="grey", linestyle=":", linewidth=0.8,
               label="store-all peak" if fits else "main memory (store-all needs %.0f MB)" % (base["peak_bytes"] / 1e6))
    ax.set_xlabel("main-memory budget (MB)")
    ax.set_ylabel("energy of one step (J), scheduled")
    ax.set_title(f"{name} on {target}: least energy under the budget")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
