"""Stream's and ZigZag's hardware files as those projects ship them (tests/data/stream_hw_2026:
Stream's newest tree, unchanged): the newer system format (`offchip_core_id`, connections as
`{type, cores, bandwidth}`, `./cores/` paths, inline cores), Stream's look-up of a bare core name
in its input tree, memory-only cores shared by compute cores, `operator_types`, and one-line
errors for what MONET cannot cost (AIE tiles)."""

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
    NEW / "examples" / "hardware" / "tpu_v7_ironwood.yaml",
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


def test_tpu_v7_ironwood_as_its_file_documents_it():
    """The file's own figures: 32 MXUs of 256x256 and 4 VPUs of 8x128 (four TensorCores of eight
    MXUs and a VPU), a 64 MiB VMEM per TensorCore shared by its nine compute cores, 384 GiB of
    HBM at 107345 bit/cycle (2 x 7380 GB/s at 1.1 GHz)."""
    target = get_target(str(NEW / "examples" / "hardware" / "tpu_v7_ironwood.yaml"))
    mxus = [c for c in target.cores if c.name.startswith("tpu_v7_mxu")]
    vpus = [c for c in target.cores if c.name.startswith("tpu_v7_vpu")]
    assert len(target.cores) == 36 and len(mxus) == 32 and len(vpus) == 4
    assert {c.array.units for c in mxus} == {256 * 256} and {c.array.units for c in vpus} == {8 * 128}
    # operator_types: the MXUs run matmuls and convolutions, the VPUs everything else
    assert {c.op_kinds for c in mxus} == {("loop_nest",)} and {(c.kind, c.op_kinds) for c in vpus} == {("simd", ("vector",))}
    vmem = mxus[0].memories[-1]
    assert vmem.name == "vmem@9" and vmem.size_bits == 64 * 2**20 * 8 // 9
    assert vmem.operands == ("I", "W", "O") and vmem.served_dims == ("D1", "D2")
    assert vmem.ports[0].bandwidth_bits == 416974 // 9
    assert vmem.read_energy_pj / vmem.ports[0].bandwidth_bits == pytest.approx(200 / 416974, rel=1e-4)
    assert target.dram.capacity_bytes == 384 * 2**30 and target.dram.bits_per_cycle(1e9) == pytest.approx(107345)
    # the MXUs and the VPU of a TensorCore share its bus (the VMEM, core 9, is not a core here)
    assert target.interconnect.buses[0].cores == tuple(range(9))


def test_a_memory_core_joined_to_nothing_is_left_out(tmp_path):
    """Stream's 2025-08 AIE arrays in ZigZag form list shim DMA tiles no connection reaches: no
    core can keep data in them, so they are not part of the target (as in Stream, they idle)."""
    cores = NEW / "examples" / "hardware" / "cores"
    path = tmp_path / "sys.yaml"
    path.write_text(f"name: s\ncores:\n  0: {cores / 'tpu_like.yaml'}\n  1: {cores / 'tpu_v7_vmem.yaml'}\n"
                    f"  2: {cores / 'offchip.yaml'}\noffchip_core_id: 2\ncore_connectivity:\n"
                    "  - {type: link, cores: [0, 2], bandwidth: 64}\n")
    (core,) = get_target(str(path)).cores
    assert [m.name for m in core.memories] == ["rf_128B", "rf_2B", "sram_2MB"]


def test_a_dma_tile_between_memories_is_left_out(tmp_path):
    """A memory core joined only to another memory core and to DRAM (Stream's 2025-08 AIE arrays
    in ZigZag form: shim DMA -> mem tile -> compute tiles) holds nothing a compute core uses: it
    is left out, the memory core next to the compute core is attached to it."""
    cores = NEW / "examples" / "hardware" / "cores"
    path = tmp_path / "sys.yaml"
    path.write_text(f"name: s\ncores:\n  0: {cores / 'tpu_like.yaml'}\n  1: {cores / 'tpu_v7_vmem.yaml'}\n"
                    f"  2: {cores / 'tpu_v7_vmem.yaml'}\n  3: {cores / 'offchip.yaml'}\noffchip_core_id: 3\n"
                    "core_connectivity:\n  - {type: link, cores: [0, 1], bandwidth: 64}\n"
                    "  - {type: link, cores: [1, 2], bandwidth: 64}\n  - {type: link, cores: [2, 3], bandwidth: 64}\n")
    (core,) = get_target(str(path)).cores
    assert [m.name for m in core.memories][-1] == "vmem@1" and core.memories[-1].size_bits == 64 * 2**20 * 8


# ------------------------------------------------------------------ Stream's files of 2024

OLD_2024 = DATA / "stream_hw_2024" / "tpu_like_quad_core.yaml"


