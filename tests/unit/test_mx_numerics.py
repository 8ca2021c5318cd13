"""monet-run --precision: the numerics of an MX training step against fp32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monet_ir.tools.monet_run import main

DATA = Path(__file__).resolve().parents[1] / "data"


def run_step(tmp_path, model: str, *options) -> dict[str, np.ndarray]:
    reference = np.load(DATA / "reference" / f"{model}.npz")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=reference["x"], labels=reference["labels"])
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.npz"
    with pytest.raises(SystemExit) as done:
        main([str(DATA / "models" / f"{model}.onnx"), "-p", "autodiff", "--inputs", str(inputs), "--out", str(out),
              *options])
    assert done.value.code == 0
    with np.load(out) as d:
        return {k: d[k] for k in d.files}


def gradient_error(run, base) -> float:
    """Mean over parameters of the relative L2 error of the gradient."""
    keys = [k for k in base if k.startswith("grad/")]
    return float(np.mean([np.linalg.norm(run[k] - base[k]) / np.linalg.norm(base[k]) for k in keys]))


@pytest.mark.parametrize("model", ["mlp_b4", "lenet5_b4"])
def test_mx_steps_against_fp32(tmp_path, model):
    base = run_step(tmp_path, model)
    fp8 = run_step(tmp_path, model, "--precision", "mxfp8_e4m3")
    fp4 = run_step(tmp_path, model, "--precision", "mxfp4_e2m1", "--mx-group", "square:8x8")
    mixed = run_step(tmp_path, model, "--precision",
                     "weights=mxfp8_e4m3,activations=mxfp8_e4m3,gradients=mxfp8_e5m2")
    assert set(fp8) == set(base)
    # MXFP8: the loss within a few percent, the gradients close but not identical
    assert abs(fp8["loss"] - base["loss"]) / abs(base["loss"]) < 0.03
    assert not any(np.array_equal(fp8[k], base[k]) for k in base if k.startswith("grad/"))
    assert 0 < gradient_error(fp8, base) < 0.4
    # MXFP4 rounds coarser: larger gradient error
    assert gradient_error(fp4, base) > 1.5 * gradient_error(fp8, base)
    # E5M2 gradients change the backward pass only: the same loss as all-E4M3
    assert mixed["loss"] == fp8["loss"]
    assert gradient_error(mixed, base) != gradient_error(fp8, base)


def test_plain_precision_changes_nothing(tmp_path):
    base = run_step(tmp_path, "mlp_b4")
    same = run_step(tmp_path, "mlp_b4", "--precision", "fp32")
    assert all(np.array_equal(base[k], same[k]) for k in base)
