"""What `monet explore` writes: the Pareto front (CSV, JSON), a scatter plot, the chosen point
and the `monet report` command line that reproduces it, and the MILP comparison."""

from __future__ import annotations

import csv
import io
import json
import math
import shlex
from pathlib import Path
from typing import Any

from monet_ir.explore.evaluate import Candidate, StepConfig, checkpoint_policy
from monet_ir.files import write_atomic
from monet_ir.explore.ga import SearchResult


def report_command(config: StepConfig, candidate: Candidate, out: str, mapping: str | None,
                   plan: str | None = None) -> list[str]:
    """`monet report` arguments that schedule exactly this candidate (under its own precision
    policy when the precision gene chose one). A candidate that pages is given as a plan file,
    written to `plan` (`--checkpoint plan=FILE.json`)."""
    if candidate.precision is not None:
        import dataclasses

        config = dataclasses.replace(config, precision=candidate.precision)
    if candidate.pages:
        from monet_ir.explore.evaluate import write_candidate_plan

        assert plan is not None
        write_candidate_plan(plan, candidate)
        policy = f"plan={plan}"
    else:
        policy = checkpoint_policy(candidate.recompute)
    args = ["monet", "report", *config.report_args(), "--out", out, "--checkpoint", policy]
    if candidate.allocation:
        assert mapping is not None
        args += ["--mapping", mapping]
    if candidate.fusion:
        args += ["--fusion", ",".join(candidate.fusion)]
        if candidate.tiles:
            args += ["--tiles", str(candidate.tiles)]
    return args


def write_mapping(candidate: Candidate, path: Path) -> None:
    import yaml

    write_atomic(path, "# core allocation chosen by monet explore (monet report --mapping)\n"
                 + yaml.safe_dump(candidate.mapping_entries(), sort_keys=False))


def _csv_value(value: Any) -> Any:
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={'/'.join(str(c) for c in v) if isinstance(v, list) else v}" for k, v in value.items())
    return value


def write_points(points: list[dict[str, Any]], csv_path: Path, json_path: Path | None = None) -> None:
    columns: list[str] = []
    for p in points:
        for k in p:
            if k not in columns and k != "peak_bytes":
                columns.append(k)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["point", *columns])
    for i, p in enumerate(points):
        writer.writerow([i, *(_csv_value(p.get(c, "")) for c in columns)])
    write_atomic(csv_path, text.getvalue())
    if json_path is not None:
        write_atomic(json_path, json.dumps(points, indent=1) + "\n")


def chosen_point(result: SearchResult, budget: int | None) -> tuple[int, ...] | None:
    """The lowest-latency (or lowest recompute cost) front point that fits (and meets the budget);
    any evaluated point if the front has none."""
    return result.best(budget, result.front) or result.best(budget)


