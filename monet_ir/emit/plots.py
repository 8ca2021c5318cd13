"""The report's plots as SVG, written directly from plain data (no plotting library).

    write_plots(step_report.plot_data(schedule, report), OUT_DIR)

Files: `gantt.svg` (ops per core and transfers per resource, coloured by phase; the legend sits
above the bars, never on them), `memory.svg` (occupancy of every memory over time with the
phases shaded; each panel's axis runs to that memory's own peak, in the unit that suits it, and
shows the capacity dashed when it is near, else names it in the title: a 4 GiB DRAM holding
308 KiB is not a flat line at zero), `energy.svg` (the energy of each phase, stacked by where it
is spent: compute, on-chip memory, off-chip memory, interconnect). Same series, axes, labels and colours as the matplotlib
PNGs of `monet report --plot-format png` (`monet_ir.emit.plots_png`), at a fraction of the cost:
this module imports only the standard library, so `monet report` draws in its own process after
the summary is out (ResNet-18 b1: a few ms against ≈ 1 s of CPU for matplotlib's import and
drawing in a second process).

`scatter` draws the searches' plots the same way: `monet explore`'s `pareto.svg` and `monet
sweep`'s `sweep.svg` (matplotlib's `pareto.png` / `sweep.png` with `--plot-format png`).

Geometry is in pixels of the PNGs' size (80 px per inch). Drawing merges the bars of one row and
colour that touch within half a pixel and gives every bar at least one pixel, as the rasterized
PNG shows them; a memory trace with more points than half-pixel columns keeps, per column, its
first, lowest, highest and last level (the step curve looks the same at that resolution; the
exact values are in `trace.json`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# matplotlib's tab10 colours, as the PNG plots use them
TAB = {"tab:blue": "#1f77b4", "tab:orange": "#ff7f0e", "tab:green": "#2ca02c", "tab:red": "#d62728",
       "tab:purple": "#9467bd", "grey": "#808080"}
PHASE_COLORS = {"forward": TAB["tab:blue"], "backward": TAB["tab:orange"], "optimizer": TAB["tab:green"],
                "recompute": TAB["tab:purple"]}
TRANSFER_COLOR = TAB["tab:red"]
ENERGY_COLORS = (TAB["tab:blue"], TAB["tab:orange"], TAB["tab:red"], TAB["tab:green"], TAB["tab:purple"])
DPI = 80
FONT = 11  # px, tick labels; titles and axis labels 12 px
CHAR_PX = 6.8  # average width of a FONT-px sans-serif character, for margins


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _num(value: float) -> str:
    """A coordinate with one decimal, without a trailing `.0`."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


class Svg:
    """An SVG document built as a list of elements."""

    def __init__(self, width: float, height: float):
        self.width, self.height = width, height
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, extra: str = "") -> None:
        self.parts.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
                          f'fill="{fill}"{extra}/>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#000", width: float = 1,
             extra: str = "") -> None:
        self.parts.append(f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" '
                          f'stroke="{stroke}" stroke-width="{width}"{extra}/>')

    def circle(self, cx: float, cy: float, r: float, fill: str, extra: str = "") -> None:
        self.parts.append(f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="{_num(r)}" fill="{fill}"{extra}/>')

    def path(self, d: str, extra: str) -> None:
        self.parts.append(f'<path d="{d}" {extra}/>')

    def text(self, x: float, y: float, text: str, size: int = FONT, anchor: str = "middle",
             baseline: str = "auto", extra: str = "") -> None:
        self.parts.append(f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" text-anchor="{anchor}" '
                          f'dominant-baseline="{baseline}"{extra}>{_esc(text)}</text>')

    def write(self, path: Path) -> Path:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(self.width)}" height="{_num(self.height)}" '
                f'viewBox="0 0 {_num(self.width)} {_num(self.height)}" font-family="DejaVu Sans, Helvetica, '
                f'Arial, sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n')
        from monet_ir.files import write_atomic

        write_atomic(path, head + "\n".join(self.parts) + "\n</svg>\n")
        return path


