"""Start-up and process tuning: what monet-opt registers without loading or scanning more than it
needs; the garbage-collector thresholds of a report."""

from __future__ import annotations

import importlib.metadata

from monet_ir.emit import get_all_emitters
from monet_ir.tools.monet_opt import MonetOptMain


def test_monet_opt_does_not_scan_installed_distributions(monkeypatch, tmp_path, capsys):
    """xDSLOptMain's default target registration reads every distribution's entry points (17 ms
    of every start); monet-opt takes xDSL's target table directly and still prints MLIR."""
    source = tmp_path / "empty.mlir"
    source.write_text("builtin.module {}\n")

    def scanned(*args, **kwargs):
        raise AssertionError("entry points scanned")

    monkeypatch.setattr(importlib.metadata, "entry_points", scanned)
    tool = MonetOptMain(args=[str(source), "-t", "mlir"])
    tool.run()
    assert capsys.readouterr().out.startswith("builtin.module {")
    monkeypatch.undo()
    from xdsl.universe import Universe

    assert set(tool.available_targets) == set(Universe.get_multiverse().all_targets) | set(get_all_emitters())


def test_a_report_runs_with_fewer_collections_and_restores_the_thresholds(monkeypatch, tmp_path):
    import gc

    from monet_ir.tools import monet
    from monet_ir.tools.gc_tuning import THRESHOLDS

    seen = []
    monkeypatch.setattr(monet, "_run_report", lambda args: seen.append(gc.get_threshold()))
    before = gc.get_threshold()
    monet.run_report(monet.build_parser().parse_args(["report", "m.onnx", "--target", "edge_npu", "--out", str(tmp_path)]))
    assert seen == [THRESHOLDS] and gc.get_threshold() == before


def test_monet_opt_loads_package_metadata_only_for_version():
    """xDSL's driver imports `importlib.metadata` (and through it email, zipfile, socket) to print
    `--version`; monet-opt defers it to that flag, and a later import gets the real module."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    code = (
        "import sys, monet_ir.tools.monet_opt;"
        "print(sorted(m for m in ('importlib.metadata', 'email', 'zipfile') if m in sys.modules));"
        "import importlib.metadata as m; print(m.version.__module__, m.version('xdsl') == m.version('xdsl'));"
        "from monet_ir.tools.monet_opt import main; main(['--version'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0, out.stderr
    assert lines[0] == "[]"
    assert lines[1] == "importlib.metadata True"  # the real module, not the stand-in
    assert lines[2].startswith("monet-opt (xdsl ")
