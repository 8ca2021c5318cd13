"""`monet-run` reproduces PyTorch's training-step numbers (tests/data/reference, from
../shared/models/*.reference.json): loss, parameter gradients, intermediate values and gradients."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


def monet_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_run", *args], capture_output=True, text=True,
                          timeout=120)


def close(got, expected, what):
    rows = expected.shape[0] if expected.ndim else None
    got = got[:rows] if rows is not None and got.ndim and got.shape[0] != rows else got
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=what)


@pytest.mark.parametrize("name", ["mlp_b4", "lenet5_b4"])
def test_training_step_matches_pytorch(tmp_path, name):
    ref = np.load(DATA / "reference" / f"{name}.npz")
    np.savez(tmp_path / "inputs.npz", x=ref["x"], labels=ref["labels"])
    result = monet_run(str(DATA / "models" / f"{name}.onnx"), "--inputs", str(tmp_path / "inputs.npz"),
                       "--out", str(tmp_path / "out.npz"), "--all-values")
    assert result.returncode == 0, result.stderr
    out = np.load(tmp_path / "out.npz")
    close(out["loss"], ref["loss"], "loss")
    params = [k.split(":", 1)[1] for k in ref.files if k.startswith("grad_init:")]
    for p in params:
        close(out[f"grad/{p}"], ref[f"grad_init:{p}"], f"grad/{p}")
    intermediates = [k.split(":", 1)[1] for k in ref.files if k.startswith("value:")]
    assert intermediates
    for t in intermediates:
        close(out[f"value/{t}"], ref[f"value:{t}"], f"value/{t}")
        close(out[f"grad/{t}"], ref[f"grad:{t}"], f"grad/{t}")


def test_errors_are_one_line(tmp_path):
    result = monet_run(str(DATA / "models" / "mlp_b4.onnx"), "--out", str(tmp_path / "o.npz"))
    assert result.returncode == 1
    assert result.stderr.strip() == ("monet-run: error: argument 0 'x' (monet.input) has no value: 'x' is not among "
                                     "the inputs (expected shape [4, 784], dtype float32); give the data inputs by "
                                     "name in an npz file with --inputs FILE.npz (no --inputs was given)")
    result = monet_run(str(tmp_path / "missing.onnx"), "--out", str(tmp_path / "o.npz"))
    assert result.returncode == 1 and "cannot read file" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["mlp_b4", "lenet5_b4"])
def test_adam_step_matches_pytorch(tmp_path, name):
    ref = np.load(DATA / "reference" / f"{name}.npz")
    np.savez(tmp_path / "inputs.npz", x=ref["x"], labels=ref["labels"])
    result = monet_run(str(DATA / "models" / f"{name}.onnx"), "-p", "autodiff,insert-optimizer{kind=adam lr=0.001}",
                       "--inputs", str(tmp_path / "inputs.npz"), "--out", str(tmp_path / "out.npz"))
    assert result.returncode == 0, result.stderr
    out = np.load(tmp_path / "out.npz")
    updated = [k.split(":", 1)[1] for k in ref.files if k.startswith("adam:")]
    assert updated
    for p in updated:
        close(out[p], ref[f"adam:{p}"], f"{p} after one Adam step")
        assert out[f"{p}.step"] == 1.0


def test_gradients_are_written_with_insert_optimizer(tmp_path):
    ref = np.load(DATA / "reference" / "mlp_b4.npz")
    np.savez(tmp_path / "inputs.npz", x=ref["x"], labels=ref["labels"])
    model = str(DATA / "models" / "mlp_b4.onnx")
    plain = monet_run(model, "--inputs", str(tmp_path / "inputs.npz"), "--out", str(tmp_path / "plain.npz"))
    adam = monet_run(model, "-p", "autodiff,insert-optimizer{kind=adam}", "--inputs", str(tmp_path / "inputs.npz"),
                     "--out", str(tmp_path / "adam.npz"))
    assert plain.returncode == 0 and adam.returncode == 0, adam.stderr
    grads, stepped = np.load(tmp_path / "plain.npz"), np.load(tmp_path / "adam.npz")
    names = [k for k in grads.files if k.startswith("grad/")]
    assert names and set(names) <= set(stepped.files)
    for name in names:
        np.testing.assert_array_equal(stepped[name], grads[name])
    assert "fc1.weight.exp_avg" in stepped.files


def test_an_unreadable_npz_is_bad_input(tmp_path):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    result = monet_run(str(DATA / "models" / "mlp_b4.onnx"), "--inputs", str(empty), "--out", str(tmp_path / "o.npz"))
    assert result.returncode == 1 and "cannot read npz" in result.stderr and "Traceback" not in result.stderr