def nice_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """At most `most` round tick values (steps 1, 2, 2.5, 5 x 10^k) within [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / most
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi * (1 + 1e-12) + 1e-12 * step:
        ticks.append(k * step)
        k += 1
    return ticks


def tick_labels(ticks: Sequence[float]) -> tuple[list[str], str]:
    """Labels of `ticks` and a common multiplier (`1e7`) when the values are large or small,
    as matplotlib writes them."""
    biggest = max((abs(t) for t in ticks), default=0.0)
    exponent = 0
    if biggest and (biggest >= 1e5 or biggest < 1e-3):
        exponent = math.floor(math.log10(biggest))
    scale = 10.0 ** exponent
    labels = []
    for t in ticks:
        v = round(t / scale, 6)
        labels.append(f"{v:g}" if v else "0")
    return labels, (f"1e{exponent}" if exponent else "")


def _padded(lo: float, hi: float, margin: float = 0.05) -> tuple[float, float]:
    if hi <= lo:
        return (lo - 1, hi + 1) if lo == hi else (0.0, 1.0)
    pad = (hi - lo) * margin
    return lo - pad, hi + pad


def significant(value: float, digits: int = 4) -> str:
    """`value` to `digits` significant digits in plain decimals, as `{:.4g}` writes it below 10^4
    (trailing zeros dropped) but never in e-notation above: `24,403` rather than `2.44e+04`, with
    thousands separated; below 10^-6 e-notation stays (such a figure is noise at this precision)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= digits - 1:
        return f"{value:,.0f}"
    if magnitude < -6:
        return f"{value:.{digits - 1}e}"
    text = f"{value:.{digits - 1 - magnitude}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


SIZE_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))
# a memory panel shows its capacity when it is at most this many times the peak (else the peak
# would be a sliver at the bottom of the panel)
CAPACITY_IN_VIEW = 1.6
ENERGY_PARTS = ("compute", "onchip_memory", "offchip_memory", "interconnect", "network")
PHASE_ORDER = ("forward", "recompute", "backward", "optimizer")


def size_unit(nbytes: float) -> tuple[str, int]:
    """The largest binary unit that `nbytes` reaches (B, KiB, MiB, GiB, TiB)."""
    name, size = SIZE_UNITS[0]
    for unit, unit_size in SIZE_UNITS:
        if nbytes >= unit_size:
            name, size = unit, unit_size
    return name, size


def format_size(nbytes: float) -> str:
    """`308.1 KiB`, `4 GiB`, `512 B`: three or four significant digits in the unit `nbytes` reaches."""
    unit, size = size_unit(nbytes)
    value = nbytes / size
    return f"{value:.0f} {unit}" if value >= 100 or value == int(value) else f"{value:.3g} {unit}"


def memory_axis(peak: int, drawn: int, capacity: float) -> dict[str, Any]:
    """The y axis of one memory's panel: up to its own peak (the reported `peak` and the highest
    level `drawn`), and up to the capacity only when the capacity is within CAPACITY_IN_VIEW of
    the peak or below it; in the unit the axis reaches. `note` says what the title adds."""
    top = max(peak, drawn, 1)
    finite = capacity != float("inf")
    capacity_shown = finite and capacity <= CAPACITY_IN_VIEW * top
    ymax = max(top, capacity if capacity_shown else 0) * 1.05
    unit, unit_bytes = size_unit(ymax / 1.05)
    if not finite:
        note = f"peak {format_size(peak)}"
    else:
        share = 100 * peak / capacity if capacity else 0.0
        share_text = f"{share:.1f} %" if share >= 0.1 or share == 0 else "< 0.1 %"
        note = f"peak {format_size(peak)} of {format_size(capacity)} ({share_text})"
        if not capacity_shown:
            note += ", capacity above the axis"
    return {"ymax_bytes": ymax, "unit": unit, "unit_bytes": unit_bytes, "capacity_shown": capacity_shown,
            "peak_bytes": peak, "note": note}


