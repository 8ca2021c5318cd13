"""Off-chip energy is honest: writes to a DRAM cost its write energy whether or not reads and
writes share one port, stores and evictions run on a `dram write` lane of the Gantt chart, and a
target without an off-chip memory says so (or takes the DRAM of a Stream system the user names)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from xdsl.context import Context

from monet_ir import import_onnx
from monet_ir.graph import step_function
from monet_ir.schedule.scheduler import DRAM, schedule
from monet_ir.schedule.taskgraph import extract
from passes.autodiff import AutodiffPass
from passes.insert_optimizer import InsertOptimizerPass
from targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"
LENET = DATA / "models" / "lenet5_b4.onnx"


def _lenet_step():
    module = import_onnx(LENET)
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    return extract(step_function(module), bits=None)


@pytest.mark.parametrize("ports", [1, 2])
def test_writes_cost_the_write_energy_on_either_port_layout(ports):
    target = get_target("edge_npu")
    dram = replace(target.dram, ports=ports, read_energy_pj_per_bit=0.8, write_energy_pj_per_bit=0.96)
    target = replace(target, dram=dram, cores=tuple(replace(c, dram=dram) for c in target.cores))
    s = schedule(_lenet_step(), target)
    writes = [t for t in s.transfers if t.dst == DRAM]
    reads = [t for t in s.transfers if t.src == DRAM]
    assert writes and reads
    for t in writes:
        assert t.resource == "dram write" and t.energy_pj == pytest.approx(t.bytes * 8 * 0.96), t
    for t in reads:
        assert t.resource == "dram read" and t.energy_pj == pytest.approx(t.bytes * 8 * 0.8), t
    if ports == 1:
        # one port: a read and a write never overlap
        spans = sorted((t.start, t.end) for t in writes + reads if t.end > t.start)
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(spans, spans[1:]))


def test_gantt_has_a_write_lane_for_a_shared_port(tmp_path):
    from monet_ir.emit.step_report import plot_data, schedule_report

    target = get_target("edge_npu")
    dram = replace(target.dram, ports=1)
    s = schedule(_lenet_step(), replace(target, dram=dram, cores=tuple(replace(c, dram=dram) for c in target.cores)))
    lanes = {resource for resource, _, _ in plot_data(s, schedule_report(s))["transfers"]}
    assert {"dram read", "dram write"} <= lanes
