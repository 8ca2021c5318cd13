"""What a multi-chip report (`monet report --system`) says and draws: every figure says whether it
is per chip or summed over the chips, no "0.0 MB per chip" beside traffic, and Gantt, memory and
energy plots with a lane per chip and per network link."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LENET = REPO / "tests" / "data" / "models" / "lenet5_b4.onnx"
SVG_NS = "{http://www.w3.org/2000/svg}"


def _run(out: Path, parallel: str, *extra: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--system",
                          "2x2_edge_npu", "--parallel", parallel, "--out", str(out), *extra],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return run


def _texts(path: Path) -> list[str]:
    return [t.text or "" for t in ET.parse(path).getroot().iter(f"{SVG_NS}text")]


@pytest.fixture(scope="module")
def pipelined(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("pp")
    return out, _run(out, "dp=2,pp=2,microbatches=2").stdout


def test_the_text_says_per_chip_or_summed_over_the_chips(pipelined):
    out, text = pipelined
    report = json.loads((out / "report.json").read_text())
    assert "ms per step of the whole system" in text
    assert "mJ per step, summed over all 4 chips and the network" in text
    chips_energy = report["energy_pj"] - report["energy_breakdown_pj"]["network"]
    assert report["energy_per_chip_pj"] == pytest.approx(chips_energy / 4)
    assert f"({report['energy_per_chip_pj'] / 1e9:.4g} mJ per chip on average)" in text
    assert "memory per chip (bytes; the fullest: a chip of stage 1)" in text
    assert "sent by all 4 chips together" in text and "reduced or gathered by each chip" in text
    assert "between stages per step, all micro-batches and replicas together" in text
    assert "1 micro-batch in flight" in text and "1 micro-batches" not in text
    assert " 0.0 MB" not in text


def test_a_pipeline_without_collectives_prints_no_zero_traffic(tmp_path):
    text = _run(tmp_path, "pp=4,microbatches=2").stdout
    assert "no collectives (no data- or tensor-parallel group)" in text
    assert "0.0 MB" not in text and "0 B per chip" not in text


def test_system_runs_draw_a_lane_per_chip_and_link_a_panel_per_stage(pipelined):
    out, _ = pipelined
    report = json.loads((out / "report.json").read_text())
    gantt = _texts(out / "gantt.svg")
    assert [t for t in gantt if t.startswith("chip")] == ["chip0 stage 0", "chip1 stage 0", "chip2 stage 1",
                                                          "chip3 stage 1"]
    assert {f"link {name}" for name in report["links"]} <= set(gantt)
    assert any("ops per chip, collectives per network link" in t for t in gantt)
    memory = [g.get("data-memory") for g in ET.parse(out / "memory.svg").getroot().iter(f"{SVG_NS}g")
              if g.get("data-memory")]
    assert memory == ["stage 0 (chips 0-1) lpddr4x", "stage 1 (chips 2-3) lpddr4x"]
    energy = _texts(out / "energy.svg")
    assert f"energy per training step: {report['energy_pj'] / 1e9:.4g} mJ, summed over 4 chips, by phase" in energy
    # the bars add up to the report's total: one per phase, the transfers and the network
    bars = [float(t.split(" mJ (")[0]) for t in energy if " mJ (" in t]
    assert sum(bars) == pytest.approx(report["energy_pj"] / 1e9, rel=1e-3)
    network = report["energy_breakdown_pj"]["network"]
    assert f"{network / 1e9:.4g} mJ ({100 * network / report['energy_pj']:.0f} %)" in energy


def test_system_runs_draw_pngs_on_request_and_none_with_no_plots(tmp_path):
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "png", "dp=4", "--plot-format", "png")
    assert run.stderr.splitlines()[-1].endswith("gantt.png, memory.png, energy.png")
    for name in ("gantt.png", "memory.png", "energy.png"):
        assert (tmp_path / "png" / name).read_bytes().startswith(b"\x89PNG")
    # the manifest, written last, names the plots too
    manifest = json.loads((tmp_path / "png" / "manifest.json").read_text())
    assert {"report.json", "gantt.png", "memory.png", "energy.png"} <= set(manifest["files"])
    _run(tmp_path / "none", "dp=4", "--no-plots")
    assert not list((tmp_path / "none").glob("*.svg")) and not list((tmp_path / "none").glob("*.png"))
