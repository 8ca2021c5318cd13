"""Invalid target descriptions are one line naming the file and the field (issue 29): Stream
systems follow Stream's own reader's rules (`stream/parser/accelerator_validator.py` and
`accelerator_factory.py` of the Stream version whose format the file uses), and no numeric field
of any format takes NaN, an infinity or an absurd magnitude."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from targets import TargetError, get_target
from targets.errors import merge_repeated

DATA = Path(__file__).resolve().parents[1] / "data"
STREAM = DATA / "stream_hw"
BUILTIN = Path(__file__).resolve().parents[2] / "targets" / "builtin"


@pytest.fixture
def hw(tmp_path: Path) -> Path:
    """A copy of Stream's shipped hardware folder (systems and cores/) to edit."""
    shutil.copytree(STREAM, tmp_path / "hw")
    return tmp_path / "hw"


TWO_CORES = "name: two\ncores:\n  0: tpu_like.yaml\n  1: tpu_like.yaml\noffchip_core: offchip.yaml\n"


def problems_of(path: Path) -> list[str]:
    with pytest.raises(TargetError) as info:
        get_target(str(path))
    return list(info.value.problems)


def one_line(path: Path, *fragments: str) -> str:
    problems = problems_of(path)
    assert len(problems) == 1, problems
    for fragment in fragments:
        assert fragment in problems[0], problems
    return problems[0]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_the_two_core_system_loads(hw):
    target = get_target(str(write(hw, "two.yaml", TWO_CORES + "core_connectivity: ['0, 1']\nbandwidth: 32\n")))
    assert len(target.cores) == 2 and target.dram is not None


def test_an_empty_core_file_is_not_a_lost_core(hw):
    (hw / "cores" / "empty.yaml").write_text("")
    path = write(hw, "s.yaml", TWO_CORES.replace("1: tpu_like.yaml", "1: empty.yaml")
                 + "core_connectivity: ['0, 1']\nbandwidth: 32\n")
    one_line(path, f"{path}: cores[1]: core file 'empty.yaml' is empty")


def test_missing_bandwidth_and_connectivity(hw):
    one_line(write(hw, "a.yaml", TWO_CORES + "core_connectivity: ['0, 1']\n"), "bandwidth: missing required field")
    one_line(write(hw, "b.yaml", TWO_CORES + "bandwidth: 32\n"), "core_connectivity: missing required field")
    # an empty list is what Stream asks for cores that share data through DRAM only
    assert len(get_target(str(write(hw, "c.yaml", TWO_CORES + "core_connectivity: []\nbandwidth: 32\n"))).cores) == 2


def test_core_ids_must_be_0_to_n_minus_1(hw):
    path = write(hw, "s.yaml", TWO_CORES.replace("1: tpu_like", "2: tpu_like")
                 + "core_connectivity: ['0, 2']\nbandwidth: 32\n")
    one_line(path, "cores: core ids must be 0..1", "1 is missing")


def test_memory_both_shared_and_connected(hw):
    path = write(hw, "s.yaml", TWO_CORES + "core_connectivity: ['0, 1']\nbandwidth: 32\ncore_memory_sharing: ['0, 1']\n")
    one_line(path, "core_memory_sharing[0]: cores 0 and 1 share their top memory and are also connected")


def test_shared_memory_must_be_the_same_memory(hw):
    path = write(hw, "s.yaml", TWO_CORES.replace("1: tpu_like.yaml", "1: simd.yaml")
                 + "core_connectivity: []\nbandwidth: 32\ncore_memory_sharing: ['0, 1']\n")
    one_line(path, "core_memory_sharing[0]: cores 0 and 1 share a top memory but describe different ones")
    path = write(hw, "t.yaml", TWO_CORES + "core_connectivity: []\nbandwidth: 32\ncore_memory_sharing: ['0']\n")
    one_line(path, "core_memory_sharing[0]: a memory sharing group needs at least two cores")


@pytest.mark.parametrize("ports, fragment", [
    ("[]", "the DRAM has no ports"),
    ("[{name: r, type: read, bandwidth_min: 64, bandwidth_max: 64, allocation: ['I1, tl', 'I2, tl', 'O, tl']}]",
     "the DRAM has no write port"),
])
def test_dram_needs_a_read_and_a_write_port(hw, ports, fragment):
    offchip = yaml.safe_load((hw / "cores" / "offchip.yaml").read_text())
    offchip["memories"]["dram"]["ports"] = yaml.safe_load(ports)
    (hw / "cores" / "offchip_bad.yaml").write_text(yaml.safe_dump(offchip))
    path = write(hw, "s.yaml", TWO_CORES.replace("offchip.yaml", "offchip_bad.yaml")
                 + "core_connectivity: ['0, 1']\nbandwidth: 32\n")
    one_line(path, "offchip_bad.yaml: memories.dram.ports", fragment)
    (hw / "cores" / "offchip_bad.yaml").write_text("")
    one_line(path, "offchip_bad.yaml: <top>: empty file")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e300", "'1e999'"])