def energy_by_phase(tasks: Iterable[tuple[str, float, float, float]],
                    transfers: Iterable[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """Energy (pJ) per phase and part, from (phase, compute, on-chip, off-chip) per costed task and
    (resource, energy) per transfer; the scheduler's transfers, in no phase, are a `transfers`
    column (DRAM and storage traffic off-chip, links and buses interconnect), as in the report."""
    rows: dict[str, dict[str, float]] = {}
    for phase, compute, onchip, offchip in tasks:
        row = rows.setdefault(phase, dict.fromkeys(ENERGY_PARTS[:4], 0.0))
        row["compute"] += compute
        row["onchip_memory"] += onchip
        row["offchip_memory"] += offchip
    moved = dict.fromkeys(ENERGY_PARTS[:4], 0.0)
    for resource, energy_pj in transfers:
        moved["offchip_memory" if resource.startswith(("dram", "storage")) else "interconnect"] += energy_pj
    ordered = {phase: rows[phase] for phase in PHASE_ORDER if phase in rows}
    ordered.update({phase: rows[phase] for phase in sorted(rows) if phase not in ordered})
    if any(moved.values()):
        ordered["transfers"] = moved
    return ordered


class Axes:
    """A plot area in pixels with data limits, drawn with its frame, ticks and labels."""

    def __init__(self, svg: Svg, left: float, top: float, width: float, height: float,
                 xlim: tuple[float, float], ylim: tuple[float, float]):
        self.svg, self.left, self.top, self.width, self.height = svg, left, top, width, height
        self.xlim, self.ylim = xlim, ylim
        self.sx = width / (xlim[1] - xlim[0])
        self.sy = height / (ylim[1] - ylim[0])

    def x(self, value: float) -> float:
        return self.left + (value - self.xlim[0]) * self.sx

    def y(self, value: float) -> float:
        """Pixel row of a data value (the y axis grows upwards unless ylim is given high-to-low)."""
        return self.top + self.height - (value - self.ylim[0]) * self.sy

    def clip_id(self, name: str) -> str:
        self.svg.parts.append(f'<clipPath id="{name}"><rect x="{_num(self.left)}" y="{_num(self.top)}" '
                              f'width="{_num(self.width)}" height="{_num(self.height)}"/></clipPath>')
        return name

    def frame(self, title: str = "", xlabel: str = "", ylabel: str = "", title_size: int = 12,
              xticks: bool = True, yticks: bool = True, title_y: float | None = None) -> None:
        svg, bottom, right = self.svg, self.top + self.height, self.left + self.width
        svg.parts.append(f'<rect x="{_num(self.left)}" y="{_num(self.top)}" width="{_num(self.width)}" '
                         f'height="{_num(self.height)}" fill="none" stroke="#000" stroke-width="0.8"/>')
        if xticks:
            ticks = [t for t in nice_ticks(*self.xlim, most=max(2, int(self.width // 110)))]
            labels, multiplier = tick_labels(ticks)
            for t, label in zip(ticks, labels, strict=True):
                px = self.x(t)
                svg.line(px, bottom, px, bottom + 4, width=0.8)
                svg.text(px, bottom + 16, label)
            if multiplier:
                svg.text(right, bottom + 30, multiplier, anchor="end")
        if yticks:
            lo, hi = sorted(self.ylim)
            ticks = nice_ticks(lo, hi, most=max(2, min(8, int(self.height // 18))))
            labels, multiplier = tick_labels(ticks)
            for t, label in zip(ticks, labels, strict=True):
                py = self.y(t)
                svg.line(self.left - 4, py, self.left, py, width=0.8)
                svg.text(self.left - 6, py, label, anchor="end", baseline="central")
            if multiplier:
                svg.text(self.left, self.top - 4, multiplier, anchor="start")
        if title:
            y = self.top - 7 if title_y is None else title_y
            svg.text(self.left + self.width / 2, y, title, size=title_size)
        if xlabel:
            svg.text(self.left + self.width / 2, bottom + 32, xlabel, size=12)
        if ylabel:
            cx, cy = self.left - 46, self.top + self.height / 2
            svg.text(cx, cy, ylabel, size=12, extra=f' transform="rotate(-90 {_num(cx)} {_num(cy)})"')

    def legend(self, entries: Iterable[tuple[str, str, str]], row_y: float | None = None,
               column_x: float | None = None) -> None:
        """Entries (label, colour, kind: `patch`, `shade`, `dashed`, `dot` or `star`) in a box at the
        upper right; with `row_y` in one row right-aligned at that height, with `column_x` in a
        column from that x at the top of the plot area, both outside it (where they hide nothing:
        the caller leaves that room free)."""
        entries = list(entries)
        svg = self.svg
        if column_x is not None:
            for i, (label, color, kind) in enumerate(entries):
                cy = self.top + 8 + 18 * i
                self._legend_mark(column_x, cy, color, kind)
                svg.text(column_x + 32, cy, label, size=10, anchor="start", baseline="central")
            return
        if row_y is not None:
            widths = [40 + CHAR_PX * 0.9 * len(label) for label, _, _ in entries]
            x = self.left + self.width - sum(widths)
            cy = row_y
            for (label, color, kind), w in zip(entries, widths, strict=True):
                self._legend_mark(x, cy, color, kind)
                svg.text(x + 32, cy, label, size=10, anchor="start", baseline="central")
                x += w
            return
        width = 36 + CHAR_PX * 0.9 * max((len(label) for label, _, _ in entries), default=0)
        x0, y0 = self.left + self.width - width - 6, self.top + 6
        svg.rect(x0, y0, width, 8 + 16 * len(entries), "#fff",
                 ' fill-opacity="0.85" stroke="#ccc" stroke-width="0.8"')
        for i, (label, color, kind) in enumerate(entries):
            cy = y0 + 12 + 16 * i
            self._legend_mark(x0, cy, color, kind)
            svg.text(x0 + 32, cy, label, size=10, anchor="start", baseline="central")

    def _legend_mark(self, x0: float, cy: float, color: str, kind: str) -> None:
        svg = self.svg
        if kind == "dashed":
            svg.line(x0 + 6, cy, x0 + 26, cy, stroke=color, width=1, extra=' stroke-dasharray="4 2"')
        elif kind == "dot":
            svg.circle(x0 + 16, cy, 4, color, ' stroke="#000" stroke-width="0.4"')
        elif kind == "star":
            svg.path(_star_path(x0 + 16, cy, 7), f'fill="{color}"')
        else:
            svg.rect(x0 + 6, cy - 5, 20, 10, color, ' fill-opacity="0.15"' if kind == "shade" else "")


def _bar_path(spans: Iterable[tuple[float, float]], ax: Axes, y: float, height: float) -> str:
    """One path for the bars (start, duration) of a row: bars closer than half a pixel merge and
    every bar is at least a pixel wide."""
    pieces: list[tuple[float, float]] = []
    for start, length in sorted(spans):
        x0, x1 = ax.x(start), ax.x(start + length)
        if x1 - x0 < 1:
            mid = (x0 + x1) / 2
            x0, x1 = mid - 0.5, mid + 0.5
        if pieces and x0 <= pieces[-1][1] + 0.5:
            if x1 > pieces[-1][1]:
                pieces[-1] = (pieces[-1][0], x1)
        else:
            pieces.append((x0, x1))
    h = _num(height)
    return "".join(f"M{_num(a)} {_num(y)}h{_num(b - a)}v{h}h{_num(a - b)}z" for a, b in pieces)


def gantt(data: dict[str, Any], path: Path) -> Path:
    resources = sorted({r for r, _, _ in data["transfers"]})
    rows = list(data["rows"]) + resources
    width, height = 14 * DPI, (0.45 * len(rows) + 1.5) * DPI + 28
    left = max((len(r) for r in rows), default=4) * CHAR_PX + 24
    svg = Svg(width, height)
    ends = [end for _, _, end, _ in data["ops"]] + [end for _, _, end in data["transfers"]]
    starts = [start for _, start, _, _ in data["ops"]] + [start for _, start, _ in data["transfers"]]
    xlim = _padded(min(starts, default=0.0), max(ends, default=1.0))
    top = 58  # the title, then the legend's row, then the bars
    ax = Axes(svg, left, top, width - left - 20, height - top - 50, xlim, (len(rows) - 0.5, -0.5))
    bars: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for core, start, end, phase in data["ops"]:
        bars[(core, PHASE_COLORS.get(phase, TAB["grey"]))].append((start, end - start))
    offset = len(data["rows"])
    row_of = {resource: offset + i for i, resource in enumerate(resources)}
    for resource, start, end in data["transfers"]:
        bars[(row_of[resource], TRANSFER_COLOR)].append((start, end - start))
    clip = ax.clip_id("plot")
    band = 0.8 * ax.height / len(rows) if rows else 0
    for (row, color), spans in sorted(bars.items()):
        svg.path(_bar_path(spans, ax, ax.y(row - 0.4), band), f'fill="{color}" clip-path="url(#{clip})"')
    for i, row in enumerate(rows):
        py = ax.y(i)
        svg.line(left - 4, py, left, py, width=0.8)
        svg.text(left - 6, py, row, anchor="end", baseline="central")
    ax.frame(title=f"{data['title']}: {data.get('gantt_what', 'ops per core and transfers')}", xlabel="cycles",
             yticks=False, title_y=20)
    ax.legend([(phase, color, "patch") for phase, color in PHASE_COLORS.items()]
              + [("transfer", TRANSFER_COLOR, "patch")], row_y=top - 14)
    return svg.write(path)


def _step_path(points: Sequence[tuple[float, float]], ax: Axes) -> str:
    """A post-step curve through (time, level) points, thinned to four points per half-pixel
    column (first, lowest, highest, last level) when it has more."""
    xs = [ax.x(t) for t, _ in points]
    ys = [ax.y(level) for _, level in points]
    if len(points) > 2 * ax.width:
        keep: list[int] = []
        column_start = 0
        for i in range(1, len(xs) + 1):
            if i == len(xs) or int(xs[i] * 2) != int(xs[column_start] * 2):
                column = range(column_start, i)
                chosen = {column_start, i - 1, min(column, key=ys.__getitem__), max(column, key=ys.__getitem__)}
                keep.extend(sorted(chosen))
                column_start = i
        xs, ys = [xs[i] for i in keep], [ys[i] for i in keep]
    parts = [f"M{_num(xs[0])} {_num(ys[0])}"]
    for i in range(1, len(xs)):
        parts.append(f"H{_num(xs[i])}V{_num(ys[i])}")
    return "".join(parts)


def memory(data: dict[str, Any], path: Path) -> Path:
    memories = data["memories"]
    panel = 2.2 * DPI
    width, height = 14 * DPI, panel * len(memories) + 1 * DPI + 20
    svg = Svg(width, height)
    left, top = 6 * CHAR_PX + 50, 48
    panel_spans = data.get("panel_spans") or [data["phase_spans"]] * len(memories)
    t_end = max([p[0] for _, _, points, _ in memories for p in points]
                + [last for spans in panel_spans for _, last in spans.values()], default=1.0)
    xlim = _padded(0.0, t_end)
    legend_phases = list(dict.fromkeys(phase for spans in panel_spans for phase in spans))
    for i, ((name, capacity, points, axis), spans) in enumerate(zip(memories, panel_spans, strict=True)):
        unit = axis["unit_bytes"]
        curve = [(0.0, 0.0)] + [(p[0], p[1] / unit) for p in points]
        end = max([last for _, last in spans.values()], default=0.0)
        if end > curve[-1][0]:  # the level holds to the end of the step
            curve.append((end, curve[-1][1]))
        ymax = axis["ymax_bytes"] / unit
        ax = Axes(svg, left, top + i * panel, width - left - 20, panel - 70, xlim, (-0.02 * ymax, ymax))
        svg.parts.append(f'<g data-memory="{_esc(name)}" data-ymax-bytes="{axis["ymax_bytes"]:.0f}" '
                         f'data-peak-bytes="{axis["peak_bytes"]}" data-unit="{axis["unit"]}"/>')
        clip = ax.clip_id(f"m{i}")
        for phase, (first, last) in spans.items():
            x0, x1 = ax.x(first), ax.x(last)
            svg.rect(x0, ax.top, max(x1 - x0, 0.5), ax.height, PHASE_COLORS.get(phase, TAB["grey"]),
                     f' fill-opacity="0.15" clip-path="url(#{clip})"')
        svg.path(_step_path(curve, ax), f'fill="none" stroke="#000" stroke-width="1" clip-path="url(#{clip})"')
        if axis["capacity_shown"]:
            y = ax.y(capacity / unit)
            svg.line(ax.left, y, ax.left + ax.width, y, stroke=TRANSFER_COLOR, width=0.8,
                     extra=' stroke-dasharray="4 2"')
        ax.frame(title=f"{name}: {axis['note']}", ylabel=axis["unit"], title_size=11,
                 xlabel=data.get("memory_xlabel", "cycles") if i == len(memories) - 1 else "")
        if i == 0:
            ax.legend([(phase, PHASE_COLORS.get(phase, TAB["grey"]), "shade") for phase in legend_phases]
                      + [("capacity", TRANSFER_COLOR, "dashed")], row_y=14)
    return svg.write(path)


def energy(data: dict[str, Any], path: Path) -> Path:
    """One bar per phase (and the scheduler's transfers), stacked by where the energy is spent;
    the legend gives each part's total and share of the step."""
    by_phase = data["energy_by_phase"]
    total = data["energy_pj"]
    legend_width = 215  # the legend's column, right of the bars
    width, height = 9 * DPI + legend_width, 4.5 * DPI
    svg = Svg(width, height)
    sums = [sum(row.values()) / 1e9 for row in by_phase.values()]
    ymax = max(sums, default=1.0) * 1.12 or 1.0
    n = max(len(by_phase), 1)
    left = 5 * CHAR_PX + 45
    ax = Axes(svg, left, 30, width - left - 20 - legend_width, height - 70, (-0.6, n - 0.4), (0.0, ymax))
    colors = dict(zip(ENERGY_PARTS, ENERGY_COLORS, strict=True))
    for i, (phase, row) in enumerate(by_phase.items()):
        x0, x1 = ax.x(i - 0.35), ax.x(i + 0.35)
        base = 0.0
        for part in ENERGY_PARTS:
            value = row.get(part, 0.0) / 1e9
            if value > 0:
                svg.rect(x0, ax.y(base + value), x1 - x0, ax.y(base) - ax.y(base + value), colors[part])
            base += value
        share = 100 * sum(row.values()) / total if total else 0.0
        svg.text(ax.x(i), ax.y(base) - 4, f"{significant(base)} mJ ({share:.0f} %)", size=10)
        svg.line(ax.x(i), ax.top + ax.height, ax.x(i), ax.top + ax.height + 4, width=0.8)
        svg.text(ax.x(i), ax.top + ax.height + 16, phase)
    note = f", {data['energy_note']}" if data.get("energy_note") else ""
    ax.frame(title=f"energy per training step: {significant(total / 1e9)} mJ{note}, by phase", ylabel="mJ",
             xticks=False)
    parts = {part: sum(row.get(part, 0.0) for row in by_phase.values()) for part in ENERGY_PARTS}
    ax.legend([(f"{part} {significant(parts[part] / 1e9)} mJ", colors[part], "patch") for part in reversed(ENERGY_PARTS)
               if part in data["energy"]], column_x=ax.left + ax.width + 10)
    return svg.write(path)


# matplotlib's viridis and plasma colour maps at nine evenly spaced points, interpolated linearly
COLOR_MAPS = {
    "viridis": ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"),
    "plasma": ("#0d0887", "#5302a3", "#8b0aa5", "#b83289", "#db5c68", "#f48849", "#febd2a", "#f0f921", "#f0f921"),
}


def map_color(name: str, fraction: float) -> str:
    """The colour at `fraction` (0..1) of a colour map."""
    anchors = COLOR_MAPS[name]
    position = min(max(fraction, 0.0), 1.0) * (len(anchors) - 1)
    i = min(int(position), len(anchors) - 2)
    t = position - i
    a, b = (tuple(int(c[k:k + 2], 16) for k in (1, 3, 5)) for c in anchors[i:i + 2])
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b, strict=True))


def _star_path(cx: float, cy: float, r: float) -> str:
    """A five-pointed star of outer radius `r`, pointing up."""
    corners = []
    for k in range(10):
        radius = r if k % 2 == 0 else r * 0.4
        angle = math.pi / 2 + k * math.pi / 5
        corners.append(f"{_num(cx + radius * math.cos(angle))} {_num(cy - radius * math.sin(angle))}")
    return "M" + "L".join(corners) + "z"


def scatter(path: Path, title: str, xlabel: str, ylabel: str, points: Sequence[tuple[float, float]],
            background: Sequence[tuple[float, float]] = (), values: Sequence[float] | None = None,
            value_label: str = "", color_map: str = "viridis", connect: bool = False,
            labels: Sequence[tuple[str, float, float]] = (), chosen: tuple[float, float] | None = None,
            vline: float | None = None, point_label: str = "", background_label: str = "") -> Path:
    """A scatter plot: `points` coloured by `values` on `color_map` (with a colour bar) or in
    blue (joined in x order when `connect`), `background` points in grey under them, text
    `labels` at points, a red star at `chosen`, a dashed red vertical line at `vline`. Points
    that fall on the same half pixel are drawn once."""
    width, height = 8 * DPI, 5.5 * DPI
    svg = Svg(width, height)
    every = list(points) + list(background) + ([chosen] if chosen else [])
    xs = [x for x, _ in every] + ([vline] if vline is not None else [])
    ys = [y for _, y in every]
    xlim = _padded(min(xs, default=0.0), max(xs, default=1.0))
    ylim = _padded(min(ys, default=0.0), max(ys, default=1.0))
    bar = 70 if values is not None else 0
    left = 6 * CHAR_PX + 50
    ax = Axes(svg, left, 30, width - left - 20 - bar, height - 80, xlim, ylim)
    clip = ax.clip_id("plot")

    def dots(pts: Iterable[tuple[float, float]], colors: Iterable[str], r: float, extra: str) -> None:
        seen = set()
        for (x, y), color in zip(pts, colors, strict=True):
            px, py = ax.x(x), ax.y(y)
            key = (round(px * 2), round(py * 2), color)
            if key not in seen:
                seen.add(key)
                svg.circle(px, py, r, color, extra + f' clip-path="url(#{clip})"')

    entries = []
    if background:
        dots(background, ["#d3d3d3"] * len(background), 1.6, "")
        entries.append((background_label, "#d3d3d3", "dot"))
    if values is not None and points:
        lo, hi = min(values), max(values)
        span = (hi - lo) or 1.0
        dots(points, [map_color(color_map, (v - lo) / span) for v in values], 3.4, ' stroke="#000" stroke-width="0.4"')
        entries.append((point_label, map_color(color_map, 0.5), "dot"))
        _color_bar(svg, ax.left + ax.width + 20, ax.top, ax.height, (lo, hi), value_label, color_map)
    elif points:
        if connect:
            ordered = sorted(points)
            svg.path("M" + "L".join(f"{_num(ax.x(x))} {_num(ax.y(y))}" for x, y in ordered),
                     f'fill="none" stroke="{TAB["tab:blue"]}" stroke-width="1.5" clip-path="url(#{clip})"')
        dots(points, [TAB["tab:blue"]] * len(points), 3.4, "")
        entries.append((point_label, TAB["tab:blue"], "dot"))
    for text, x, y in labels:
        svg.text(ax.x(x) + 4, ax.y(y) - 4, text, size=9, anchor="start")
    if chosen is not None:
        svg.path(_star_path(ax.x(chosen[0]), ax.y(chosen[1]), 9), f'fill="{TAB["tab:red"]}"')
        entries.append(("chosen", TAB["tab:red"], "star"))
    if vline is not None:
        px = ax.x(vline)
        svg.line(px, ax.top, px, ax.top + ax.height, stroke=TAB["tab:red"], width=0.8, extra=' stroke-dasharray="4 2"')
        entries.append(("budget", TAB["tab:red"], "dashed"))
    ax.frame(title=title, xlabel=xlabel, ylabel=ylabel)
    shown = [e for e in entries if e[0]]  # (a series without a label stays out of the legend)
    if shown:
        ax.legend(shown)
    return svg.write(path)


def _color_bar(svg: Svg, left: float, top: float, height: float, limits: tuple[float, float], label: str,
               color_map: str) -> None:
    """A vertical colour bar (low values at the bottom) with ticks and a label."""
    stops = "".join(f'<stop offset="{k / 8:.3f}" stop-color="{map_color(color_map, 1 - k / 8)}"/>' for k in range(9))
    svg.parts.append(f'<linearGradient id="bar" x1="0" y1="0" x2="0" y2="1">{stops}</linearGradient>')
    svg.rect(left, top, 14, height, "url(#bar)", ' stroke="#000" stroke-width="0.6"')
    lo, hi = limits
    if hi <= lo:
        hi = lo + 1.0
    ticks = nice_ticks(lo, hi, most=6)
    texts, multiplier = tick_labels(ticks)
    for t, text in zip(ticks, texts, strict=True):
        py = top + height - (t - lo) / (hi - lo) * height
        svg.line(left + 14, py, left + 18, py, width=0.8)
        svg.text(left + 20, py, text, size=9, anchor="start", baseline="central")
    if multiplier:
        svg.text(left, top - 4, multiplier, size=9, anchor="start")
    cx, cy = left + 58, top + height / 2
    svg.text(cx, cy, label, size=11, extra=f' transform="rotate(90 {_num(cx)} {_num(cy)})"')


def write_plots(data: dict[str, Any], out: Path) -> list[Path]:
    """gantt.svg, memory.svg, energy.svg from `step_report.plot_data`; returns the files written."""
    return [gantt(data, out / "gantt.svg"), memory(data, out / "memory.svg"), energy(data, out / "energy.svg")]
