"""The text report's layout: columns never run together whatever the figures' widths (fusemax's
1,250,000,000,000,000-byte DRAM), and numbers are written one way (no `2.44e+04 ms` beside
`86.18 ms`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monet_ir.emit.parallel_report import parallel_text
from monet_ir.emit.plots import significant
from monet_ir.emit.step_report import table, text_summary

REPO = Path(__file__).resolve().parents[2]
LENET = REPO / "tests" / "data" / "models" / "lenet5_b4.onnx"


@pytest.mark.parametrize("value, text", [(24403.1, "24,403"), (88.834, "88.83"), (41.0, "41"), (14.3, "14.3"),
                                         (0.0001174, "0.0001174"), (9999.6, "10,000"), (0.99996, "1"), (0, "0"),
                                         (5628.4, "5,628"), (1.23e-9, "1.230e-09"), (-2.5e4, "-25,000")])
def test_significant_digits_without_e_notation(value, text):
    assert significant(value) == text


def test_table_columns_widen_to_their_cells():
    lines = table([["memory", "peak", "capacity"], ["dram", "49,857,599", "1,250,000,000,000,000"]], [10, 8, 8])
    assert lines == ["  memory            peak               capacity",
                     "  dram        49,857,599  1,250,000,000,000,000"]


def _split_columns(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().split("  ") if cell.strip()]


def test_fusemax_memory_table_keeps_its_columns_apart(tmp_path):
    fusemax = REPO / "tests" / "data" / "stream_hw" / "fusemax.yaml"
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--target", str(fusemax),
                          "--out", str(tmp_path), "--no-plots"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    lines = run.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.lstrip().startswith("memory ")))
    for name, peak in report["memory"]["peak_bytes"].items():
        row = next(line for line in lines[start:] if line.split()[0] == name)
        cap = report["memory"]["capacity_bytes"][name]
        assert _split_columns(row) == [name, f"{peak:,}", f"{int(cap):,}"], row
    assert report["memory"]["capacity_bytes"]["dram"] >= 10**15  # the case that ran together


def test_large_and_small_figures_print_in_one_format(tmp_path):
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--target", "edge_npu",
                          "--out", str(tmp_path), "--no-plots"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    # the same step 30,000 times longer and costlier: GPT-2-sized figures
    report["latency_s"] *= 30000
    report["energy_pj"] *= 30000
    report["energy_breakdown_pj"] = {k: v * 30000 for k, v in report["energy_breakdown_pj"].items()}
    for row in report["phases"].values():
        row["energy_pj"] *= 30000
    text = text_summary(report)
    assert "e+" not in text and "e-0" not in text
    assert f"= {significant(report['latency_s'] * 1e3)} ms at" in text and "," in significant(report["latency_s"] * 1e3)
    assert f"  energy   {significant(report['energy_pj'] / 1e9)} mJ" in text


def test_multichip_text_prints_one_format(tmp_path):
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--system", "2x2_edge_npu",
                          "--parallel", "dp=4", "--out", str(tmp_path), "--no-plots"], capture_output=True, text=True,
                         cwd=REPO)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    report["latency_s"] *= 30000
    report["energy_pj"] *= 30000
    text = parallel_text(report)
    assert "e+" not in text and "1 collectives" not in text and "  network    1 collective per chip's step" in text
