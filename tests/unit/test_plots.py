"""The report's plots: SVG written directly (default) and the matplotlib PNGs of --plot-format png,
drawn from plain data by modules that load nothing of MONET's pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from monet_ir.emit import plots

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "tests" / "data" / "models" / "mlp_b4.onnx"
PNG = b"\x89PNG\r\n\x1a\n"
SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("module, also_absent", [("plots", ("matplotlib", "numpy")), ("plots_png", ())])
def test_plot_modules_import_nothing_they_do_not_draw(module, also_absent):
    absent = {"xdsl", "onnx", "dialects", "passes", "targets", "yaml", "scipy", "networkx", "deap", *also_absent}
    code = (f"import sys, monet_ir.emit.{module}; "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(absent)!r})), "
            f"sorted(m for m in sys.modules if m.startswith('monet_ir.') and m not in ('monet_ir.emit', "
            f"'monet_ir.emit.{module}', 'monet_ir.files', 'monet_ir.errors')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert run.stdout.strip() == "[] []"


def _texts(path: Path) -> list[str]:
    return [t.text or "" for t in ET.parse(path).getroot().iter(f"{SVG_NS}text")]


def test_report_writes_svg_plots_after_the_summary(tmp_path):
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(MLP), "--target", "edge_npu",
                          "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("MONET training-step report: mlp_b4.onnx on edge_npu")
    assert run.stdout == (tmp_path / "report.txt").read_text()
    gantt = _texts(tmp_path / "gantt.svg")
    assert "mlp_b4.onnx on edge_npu: ops per core and transfers" in gantt and "cycles" in gantt
    assert {"forward", "backward", "optimizer", "recompute", "transfer"} <= set(gantt)
    assert any(t.startswith("core0 ") for t in gantt)
    memory = _texts(tmp_path / "memory.svg")
    assert {"KiB", "MiB"} & set(memory) and "capacity" in memory and "cycles" in memory
    energy = _texts(tmp_path / "energy.svg")
    assert any(t.startswith("energy per training step: ") and t.endswith(" mJ, by phase") for t in energy)
    assert {"forward", "backward", "optimizer", "mJ"} <= set(energy)
    assert {"compute", "onchip_memory", "offchip_memory", "interconnect"} <= {t.split()[0] for t in energy if t}
    assert not list(tmp_path.glob("*.png"))
    lines = run.stderr.splitlines()
    assert "report.json, layers.csv, report.txt, trace.json" in lines[-2]
    assert lines[-1].endswith("gantt.svg, memory.svg, energy.svg")


def test_report_writes_png_plots_with_matplotlib_on_request(tmp_path):
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(MLP), "--target", "edge_npu",
                          "--out", str(tmp_path), "--plot-format", "png"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    for name in ("gantt.png", "memory.png", "energy.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
    assert run.stderr.splitlines()[-1].endswith("gantt.png, memory.png, energy.png")


def test_nice_ticks_and_labels():
    assert plots.nice_ticks(0, 10, most=5) == [0, 2, 4, 6, 8, 10]
    assert plots.nice_ticks(-4.3e6, 9.03e7, most=8) == [0.0, 2e7, 4e7, 6e7, 8e7]
    assert plots.nice_ticks(0, 2.1, most=5) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert plots.tick_labels([0.0, 2e7, 4e7]) == (["0", "2", "4"], "1e7")
    assert plots.tick_labels([0.0, 0.5, 1.0]) == (["0", "0.5", "1"], "")
    assert plots.nice_ticks(3, 3) == [3]


def _spans(d: str) -> list[tuple[float, float]]:
    """(x, width) of every sub-path M x y h w v h h -w z."""
    out = []
    for piece in d.split("M")[1:]:
        x = float(piece.split()[0])
        w = float(piece.split("h")[1].split("v")[0])
        out.append((x, w))
    return out


def test_bars_touching_within_half_a_pixel_merge_and_thin_bars_show():
    svg = plots.Svg(100, 100)
    ax = plots.Axes(svg, 0, 0, 100, 100, (0, 100), (0, 1))
    # 10-20 and 20.3-30 merge (gap 0.3 px); 50-50.01 becomes one pixel around its middle
    d = plots._bar_path([(20.3, 9.7), (10, 10), (50, 0.01)], ax, 5, 10)
    assert _spans(d) == [(10, 20), (49.5, 1)]


def test_a_long_memory_trace_keeps_each_columns_extremes():
    svg = plots.Svg(20, 100)
    ax = plots.Axes(svg, 0, 0, 10, 100, (0, 1000), (0, 100))
    points = [(float(t), float((t * 37) % 101)) for t in range(1000)]
    d = plots._step_path(points, ax)
    levels = [float(p.split("V")[1]) for p in d.split("H")[1:]]
    assert len(levels) < len(points) // 10
    # the lowest and highest level of the whole trace are still drawn
    assert min(levels) == pytest.approx(ax.y(100), abs=0.05) and max(levels) == pytest.approx(ax.y(0), abs=0.05)


def _circles(path: Path) -> list[ET.Element]:
    return list(ET.parse(path).getroot().iter(f"{SVG_NS}circle"))


def _plotted(path: Path) -> list[ET.Element]:
    """The data points with an outline (not the grey background ones, not the legend's)."""
    return [c for c in _circles(path) if c.get("stroke") == "#000" and c.get("clip-path")]


def test_scatter_places_colours_and_thins_points(tmp_path):
    assert plots.map_color("viridis", 0.0) == "#440154" and plots.map_color("viridis", 1.0) == "#fde725"
    assert plots.map_color("plasma", -3) == "#0d0887"  # clamped
    # (1, 10) and (1.000001, 10) fall on the same half pixel: drawn once
    points = [(1.0, 10.0), (1.000001, 10.0), (2.0, 30.0), (3.0, 20.0)]
    path = plots.scatter(tmp_path / "s.svg", "title", "x", "y", points, background=[(1.5, 15.0)],
                         values=[0.0, 0.0, 5.0, 10.0], value_label="energy", chosen=(3.0, 20.0), vline=2.5,
                         labels=[("seed", 2.0, 30.0)], point_label="front", background_label="evaluated")
    circles = _circles(path)
    coloured = _plotted(path)
    assert [c.get("fill") for c in coloured] == ["#440154", "#21918c", "#fde725"]
    # data coordinates map to pixels in order: x grows to the right, y upwards
    xs = [float(c.get("cx")) for c in coloured]
    ys = [float(c.get("cy")) for c in coloured]
    assert xs[0] < xs[1] < xs[2] and ys[1] < ys[2] < ys[0]
    assert len(circles) == 3 + 1 + 2  # the front, the background point, two legend dots
    texts = _texts(path)
    assert {"title", "x", "y", "energy", "seed", "front", "evaluated", "chosen", "budget"} <= set(texts)
    assert any(line.get("stroke-dasharray") for line in ET.parse(path).getroot().iter(f"{SVG_NS}line"))
    # without labels (as monet sweep draws its designs) there is no legend box at all
    bare = plots.scatter(tmp_path / "bare.svg", "t", "x", "y", points, values=[0.0, 0.0, 5.0, 10.0])
    assert not [r for r in ET.parse(bare).getroot().iter(f"{SVG_NS}rect") if r.get("stroke") == "#ccc"]


def test_explore_writes_its_front_as_svg_or_png(tmp_path):
    lenet = REPO / "tests" / "data" / "models" / "lenet5_b4.onnx"
    base = [sys.executable, "-m", "monet_ir.tools.monet", "explore", str(lenet), "--target", "edge_npu",
            "--population", "4", "--generations", "1", "--jobs", "1"]
    run = subprocess.run([*base, "--out", str(tmp_path / "svg")], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "svg"
    assert not list(out.glob("*.png"))
    front = json.loads((out / "front.json").read_text())
    chosen = json.loads((out / "chosen.json").read_text())
    texts = _texts(out / "pareto.svg")
    assert f"{chosen['search']['evaluations']} evaluations, {len(front)} Pareto points" in texts
    assert {"peak memory, all memories (MiB)", "latency (cycles)", "energy (mJ)", "Pareto front", "chosen"} <= set(texts)
    assert 1 <= len(_plotted(out / "pareto.svg")) <= len(front)
    assert "pareto.svg" in run.stdout
    run = subprocess.run([*base, "--out", str(tmp_path / "png"), "--plot-format", "png"], capture_output=True,
                         text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "png" / "pareto.png").read_bytes().startswith(PNG)
    assert not (tmp_path / "png" / "pareto.svg").exists()


LENET = REPO / "tests" / "data" / "models" / "lenet5_b4.onnx"


def _report(tmp_path: Path, target: str, *extra: str) -> Path:
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--target", target,
                          "--out", str(tmp_path), *extra], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return tmp_path


def _panels(path: Path) -> dict[str, dict[str, str]]:
    return {g.get("data-memory"): dict(g.attrib) for g in ET.parse(path).getroot().iter(f"{SVG_NS}g")
            if g.get("data-memory")}


def test_each_memory_panel_runs_to_its_own_peak_not_only_its_capacity(tmp_path):
    """cortex_a_board: a 4 GiB LPDDR4 holding a few hundred kB was a flat line at zero on a 0-4 GiB
    axis. Every panel's axis now covers its own peak and the peak fills most of it."""
    out = _report(tmp_path, "cortex_a_board")
    report = json.loads((out / "report.json").read_text())
    panels = _panels(out / "memory.svg")
    assert set(panels) == {name for name, peak in report["memory"]["peak_bytes"].items() if peak}
    for name, panel in panels.items():
        peak, ymax = report["memory"]["peak_bytes"][name], float(panel["data-ymax-bytes"])
        assert peak <= ymax <= 1.05 * plots.CAPACITY_IN_VIEW * peak + 1, (name, peak, ymax)
    dram = report["memory"]["budgeted"]
    assert report["memory"]["capacity_bytes"][dram] == 4 * 2**30
    peak = report["memory"]["peak_bytes"][dram]
    assert float(panels[dram]["data-ymax-bytes"]) < 4 * 2**30 / 100 and panels[dram]["data-unit"] == "MiB"
    assert f"{dram}: peak {plots.format_size(peak)} of 4 GiB (< 0.1 %), capacity above the axis" \
        in _texts(out / "memory.svg")


def test_memory_axis_rules():
    near = plots.memory_axis(1_900_000, 1_900_000, 2 * 2**20)
    assert near["capacity_shown"] and near["ymax_bytes"] == pytest.approx(2 * 2**20 * 1.05)
    assert near["unit"] == "MiB" and near["note"] == "peak 1.81 MiB of 2 MiB (90.6 %)"
    far = plots.memory_axis(308_000, 308_000, 4 * 2**30)
    assert not far["capacity_shown"] and far["ymax_bytes"] == pytest.approx(308_000 * 1.05)
    assert far["unit"] == "KiB" and far["note"] == "peak 301 KiB of 4 GiB (< 0.1 %), capacity above the axis"
    over = plots.memory_axis(3000, 3000, 2048)  # a memory over its capacity shows both
    assert over["capacity_shown"] and over["ymax_bytes"] == pytest.approx(3150)
    unbounded = plots.memory_axis(0, 0, float("inf"))
    assert unbounded["ymax_bytes"] > 0 and not unbounded["capacity_shown"]


def _plot_data_of(out: Path) -> dict:
    """The plot data of a report, rebuilt in this process through the tool's own path."""
    from monet_ir.emit.step_report import plot_data
    from monet_ir.tools.monet import Progress, build_parser, make_report

    args = build_parser().parse_args(["report", str(LENET), "--target", "cortex_a_board", "--out", str(out)])
    report, sched = make_report(args, Progress(enabled=False))
    return plot_data(sched, report)


def test_png_memory_panels_and_legends_hide_nothing(tmp_path):
    """The PNGs as drawn: each memory's curve reaches the upper half of its panel (the pixels are
    read back), and the Gantt and energy legends lie outside the plot area."""
    pytest.importorskip("matplotlib")
    from monet_ir.emit import plots_png

    data = _plot_data_of(tmp_path)
    fig = plots_png.memory_figure(data)
    fig.canvas.draw()
    width, height = fig.canvas.get_width_height()
    import numpy as np

    pixels = np.asarray(fig.canvas.buffer_rgba())
    for ax, (name, _, points, axis) in zip(fig.axes, data["memories"], strict=True):
        peak = max(level for _, level in points) / axis["unit_bytes"]
        low, high = ax.get_ylim()
        assert high >= peak >= 0.6 * high, name
        box = ax.get_window_extent()
        x0, x1 = int(box.x0) + 3, int(box.x1) - 3
        top, bottom = height - int(box.y1) + 3, height - int(box.y0) - 3
        black = (pixels[top:bottom, x0:x1, :3] == 0).all(axis=2)
        rows_with_curve = np.nonzero(black.any(axis=1))[0]
        assert len(rows_with_curve) and rows_with_curve[0] < (bottom - top) / 2, name
    for figure in (plots_png.gantt_figure(data), plots_png.energy_figure(data)):
        figure.canvas.draw()
        ax = figure.axes[0]
        legend, area = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert legend.y0 >= area.y1 - 1 or legend.x0 >= area.x1 - 1
        assert 0 <= legend.x0 and legend.x1 <= figure.bbox.x1 and legend.y1 <= figure.bbox.y1


def test_svg_gantt_legend_sits_above_the_bars_and_energy_is_split_by_phase(tmp_path):
    out = _report(tmp_path, "snax_mx", "--precision", "mxfp8_e4m3")
    root = ET.parse(out / "gantt.svg").getroot()
    frame = next(r for r in root.iter(f"{SVG_NS}rect") if r.get("fill") == "none" and r.get("stroke") == "#000")
    legend_marks = [r for r in root.iter(f"{SVG_NS}rect") if r.get("width") == "20" and r.get("height") == "10"]
    assert len(legend_marks) == 5
    assert all(float(r.get("y")) + 10 < float(frame.get("y")) for r in legend_marks)
    report = json.loads((out / "report.json").read_text())
    texts = _texts(out / "energy.svg")
    for phase, row in report["phases"].items():
        if not row["ops"]:
            assert phase not in texts
            continue
        share = 100 * row["energy_pj"] / report["energy_pj"]
        assert phase in texts and f"{row['energy_pj'] / 1e9:.4g} mJ ({share:.0f} %)" in texts, phase
    moved = sum(t["energy_pj"] for t in report["transfers"].values())
    assert "transfers" in texts and f"{moved / 1e9:.4g} mJ ({100 * moved / report['energy_pj']:.0f} %)" in texts