def test_2024_list_system_with_a_generated_mesh():
    """`cores` as a list, `graph: {type: 2d_mesh}`: the four tpu_like cores fill the 2 x 2 grid
    column by column (Stream's reshape order "F"), the pooling and SIMD cores link to every grid
    core and to each other, the off-chip core is the DRAM; the cores' `multipliers` give their
    MAC energy (ZigZag's older name `multiplier_energy`)."""
    target = get_target(str(OLD_2024))
    assert [c.name for c in target.cores] == ["tpu_like#0", "tpu_like#1", "tpu_like#2", "tpu_like#3", "pooling", "simd"]
    assert [c.kind for c in target.cores] == ["mac_array"] * 4 + ["pooling", "simd"]
    assert [c.array.units for c in target.cores] == [1024] * 4 + [9, 64]
    assert [c.precisions[0].energy_pj for c in target.cores] == [0.04] * 4 + [0.1, 0.1]
    pairs = {(l.src, l.dst) for l in target.interconnect.links if l.src < l.dst}
    mesh = {(0, 1), (2, 3), (0, 2), (1, 3)}  # grid (row, col): 0 (0,0), 1 (1,0), 2 (0,1), 3 (1,1)
    assert pairs == mesh | {(i, 4) for i in range(4)} | {(i, 5) for i in range(4)} | {(4, 5)}
    assert {l.bandwidth_bits for l in target.interconnect.links} == {32}
    assert target.dram.capacity_bytes == 10_000_000_000 // 8 and target.dram.bits_per_cycle(1e9) == pytest.approx(64)


@pytest.mark.parametrize("graph", ["graph:\n  type: bus\n", "bus:\n"])
def test_2024_list_system_with_a_bus(tmp_path, graph):
    text = OLD_2024.read_text()
    text = text.replace("graph:\n  type: 2d_mesh\n", graph) if graph.startswith("graph") else \
        text.replace("graph:\n  type: 2d_mesh\n", "bus:\n")
    (tmp_path / "cores").mkdir()
    for core in (OLD_2024.parent / "cores").glob("*.yaml"):
        (tmp_path / "cores" / core.name).write_text(core.read_text())
    (tmp_path / "sys.yaml").write_text(text)
    target = get_target(str(tmp_path / "sys.yaml"))
    (bus,) = target.interconnect.buses
    assert bus.cores == (0, 1, 2, 3, 5) and bus.bandwidth_bits == 32  # the grid cores and the SIMD core
    assert {(l.src, l.dst) for l in target.interconnect.links if l.src < l.dst} == {(i, 4) for i in range(4)} | {(4, 5)}


def test_2024_may_layout_with_a_top_level_2d_mesh(tmp_path):
    """May 2024 files write the mesh fields under `2d_mesh:` (no `type`); special cores first."""
    (tmp_path / "cores").mkdir()
    for core in (OLD_2024.parent / "cores").glob("*.yaml"):
        (tmp_path / "cores" / core.name).write_text(core.read_text())
    (tmp_path / "sys.yaml").write_text(
        "name: may\ncores: [pooling.yaml, simd.yaml, offchip.yaml, tpu_like.yaml, tpu_like.yaml]\n"
        "2d_mesh: {nb_rows: 1, nb_cols: 2, bandwidth: 16, unit_energy_cost: 4, pooling_core_id: 0, simd_core_id: 1,"
        " offchip_core_id: 2}\n")
    target = get_target(str(tmp_path / "sys.yaml"))
    assert [c.name for c in target.cores] == ["pooling", "simd", "tpu_like#0", "tpu_like#1"]
    links = {(l.src, l.dst): l for l in target.interconnect.links}
    assert set(links) >= {(2, 3), (3, 2), (2, 0), (3, 1)} and links[(2, 3)].energy_pj_per_bit == pytest.approx(0.25)


@pytest.mark.parametrize("graph, message", [
    ("graph: {type: 2d_mesh_of_pairs, bandwidth: 8}", "graph.type: unknown graph type '2d_mesh_of_pairs'"),
    ("graph: {type: 2d_mesh, nb_rows: 2, nb_cols: 2, bandwidth: 8, offchip_core_id: 2}",
     "graph.nb_rows: a 2 x 2 mesh needs 4 cores besides the pooling, SIMD and off-chip ones; the file lists 2"),
    ("graph: {type: bus, bandwidth: 8, offchip_core_id: 7}", "graph.offchip_core_id: 7 is not an index of `cores`"),
    ("{}", "graph: missing required field"),
])
def test_2024_list_system_errors_are_one_line(tmp_path, graph, message):
    (tmp_path / "cores").mkdir()
    for core in (OLD_2024.parent / "cores").glob("*.yaml"):
        (tmp_path / "cores" / core.name).write_text(core.read_text())
    path = tmp_path / "sys.yaml"
    path.write_text(f"name: s\ncores: [tpu_like.yaml, tpu_like.yaml, offchip.yaml]\n{graph if graph != '{}' else ''}\n")
    with pytest.raises(TargetError) as error:
        get_target(str(path))
    assert len(error.value.problems) == 1 and error.value.problems[0].startswith(f"{path}: {message}")


def test_2024_system_report_is_sensible(tmp_path):
    code, err = run_monet("report", str(MLP), "--target", str(OLD_2024), "--out", str(tmp_path), "--no-plots")
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["latency_cycles"] > 0 and report["energy_breakdown_pj"]["compute"] > 0


