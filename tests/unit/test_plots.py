"""The plot process: draws the three PNGs from plain data and loads nothing of MONET's pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "tests" / "data" / "models" / "mlp_b4.onnx"
PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_process_imports_nothing_it_does_not_draw():
    code = ("import sys, monet_ir.emit.plots; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'xdsl', 'onnx', 'dialects', 'passes', 'targets', "
            "'yaml', 'scipy', 'networkx', 'deap'}), "
            "sorted(m for m in sys.modules if m.startswith('monet_ir.') and m not in ('monet_ir.emit', 'monet_ir.emit.plots')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert run.stdout.strip() == "[] []"


def test_report_writes_the_plots_after_the_summary(tmp_path):
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(MLP), "--target", "edge_npu",
                          "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("MONET training-step report: mlp_b4.onnx on edge_npu")
    assert run.stdout == (tmp_path / "report.txt").read_text()
    for name in ("gantt.png", "memory.png", "energy.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
    lines = run.stderr.splitlines()
    assert "report.json, layers.csv, report.txt, trace.json" in lines[-2]
    assert lines[-1].endswith("gantt.png, memory.png, energy.png")