def test_numbers_of_a_stream_system_and_core(hw, value):
    path = write(hw, "s.yaml", TWO_CORES + f"core_connectivity: ['0, 1']\nbandwidth: {value}\n")
    one_line(path, "bandwidth:")
    core = (hw / "cores" / "tpu_like.yaml").read_text()
    (hw / "cores" / "tpu_like.yaml").write_text(core.replace("r_cost: 0.095", f"r_cost: {value}", 1))
    if "0.095" in core:
        one_line(write(hw, "t.yaml", TWO_CORES + "core_connectivity: ['0, 1']\nbandwidth: 32\n"), "r_cost")


@pytest.mark.parametrize("field, value", [
    ("bandwidth_GBps", ".nan"), ("bandwidth_GBps", ".inf"), ("bandwidth_GBps", "1e-300"),
    ("read_energy_pj_per_bit", "-.inf"), ("capacity", "'1e999 GiB'"), ("capacity", "1e300"),
])
def test_numbers_of_our_format(tmp_path, field, value):
    data = yaml.safe_load((BUILTIN / "edge_npu.yaml").read_text())
    data["dram"][field] = yaml.safe_load(value)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    one_line(path, f"dram.{field}")


def test_a_problem_shared_by_several_cores_is_one_line(tmp_path):
    """A YAML alias (or one of our templates) used by four cores gives its problem once."""
    data = (BUILTIN / "tpu_like_quad_core.yaml").read_text()
    target = get_target(str(BUILTIN / "tpu_like_quad_core.yaml"))
    assert len(target.cores) >= 4
    bad = tmp_path / "t.yaml"
    bad.write_text(data.replace("energy_pj:", "energy_pj: .nan #", 1))
    problems = problems_of(bad)
    assert len(problems) == 1, problems
    assert merge_repeated(["f: cores[0].x: bad", "f: cores[3].x: bad", "f: dram: other"]) == [
        "f: cores[0, 3].x: bad", "f: dram: other"]


def test_system_file_numbers(tmp_path):
    path = tmp_path / "sys.yaml"
    path.write_text("chip: edge_npu\nchips: 4\nnetwork: {topology: ring, bandwidth_GBps: .nan}\n")
    one_line(path, "network.bandwidth_GBps: expected a finite number")  # (even where a target is expected)
    path.write_text("chip: edge_npu\nchips: 4\nnetwork: {topology: ring, bandwidth_GBps: 5}\n")
    one_line(path, "a multi-chip system file", "--system")
    path.write_text("chip: edge_npu\nchips: 4\nnetwork: {topology: ring, bandwidth_GBps: .nan}\n")
    from targets.system import get_system

    with pytest.raises(TargetError) as info:
        get_system(str(path))
    assert len(info.value.problems) == 1 and "network.bandwidth_GBps: expected a finite number" in \
        info.value.problems[0]


def test_cli_one_line_exit_1(hw):
    (hw / "cores" / "empty.yaml").write_text("")
    path = write(hw, "s.yaml", TWO_CORES.replace("1: tpu_like.yaml", "1: empty.yaml")
                 + "core_connectivity: ['0, 1']\nbandwidth: 32\n")
    model = DATA / "models" / "mlp_b4.onnx"
    result = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(model), "--target",
                             str(path), "--no-plots", "--out", str(hw / "out")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("[")]
    assert lines == [f"monet: error: {path}: cores[1]: core file 'empty.yaml' is empty: it describes no core"]


def test_a_core_id_or_a_setting_given_twice(hw):
    """YAML keeps the last of two equal keys: the first core (or bandwidth) would be lost."""
    path = write(hw, "s.yaml", TWO_CORES.replace("  1: tpu_like.yaml\n", "  1: tpu_like.yaml\n  1: simd.yaml\n")
                 + "core_connectivity: ['0, 1']\nbandwidth: 32\n")
    one_line(path, "cores[1]: core id 1 is given twice (line 5)")
    path = write(hw, "t.yaml", TWO_CORES + "core_connectivity: ['0, 1']\nbandwidth: 32\nbandwidth: 64\n")
    one_line(path, "bandwidth: `bandwidth` is given twice")
    # ZigZag's own tpu_like.yaml repeats `ports` in a memory and loads in ZigZag: core files are not checked
    get_target(str(DATA / "zigzag_hw" / "tpu_like.yaml"))
