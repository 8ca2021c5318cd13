"""Stream's and ZigZag's hardware files as those projects ship them (tests/data/stream_hw_2026:
Stream's newest tree, unchanged): the newer system format (`offchip_core_id`, connections as
`{type, cores, bandwidth}`, `./cores/` paths, inline cores), Stream's look-up of a bare core name
in its input tree, and one-line errors for what MONET cannot cost (AIE tiles, memory-only cores)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from targets import TargetError, get_target

DATA = Path(__file__).resolve().parents[1] / "data"
NEW = DATA / "stream_hw_2026" / "inputs"
OLD = DATA / "stream_hw"
MLP = DATA / "models" / "mlp_b4.onnx"

LOADS = [
    NEW / "examples" / "hardware" / "tpu_like_quad_core.yaml",
    NEW / "examples" / "hardware" / "simba_small.yaml",
    NEW / "examples" / "hardware" / "fusemax.yaml",
    NEW / "testing" / "hardware" / "simple_example_hw.yaml",
]


def run_monet(*argv: str) -> tuple[int, str]:
    from monet_ir.tools.monet import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
            pytest.raises(SystemExit) as exit_:
        main(list(argv))
    return exit_.value.code, err.getvalue()


@pytest.mark.parametrize("path", LOADS, ids=lambda p: p.name)
def test_newer_stream_system_loads(path):
    target = get_target(str(path))
    assert target.dram is not None and target.dram.capacity_bytes > 0
    assert target.cores and all(core.array.units > 0 for core in target.cores)
    assert all(m.size_bits > 0 for core in target.cores for m in core.memories)
    # the off-chip core is the DRAM, not a core; every other core is reachable
    assert all("offchip" not in core.name and "dram" not in core.name for core in target.cores)
    shared = {core for group in target.shared_memories for core in group}
    assert all(target.interconnect.neighbours(core.id) or core.id in shared for core in target.cores[1:])


def test_newer_tpu_like_quad_core_reads_as_the_older_file():
    """The same hardware in both formats: the same six cores (PE counts and memories as Stream's
    files say: four 32x32 arrays with 2 MB SRAM, a pooling and a SIMD core) and the same DRAM
    (64 bit/cycle port; the newer file's 128 bit/cycle bus to it does not widen it)."""
    new = get_target(str(NEW / "examples" / "hardware" / "tpu_like_quad_core.yaml"))
    old = get_target(str(OLD / "tpu_like_quad_core.yaml"))
    assert [c.name for c in new.cores] == [c.name for c in old.cores]
    assert [c.array.units for c in new.cores] == [1024, 1024, 1024, 1024, 72, 64]
    assert new.cores[0].hierarchy("I")[-1].size_bits == 2 * 1024 * 1024 * 8
    assert new.dram == old.dram and new.dram.bits_per_cycle(1e9) == pytest.approx(64)
    links = {(link.src, link.dst): link.bandwidth_bits for link in new.interconnect.links}
    assert links[(0, 1)] == links[(1, 0)] == 32 and links[(3, 5)] == 32
    (bus,) = new.interconnect.buses
    assert bus.cores == (0, 1, 2, 3, 4, 5) and bus.bandwidth_bits == 128  # DRAM (core 6) left out


def test_offchip_core_id_in_the_middle_renumbers_the_cores(tmp_path):
    cores = NEW / "examples" / "hardware" / "cores"
    (tmp_path / "sys.yaml").write_text(
        f"name: s\ncores:\n  0: {cores / 'tpu_like.yaml'}\n  1: {cores / 'offchip.yaml'}\n  2: {cores / 'simd.yaml'}\n"
        "offchip_core_id: 1\ncore_connectivity:\n"
        "  - {type: link, cores: [0, 2], bandwidth: 16, unit_energy_cost: 8}\n"
        "  - {type: link, cores: [0, 1], bandwidth: 16}\n"
    )
    target = get_target(str(tmp_path / "sys.yaml"))
    assert [c.id for c in target.cores] == [0, 1] and target.cores[1].name == "simd"
    assert {(l.src, l.dst) for l in target.interconnect.links} == {(0, 1), (1, 0)}
    assert target.interconnect.links[0].energy_pj_per_bit == pytest.approx(0.5)
    assert target.dram.bits_per_cycle(1e9) == pytest.approx(16)  # only a 16 bit/cycle link reaches DRAM


def test_inline_core_description(tmp_path):
    import yaml

    core = yaml.safe_load((NEW / "examples" / "hardware" / "cores" / "tpu_like.yaml").read_text())
    offchip = yaml.safe_load((NEW / "examples" / "hardware" / "cores" / "offchip.yaml").read_text())
    (tmp_path / "sys.yaml").write_text(yaml.safe_dump(
        {"name": "inline", "cores": {0: core, 1: offchip}, "offchip_core_id": 1, "core_connectivity": []}))
    target = get_target(str(tmp_path / "sys.yaml"))
    assert len(target.cores) == 1 and target.cores[0].array.units == 1024 and target.dram is not None


@pytest.mark.parametrize("connection, message", [
    ("{type: ring, cores: [0, 1], bandwidth: 8}", "core_connectivity[0].type: unknown connection type 'ring'"),
    ("{type: link, cores: [0, 1, 2], bandwidth: 8}", "core_connectivity[0].cores: a link joins exactly two cores"),
    ("{type: bus, cores: [0, 1]}", "core_connectivity[0].bandwidth: missing required field"),
    ("{type: bus, cores: [0, 7], bandwidth: 8}", "core_connectivity[0]: unknown core 7"),
    ("'0, 1'", "core_connectivity[0]: a 'a, b' entry takes the system's `bandwidth`, which is missing"),
])
def test_bad_connection_is_one_line(tmp_path, connection, message):
    cores = NEW / "examples" / "hardware" / "cores"
    path = tmp_path / "sys.yaml"
    path.write_text(f"name: s\ncores:\n  0: {cores / 'tpu_like.yaml'}\n  1: {cores / 'simd.yaml'}\n"
                    f"  2: {cores / 'offchip.yaml'}\noffchip_core_id: 2\ncore_connectivity:\n  - {connection}\n")
    with pytest.raises(TargetError) as error:
        get_target(str(path))
    assert len(error.value.problems) == 1 and error.value.problems[0].startswith(f"{path}: {message}")


def test_aie_array_is_one_clear_error():
    path = NEW / "aie" / "hardware" / "single_col.yaml"
    code, err = run_monet("report", str(MLP), "--target", str(path), "--out", "/nonexistent", "--no-plots")
    lines = [line for line in err.splitlines() if line.startswith("monet: error")]
    assert code == 1 and "Traceback" not in err and len(lines) == 1, err
    assert f"{path}: cores[0, 1, 2, 3, 4, 5] (aie_tile.yaml, mem_tile_256KB.yaml, shim_dma.yaml): aie2 tiles" in lines[0]


@pytest.mark.parametrize("name", ["aie_tile", "mem_tile_256KB", "shim_dma"])
def test_an_aie_tile_file_alone_is_one_clear_error(name):
    path = NEW / "aie" / "hardware" / "cores" / f"{name}.yaml"
    with pytest.raises(TargetError) as error:
        get_target(str(path))
    (line,) = error.value.problems
    assert line.startswith(f"{path}: type: an aie2 tile") and "MONET cannot cost it" in line


def test_newer_system_report_is_sensible(tmp_path):
    code, err = run_monet("report", str(MLP), "--target", str(NEW / "examples" / "hardware" / "simba_small.yaml"),
                          "--out", str(tmp_path), "--no-plots")
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["latency_cycles"] > 0 and report["energy_breakdown_pj"]["compute"] > 0
    assert all(cap > 0 for cap in report["memory"]["capacity_bytes"].values())
