"""The report's plots as PNG (`monet report --plot-format png`), drawn with matplotlib from plain
data in a process of their own (the default SVG plots are `monet_ir.emit.plots`, drawn without
a plotting library).

    python -I -c "...; from monet_ir.emit.plots_png import main; main()" OUT_DIR < plot data as JSON

`monet report --plot-format png` starts this process first thing (`step_report.PlotWorker`), so
that loading matplotlib overlaps its own work on the other core, and sends it
`step_report.plot_data(...)` (lists, dicts and numbers as JSON, no schedule objects, never a
pickle) once the schedule is done. The process runs isolated (`python -I`): neither the current
folder nor `PYTHONPATH` is on its `sys.path`, so a `pickle.py` or `matplotlib.py` in the folder
`monet report` runs from is never imported; the worker is given the folder of `monet_ir` and the
parent's other absolute import paths. Each PNG is written atomically (`monet_ir.files`). The
module imports nothing of MONET's pipeline and nothing matplotlib does not need to draw: no
pyplot (a `Figure` on the Agg canvas directly) and fixed margins instead of `tight_layout`
(which draws every figure twice).

Files: `gantt.png` (ops per core and transfers per resource, coloured by phase), `memory.png`
(occupancy of every memory over time with the phases shaded, each panel scaled to that memory's
own peak), `energy.png` (energy per phase, stacked by where it is spent): the same layout as the
SVGs of `monet_ir.emit.plots`, whose scales `step_report.plot_data` decided.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

PHASE_COLORS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green", "recompute": "tab:purple"}
ENERGY_PARTS = ("compute", "onchip_memory", "offchip_memory", "interconnect", "network")  # as monet_ir.emit.plots
ENERGY_COLORS = ("tab:blue", "tab:orange", "tab:red", "tab:green", "tab:purple")
DPI = 80


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _margins(fig: Any, left_chars: int = 6, top_lines: int = 1, hspace_in: float = 0.0) -> None:
    """Margins in inches from what sits beside the axes (tick labels, titles, axis labels)."""
    width, height = fig.get_size_inches()
    char_in, line_in = 0.085, 0.22
    left = (left_chars * char_in + 0.45) / width
    fig.subplots_adjust(left=left, right=1 - 0.2 / width, bottom=0.5 / height, top=1 - (0.15 + top_lines * line_in) / height,
                        hspace=hspace_in)


def write_plots(data: dict[str, Any], out: Path) -> list[Path]:
    """gantt.png, memory.png, energy.png from `step_report.plot_data`; returns the files written."""
    return [_save(gantt_figure(data), out / "gantt.png"), _save(memory_figure(data), out / "memory.png"),
            _save(energy_figure(data), out / "energy.png")]


def gantt_figure(data: dict[str, Any]) -> Any:
    from matplotlib.patches import Rectangle

    colors = PHASE_COLORS
    resources = sorted({r for r, _, _ in data["transfers"]})
    rows = list(data["rows"]) + resources
    fig = _figure(14, 0.45 * len(rows) + 1.5 + 0.35)
    ax = fig.add_subplot()
    bars: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for core, start, end, phase in data["ops"]:
        bars[(core, colors.get(phase, "grey"))].append((start, end - start))
    offset = len(data["rows"])
    row_of = {resource: offset + i for i, resource in enumerate(resources)}
    for resource, start, end in data["transfers"]:
        bars[(row_of[resource], "tab:red")].append((start, end - start))
    # one broken_barh per row and colour: thousands of separate bars would take seconds
    for (row, color), spans in bars.items():
        ax.broken_barh(spans, (row - 0.4, 0.8), color=color)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("cycles")
    ax.set_title(f"{data['title']}: {data.get('gantt_what', 'ops per core and transfers')}", pad=22)
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in (*colors.values(), "tab:red")]
    # above the bars, in one row: inside the axes it would hide them
    ax.legend(handles, [*colors, "transfer"], loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(handles),
              fontsize=8, frameon=False, borderaxespad=0.2)
    _margins(fig, max((len(r) for r in rows), default=4), top_lines=2)
    return fig


def memory_figure(data: dict[str, Any]) -> Any:
    colors = PHASE_COLORS
    memories = data["memories"]
    fig = _figure(14, 2.2 * len(memories) + 1.25)
    axes = fig.subplots(len(memories), 1, squeeze=False)
    panel_spans = data.get("panel_spans") or [data["phase_spans"]] * len(memories)
    legend_phases = list(dict.fromkeys(phase for spans in panel_spans for phase in spans))
    for ax, (name, capacity, points, axis), spans in zip(axes[:, 0], memories, panel_spans, strict=True):
        unit = axis["unit_bytes"]
        xs = [0.0] + [p[0] for p in points]
        ys = [0] + [p[1] for p in points]
        end = max([last for _, last in spans.values()], default=0.0)
        if end > xs[-1]:  # the level holds to the end of the step
            xs.append(end)
            ys.append(ys[-1])
        ax.step(xs, [y / unit for y in ys], where="post", color="black", linewidth=1)
        for phase, (first, last) in spans.items():
            ax.axvspan(first, last, color=colors.get(phase, "grey"), alpha=0.15, label=phase)
        if axis["capacity_shown"]:
            ax.axhline(capacity / unit, color="tab:red", linestyle="--", linewidth=0.8, label="capacity")
        ymax = axis["ymax_bytes"] / unit
        ax.set_ylim(-0.02 * ymax, ymax)
        ax.set_ylabel(axis["unit"])
        ax.set_title(f"{name}: {axis['note']}", fontsize=9)
    if memories:
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        handles = [Patch(color=colors.get(phase, "grey"), alpha=0.15) for phase in legend_phases]
        handles.append(Line2D([], [], color="tab:red", linestyle="--", linewidth=0.8))
        fig.legend(handles, [*legend_phases, "capacity"], loc="upper right", ncol=len(handles), fontsize=8,
                   frameon=False)
        axes[-1, 0].set_xlabel(data.get("memory_xlabel", "cycles"))
    _margins(fig, 6, top_lines=2, hspace_in=0.9 / 2.2)
    return fig


def energy_figure(data: dict[str, Any]) -> Any:
    by_phase = data["energy_by_phase"]
    total = data["energy_pj"]
    legend_in = 2.7  # the legend's column, right of the bars
    fig = _figure(9 + legend_in, 4.5)
    ax = fig.add_subplot()
    names = list(by_phase)
    base = [0.0] * len(names)
    for part, color in zip(ENERGY_PARTS, ENERGY_COLORS, strict=True):
        if part not in data["energy"]:
            continue
        values = [by_phase[name].get(part, 0.0) / 1e9 for name in names]
        label = f"{part} {_significant(sum(values))} mJ"
        ax.bar(names, values, width=0.7, bottom=base, color=color, label=label)
        base = [b + v for b, v in zip(base, values, strict=True)]
    for i, height in enumerate(base):
        share = 100 * height * 1e9 / total if total else 0.0
        ax.text(i, height, f"{_significant(height)} mJ ({share:.0f} %)", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(base, default=1.0) * 1.12 or 1.0)
    ax.set_ylabel("mJ")
    note = f", {data['energy_note']}" if data.get("energy_note") else ""
    ax.set_title(f"energy per training step: {_significant(total / 1e9)} mJ{note}, by phase")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    _margins(fig, 5)
    fig.subplots_adjust(right=1 - (legend_in + 0.2) / (9 + legend_in))
    return fig


def _significant(value: float) -> str:
    """As `monet_ir.emit.plots.significant` (this module imports nothing of MONET): four
    significant digits, no e-notation above 10^4."""
    import math

    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= 3:
        return f"{value:,.0f}"
    if magnitude < -6:
        return f"{value:.3e}"
    text = f"{value:.{3 - magnitude}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _save(fig: Any, path: Path) -> Path:
    import io

    from monet_ir.files import write_atomic

    image = io.BytesIO()
    fig.savefig(image, dpi=DPI, format="png")
    write_atomic(path, image.getvalue())
    return path


def main() -> None:
    """The worker process: `sys.argv[1]` is the output folder, the plot data arrives on stdin
    as JSON."""
    import json
    import sys

    # loaded before the data arrives, while the parent still schedules
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401

    write_plots(json.loads(sys.stdin.buffer.read()), Path(sys.argv[1]))