def write_search(result: SearchResult, config: StepConfig, out: Path, budget: int | None,
                 plots: str | None = "svg", files: list[str] | None = None) -> dict[str, Any]:
    """front.csv, front.json, evaluated.csv, chosen.json (+ chosen_mapping.yaml, chosen_plan.json,
    chosen_command.txt) and, unless `plots` is None, the front's plot as `pareto.svg` or
    `pareto.png` (`plots`: the format); the names of the files written are appended to `files`."""
    out.mkdir(parents=True, exist_ok=True)
    written = files if files is not None else []
    front = [result.point(g) for g in result.front]
    write_points(front, out / "front.csv", out / "front.json")
    write_points([result.point(g) for g in result.order], out / "evaluated.csv")
    written += ["front.csv", "front.json", "evaluated.csv"]
    chosen: dict[str, Any] = {"objective": result.objective, "budget_bytes": budget}
    genome = chosen_point(result, budget)
    if genome is None:
        chosen["point"] = None
        chosen["message"] = ("no evaluated point fits " + (f"the budget of {budget} bytes" if budget is not None
                                                           else "the target's memories"))
    else:
        candidate = result.spec.decode(genome)
        mapping = None
        if candidate.allocation:
            mapping = str(out / "chosen_mapping.yaml")
            write_mapping(candidate, Path(mapping))
            written.append("chosen_mapping.yaml")
        command = report_command(config, candidate, str(out / "chosen_report"), mapping, str(out / "chosen_plan.json"))
        if candidate.pages:
            written.append("chosen_plan.json")
        chosen["point"] = result.point(genome)
        chosen["command"] = command
        chosen["command_line"] = shlex.join(command)
        write_atomic(out / "chosen_command.txt", chosen["command_line"] + "\n")
        written.append("chosen_command.txt")
    chosen["search"] = {"evaluations": result.evaluations, "seconds": result.seconds,
                        "ms_per_evaluation": result.eval_seconds / max(1, result.evaluations) * 1e3,
                        "genes": {"checkpoint": len(result.spec.checkpoint), "allocation": len(result.spec.allocation),
                                  "fusion": len(result.spec.fusion), "precision": list(result.spec.precisions)},
                        "seeds": {name: result.point(g) for name, g in result.seeds.items()}}
    write_atomic(out / "chosen.json", json.dumps(chosen, indent=1) + "\n")
    written.append("chosen.json")
    if plots == "png":
        plot_front(result, out / "pareto.png", genome, budget)
        written.append("pareto.png")
    elif plots is not None:
        plot_front_svg(result, out / "pareto.svg", genome, budget)
        written.append("pareto.svg")
    return chosen


def plot_front_svg(result: SearchResult, path: Path, chosen: tuple[int, ...] | None, budget: int | None) -> None:
    """`plot_front`'s figure as SVG, written directly (milliseconds; matplotlib's import and
    drawing take about a second)."""
    from monet_ir.emit.plots import scatter

    schedule = result.objective == "schedule"

    def xy(g):
        v = result.objectives(g)
        return (v[2] / 2**20, v[0]) if schedule else (v[1] / 2**20, v[0])

    scatter(path, f"{result.evaluations} evaluations, {len(result.front)} Pareto points",
            "peak memory, all memories (MiB)" if schedule else "saved activations (MiB)",
            "latency (cycles)" if schedule else "recompute (cycles)",
            [xy(g) for g in result.front],
            background=[xy(g) for g in result.order if result.objectives(g)[0] < 1e29],
            values=[result.objectives(g)[1] / 1e9 for g in result.front] if schedule else None,
            value_label="energy (mJ)", connect=not schedule,
            labels=[(name, *xy(g)) for name, g in result.seeds.items()],
            chosen=xy(chosen) if chosen is not None else None,
            vline=budget / 2**20 if budget is not None else None,
            point_label="Pareto front", background_label="evaluated")


