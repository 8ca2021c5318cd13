"""Tensors kept in storage (a plan's `storage` list): parameters, optimizer state, gradients and
activations live in the target's storage level and are paged into main memory around each use,
in tiles when larger than the plan's tile; values never change; main memory is relieved;
transfers are priced on the storage; bad names are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from monet_ir.emit.step_report import schedule_report
from monet_ir.schedule.paging import default_tile, tile_passes
from test_paging import DATA, run_monet_run, scheduled, tiny_mlp

MLP_FC1 = ["fc1.weight", "fc1.weight.exp_avg", "fc1.weight.exp_avg_sq", "d_fc1.weight", "x"]


def adam_scheduled(model: Path, target: str, plan: Path | None):
    from xdsl.context import Context

    from monet_ir import import_onnx
    from monet_ir.graph import step_function
    from monet_ir.schedule.scheduler import schedule
    from monet_ir.schedule.taskgraph import extract
    from passes.activation_checkpoint import ActivationCheckpointPass
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass
    from targets import get_target

    module = import_onnx(model)
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    if plan is not None:
        ActivationCheckpointPass(policy=f"plan={plan}").apply(Context(), module)
    module.verify()
    return schedule(extract(step_function(module), bits=32), get_target(target))


def test_stored_tensors_are_paged_around_each_use(tmp_path):
    model = DATA / "models" / "mlp_b4.onnx"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"storage": MLP_FC1, "tile_bytes": 65536}))
    base = schedule_report(adam_scheduled(model, "cortex_a_board", None))
    s = adam_scheduled(model, "cortex_a_board", plan)
    report = schedule_report(s)
    g = s.graph
    sizes = {t.name: t.bytes for t in g.tensors if t.name in MLP_FC1 and t.kind == "stored"}
    sizes["d_fc1.weight"] = next(t.bytes for t in g.tensors if t.name == "d_fc1.weight@storage")
    assert sizes == {"fc1.weight": 802816, "fc1.weight.exp_avg": 802816, "fc1.weight.exp_avg_sq": 802816,
                     "d_fc1.weight": 802816, "x": 12544}
    ins = [tr for tr in s.transfers if tr.reason == "page_in"]
    outs = [tr for tr in s.transfers if tr.reason == "page_out"]
    # one page-in per op reading a stored tensor: fc1.weight by the forward Gemm and Adam, the
    # batch by the Gemm and the weight gradient, the moments and the gradient by Adam
    assert len(ins) == 7
    # written: the gradient once (by its producer), the weight and both moments after Adam
    assert len(outs) == 4
    page = 4096
    rounded = {n: -(-b // page) * page for n, b in sizes.items()}
    assert report["transfers"]["page_in"]["bytes"] == (2 * rounded["fc1.weight"] + 2 * rounded["x"]
                                                       + rounded["fc1.weight.exp_avg"]
                                                       + rounded["fc1.weight.exp_avg_sq"] + rounded["d_fc1.weight"])
    assert report["memory"]["paged_bytes"] == sum(rounded[n] for n in MLP_FC1 if n != "x")
    # the arguments are held in storage for the whole step, the gradient from its page-out on
    held = sum(rounded[n] for n in MLP_FC1 if n != "d_fc1.weight")
    assert report["memory"]["peak_bytes"]["sd_card"] == held + rounded["d_fc1.weight"]
    # main memory holds at most a tile of each while it is used: the 3.2 MB of fc1's weight,
    # gradient and Adam moments no longer sit in LPDDR4
    assert report["memory"]["peak_bytes"]["lpddr4"] < base["memory"]["peak_bytes"]["lpddr4"] - 2_900_000
    assert report["energy_pj"] > base["energy_pj"] and report["latency_cycles"] > base["latency_cycles"]
    # one transfer at a time; tiles: a 802,816-byte tensor through a 64 KiB buffer is 13 pieces
    spans = sorted((tr.start, tr.end) for tr in ins + outs)
    assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:]))
    storage, freq = s.target.storage, s.target.frequency_hz
    weight = next(tr for tr in outs if g.tensors[tr.tensor].name.startswith("fc1.weight@"))
    assert weight.bytes == 802816
    assert weight.end - weight.start == pytest.approx(
        (13 * storage.latency_s + 802816 / storage.write_bandwidth_bytes_per_s) * freq)
    # every reader of a stored tensor waits for its page-in; Adam's write-back after Adam
    by_task = {st.task: st for st in s.tasks}
    for task in g.tasks:
        if task.page == "read":
            copy = task.writes[0]
            readers = [c for t in g.tensors if t.root == copy for c in t.consumers if not g.tasks[c].page]
            assert readers and all(by_task[c].start >= by_task[task.index].end for c in readers)
        if task.page == "write" and g.tasks[g.tensors[task.reads[0]].producer].page == "read":
            updater = [c for c in g.tensors[task.reads[0]].consumers if not g.tasks[c].page]
            assert updater and by_task[task.index].start >= by_task[updater[0]].end


def test_an_operand_larger_than_main_memory_streams_through_it(tmp_path):
    # fc0's weight (300 x 256 floats, 307,200 B) alone exceeds cortex_m_mcu's 256 KiB of SRAM
    model = tiny_mlp(tmp_path / "wide.onnx", widths=(256, 300, 10), batch=2)
    from monet_ir.schedule.scheduler import ScheduleError

    with pytest.raises(ScheduleError, match="sram"):
        adam_scheduled(model, "cortex_m_mcu", None)
    names = ["fc0.weight", "fc0.weight.exp_avg", "fc0.weight.exp_avg_sq", "d_fc0.weight"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"storage": names}))
    s = adam_scheduled(model, "cortex_m_mcu", plan)
    report = schedule_report(s)
    tile = default_tile(s.target)
    assert tile == 16384  # a sixteenth of the 256 KiB SRAM
    assert report["memory"]["peak_bytes"]["sram"] <= 262144
    ins = [tr for tr in s.transfers if tr.reason == "page_in"]
    assert ins and all(s.graph.tensors[tr.tensor].bytes <= tile for tr in ins)
    assert report["memory"]["paged_bytes"] == 4 * 307200


def test_tile_passes():
    assert tile_passes(100, (), 200) == 1
    assert tile_passes(1000, (50,), 100) == 1  # the other fits a tile: it stays
    assert tile_passes(1000, (300,), 100) == 3  # re-read once per tile of the smaller
    assert tile_passes(300, (1000,), 100) == 1  # the smaller is read once


def test_storage_never_changes_gradients(tmp_path):
    model = DATA / "models" / "mlp_b4.onnx"
    ref = np.load(DATA / "reference" / "mlp_b4.npz")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=ref["x"], labels=ref["labels"])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"storage": ["fc1.weight", "fc2.weight", "d_fc1.weight", "x", "Relu_output"],
                                "tile_bytes": 4096, "activations": {"/Relu": "page"}}))
    before = run_monet_run(model, "store-all", inputs, tmp_path / "before.npz")
    after = run_monet_run(model, f"plan={plan}", inputs, tmp_path / "after.npz")
    assert sorted(after) == sorted(before) and any(k.startswith("grad/") for k in before)
    for key in before:
        assert np.array_equal(after[key], before[key]), key


@pytest.mark.parametrize("content, message", [
    ('{"storage": "fc1.weight"}', "plan.json: storage: expected a list of tensor names"),
    ('{"storage": ["nowhere"]}', "plan.json: storage[0]: no argument or value of the step is named 'nowhere'"),
    ('{"storage": [], "tile_bytes": 0}', "plan.json: tile_bytes: expected a positive integer, got 0"),
])
def test_storage_plan_errors(tmp_path, content, message):
    plan = tmp_path / "plan.json"
    plan.write_text(content)
    out = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(DATA / "models" / "mlp_b4.onnx"),
                          "--target", "cortex_a_board", "--out", str(tmp_path / "out"), "--no-plots", "--checkpoint",
                          f"plan={plan}"], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if not line.startswith("[")]
    assert len(lines) == 1 and message in lines[0], lines


def test_storage_needs_a_storage_level(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"storage": ["fc1.weight"]}))
    from monet_ir.schedule.scheduler import ScheduleError

    with pytest.raises(ScheduleError, match="target 'edge_npu' has no storage level"):
        adam_scheduled(DATA / "models" / "mlp_b4.onnx", "edge_npu", plan)
