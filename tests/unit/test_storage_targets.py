"""The storage level below main memory (`storage:` in our target YAML) and the two edge targets
that have one (cortex_m_mcu, cortex_a_board)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from targets import TargetError, get_target, list_builtin_targets
from targets.loader import builtin_target_path

BASE = """
name: chip
dram: {capacity: 1 GiB, bandwidth_GBps: 10, read_energy_pj_per_bit: 5}
cores:
  - name: c0
    kind: simd
    array: {dims: {D1: 4}}
    precisions: {fp32: {bits: 32, energy_pj: 1.0}}
    memories:
      sram: {size: 64 KiB, operands: [I, W, O], read_bw: 64, read_pj_per_bit: 0.3, write_pj_per_bit: 0.3}
"""


def load(tmp_path, extra: str, base: str = BASE):
    path = tmp_path / "chip.yaml"
    path.write_text(base + textwrap.dedent(extra))
    return get_target(str(path)), str(path)


def problems(tmp_path, extra: str, base: str = BASE) -> list[str]:
    with pytest.raises(TargetError) as info:
        load(tmp_path, extra, base)
    return list(info.value.problems)


def test_storage_fields_are_read(tmp_path):
    target, _ = load(tmp_path, """
        storage:
          name: nvme0
          kind: nvme
          capacity: 512 GB
          read_bandwidth_MBps: 3500
          write_bandwidth_MBps: 3000
          read_energy_pj_per_bit: 10
          write_energy_pj_per_bit: 20
          page: 4 KiB
          latency_us: 20
        """)
    s = target.storage
    assert (s.name, s.kind, s.capacity_bytes) == ("nvme0", "nvme", 512 * 10**9)
    assert (s.read_bandwidth_bytes_per_s, s.write_bandwidth_bytes_per_s) == (3.5e9, 3.0e9)
    assert (s.read_energy_pj_per_bit, s.write_energy_pj_per_bit) == (10, 20)
    assert s.page_bytes == 4096 and s.latency_s == pytest.approx(20e-6)
    assert s.rounded(1) == 4096 and s.rounded(4096) == 4096 and s.rounded(4097) == 8192


def test_storage_is_optional_and_defaults(tmp_path):
    target, _ = load(tmp_path, "")
    assert target.storage is None and target.dram.technology == "dram"
    target, _ = load(tmp_path, """
        storage: {capacity: 8 MB, read_bandwidth_MBps: 1, write_bandwidth_MBps: 1, read_energy_pj_per_bit: 100}
        """)
    s = target.storage
    assert (s.name, s.kind, s.page_bytes, s.latency_s) == ("storage", "other", 0, 0.0)
    assert s.write_energy_pj_per_bit == 100  # defaults to the read energy
    assert s.rounded(3) == 3


def test_storage_errors_name_file_and_field(tmp_path):
    lines = problems(tmp_path, """
        storage:
          kind: tape
          capacity: -3
          read_bandwidth_MBps: 0
          write_bandwidth_MBps: fast
          read_energy_pj_per_bit: 10
          page: 0
          bogus: 1
        """)
    path = str(tmp_path / "chip.yaml")
    assert all(line.startswith(f"{path}: storage.") for line in lines), lines
    text = "\n".join(lines)
    assert "storage.kind: unknown storage kind 'tape' (use flash, sd, nvme, host, other)" in text
    assert "storage.capacity: size must be positive" in text
    assert "storage.read_bandwidth_MBps: must be positive" in text
    assert "storage.write_bandwidth_MBps: expected a number, got string 'fast'" in text
    assert "storage.page: size must be positive" in text
    assert "storage.bogus: unknown field" in text
    assert len(lines) == 6


def test_storage_required_fields(tmp_path):
    lines = problems(tmp_path, """
        storage: {kind: flash}
        """)
    fields = sorted(line.split(": ")[1] for line in lines)
    assert fields == ["storage.capacity", "storage.read_bandwidth_MBps", "storage.read_energy_pj_per_bit",
                      "storage.write_bandwidth_MBps"]
    assert all(line.endswith("missing required field") for line in lines)


def test_storage_needs_a_main_memory(tmp_path):
    base = BASE.replace("dram: {capacity: 1 GiB, bandwidth_GBps: 10, read_energy_pj_per_bit: 5}\n", "")
    lines = problems(tmp_path, """
        storage: {capacity: 8 MB, read_bandwidth_MBps: 1, write_bandwidth_MBps: 1, read_energy_pj_per_bit: 100}
        """, base)
    assert lines == [f"{tmp_path / 'chip.yaml'}: storage: a storage level needs a main memory above it (add a dram: section)"]


def test_main_memory_technology(tmp_path):
    base = BASE.replace("read_energy_pj_per_bit: 5}", "read_energy_pj_per_bit: 5, technology: flash}")
    lines = problems(tmp_path, "", base)
    assert lines == [f"{tmp_path / 'chip.yaml'}: dram.technology: unknown technology 'flash' (use dram, sram)"]


def test_edge_targets_are_built_in_with_sourced_figures():
    assert {"cortex_m_mcu", "cortex_a_board"} <= set(list_builtin_targets())
    out = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "targets"], capture_output=True, text=True)
    assert {"cortex_m_mcu", "cortex_a_board"} <= set(out.stdout.split())
    mcu, board = get_target("cortex_m_mcu"), get_target("cortex_a_board")
    # an MCU: no DRAM, its main memory is a few hundred kB of SRAM; MB-scale (or larger) storage
    assert mcu.dram.technology == "sram" and 256 * 1024 <= mcu.dram.capacity_bytes <= 512 * 1024
    assert all(m.size_bytes <= 64 * 1024 for c in mcu.cores for m in c.memories)
    assert mcu.storage is not None and mcu.storage.capacity_bytes >= 10**6
    assert board.dram.technology == "dram" and board.dram.capacity_bytes >= 10**9
    assert board.storage is not None and board.storage.kind == "sd"
    for name in ("cortex_m_mcu", "cortex_a_board"):
        text = open(builtin_target_path(name), encoding="utf-8").read()
        # every figure's source is stated: POET's measured profiles for the SD cards
        assert "poet/chipsets.py" in text and "Where the figures come from" in text
        storage = get_target(name).storage
        # paging is far dearer per bit than main memory, and slower: the trade-off is real
        assert storage.read_energy_pj_per_bit > 10 * get_target(name).dram.read_energy_pj_per_bit
        assert storage.read_bandwidth_bytes_per_s < get_target(name).dram.bandwidth_bytes_per_s