def plot_front(result: SearchResult, path: Path, chosen: tuple[int, ...] | None, budget: int | None) -> None:
    """Memory against latency (or saved bytes against recompute cycles); energy as colour
    (matplotlib PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    schedule = result.objective == "schedule"

    def xy(g):
        v = result.objectives(g)
        return (v[2] / 2**20, v[0]) if schedule else (v[1] / 2**20, v[0])

    fig, ax = plt.subplots(figsize=(8, 5.5))
    others = [xy(g) for g in result.order if result.objectives(g)[0] < 1e29]
    if others:
        ax.scatter(*zip(*others, strict=True), s=8, color="lightgrey", label="evaluated")
    pts = [xy(g) for g in result.front]
    if pts:
        if schedule:
            colors = [result.objectives(g)[1] / 1e9 for g in result.front]
            sc = ax.scatter(*zip(*pts, strict=True), c=colors, cmap="viridis", s=36, edgecolors="black",
                            linewidths=0.4, label="Pareto front", zorder=3)
            fig.colorbar(sc, ax=ax, label="energy (mJ)")
        else:
            ax.plot(*zip(*sorted(pts), strict=True), "o-", color="tab:blue", label="Pareto front", zorder=3)
    for name, g in result.seeds.items():
        x, y = xy(g)
        ax.annotate(name, (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
    if chosen is not None:
        x, y = xy(chosen)
        ax.scatter([x], [y], marker="*", s=220, color="tab:red", label="chosen", zorder=4)
    if budget is not None:
        ax.axvline(budget / 2**20, color="tab:red", linestyle="--", linewidth=0.8, label="budget")
    ax.set_xlabel("peak memory, all memories (MiB)" if schedule else "saved activations (MiB)")
    ax.set_ylabel("latency (cycles)" if schedule else "recompute (cycles)")
    ax.set_title(f"{result.evaluations} evaluations, {len(result.front)} Pareto points")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=90)
    plt.close(fig)


def save_figure(fig: Any, path: Path, dpi: int) -> None:
    """A matplotlib figure as PNG, written atomically."""
    image = io.BytesIO()
    fig.savefig(image, dpi=dpi, format="png")
    write_atomic(path, image.getvalue())


def front_table(result: SearchResult, limit: int = 20) -> str:
    """The front as a text table (at most `limit` rows, spread over it)."""
    rows = result.front
    if len(rows) > limit:
        step = (len(rows) - 1) / (limit - 1)
        rows = [rows[round(i * step)] for i in range(limit)]
    lines = []
    if result.objective == "schedule":
        paging = bool(result.spec.paging)
        lines.append(f"{'latency (cycles)':>18}{'energy (mJ)':>13}{'peak (MiB)':>12}  {'recompute':>9}{'pinned':>8}"
                     f"{'fused':>7}{'  paged  stored' if paging else ''}  {'precision  ' if result.spec.precisions else ''}seed")
        for g in rows:
            p = result.point(g)
            lines.append(f"{p['latency_cycles']:>18,}{p['energy_pj'] / 1e9:>13.4f}{p['peak_memory_bytes'] / 2**20:>12.2f}"
                         f"  {len(p['recompute']):>9}{len(p['allocation']):>8}{len(p.get('fusion', [])):>7}"
                         + (f"{len(p['paged']):>7}{len(p['stored']):>8}" if paging else "") + "  "
                         + (f"{p['precision']}  " if result.spec.precisions else "") + p["seed"])
    else:
        lines.append(f"{'recompute (cycles)':>20}{'saved (bytes)':>16}  {'recompute':>9}  seed")
        for g in rows:
            p = result.point(g)
            lines.append(f"{p['recompute_cycles']:>20,.0f}{p['saved_bytes']:>16,}  {len(p['recompute']):>9}  {p['seed']}")
    return "\n".join(lines)


def write_milp(rows: list[dict[str, Any]], out: Path) -> str:
    write_atomic(out / "milp.json", json.dumps(rows, indent=1) + "\n")
    write_points(rows, out / "milp.csv")

    def num(value: Any, fmt: str = ",.0f") -> str:
        return "-" if value is None else format(value, fmt)

    def pct(value: Any) -> str:
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * 100:.2f}%"

    lines = [f"{'budget (bytes)':>15}{'MILP cycles':>13}{'MILP saved':>12}{'MILP s':>8}{'GA cycles':>12}{'GA gap':>8}"
             f"{'front gap':>10}{'greedy gap':>11}"]
    for r in rows:
        lines.append(f"{r['budget']:>15,}{num(r['milp_recompute_cycles']):>13}{num(r['milp_saved_bytes'], ','):>12}"
                     f"{r['milp_seconds']:>8.2f}{num(r.get('ga_recompute_cycles')):>12}{pct(r.get('gap')):>8}"
                     f"{pct(r.get('front_gap')):>10}{pct(r.get('greedy_gap')):>11}")
    return "\n".join(lines)


def failure_summary(results) -> str:
    """One line counting the evaluations that failed and naming the first one's reason, in
    candidate order (empty when none failed)."""
    errors = [r.error for r in results if getattr(r, "error", "")]
    if not errors:
        return ""
    return f"  {len(errors)} evaluated point(s) failed and are left out of the front; first reason: {errors[0]}"