def test_sweep_refuses_a_2024_stream_system_as_a_template(tmp_path):
    code, err = run_monet("sweep", str(MLP), "--target-template", str(OLD_2024), "--set", "graph.bandwidth=16,32",
                          "--out", str(tmp_path), "--no-plots", "--jobs", "1")
    assert code == 1 and "Traceback" not in err
    assert "got a Stream system (cores: a list of core files)" in err


def test_keys_monet_does_not_use_are_ignored(tmp_path):
    """Stream keeps adding keys (core_coordinates, technology_node, memory_aliases, a core's
    `type`, `utilization`...): a system that carries them, and ones Stream has not invented yet,
    is the same target as without them."""
    import yaml

    source = NEW / "examples" / "hardware" / "tpu_like_quad_core.yaml"
    data = yaml.safe_load(source.read_text())
    data["cores"] = {k: str(source.parent / v) for k, v in data["cores"].items()}
    plain = {k: v for k, v in data.items() if k != "core_coordinates"}
    extra = {**data, "technology_node": "n3", "memory_aliases": [["0.sram_2MB", "1.sram_2MB"]],
             "a_key_from_the_future": {"x": 1}}
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    (tmp_path / "extra.yaml").write_text(yaml.safe_dump(extra))
    assert get_target(str(tmp_path / "plain.yaml")) == get_target(str(tmp_path / "extra.yaml"))


# ------------------------------------------------------------------ every copied file

COPIED = sorted([*(DATA / "stream_hw_2026").rglob("*.yaml"), *(DATA / "stream_hw_2024").rglob("*.yaml")])
REFUSED = {  # file name -> what its one-line error says
    "single_col.yaml": "aie2 tiles give only a memory",
    "aie_tile.yaml": "an aie2 tile", "mem_tile_256KB.yaml": "an aie2 tile", "shim_dma.yaml": "an aie2 tile",
    "offchip.yaml": "no compute units (an off-chip memory", "simba_offchip.yaml": "no compute units (an off-chip",
    "fusemax_dram.yaml": "no compute units (an off-chip", "tpu_v7_hbm.yaml": "no compute units (an off-chip",
    "tpu_v7_vmem.yaml": "no compute units (a core of type zigzag.memory",
}


@pytest.mark.parametrize("path", COPIED, ids=lambda p: str(p.relative_to(DATA)))
def test_every_copied_file_loads_or_says_why_in_one_line(path):
    """Every system and core file copied from Stream either loads with every core computing,
    every memory holding something and every MAC costing energy, or is refused in one line
    that names the file and what MONET cannot cost."""
    if path.name in REFUSED:
        with pytest.raises(TargetError) as error:
            get_target(str(path))
        (line,) = error.value.problems
        assert line.startswith(f"{path}: ") and REFUSED[path.name] in line
        return
    target = get_target(str(path))
    assert target.dram is not None or any(m.name == "dram" for c in target.cores for m in c.memories)
    for core in target.cores:
        assert core.array.units > 0 and core.memories and all(m.size_bits > 0 for m in core.memories)
        assert core.precisions[0].energy_pj > 0 or core.kind != "mac_array"


def test_monet_targets_shows_what_was_read():
    """`monet targets FILE` prints the cores, memories, DRAM and links MONET read, to check
    against what the file's authors document; a file MONET cannot cost is the one-line error."""
    from monet_ir.tools.monet import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(["targets", str(NEW / "examples" / "hardware" / "tpu_v7_ironwood.yaml"), "edge_npu"])
    text = out.getvalue()
    assert exit_.value.code == 0, err.getvalue()
    assert "core0 tpu_v7_mxu#0: mac_array, 65536 units (D1=256 x D2=256), int8 0.02 pJ; runs loop_nest" in text
    assert "vmem@9: 7.1 MiB, holds I/W/O" in text and "dram hbm3e: 384 GiB, 107345 bit/cycle" in text
    assert "bus: cores 0, 1, 2, 3, 4, 5, 6, 7, 8, 416974 bit/cycle" in text and "\n\nedge_npu  (" in text
    code, err = run_monet("targets", str(NEW / "aie" / "hardware" / "single_col.yaml"))
    assert code == 1 and err.count("monet: error:") == 1 and "aie2 tiles" in err


def test_2025_offchip_file_with_an_id_and_ids_with_gaps(tmp_path):
    """Stream's files of 2025-01..07 (`single_aie_col.yaml`) name the off-chip core by file and
    give it an id, and number the other cores from 2: ids need only be distinct."""
    cores = NEW / "examples" / "hardware" / "cores"
    path = tmp_path / "sys.yaml"
    path.write_text(f"name: s\ncores:\n  2: {cores / 'tpu_like.yaml'}\n  3: {cores / 'tpu_like.yaml'}\n"
                    f"offchip_core: {cores / 'offchip.yaml'}\noffchip_core_id: 0\n"
                    "core_connectivity: ['2, 3', '0, 2']\nbandwidth: 64\n")
    target = get_target(str(path))
    assert [c.id for c in target.cores] == [0, 1] and target.dram is not None
    assert {(l.src, l.dst) for l in target.interconnect.links} == {(0, 1), (1, 0)}
