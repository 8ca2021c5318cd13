"""The quantize pass in a report: what the casts cost, and what square groups save."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from xdsl.context import Context

from dialects import mx
from monet_ir.analysis.ir_signatures import signature_of, value_bytes
from monet_ir.frontend.onnx_import import import_onnx
from monet_ir.graph import compute_ops, step_function
from monet_ir.precision import parse_precision
from monet_ir.schedule.taskgraph import extract
from monet_ir.tools.monet import Progress, build_parser, make_report
from passes.autodiff import AutodiffPass
from passes.insert_optimizer import InsertOptimizerPass
from passes.quantize import QuantizePass

DATA = Path(__file__).resolve().parents[1] / "data" / "models"
LENET = DATA / "lenet5_b4.onnx"


def report(*options):
    args = build_parser().parse_args(["report", str(LENET), "--out", "unused", "--target", "edge_npu", *options])
    return make_report(args, Progress(enabled=False))[0]


def mx_ops(r):
    return Counter((row["op"], row["phase"]) for row in r["layers"] if row["op"].startswith("mx."))


@pytest.fixture(scope="module")
def reports():
    return {g: report("--precision", "mxfp8_e4m3", "--mx-group", g) for g in ("vector", "square:8x8")}


def test_vector_groups_requantize_every_transposed_use_square_groups_none(reports):
    vector, square = mx_ops(reports["vector"]), mx_ops(reports["square:8x8"])
    # LeNet: 5 contractions (2 conv, 3 gemm); the first needs no dX. Vector: W^T for 4 dX,
    # X^T for 5 dW are requantized; dY is cast for 4 dX and 5 dW. Square: dY once per layer.
    assert vector[("mx.requantize", "backward")] == 9 and vector[("mx.quantize", "backward")] == 9
    assert square[("mx.requantize", "backward")] == 0 and square[("mx.quantize", "backward")] == 5
    for counts in (vector, square):
        assert counts[("mx.quantize", "forward")] == 10 and counts[("mx.quantize", "optimizer")] == 5
    assert "quantize{policy=" in reports["vector"]["pipeline"]


def test_square_groups_lower_the_peak_memory_and_the_cast_work(reports):
    def cast_cost(r):
        rows = [row for row in r["layers"] if row["op"].startswith("mx.")]
        return sum(row["latency_cycles"] for row in rows), sum(row["energy_pj"] for row in rows)

    v, s = reports["vector"], reports["square:8x8"]
    assert s["memory"]["peak_bytes"]["lpddr4x"] < v["memory"]["peak_bytes"]["lpddr4x"]
    assert cast_cost(s)[0] < cast_cost(v)[0] and cast_cost(s)[1] < cast_cost(v)[1]
    # casts run on the SIMD core (core 2 of edge_npu), not on the MAC arrays
    assert {row["core"] for row in v["layers"] if row["op"].startswith("mx.")} == {2}


def quantized_step(policy: str, group: str = "vector"):
    module = import_onnx(str(LENET))
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="sgd").apply(Context(), module)
    QuantizePass(policy=policy, group=group).apply(Context(), module)
    return module


def test_a_cast_reads_its_source_and_writes_mx_bytes():
    module = quantized_step("weights=mxfp4_e2m1,activations=mxfp8_e4m3,gradients=mxfp8_e5m2")
    policy = parse_precision("weights=mxfp4_e2m1,activations=mxfp8_e4m3,gradients=mxfp8_e5m2")
    casts = [op for op in compute_ops(step_function(module)) if isinstance(op, mx.CastOp)]
    weight = next(op for op in casts if op.get_format() == "mxfp4_e2m1" and op.get_phase() == "forward")
    n = 1
    for d in weight.input.type.get_shape():
        n *= d
    sig = signature_of(weight, policy)
    assert sig.bytes_read == 4 * n  # the fp32 master
    assert sig.bytes_written == value_bytes(weight.result, policy) == (n * 4 + -(-n // 32) * 8 + 7) // 8
    assert sig.ops_per_element == 4 and sig.elements == n
    requant = next(op for op in casts if isinstance(op, mx.RequantizeOp))
    rsig = signature_of(requant, policy)
    assert rsig.bytes_read == rsig.bytes_written == value_bytes(requant.result, policy)
    # an MX cast's result keeps its format even without a policy
    assert value_bytes(weight.result, None) == value_bytes(weight.result, policy)


def test_the_weight_requantization_waits_for_the_update():
    module = quantized_step("mxfp8_e4m3")
    graph = extract(step_function(module), bits=parse_precision("mxfp8_e4m3"))
    tasks = graph.tasks
    for task in tasks:
        if task.phase == "optimizer" and task.op == "mx.quantize":
            updates = [tasks[p] for p in task.preds if tasks[p].op.startswith("train.")]
            assert updates, f"{task.node} does not wait for its parameter's update"
