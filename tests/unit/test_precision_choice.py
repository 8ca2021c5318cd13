"""Every target takes --precision; defaults come from the target and are stated in the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from targets import TargetError, get_target, load_target_file
from targets.precision_choice import choose_precision

DATA = Path(__file__).resolve().parents[1] / "data"
LENET = DATA / "models" / "lenet5_b4.onnx"
STREAM = DATA / "stream_hw" / "tpu_like_quad_core.yaml"

INT8_ONLY = """
name: int8_only
dram: {name: dram, capacity: 1 GiB, bandwidth_GBps: 8.0, read_energy_pj_per_bit: 10.0}
cores:
  - name: npu
    kind: mac_array
    array: {dims: {D1: 16, D2: 16}, dataflow: {D1: ["K, 16"], D2: ["C, 16"]}}
    precisions: {int8: {bits: 8, energy_pj: 0.1}, fp16: {bits: 16, energy_pj: 0.4}}
    op_kinds: [loop_nest, vector]
    memories:
      sram: {size: 256 KiB, operands: [I, W, O], served_dims: [D1, D2], read_bw: 512, read_energy_pj: 50.0,
             write_energy_pj: 60.0}
"""

@pytest.mark.parametrize("name", ["edge_npu", "tpu_like_quad_core", "hetero_chip", "datacenter"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8"])
def test_every_builtin_target_takes_a_precision(name, precision):
    choice = choose_precision(get_target(name, precision=precision), precision)
    assert (choice.name, choice.source) == (precision, "--precision")


def test_datacenter_runs_bf16_by_default_others_the_model_type():
    assert choose_precision(get_target("datacenter"), None).name == "bf16"
    assert choose_precision(get_target("edge_npu"), None).name is None


def test_stream_files_default_to_int8_and_say_why():
    choice = choose_precision(get_target(str(STREAM)), None)
    assert choice.name == "int8" and "int8" in choice.source and "--precision" in choice.source


def test_a_precision_no_core_runs_names_the_ones_they_run(tmp_path):
    path = tmp_path / "int8_only.yaml"
    path.write_text(INT8_ONLY)
    target = load_target_file(str(path))
    with pytest.raises(TargetError) as err:
        choose_precision(target, "fp32")
    message = str(err.value)
    assert "\n" not in message and "int8_only.yaml" in message and "fp32" in message
    assert "it runs int8, fp16" in message
    assert message.endswith("(precisions every core of 'int8_only' runs: bf16, fp16, fp8, int8, mxint8, mxfp8_e4m3, "
                            "mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4_e2m1)")


def test_a_default_precision_the_cores_cannot_run_is_a_target_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(INT8_ONLY + "default_precision: fp32\n")
    with pytest.raises(TargetError, match=r"bad.yaml: default_precision: core 0 \('npu'\) cannot run fp32"):
        load_target_file(str(path))


def run_report(tmp_path, *args):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(LENET), "--out", str(out),
                          "--no-plots", *args], capture_output=True, text=True)
    return run, out


def test_report_states_the_precision_and_its_source(tmp_path):
    run, out = run_report(tmp_path, "--target", "datacenter")
    assert run.returncode == 0, run.stderr
    assert "precision: bf16 (default of target 'datacenter')" in run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["precision"] == "bf16" and "datacenter" in report["precision_source"]
    assert "precision  bf16" in (out / "report.txt").read_text()
    run, out = run_report(tmp_path, "--target", "edge_npu", "--precision", "fp16")
    assert run.returncode == 0, run.stderr
    assert json.loads((out / "report.json").read_text())["precision"] == "fp16"


def test_report_on_a_stream_file_without_precision(tmp_path):
    run, out = run_report(tmp_path, "--target", str(STREAM))
    assert run.returncode == 0, run.stderr
    assert "precision: int8" in run.stderr
    assert json.loads((out / "report.json").read_text())["precision"] == "int8"


def test_report_with_a_precision_the_target_cannot_run(tmp_path):
    path = tmp_path / "int8_only.yaml"
    path.write_text(INT8_ONLY)
    run, _ = run_report(tmp_path, "--target", str(path), "--precision", "fp32")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if not line.startswith("[")]
    assert len(errors) == 1 and "cannot run fp32" in errors[0]
