"""Multi-chip systems can be inspected like targets (`monet targets SYSTEM|FILE`), and a system
given where one chip is expected (or a chip where a system is) says which option to use, as a
misspelled name says which name was meant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from targets import TargetError, get_target
from targets.system import get_system, list_builtin_systems

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = REPO / "targets" / "builtin" / "systems"
MLP = REPO / "tests" / "data" / "models" / "mlp_b4.onnx"


def _monet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", *args], capture_output=True, text=True,
                          cwd=REPO)


@pytest.mark.parametrize("given", ["name", "file"])
def test_monet_targets_describes_every_builtin_system(given):
    names = list_builtin_systems()
    assert {"8x_datacenter", "4x8_datacenter", "2x2_edge_npu", "8x_tpu_like_quad_core"} <= set(names)
    run = _monet("targets", *(names if given == "name" else [str(SYSTEMS / f"{n}.yaml") for n in names]))
    assert run.returncode == 0, run.stderr
    assert "unknown field" not in run.stdout + run.stderr
    for name in names:
        system = get_system(name)
        assert f"{name}  (" in run.stdout
        assert f"  {system.chips} x {system.chip.name}, {system.network.topology} network" in run.stdout
        assert f"    {system.chip.name}  (" in run.stdout  # the chip's own description, indented
    assert "nodes of 8 chips" in run.stdout and "2 x 2 torus" in run.stdout
    assert "100 GB/s each way, 2.5 us and 5 pJ/bit per link crossed" in run.stdout  # 4x8's node uplinks


def test_monet_targets_mixes_chips_and_systems_and_still_lists_both():
    run = _monet("targets", "edge_npu", "8x_datacenter")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("edge_npu  (") and "\n\n8x_datacenter  (" in run.stdout
    listing = _monet("targets").stdout.splitlines()
    assert "edge_npu" in listing and any(line.startswith("8x_datacenter  (system: 8 x datacenter") for line in listing)


def test_a_system_given_as_a_target_points_to_system():
    with pytest.raises(TargetError, match=r"^8x_datacenter: <name>: a built-in multi-chip system, not one chip: "
                                          r"give it as --system 8x_datacenter \(with --parallel\), or its chip as "
                                          r"--target datacenter$"):
        get_target("8x_datacenter")
    with pytest.raises(TargetError, match=r"4x8_datacenter.yaml: chip: this is a multi-chip system file .*--system FILE"):
        get_target(str(SYSTEMS / "4x8_datacenter.yaml"))
    run = _monet("report", str(MLP), "--target", "8x_datacenter", "--out", "/nonexistent/never-written")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].endswith("give it as --system 8x_datacenter (with --parallel), or its "
                                                        "chip as --target datacenter")


def test_a_chip_given_as_a_system_points_to_target():
    with pytest.raises(TargetError, match=r"^datacenter: <name>: a built-in chip target, not a multi-chip system: "
                                          r"give it as --target datacenter"):
        get_system("datacenter")


@pytest.mark.parametrize("lookup, name, meant", [(get_target, "edge_nup", "edge_npu"),
                                                 (get_target, "Datacenter", "datacenter"),
                                                 (get_target, "tpu_like_quad", "tpu_like_quad_core"),
                                                 (get_system, "8x_datacentre", "8x_datacenter")])
def test_misspelled_names_say_what_was_meant(lookup, name, meant):
    with pytest.raises(TargetError, match=f"no such file and no built-in (target|system) of that name; "
                                          f"did you mean '{meant}'\\?"):
        lookup(name)


def test_a_name_close_to_nothing_suggests_nothing():
    with pytest.raises(TargetError) as error:
        get_target("quantum_annealer_9000")
    assert "did you mean" not in str(error.value) and "(built-in: " in str(error.value)
