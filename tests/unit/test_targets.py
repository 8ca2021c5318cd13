"""Target descriptions: built-ins, Stream/ZigZag files, topologies and validation messages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from targets import TargetError, get_target, list_builtin_targets, load_zigzag_core, target_from_zigzag_core
from targets.topology import all_to_all, mesh, ring, square_shape

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "stream_hw"
SHARED_HW = Path(os.environ.get("MONET_SHARED", REPO.parent / "shared")) / "stream_hw"
STREAM_SYSTEMS = sorted(p.name for p in DATA.glob("*.yaml"))
LINE = re.compile(r"^(?P<file>[^:]+): (?P<path>[^:]+): (?P<problem>.+)$")


# ------------------------------------------------------------------ built-ins


def test_builtin_names():
    assert {"edge_npu", "tpu_like_quad_core", "hetero_chip", "datacenter"} <= set(list_builtin_targets())


@pytest.mark.parametrize("name", list_builtin_targets())
def test_builtin_loads_consistently(name):
    target = get_target(name)
    assert target.name == name
    assert [core.id for core in target.cores] == list(range(len(target.cores)))
    assert target.dram is not None and target.dram.bandwidth_bytes_per_s > 0
    for core in target.cores:
        if target.storage is None:
            assert core.dram == target.dram
        else:  # the cost model sees main memory holding what streams from storage through it
            assert core.dram == replace(target.dram, capacity_bytes=target.dram.capacity_bytes
                                        + target.storage.capacity_bytes)
        assert core.memories and core.precisions
        if core.kind == "mac_array":
            assert all(core.hierarchy(op) for op in ("W", "I", "O"))
        # Every wide precision is at least as costly per op as int8 (Horowitz ratios).
        energy = {p.name: p.energy_pj for p in core.precisions}
        if "int8" in energy and "fp32" in energy:
            assert energy["fp32"] > energy.get("fp16", energy["int8"]) > energy["int8"]


def test_builtin_physical_sanity():
    """No figure below the red-flag floors of notes §5.1 (SRAM >= 0.05 pJ/bit, DRAM >= 3)."""
    for name in list_builtin_targets():
        target = get_target(name)
        # an MCU's main memory is SRAM (technology: sram): the SRAM floor applies to it
        assert target.dram.read_energy_pj_per_bit >= (3.0 if target.dram.technology == "dram" else 0.05)
        for core in target.cores:
            for memory in core.memories:
                if memory.size_bits >= 8 * 8 * 1024:  # SRAMs, not register files
                    per_bit = memory.read_energy_pj / max(p.bandwidth_bits for p in memory.ports)
                    assert per_bit >= 0.05, (name, core.name, memory.name)


def test_builtin_shapes_match_their_descriptions():
    edge = get_target("edge_npu")
    sram = [m.size_bytes for c in edge.cores for m in c.memories if m.size_bytes > 1024]
    assert all(100e3 <= s <= 4e6 for s in sram)
    hetero = get_target("hetero_chip")
    assert {c.kind for c in hetero.cores} == {"mac_array", "simd", "pooling"}
    assert len({c.array.units for c in hetero.cores if c.kind == "mac_array"}) == 2
    datacenter = get_target("datacenter")
    assert sum(m.size_bytes for c in datacenter.cores for m in c.memories) > 10e6
    assert datacenter.dram.bandwidth_bytes_per_s > 1e12


def test_builtin_tpu_like_is_streams_hardware():
    ours = get_target("tpu_like_quad_core")
    stream = get_target(str(DATA / "tpu_like_quad_core.yaml"))
    assert len(ours.cores) == len(stream.cores)
    for a, b in zip(ours.cores, stream.cores):
        assert a.memories == b.memories
        assert a.array == b.array
        assert a.kind == b.kind
        int8 = [p for p in a.precisions if p.bits == 8]
        assert int8 and int8[0].energy_pj == b.precisions[0].energy_pj
    assert ours.dram == stream.dram
    pairs = lambda t: sorted((link.src, link.dst, link.bandwidth_bits) for link in t.interconnect.links)
    assert pairs(ours) == pairs(stream)


def test_importing_targets_does_not_import_yaml():
    code = "import sys, targets; print('yaml' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# ------------------------------------------------------------------ Stream / ZigZag


@pytest.mark.parametrize("system", STREAM_SYSTEMS)
def test_stream_system_loads_from_test_data(system):
    target = get_target(str(DATA / system))
    assert target.cores and target.dram is not None
    for core in target.cores:
        assert core.array.units > 0


@pytest.mark.parametrize("system", STREAM_SYSTEMS)
def test_stream_system_loads_from_shared(system):
    path = SHARED_HW / system
    if not path.exists():
        pytest.skip("../shared/stream_hw is not present")
    assert get_target(str(path)) == get_target(str(DATA / system))


def test_zigzag_core_meaning():
    core = load_zigzag_core(str(DATA / "cores" / "tpu_like.yaml"))
    assert core.kind == "mac_array" and core.array.units == 1024
    assert [(u.array_dim, u.loop_dim, u.factor) for u in core.array.dataflow] == [("D1", "K", 32), ("D2", "C", 32)]
    assert [m.name for m in core.hierarchy("W")] == ["rf_128B", "sram_2MB"]
    assert [m.name for m in core.hierarchy("O")] == ["rf_2B", "sram_2MB"]
    assert [m.name for m in core.hierarchy("I")] == ["sram_2MB"]
    sram = core.hierarchy("I")[0]
    assert sram.size_bits == 16777216 and sram.operands == ("I", "W", "O")
    assert sram.port_for("W", "tl").bandwidth_bits == 2048 and sram.port_for("W", "tl").min_bandwidth_bits == 64
    assert core.precisions[0].bits == 8 and core.precisions[0].energy_pj == pytest.approx(0.04)


def test_zigzag_precision_can_be_chosen():
    core = load_zigzag_core(str(DATA / "cores" / "tpu_like.yaml"), precision="bf16")
    assert core.precisions[0].name == "bf16" and core.precisions[0].bits == 16


def test_old_zigzag_port_format_is_read():
    target = get_target(str(DATA / "fusemax.yaml"))
    vec = target.cores[1]
    rf_o = next(m for m in vec.memories if m.name == "rf_O")
    assert {d for p in rf_o.ports for _, d in p.allocation} == {"fh", "tl", "fl", "th"}
    assert target.shared_memories == ((0, 1),)
    assert target.cores[0].array.dataflow[0].loop_dim == "B"  # ZigZag's matmul row dim D


def test_stream_offchip_becomes_dram_and_links():
    target = get_target(str(DATA / "tpu_like_quad_core.yaml"))
    assert target.dram.read_energy_pj_per_bit == pytest.approx(1000 / 64)
    assert target.dram.bits_per_cycle(1e9) == pytest.approx(64)
    assert (0, 4) in {(l.src, l.dst) for l in target.interconnect.links}
    assert (4, 0) in {(l.src, l.dst) for l in target.interconnect.links}


def test_stream_bus_entry(tmp_path):
    (tmp_path / "cores").mkdir()
    for name in ("tpu_like.yaml", "simd.yaml", "offchip.yaml"):
        (tmp_path / "cores" / name).write_text((DATA / "cores" / name).read_text())
    system = tmp_path / "sys.yaml"
    system.write_text(
        "name: s\ncores: {0: tpu_like.yaml, 1: tpu_like.yaml, 2: simd.yaml}\noffchip_core: offchip.yaml\n"
        "core_connectivity: ['0, 1, 2']\nbandwidth: 64\nunit_energy_cost: 32\n"
    )
    target = get_target(str(system))
    assert target.interconnect.buses[0].cores == (0, 1, 2)
    assert target.interconnect.buses[0].energy_pj_per_bit == pytest.approx(0.5)
    assert target.interconnect.neighbours(0) == (1, 2)


def test_single_zigzag_core_with_offchip():
    target = target_from_zigzag_core(str(DATA / "cores" / "eyeriss_like.yaml"), str(DATA / "cores" / "offchip.yaml"))
    assert len(target.cores) == 1 and target.cores[0].dram == target.dram


# ------------------------------------------------------------------ topologies


def test_topologies():
    assert len(ring([0, 1, 2, 3], 8, 0.1)) == 8
    assert len(mesh([0, 1, 2, 3, 4, 5], 2, 3, 8, 0.1)) == 2 * 7
    assert len(all_to_all([0, 1, 2, 3], 8, 0.1)) == 12
    assert square_shape(6) == (2, 3) and square_shape(4) == (2, 2)


def test_own_mesh_target(tmp_path):
    path = _write(tmp_path, _own_target(cores=4, interconnect="topology: mesh\n  mesh: [2, 2]\n  bandwidth_bits: 64"))
    target = get_target(str(path))
    assert sorted({(l.src, l.dst) for l in target.interconnect.links}) == [
        (0, 1), (0, 2), (1, 0), (1, 3), (2, 0), (2, 3), (3, 1), (3, 2)
    ]


# ------------------------------------------------------------------ validation


MEMORY_FIELDS = (
    "size: 64 KiB",
    "operands: [W, I, O]",
    "served_dims: [D1, D2]",
    "read_bw: 64",
    "read_energy_pj: 6.4",
    "write_energy_pj: 7.0",
)
FIELD_INDENT = " " * 10


def _own_target(cores: int = 1, dataflow: str = '["K, 4"]', interconnect: str = "topology: bus\n  bandwidth_bits: 64", extra: str = "") -> str:
    memory = "".join(f"{FIELD_INDENT}{line}\n" for line in MEMORY_FIELDS)
    body = ""
    for i in range(cores):
        body += (
            f"  - name: c{i}\n"
            "    kind: mac_array\n"
            "    array:\n"
            "      dims: {D1: 4, D2: 4}\n"
            f"      dataflow: {{D1: {dataflow}, D2: [\"C, 4\"]}}\n"
            "    precisions:\n"
            "      int8: {bits: 8, energy_pj: 0.1}\n"
            "    memories:\n"
            "      sram:\n"
            f"{memory}"
        )
    return (
        "name: t\n"
        "dram: {capacity: 1 GiB, bandwidth_GBps: 10, read_energy_pj_per_bit: 5}\n"
        f"cores:\n{body}"
        f"interconnect:\n  {interconnect}\n{extra}"
    )


def _write(tmp_path: Path, text: str, name: str = "target.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _problems(path: Path) -> list[re.Match]:
    with pytest.raises(TargetError) as caught:
        get_target(str(path))
    lines = str(caught.value).split("\n")
    assert lines == list(caught.value.problems)
    matches = [LINE.match(line) for line in lines]
    assert all(matches), lines
    return matches


def _has(matches, path_fragment: str, problem_fragment: str, file: str | None = None) -> bool:
    return any(
        path_fragment in m["path"] and problem_fragment in m["problem"] and (file is None or m["file"].endswith(file))
        for m in matches
    )


def test_valid_own_target_loads(tmp_path):
    target = get_target(str(_write(tmp_path, _own_target(cores=2))))
    assert len(target.cores) == 2 and target.interconnect.buses[0].cores == (0, 1)
    assert target.cores[0].memories[0].size_bytes == 64 * 1024


def test_missing_field(tmp_path):
    text = _own_target().replace(f"{FIELD_INDENT}size: 64 KiB\n", "")
    matches = _problems(_write(tmp_path, text))
    assert _has(matches, "cores[0].memories.sram.size", "missing required field", "target.yaml")


def test_wrong_type(tmp_path):
    text = _own_target().replace("read_bw: 64", "read_bw: [64]")
    assert _has(_problems(_write(tmp_path, text)), "cores[0].memories.sram.read_bw", "expected an integer")


def test_negative_size(tmp_path):
    text = _own_target().replace("size: 64 KiB", "size: -5")
    assert _has(_problems(_write(tmp_path, text)), "cores[0].memories.sram.size", "must be positive")


def test_unknown_operand(tmp_path):
    text = _own_target().replace("operands: [W, I, O]", "operands: [W, I, O, X]")
    assert _has(_problems(_write(tmp_path, text)), "cores[0].memories.sram.operands[3]", "unknown operand 'X'")


def test_unknown_core_in_link(tmp_path):
    text = _own_target(extra="") + "  links:\n    - {between: [0, 9]}\n"
    assert _has(_problems(_write(tmp_path, text)), "interconnect.links[0].between[1]", "unknown core 9")


def test_unknown_dataflow_dim(tmp_path):
    text = _own_target(dataflow='["Q, 4"]')
    assert _has(_problems(_write(tmp_path, text)), "cores[0].array.dataflow.D1", "unknown dataflow loop dimension 'Q'")


def test_unknown_field_is_reported(tmp_path):
    text = _own_target().replace("read_bw: 64", f"read_bw: 64\n{FIELD_INDENT}raed_bw: 64")
    assert _has(_problems(_write(tmp_path, text)), "cores[0].memories.sram.raed_bw", "unknown field")


def test_bad_yaml_syntax(tmp_path):
    matches = _problems(_write(tmp_path, "name: t\ncores: [\n  - a: b: c\n"))
    assert matches[0]["file"].endswith("target.yaml") and "line" in matches[0]["path"]
    assert "invalid YAML" in matches[0]["problem"]


def test_missing_core_file(tmp_path):
    text = "name: s\ncores: {0: nowhere.yaml}\noffchip_core: offchip.yaml\n"
    matches = _problems(_write(tmp_path, text, "system.yaml"))
    assert _has(matches, "cores[0]", "core file 'nowhere.yaml' not found", "system.yaml")
    assert _has(matches, "offchip_core", "not found")


def test_every_problem_is_collected(tmp_path):
    text = _own_target(dataflow='["Q, 4"]').replace("size: 64 KiB", "size: -5").replace("operands: [W, I, O]", "operands: [W, Z]")
    matches = _problems(_write(tmp_path, text))
    assert len(matches) >= 3
    assert _has(matches, "size", "positive") and _has(matches, "operands[1]", "'Z'") and _has(matches, "dataflow", "'Q'")


def test_zigzag_core_errors_name_the_core_file(tmp_path):
    (tmp_path / "cores").mkdir()
    bad = (DATA / "cores" / "tpu_like.yaml").read_text().replace("operands: [I2]", "operands: [I3]", 1)
    bad = bad.replace("r_cost: 416.16", "r_cost: -1")
    (tmp_path / "cores" / "bad.yaml").write_text(bad)
    system = _write(tmp_path, "name: s\ncores: {0: bad.yaml, 1: bad.yaml}\n", "system.yaml")
    matches = _problems(system)
    assert _has(matches, "memories.rf_128B.operands[0]", "unknown operand 'I3'", "bad.yaml")
    assert _has(matches, "memories.sram_2MB.r_cost", ">= 0", "bad.yaml")
    # A core file used twice reports its problems once.
    assert len([m for m in matches if "I3" in m["problem"]]) == 1


def test_unknown_builtin_name_is_one_line():
    with pytest.raises(TargetError) as caught:
        get_target("no_such_target")
    assert "\n" not in str(caught.value) and "built-in" in str(caught.value)


def test_file_not_found_is_one_line(tmp_path):
    with pytest.raises(TargetError) as caught:
        get_target(str(tmp_path / "x" / "missing.yaml"))
    assert "\n" not in str(caught.value)


def test_core_equality_ignores_id_and_name():
    target = get_target("tpu_like_quad_core")
    assert target.cores[0] == target.cores[1] and hash(target.cores[0]) == hash(target.cores[1])
    assert target.cores[0] != target.cores[4]
    assert replace(target.cores[0], clock_hz=2e9) != target.cores[0]


def test_stream_cores_get_distinct_names():
    names = [c.name for c in get_target(str(DATA / "tpu_like_quad_core.yaml")).cores]
    # four cores from tpu_like.yaml, and simd.yaml, which Stream ships with `name: pooling`
    assert names == ["tpu_like#0", "tpu_like#1", "tpu_like#2", "tpu_like#3", "pooling", "simd"]
    for system in sorted(DATA.glob("*.yaml")):
        names = [c.name for c in get_target(str(system), precision="int8").cores]
        assert len(set(names)) == len(names), system.name


def test_version_option():
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and re.fullmatch(r"monet \S+\n", run.stdout)


def test_a_pickled_core_hashes_like_a_fresh_one_in_another_process():
    # explore workers (Ray, spawned processes) receive Cores pickled by the parent, whose string
    # hashes are salted differently: the cost memo must still find them
    import pickle

    core = get_target("edge_npu").cores[0]
    hash(core)  # caches this process's hash on the instance
    script = (
        "import pickle, sys\n"
        "from targets import get_target\n"
        "core = pickle.loads(sys.stdin.buffer.read())\n"
        "fresh = get_target('edge_npu').cores[0]\n"
        "assert hash(core) == hash(fresh) and {fresh: 1}[core] == 1\n"
    )
    for seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(core), capture_output=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        assert run.returncode == 0, run.stderr.decode()
