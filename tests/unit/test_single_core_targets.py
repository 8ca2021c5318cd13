"""A single ZigZag core file is a target that runs every op: ZigZag's own shipped hardware files
and Stream's core files, unchanged, price a whole training step (vector ops on the core's own
array, one lane per PE); a file without compute units is a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED
from targets import TargetError, get_target

DATA = Path(__file__).resolve().parents[1] / "data"
ZIGZAG_ALL = sorted((DATA / "zigzag_hw").glob("*.yaml"))
IMC = [p for p in ZIGZAG_ALL if p.stem in ("aimc", "dimc")]  # energies from ZigZag's IMC macro model
ZIGZAG = [p for p in ZIGZAG_ALL if p not in IMC]
STREAM_CORES = [DATA / "stream_hw" / "cores" / f"{name}.yaml" for name in ("tpu_like", "eyeriss_like", "meta_prototype")]
LENET = DATA / "models" / "lenet5_b4.onnx"


def report(model: Path, target: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(model), "--target", str(target),
                           "--out", str(tmp_path / "out"), "--no-plots", *extra], capture_output=True, text=True)


@pytest.mark.parametrize("path", ZIGZAG + STREAM_CORES, ids=lambda p: p.name)
def test_one_core_runs_every_op(path):
    (core,) = get_target(str(path)).cores
    assert {"loop_nest", "vector"} <= set(core.op_kinds)


@pytest.mark.parametrize("path", [p for p in ZIGZAG if p.stem != "gemm_l1"] + STREAM_CORES, ids=lambda p: p.name)
def test_training_step_on_a_zigzag_core(path, tmp_path):
    run = report(LENET, path, tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["latency_cycles"] > 0


def test_a_core_too_small_for_a_layer_says_which_layer(tmp_path):
    run = report(LENET, DATA / "zigzag_hw" / "gemm_l1.yaml", tmp_path)
    if run.returncode == 0:
        return  # LeNet's layers fit the L1 of gemm_l1
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "(node '" in run.stderr and "no loop order" in run.stderr


@pytest.mark.parametrize("path", IMC, ids=lambda p: p.name)
def test_an_imc_array_without_unit_energy_is_one_clear_error(path, tmp_path):
    """ZigZag prices its in-memory-computing arrays with its own macro model (the files give no
    unit_energy); MONET has none, so it says so instead of pricing every MAC at 0 pJ."""
    with pytest.raises(TargetError) as error:
        get_target(str(path))
    (line,) = error.value.problems
    assert line.startswith(f"{path}: operational_array.is_imc: an in-memory-computing array")
    assert "give operational_array.unit_energy" in line
    patched = tmp_path / path.name
    patched.write_text(path.read_text().replace("  is_imc: True", "  is_imc: True\n  unit_energy: 0.01"))
    (core,) = get_target(str(patched)).cores
    assert core.array.units == 128 * 128 and core.precisions[0].energy_pj == pytest.approx(0.01)


def test_a_missing_mac_energy_is_an_error_not_zero(tmp_path):
    path = tmp_path / "core.yaml"
    path.write_text((DATA / "stream_hw" / "cores" / "tpu_like.yaml").read_text().replace("unit_energy: 0.04", ""))
    with pytest.raises(TargetError, match="operational_array.unit_energy: missing required field"):
        get_target(str(path))


def test_memories_priced_by_cacti_are_one_clear_error(tmp_path):
    """ZigZag's generic_array_cacti.yaml of 2024 leaves r_cost/w_cost to CACTI
    (auto_cost_extraction: true): one line naming those memories, not 0 pJ per access."""
    import re

    text = (DATA / "zigzag_hw" / "generic_array_cacti.yaml").read_text()
    for name in ("rf_I", "sram_32MB"):
        block = re.search(rf"  {name}:.*?\n\n", text, re.S).group(0)
        text = text.replace(block, re.sub(r"    [rw]_cost: .*\n", "", block).replace(
            "    size:", "    auto_cost_extraction: true\n    size:"))
    path = tmp_path / "cacti.yaml"
    path.write_text(text)
    with pytest.raises(TargetError) as error:
        get_target(str(path))
    assert error.value.problems == (f"{path}: memories.{{rf_I, sram_32MB}}.auto_cost_extraction: ZigZag takes the "
                                    "access energies from CACTI, which MONET does not have; give r_cost and w_cost "
                                    "(pJ per access)",)


def test_a_memory_only_file_is_not_a_target():
    with pytest.raises(TargetError, match="offchip.yaml: operational_array.sizes: this core has no compute units"):
        get_target(str(DATA / "stream_hw" / "cores" / "offchip.yaml"))


def test_streams_resnet18_inference_on_the_tpu_like_core(tmp_path):
    model = SHARED / "models" / "stream_resnet18_inference.onnx"
    if not model.exists():
        pytest.skip("../shared/models/stream_resnet18_inference.onnx is not present")
    run = report(model, DATA / "stream_hw" / "cores" / "tpu_like.yaml", tmp_path, "--inference", "--precision", "int8")
    assert run.returncode == 0, run.stderr
    layers = json.loads((tmp_path / "out" / "report.json").read_text())["layers"]
    assert sum(1 for row in layers if row["op"] == "nn.conv") == 20
