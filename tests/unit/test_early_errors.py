"""Errors come early and say what to do: options are checked before the model is read, a
misspelled name says which one was meant, a model too big for a target says which of
--precision, --checkpoint, --system or a storage plan would help (with the command), a sweep
whose every design fails exits non-zero, and monet-run names the flag a missing input comes from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from monet_ir.tools.monet import main

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "data" / "models"
LENET = str(MODELS / "lenet5_b4.onnx")
MLP = str(MODELS / "mlp_b4.onnx")


def _monet(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as code:
        main(list(args))
    out = capsys.readouterr()
    return code.value.code, out.out, out.err


@pytest.mark.parametrize("args, expected", [
    (["--target", "edge_nup"], "did you mean 'edge_npu'?"),
    (["--target", "edge_npu", "--precision", "bf61"], "unknown precision 'bf61'; did you mean 'bf16'?"),
    (["--target", "edge_npu", "--checkpoint", "sqrtt"], "unknown policy 'sqrtt'; did you mean 'sqrt'?"),
    (["--target", "edge_npu", "--checkpoint", "plan=no_such_plan.json"], "no_such_plan.json: file not found"),
    (["--target", "edge_npu", "--fusion", "autoo"], "did you mean 'auto'?"),
    (["--target", "edge_npu", "--fusion", "auto", "--tiles", "-1"], "--tiles -1"),
])
def test_bad_options_fail_before_the_model_is_read(args, expected, capsys, monkeypatch):
    import monet_ir.frontend.onnx_import as importer

    def never(*_a, **_k):
        raise AssertionError("the model was imported before the options were checked")

    monkeypatch.setattr(importer, "import_onnx", never)
    code, _, err = _monet(capsys, "report", LENET, *args, "--out", "/nonexistent/never")
    assert code == 1 and expected in err.strip().splitlines()[-1], err


@pytest.mark.parametrize("args, expected", [
    (["report", LENET, "--target", "edge_npu", "--optimizer", "adamm"], "invalid choice: 'adamm'; did you mean 'adam'?"),
    (["report", LENET, "--target", "edge_npu", "--optimiser", "adam"], "did you mean '--optimizer'?"),
    (["explore", LENET, "--target", "edge_npu", "--populaton", "4"], "did you mean '--population'?"),
    (["reprot", LENET], "did you mean 'report'?"),
])
def test_misspelled_options_and_choices_say_what_was_meant(args, expected, capsys):
    code, _, err = _monet(capsys, *args, "--out", "/nonexistent/never") if args[0] != "reprot" else _monet(capsys, *args)
    assert code == 2 and expected in err, err


def test_misspelled_node_names_in_fusion_and_mapping(tmp_path, capsys):
    code, _, err = _monet(capsys, "report", LENET, "--target", "edge_npu", "--fusion", "/conv1/Convv:/MaxPool_1",
                          "--out", str(tmp_path / "a"), "--no-plots")
    assert code == 1 and "'/conv1/Convv' is no such node; did you mean '/conv1/Conv'?" in err
    mapping = tmp_path / "map.yaml"
    mapping.write_text("- name: default\n  core_allocation: [0, 1, 2]\n- name: /conv2/Con\n  core_allocation: [0]\n"
                       "- name: LayerNormalization\n  core_allocation: [1]\n")
    code, _, err = _monet(capsys, "report", LENET, "--target", "edge_npu", "--mapping", str(mapping),
                          "--out", str(tmp_path / "b"), "--no-plots")
    assert code == 1 and err.strip().endswith("entry '/conv2/Con': names no node, op, ONNX op type or phase of the "
                                              "step; did you mean '/conv2/Conv'?"), err
    # an op type the model lacks (a file shared by several models) is no error
    mapping.write_text("- name: default\n  core_allocation: [0, 1, 2]\n- name: LayerNormalization\n"
                       "  core_allocation: [1]\n")
    code, _, err = _monet(capsys, "report", LENET, "--target", "edge_npu", "--mapping", str(mapping),
                          "--out", str(tmp_path / "c"), "--no-plots")
    assert code == 0, err


def test_a_model_too_big_says_what_would_help_with_the_commands(tmp_path, capsys):
    """LeNet-5 b4 with Adam on a 1 MB DRAM (edge_npu's, shrunk): every suggestion is a command,
    and those it tried say what they measured."""
    import yaml

    from targets.loader import BUILTIN_DIR

    data = yaml.safe_load(Path(BUILTIN_DIR, "edge_npu.yaml").read_text())
    data["name"] = "small_npu"
    data["dram"]["capacity"] = "1MB"
    target = tmp_path / "small_npu.yaml"
    target.write_text(yaml.safe_dump(data))
    code, _, err = _monet(capsys, "report", LENET, "--target", str(target), "--out", str(tmp_path / "o"), "--no-plots")
    assert code == 1
    lines = err.splitlines()
    assert lines[-1].startswith("monet: error: target 'small_npu': DRAM") and "the training step needs" in lines[-1]
    help_at = lines.index("monet: the step does not fit; what would help:")
    tips = [line for line in lines[help_at + 1:-1] if line.startswith("  - ")]
    assert any(t.startswith("  - --precision bf16 halves every float tensor: needs ") and
               f"monet report {LENET} --target {target} --precision bf16 --out DIR" in t for t in tips), tips
    assert any("--checkpoint" in t and "needs " in t for t in tips), tips
    assert any("with `chip: small_npu`" in t and "dp=N,zero=3" in t for t in tips), tips
    # a suggestion said to fit does fit
    fitting = [t for t in tips if ", fits: monet report " in t]
    assert fitting
    command = fitting[0].split(", fits: ")[1].split()
    assert command[:2] == ["monet", "report"] and command[-2:] == ["--out", "DIR"]
    code, _, err = _monet(capsys, *command[1:-1], str(tmp_path / "fits"), "--no-plots")
    assert code == 0, err


def test_a_sweep_whose_designs_all_fail_exits_non_zero(tmp_path):
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "sweep", MLP, "--target-template", "edge_npu",
                          "--set", "dram.capacity=1kB,2kB", "--out", str(tmp_path / "s"), "--no-plots"],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("monet: error: every design of the sweep failed; design 0: ")
    assert (tmp_path / "s" / "sweep.csv").exists()  # the table is still written
    bad = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "sweep", MLP, "--target-template", "edge_npu",
                          "--set", "cores.0.arrayy=8,16", "--out", str(tmp_path / "t")], capture_output=True, text=True,
                         cwd=REPO)
    assert bad.returncode == 1
    assert "--set cores.0.arrayy=8,16: design 0 (cores.0.arrayy=8) is not a valid target: " in bad.stderr
    assert "cores[0].arrayy: unknown field (did you mean 'array'?)" in bad.stderr


def test_monet_run_names_the_flag_a_missing_value_comes_from(tmp_path):
    import numpy as np

    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_run", MLP, "--out", str(tmp_path / "o.npz")],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 1
    assert run.stderr.strip().endswith("give the data inputs by name in an npz file with --inputs FILE.npz (no --inputs "
                                       "was given)"), run.stderr
    np.savez(tmp_path / "labels.npz", labels=np.zeros(4, dtype=np.int64))
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_run", MLP, "--inputs", str(tmp_path / "labels.npz"),
                          "--out", str(tmp_path / "o.npz")], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 1 and "'x' is not among the inputs" in run.stderr
    assert "labels.npz has no array of that name" in run.stderr


def test_monet_run_writes_into_a_new_folder_and_refuses_an_unwritable_one(tmp_path):
    inputs = str(REPO / "examples" / "batches" / "mlp_b4.npz")  # the README's example batch
    out = tmp_path / "new" / "folder" / "step.npz"
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_run", MLP, "--inputs", inputs, "--out", str(out)],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert out.exists() and not [p for p in out.parent.iterdir() if p != out]  # no temporary file left
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_run", MLP, "--inputs", inputs, "--out",
                          str(blocked / "step.npz")], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 1 and run.stderr.startswith(f"monet-run: error: --out {blocked}: ")
