"""Paging saved activations to the target's storage level (activation-checkpoint's plan policy and
the scheduler's page-out / page-in tasks): gradients never change, transfers are priced on the
storage, main memory is relieved, bad plans and targets without storage are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context

from monet_ir import import_onnx
from monet_ir.analysis import checkpoint_policies as plans
from monet_ir.analysis.paging_plan import PAGE_ATTR, paged_results, read_plan
from monet_ir.emit.step_report import schedule_report
from monet_ir.graph import op_node, step_function
from monet_ir.interp.run import run_module
from monet_ir.schedule.scheduler import DRAM, schedule
from monet_ir.schedule.taskgraph import extract
from monet_ir.tools import monet_run
from conftest import SHARED
from passes.activation_checkpoint import ActivationCheckpointPass
from passes.autodiff import AutodiffPass
from passes.insert_optimizer import InsertOptimizerPass
from targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"


def tiny_mlp(path: Path, widths=(32, 64, 48, 10), batch: int = 8) -> Path:
    """A small MLP that trains within the 256 KiB of cortex_m_mcu's SRAM."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    nodes, inits, current = [], [], "x"
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        inits.append(numpy_helper.from_array((rng.standard_normal((b, a)) * 0.1).astype(np.float32), f"fc{i}.weight"))
        inits.append(numpy_helper.from_array(np.zeros(b, np.float32), f"fc{i}.bias"))
        nodes.append(helper.make_node("Gemm", [current, f"fc{i}.weight", f"fc{i}.bias"], [f"h{i}"],
                                      name=f"/fc{i}/Gemm", transB=1))
        current = f"h{i}"
        if i < len(widths) - 2:
            nodes.append(helper.make_node("Relu", [current], [f"a{i}"], name=f"/act{i}/Relu"))
            current = f"a{i}"
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, widths[0]])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, [batch, widths[-1]])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def tiny_cnn(path: Path, channels: int = 8, layers: int = 3, batch: int = 4, size: int = 16) -> Path:
    """A small CNN whose activations, not its weights, fill cortex_m_mcu's SRAM."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    nodes, inits, current, c_in = [], [], "x", 3
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((channels, c_in, 3, 3)) * 0.1).astype(np.float32),
                                             f"conv{i}.weight"))
        nodes.append(helper.make_node("Conv", [current, f"conv{i}.weight"], [f"c{i}"], name=f"/conv{i}/Conv",
                                      pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"/relu{i}/Relu"))
        current, c_in = f"r{i}", channels
    nodes.append(helper.make_node("GlobalAveragePool", [current], ["p"], name="/pool/GlobalAveragePool"))
    nodes.append(helper.make_node("Flatten", ["p"], ["f"], name="/flatten/Flatten"))
    inits.append(numpy_helper.from_array((rng.standard_normal((10, channels)) * 0.1).astype(np.float32), "fc.weight"))
    nodes.append(helper.make_node("Gemm", ["f", "fc.weight"], ["logits"], name="/fc/Gemm", transB=1))
    graph = helper.make_graph(nodes, "tiny_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def saved_nodes(module) -> list[str]:
    problem = plans.CheckpointProblem(step_function(module))
    return list(dict.fromkeys(op_node(s.op) for s in problem.storages))


def mixed_plan(module, path: Path, page_every: int = 2) -> dict[str, str]:
    """Page every other saved node, recompute one recomputable node among the rest, keep the others."""
    problem = plans.CheckpointProblem(step_function(module))
    candidates = {op_node(s.op) for s in problem.candidates}
    decisions = {}
    for i, node in enumerate(saved_nodes(module)):
        if i % page_every == 0:
            decisions[node] = "page"
        elif node in candidates and "recompute" not in decisions.values():
            decisions[node] = "recompute"
        else:
            decisions[node] = "keep"
    if "recompute" not in decisions.values():  # a tiny model: page the rest
        decisions = {n: "page" for n in decisions}
    path.write_text(json.dumps({"activations": decisions, "note": "informative"}))
    return decisions


def differentiated(model: Path, policy: str | None = None, optimizer: bool = False):
    module = import_onnx(model)
    AutodiffPass().apply(Context(), module)
    if optimizer:
        InsertOptimizerPass(kind="sgd").apply(Context(), module)
    if policy is not None:
        ActivationCheckpointPass(policy=policy).apply(Context(), module)
    module.verify()
    return module


# ----------------------------------------------------------------------------- numerics


def run_monet_run(model: Path, policy: str, inputs: Path, out: Path) -> dict[str, np.ndarray]:
    args = monet_run.build_parser().parse_args([
        str(model), "-p", f'autodiff,activation-checkpoint{{policy="{policy}"}}', "--inputs", str(inputs),
        "--out", str(out)])
    monet_run.run(args)
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("name", ["mlp_b4", "lenet5_b4"])
def test_paging_never_changes_gradients(tmp_path, name):
    model = DATA / "models" / f"{name}.onnx"
    plan = tmp_path / "plan.json"
    decisions = mixed_plan(differentiated(model), plan)
    assert "page" in decisions.values() and ("recompute" in decisions.values() or name == "mlp_b4")
    ref = np.load(DATA / "reference" / f"{name}.npz")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=ref["x"], labels=ref["labels"])
    before = run_monet_run(model, "store-all", inputs, tmp_path / "before.npz")
    after = run_monet_run(model, f"plan={plan}", inputs, tmp_path / "after.npz")
    assert sorted(after) == sorted(before) and any(k.startswith("grad/") for k in before)
    for key in before:
        assert np.array_equal(after[key], before[key]), key


def test_paging_never_changes_resnet18_gradients(tmp_path):
    model = SHARED / "models" / "resnet18_b1.onnx"
    if not model.is_file():
        pytest.skip(f"{model} is not present")
    from test_activation_checkpoint import random_arguments

    base = differentiated(model)
    plan = tmp_path / "plan.json"
    mixed_plan(base, plan, page_every=3)
    paged = differentiated(model, f"plan={plan}")
    assert any(PAGE_ATTR in op.attributes for op in step_function(paged).body.block.ops)
    params, inputs = random_arguments(base)
    before = run_module(base, params, inputs).outputs
    after = run_module(paged, params, inputs).outputs
    assert len(after) == len(before) > 1
    for i, (a, b) in enumerate(zip(after, before, strict=True)):
        assert np.array_equal(a, b), f"result {i}"


# ----------------------------------------------------------------------------- the pass


def test_plan_marks_paged_storages_and_recomputes_the_rest(tmp_path):
    model = DATA / "models" / "lenet5_b4.onnx"
    plan = tmp_path / "plan.json"
    decisions = mixed_plan(differentiated(model), plan)
    module = differentiated(model, f"plan={plan}")
    fn = step_function(module)
    marked = {op_node(op) for op in fn.body.block.ops if paged_results(op)}
    assert marked == {n for n, d in decisions.items() if d == "page"}
    recomputed = {op_node(op) for op in fn.body.block.ops if op.properties.get("phase") is not None
                  and op.properties["phase"].data == "recompute"}
    assert {n for n, d in decisions.items() if d == "recompute"} <= recomputed
    # clones of a paged op are not paged themselves
    assert all(not paged_results(op) for op in fn.body.block.ops if op in recomputed)


@pytest.mark.parametrize("content, message", [
    ("{", "plan.json: line 1 column 2: invalid JSON"),
    ("[]", "plan.json: expected a JSON object with an 'activations' object"),
    ('{"nodes": {}}', "plan.json: activations: missing (node -> keep|recompute|page)"),
    ('{"activations": {"/conv1/Conv": "swap"}}', "plan.json: activations./conv1/Conv: unknown decision 'swap'"),
    ('{"activations": {"/nowhere": "page"}}', "plan.json: activations./nowhere: no forward op has this node"),
])
def test_plan_file_errors(tmp_path, content, message):
    plan = tmp_path / "plan.json"
    plan.write_text(content)
    model = DATA / "models" / "lenet5_b4.onnx"
    out = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(model), "--target",
                          "cortex_a_board", "--out", str(tmp_path / "out"), "--no-plots", "--checkpoint",
                          f"plan={plan}"], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if not line.startswith("[")]  # progress lines
    assert len(lines) == 1 and message in lines[0] and str(plan) in lines[0], lines


def test_missing_plan_file_is_an_error(tmp_path):
    with pytest.raises(plans.PlanError, match="nowhere.json: file not found"):
        read_plan(str(tmp_path / "nowhere.json"))


def test_paging_needs_a_storage_level(tmp_path):
    model = DATA / "models" / "mlp_b4.onnx"
    plan = tmp_path / "plan.json"
    mixed_plan(differentiated(model), plan)
    out = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(model), "--target",
                          "edge_npu", "--out", str(tmp_path / "out"), "--no-plots", "--checkpoint", f"plan={plan}"],
                         capture_output=True, text=True)
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if not line.startswith("[")]
    assert len(lines) == 1 and "target 'edge_npu' has no storage level to page node" in lines[0], lines


# ----------------------------------------------------------------------------- the schedule


def scheduled(model: Path, target: str, plan: Path | None):
    module = differentiated(model, f"plan={plan}" if plan else None, optimizer=True)
    t = get_target(target)
    return schedule(extract(step_function(module), bits=32), t)


def test_page_transfers_are_priced_on_the_storage(tmp_path):
    model = tiny_cnn(tmp_path / "tiny_cnn.onnx")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"activations": {n: "page" for n in saved_nodes(differentiated(model))}}))
    target = get_target("cortex_m_mcu")
    storage, sram = target.storage, target.dram
    store_all = scheduled(model, "cortex_m_mcu", None)
    paged = scheduled(model, "cortex_m_mcu", plan)
    outs = [tr for tr in paged.transfers if tr.reason == "page_out"]
    ins = [tr for tr in paged.transfers if tr.reason == "page_in"]
    assert outs and len(outs) == len(ins)
    freq = target.frequency_hz
    for tr in outs + ins:
        nbytes = paged.graph.tensors[tr.tensor].bytes
        assert tr.bytes == -(-nbytes // storage.page_bytes) * storage.page_bytes
        write = tr.reason == "page_out"
        bandwidth = storage.write_bandwidth_bytes_per_s if write else storage.read_bandwidth_bytes_per_s
        assert tr.end - tr.start == pytest.approx((storage.latency_s + tr.bytes / bandwidth) * freq)
        main = nbytes * 8 * (sram.read_energy_pj_per_bit if write else sram.write_energy_pj_per_bit)
        if write and tr.src != DRAM:
            main = 0.0
        own = tr.bytes * 8 * (storage.write_energy_pj_per_bit if write else storage.read_energy_pj_per_bit)
        assert tr.energy_pj == pytest.approx(own + main)
        assert tr.resource == "storage sd_card"
    # one transfer at a time on the storage channel
    spans = sorted((tr.start, tr.end) for tr in outs + ins)
    assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:]))
    report = schedule_report(paged)
    assert report["memory"]["paged_bytes"] == sum(tr.bytes for tr in outs) == report["paging"]["paged_bytes"]
    assert report["paging"]["energy_pj"] == pytest.approx(sum(tr.energy_pj for tr in outs + ins))
    assert report["memory"]["budgeted"] == "sram" and report["paging"]["storage"] == "sd_card"
    assert 0 < report["memory"]["peak_bytes"]["sd_card"] <= sum(tr.bytes for tr in outs)
    assert report["energy_pj"] == pytest.approx(sum(report["energy_breakdown_pj"].values()))
    # paging relieves the SRAM and costs energy and time
    base = schedule_report(store_all)
    assert report["memory"]["peak_bytes"]["sram"] < base["memory"]["peak_bytes"]["sram"]
    assert report["energy_pj"] > base["energy_pj"] and report["latency_cycles"] > base["latency_cycles"]
    assert base["memory"]["paged_bytes"] == 0 and "sd_card" not in base["memory"]["peak_bytes"]


def test_page_in_comes_after_page_out_and_before_the_backward_readers(tmp_path):
    model = DATA / "models" / "lenet5_b4.onnx"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"activations": {n: "page" for n in saved_nodes(differentiated(model))}}))
    s = scheduled(model, "cortex_a_board", plan)
    g = s.graph
    by_task = {st.task: st for st in s.tasks}
    pages = [t for t in g.tasks if t.page]
    assert pages and {t.phase for t in pages} == {"paging"}
    for task in pages:
        if task.page != "in":
            continue
        out_task = g.tasks[g.tensors[task.reads[0]].producer]
        assert out_task.page == "out" and by_task[task.index].start >= by_task[out_task.index].end
        copy = task.writes[0]
        readers = [c for t in g.tensors if t.root == copy for c in t.consumers]
        assert readers and all(g.tasks[c].phase in ("backward", "recompute") for c in readers)
        assert all(by_task[c].start >= by_task[task.index].end for c in readers)
        # the original is read by forward tasks and the page-out only
        original = out_task.reads[0]
        assert all(g.tasks[c].phase in ("forward", "paging") for t in g.tensors if t.root == original
                   for c in t.consumers)


def test_storage_overflow_is_a_schedule_error(tmp_path):
    from monet_ir.schedule.scheduler import ScheduleError
    from targets.loader import builtin_target_path

    small = tmp_path / "small_sd.yaml"
    small.write_text(Path(builtin_target_path("cortex_m_mcu")).read_text().replace("capacity: 16 GB", "capacity: 1 kB"))
    model = tiny_cnn(tmp_path / "tiny_cnn.onnx")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"activations": {n: "page" for n in saved_nodes(differentiated(model))}}))
    with pytest.raises(ScheduleError, match=r"storage 'sd_card' holds 1000 bytes, paging needs \d+ bytes in it"):
        scheduled(model, str(small), plan)


def test_a_step_too_large_for_main_memory_names_the_storage_remedy(tmp_path, capsys):
    """Without a plan, a step larger than an MCU's SRAM is refused in one line that names the
    storage level and how to keep tensors there."""
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as code:
        main(["report", str(DATA / "models" / "mlp_b4.onnx"), "--target", "cortex_m_mcu", "--no-plots",
              "--out", str(tmp_path / "out")])
    assert code.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds 262144 bytes" in err and "storage 'sd_card'" in err and "--checkpoint plan=FILE.json" in err
