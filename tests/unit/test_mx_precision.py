"""Precision policies per tensor class and MX storage in every memory figure of a report."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from monet_ir.precision import MXGroup, PrecisionError, number_format, parse_precision
from monet_ir.tools.monet import Progress, build_parser, make_report
from targets import TargetError, get_target
from targets.precision_choice import choose_precision

POLICY = "weights=mxfp8_e4m3,activations=mxfp8_e4m3,gradients=mxfp8_e5m2,master=fp32,state=fp32"


def matmul_model(path, n=1024, batch=8):
    """y = x @ w, w [n, n] without bias."""
    w = numpy_helper.from_array(np.zeros((n, n), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n])], [w])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return matmul_model(tmp_path_factory.mktemp("mx") / "mm.onnx")


def report(model, *options):
    args = build_parser().parse_args(["report", str(model), "--out", "unused", "--loss", "mse", *options])
    return make_report(args, Progress(enabled=False))[0]


def test_storage_is_exact_with_scales():
    group = MXGroup("vector", 1, 32)
    n = 1_048_576
    assert number_format("mxfp4_e2m1", group).storage_bytes(n) == 557_056
    assert number_format("mxfp8_e4m3", group).storage_bytes(n) == 1_081_344
    assert number_format("mxint8", group).storage_bytes(n) == 1_081_344
    assert number_format("mxfp6_e3m2", group).storage_bytes(n) == 819_200
    assert number_format("mxfp4_e2m1", group).amortized_bits == 4.25
    # a partial last block still has its scale; square 8x8 groups: one scale per 64 elements
    assert number_format("mxfp4_e2m1", group).storage_bytes(33) == (33 * 4 + 2 * 8 + 7) // 8
    assert number_format("mxfp8_e4m3", MXGroup("square", 8, 8)).storage_bytes(n) == n + n // 64


@pytest.mark.parametrize("name,expected", [("mxfp4_e2m1", 557_056), ("mxfp8_e4m3", 1_081_344),
                                           ("mxfp8_e5m2", 1_081_344), ("mxint8", 1_081_344),
                                           ("mxfp6_e2m3", 819_200)])
def test_a_million_weights_occupy_their_mx_bytes_in_every_memory_figure(model, name, expected):
    r = report(model, "--target", "edge_npu", "--precision", name)
    memory = r["memory"]
    assert memory["parameter_bytes"] == expected
    assert memory["gradient_bytes"] == expected
    assert r["precision"] == f"{name};mx-block=32;mx-group=vector"
    assert r["precision_policy"]["weights"] == name
    # the DRAM peak holds the weight, its gradient, and Adam's two moments (and a 1-element step)
    step = number_format(name).storage_bytes(1)
    assert memory["optimizer_state_bytes"] == 2 * expected + step
    assert memory["peak_bytes"]["lpddr4x"] >= 4 * expected
    assert memory["peak_bytes"]["lpddr4x"] < 4 * expected + 4 * 8 * 1024 * 2


def test_a_policy_keeps_master_and_state_and_adds_the_quantized_copy(model):
    r = report(model, "--target", "edge_npu", "--precision", POLICY, "--mx-group", "square:8x8")
    memory = r["memory"]
    assert memory["parameter_bytes"] == 4 * 1024 * 1024
    assert memory["optimizer_state_bytes"] == 2 * 4 * 1024 * 1024 + 4
    assert memory["gradient_bytes"] == 1024 * 1024 + 1024 * 1024 // 64  # E5M2 elements + square scales
    assert memory["weight_copy_bytes"] == 1024 * 1024 + 1024 * 1024 // 64
    assert r["precision"] == POLICY + ";mx-block=64;mx-group=square:8x8"
    assert r["precision_policy"]["bits_per_element"]["gradients"] == 8.125
    # the task graph sizes tensors by class too: the fp32 master and moments dominate DRAM
    assert memory["peak_bytes"]["lpddr4x"] >= 3 * 4 * 1024 * 1024 + memory["gradient_bytes"]


def test_mx_traffic_counts_the_scales(model):
    fp = report(model, "--target", "edge_npu", "--precision", "fp8")
    mx = report(model, "--target", "edge_npu", "--precision", "mxfp8_e4m3")
    # same 8-bit MACs; MX moves 8.25 bits per element, so no faster than fp8
    assert mx["latency_cycles"] >= fp["latency_cycles"]
    four = report(model, "--target", "edge_npu", "--precision", "mxfp4_e2m1")
    assert four["memory"]["parameter_bytes"] < mx["memory"]["parameter_bytes"]


def test_signatures_under_a_policy():
    from xdsl.context import Context

    from dialects import grad, nn
    from monet_ir.analysis.ir_signatures import signature_of
    from monet_ir.frontend.onnx_import import import_onnx
    from monet_ir.graph import compute_ops, step_function
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass
    import tempfile, pathlib

    with tempfile.TemporaryDirectory() as d:
        module = import_onnx(str(matmul_model(pathlib.Path(d) / "m.onnx", n=64)))
    AutodiffPass(loss="mse").apply(Context(), module)
    InsertOptimizerPass(kind="sgd").apply(Context(), module)
    policy = parse_precision(POLICY)
    sigs = {type(op): signature_of(op, policy) for op in compute_ops(step_function(module))}
    forward = sigs[nn.MatMulOp]
    assert (forward.w_bits, forward.i_bits, forward.o_bits, forward.mac_bits, forward.psum_bits) == (8.25, 8.25, 8.25, 8, 32)
    weight_grad = sigs[grad.MatMulRhsGradOp]
    assert weight_grad.w_bits == 8.25 and weight_grad.mac_bits == 8  # dW in E5M2, from X and dY
    # plain formats keep the integer widths they had
    assert signature_of(next(o for o in compute_ops(step_function(module)) if isinstance(o, nn.MatMulOp)), 16).w_bits == 16


def test_policy_parsing_and_errors():
    policy = parse_precision("weights=mxfp4_e2m1,gradients=bf16", block=16)
    assert (policy.weights, policy.activations, policy.gradients, policy.master, policy.state) == (
        "mxfp4_e2m1", "fp32", "bf16", "fp32", "fp32")
    assert parse_precision(policy.spec()) == policy
    assert parse_precision("bf16").spec() == "bf16"
    assert parse_precision("weights=bf16,activations=bf16").spec() == "weights=bf16,activations=bf16,gradients=fp32,master=fp32,state=fp32"
    for bad, words in [("weight=fp32", "CLASS=FORMAT"), ("weights=fp32,weights=bf16", "given twice"),
                       ("weights=mxfp9", "unknown precision 'mxfp9'"), ("mxfp4_e2m1;mx-block=x", "mx-block=K")]:
        with pytest.raises(PrecisionError, match=words):
            parse_precision(bad)


def test_choice_of_a_policy_on_targets():
    assert choose_precision(get_target("edge_npu"), "bf16").bits == 16  # plain: the old integer path
    choice = choose_precision(get_target("edge_npu"), parse_precision(POLICY))
    assert choice.bits == parse_precision(POLICY) and choice.source == "--precision"
    with pytest.raises(TargetError, match="unknown precision"):
        choose_precision(get_target("edge_npu"), "weights=nope")


def test_bad_mx_options_are_one_line_errors(model, tmp_path):
    import subprocess, sys

    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(model), "--target", "edge_npu",
                          "--out", str(tmp_path), "--no-plots", "--precision", "mxfp8_e4m3", "--mx-group", "cube"],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == "monet: error: --mx-group cube: expected vector or square:RxC (e.g. square:8x8)"
