"""FLOP, op-count and memory accounting and the saved-activation analysis on hand-written
training steps, with the expected numbers worked out by hand."""

from __future__ import annotations

import json

import pytest
from xdsl.dialects.builtin import UnitAttr

from dialects import grad, nn
from monet_ir import graph, make_context, parse_module, print_module
from monet_ir.analysis import accounting, saved
from monet_ir.analysis.ir_signatures import signature_of
from passes.insert_optimizer import InsertOptimizerPass

CNN = """
func.func @step(%x: tensor<2x2x5x5xf32> {monet.input = "x"}, %lab: tensor<2xi64> {monet.input = "labels"},
                %w: tensor<3x2x3x3xf32> {monet.param = "conv.weight", monet.trainable},
                %fw: tensor<4x12xf32> {monet.param = "fc.weight", monet.trainable},
                %rm: tensor<3xf32> {monet.param = "bn.running_mean"})
    -> (tensor<f32> {monet.loss}, tensor<3x2x3x3xf32> {monet.grad = "conv.weight"}, tensor<4x12xf32> {monet.grad = "fc.weight"}) {
  %c = nn.conv %x, %w {pads = array<i64: 1, 1, 1, 1>, node = "/conv"} : (tensor<2x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<2x3x5x5xf32>
  %r = nn.relu %c {node = "/relu"} : tensor<2x3x5x5xf32>
  %p = nn.max_pool %r {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, node = "/pool"} : (tensor<2x3x5x5xf32>) -> tensor<2x3x2x2xf32>
  %f = nn.reshape %p {node = "/flatten"} : (tensor<2x3x2x2xf32>) -> tensor<2x12xf32>
  %d, %mask = nn.dropout %f {ratio = 5.000000e-01 : f64, node = "/drop"} : (tensor<2x12xf32>) -> (tensor<2x12xf32>, tensor<2x12xi1>)
  %s = nn.gemm %d, %fw {trans_b = true, node = "/fc"} : (tensor<2x12xf32>, tensor<4x12xf32>) -> tensor<2x4xf32>
  %loss, %logp = nn.softmax_cross_entropy %s, %lab {node = "/loss"} : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
  %ds = grad.softmax_cross_entropy %one, %logp, %lab {node = "/loss"} : (tensor<f32>, tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %dfw = grad.matmul_rhs %ds, %d {trans_b = true, node = "/fc"} : (tensor<2x4xf32>, tensor<2x12xf32>) -> tensor<4x12xf32>
  %dd = grad.matmul_lhs %ds, %fw {trans_b = true, node = "/fc"} : (tensor<2x4xf32>, tensor<4x12xf32>) -> tensor<2x12xf32>
  %df = grad.dropout %dd, %mask {ratio = 5.000000e-01 : f64, node = "/drop"} : (tensor<2x12xf32>, tensor<2x12xi1>) -> tensor<2x12xf32>
  %dp = nn.reshape %df {node = "/flatten", phase = "backward"} : (tensor<2x12xf32>) -> tensor<2x3x2x2xf32>
  %dr = grad.max_pool %dp, %r {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, node = "/pool"} : (tensor<2x3x2x2xf32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  %dc = grad.relu %dr, %c {node = "/relu"} : tensor<2x3x5x5xf32>
  %dw = grad.conv_weight %dc, %x {pads = array<i64: 1, 1, 1, 1>, node = "/conv"} : (tensor<2x3x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<3x2x3x3xf32>
  func.return %loss, %dw, %dfw : tensor<f32>, tensor<3x2x3x3xf32>, tensor<4x12xf32>
}
"""

# conv 2x3x5x5 outputs x (2 channels x 3x3 window) = 2700 MACs; gemm / matmul grads 2x12x4 = 96 MACs
FORWARD = {"matmul_conv": 2 * 2700 + 2 * 96,
           # relu 150 + max_pool 24 outputs x window 4 + dropout 24 x 3 + cross-entropy 8 scores x 8
           "other": 150 + 96 + 72 + 64}
BACKWARD = {"matmul_conv": 2 * 96 + 2 * 96 + 2 * 2700,  # no input gradient for the first conv
            # cross-entropy grad 8 x 3 + dropout grad 24 x 2 + max_pool grad 150 x window 4 + relu grad 150
            "other": 24 + 48 + 600 + 150}
ZERO = {"matmul_conv": 0, "other": 0}


def step(text: str = CNN):
    module = parse_module(text)
    return module, graph.step_function(module)


def optimize(module, **options):
    InsertOptimizerPass(**options).apply(make_context(), module)
    module.verify()
    return graph.step_function(module)


# ------------------------------------------------------------------------------ FLOPs


def test_flops_by_phase():
    _, fn = step()
    assert accounting.flops_by_phase(fn) == {
        "forward": FORWARD, "backward": BACKWARD, "optimizer": ZERO, "recompute": ZERO}
    assert accounting.op_counts_by_phase(fn) == {"forward": 7, "backward": 9, "optimizer": 0, "recompute": 0}


def test_optimizer_flops_and_per_op_rows():
    module, _ = step()
    fn = optimize(module, kind="sgd")
    flops = accounting.flops_by_phase(fn)
    assert flops["optimizer"] == {"matmul_conv": 0, "other": 3 * (54 + 48)}  # 3 ops per parameter element
    assert flops["forward"] == FORWARD and flops["backward"] == BACKWARD
    rows = accounting.per_op_rows(fn)
    assert [r["op"] for r in rows][:4] == ["nn.conv", "nn.relu", "nn.max_pool", "nn.reshape"]
    assert rows[0] == {"name": "/conv", "op": "nn.conv", "phase": "forward", "matmul_conv": 5400, "other": 0}
    assert rows[3] == {"name": "/flatten", "op": "nn.reshape", "phase": "forward", "matmul_conv": 0, "other": 0}
    assert rows[-2:] == [
        {"name": "conv.weight", "op": "train.sgd", "phase": "optimizer", "matmul_conv": 0, "other": 162},
        {"name": "fc.weight", "op": "train.sgd", "phase": "optimizer", "matmul_conv": 0, "other": 144},
    ]
    # the rows add up to the phase totals
    for phase, totals in flops.items():
        for key in ("matmul_conv", "other"):
            assert sum(r[key] for r in rows if r["phase"] == phase) == totals[key]


def test_recompute_phase_and_rounding():
    text = """
func.func @f(%x: tensor<3xf32> {monet.input = "x"}) -> tensor<3xf32> {
  %a = nn.sigmoid %x {node = "/s"} : tensor<3xf32>
  %b = nn.sigmoid %x {node = "/s", phase = "recompute"} : tensor<3xf32>
  %c = nn.softmax %b {axis = 0 : i64, phase = "backward"} : tensor<3xf32>
  func.return %c : tensor<3xf32>
}
"""
    _, fn = step(text)
    flops = accounting.flops_by_phase(fn)
    assert flops["forward"] == {"matmul_conv": 0, "other": 12}
    assert flops["recompute"] == {"matmul_conv": 0, "other": 12}
    assert flops["backward"] == {"matmul_conv": 0, "other": 21}
    assert flops["optimizer"] == ZERO
    assert accounting.op_counts_by_phase(fn) == {"forward": 1, "backward": 1, "optimizer": 0, "recompute": 1}


CONVS = """
func.func @convs(%x: tensor<1x4x7x7xf32>, %w: tensor<6x2x3x3xf32>, %dy: tensor<1x6x4x4xf32>, %t: tensor<1x4x3x3xf32>, %tw: tensor<4x2x3x3xf32>) {
  %y = nn.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, group = 2 : i64} : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  %dx = grad.conv_input %dy, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, group = 2 : i64} : (tensor<1x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  %dw = grad.conv_weight %dy, %x {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, group = 2 : i64} : (tensor<1x6x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<6x2x3x3xf32>
  %u = nn.conv_transpose %t, %tw : (tensor<1x4x3x3xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x5x5xf32>
  func.return
}
"""


def test_conv_flops_and_the_direct_rule_agree_with_the_loop_nest():
    _, fn = step(CONVS)
    ops = list(graph.compute_ops(fn))
    # 16 outputs x 6 channels x (2 input channels per group x 3x3) = 1728 MACs, for all three
    assert [accounting.op_flops(op)["matmul_conv"] for op in ops[:3]] == [3456] * 3
    # transposed conv: 9 input positions x 4 input channels x 2 outputs per group x 3x3 = 648
    assert accounting.op_flops(ops[3])["matmul_conv"] == 2 * 648
    for op in ops:
        assert op.direct_macs() == signature_of(op).macs


def test_three_d_convolutions_are_counted_directly():
    text = """
func.func @c3(%x: tensor<1x2x4x4x4xf32>, %w: tensor<3x2x3x3x3xf32>, %dy: tensor<1x3x4x4x4xf32>) {
  %y = nn.conv %x, %w {pads = array<i64: 1, 1, 1, 1, 1, 1>} : (tensor<1x2x4x4x4xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x3x4x4x4xf32>
  %dx = grad.conv_input %dy, %w {pads = array<i64: 1, 1, 1, 1, 1, 1>} : (tensor<1x3x4x4x4xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x2x4x4x4xf32>
  func.return
}
"""
    _, fn = step(text)
    # 64 outputs x 3 channels x 2 input channels x 27 = 10368 MACs each
    assert accounting.flops_by_phase(fn)["forward"] == {"matmul_conv": 2 * 10368, "other": 0}
    assert accounting.flops_by_phase(fn)["backward"] == {"matmul_conv": 2 * 10368, "other": 0}


# ------------------------------------------------------------------------------ memory


def test_memory_summary():
    _, fn = step()
    assert accounting.memory_summary(fn) == {
        "parameter_bytes": 4 * (54 + 48),       # trainable only
        "buffer_bytes": 12,                     # the non-trainable running mean
        "gradient_bytes": 4 * (54 + 48),        # the two monet.grad results
        "optimizer_state_bytes": 0,
        "input_bytes": 400 + 16,                # images + int64 labels
        # conv out %c 600 + relu out %r 600 + dropout out %d 96 + i1 mask 24 (1 byte each) + log-probs 32
        "saved_activation_bytes": 600 + 600 + 96 + 24 + 32,
        "saved_input_bytes": 400 + 16,
        "saved_param_bytes": 192,               # fc.weight; conv.weight is not read (no input gradient)
    }


@pytest.mark.parametrize("kind, state", [("sgd", 0), ("momentum", 408), ("adam", 2 * 408 + 2 * 4), ("adamw", 824)])
def test_memory_after_insert_optimizer(kind, state):
    module, fn = step()
    before = accounting.memory_summary(fn)
    after = accounting.memory_summary(optimize(module, kind=kind))
    assert after["optimizer_state_bytes"] == state
    # the gradients are now operands of the train ops instead of results: same bytes
    assert after["gradient_bytes"] == before["gradient_bytes"] == 408
    assert {k: v for k, v in after.items() if k != "optimizer_state_bytes"} == \
        {k: v for k, v in before.items() if k != "optimizer_state_bytes"}


def test_forward_only_step_has_no_gradients():
    text = CNN.split("  %one")[0] + "  func.return %loss : tensor<f32>\n}\n"
    text = text.replace(", tensor<3x2x3x3xf32> {monet.grad = \"conv.weight\"}, tensor<4x12xf32> {monet.grad = \"fc.weight\"}", "")
    _, fn = step(text)
    memory = accounting.memory_summary(fn)
    assert memory["gradient_bytes"] == 0 and memory["saved_activation_bytes"] == 0
    assert accounting.flops_by_phase(fn)["backward"] == ZERO


# ------------------------------------------------------------------------------ saved values


def test_saved_values_of_the_cnn():
    _, fn = step()
    found = {(sv.value.name_hint, sv.kind, sv.bytes, sv.producer, tuple(op.name for op in sv.consumers))
             for sv in saved.saved_activations(fn)}
    assert found == {
        ("x", "input", 400, "x", ("grad.conv_weight",)),
        ("lab", "input", 16, "labels", ("grad.softmax_cross_entropy",)),
        ("fw", "param", 192, "fc.weight", ("grad.matmul_lhs",)),
        ("c", "activation", 600, "/conv", ("grad.relu",)),
        ("r", "activation", 600, "/relu", ("grad.max_pool",)),
        ("d", "activation", 96, "/drop", ("grad.matmul_rhs",)),
        ("mask", "activation", 24, "/drop", ("grad.dropout",)),
        ("logp", "activation", 32, "/loss", ("grad.softmax_cross_entropy",)),
    }
    # arguments first in argument order, then op results in program order
    assert [sv.value.name_hint for sv in saved.saved_activations(fn)] == ["x", "lab", "fw", "c", "r", "d", "mask", "logp"]
    assert saved.saved_bytes_by_kind(fn) == {"activation": 1352, "input": 416, "param": 192}


VIEWS = """
func.func @views(%x: tensor<2x6xf32> {monet.input = "x"}, %w: tensor<3x4xf32> {monet.param = "w", monet.trainable}) -> tensor<3x4xf32> {
  %xv = nn.reshape %x {node = "/flat"} : (tensor<2x6xf32>) -> tensor<4x3xf32>
  %h = nn.matmul %xv, %w {node = "/mm"} : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  %hv = nn.reshape %h {node = "/view"} : (tensor<4x4xf32>) -> tensor<16xf32>
  %e = nn.exp %h {node = "/exp"} : tensor<4x4xf32>
  %k = nn.constant dense<2.000000e+00> : tensor<4x4xf32> {node = "/k", monet.saved}
  %re = nn.exp %e {node = "/exp2", phase = "recompute"} : tensor<4x4xf32>
  %a = nn.mul %re, %k {node = "/exp2", phase = "backward"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = nn.reshape %hv {node = "/view", phase = "backward"} : (tensor<16xf32>) -> tensor<4x4xf32>
  %c = nn.mul %a, %h {node = "/mul", phase = "backward"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = nn.add %c, %b {node = "/add", phase = "backward"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %dw = grad.matmul_rhs %d, %xv {node = "/mm"} : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<3x4xf32>
  func.return %dw : tensor<3x4xf32>
}
"""


def test_views_constants_and_recomputation():
    _, fn = step(VIEWS)
    found = [(sv.value.name_hint, sv.kind, sv.bytes, sv.producer, sv.storage.name_hint, [op.name for op in sv.consumers])
             for sv in saved.saved_activations(fn)]
    assert found == [
        ("xv", "input", 48, "/flat", "x", ["grad.matmul_rhs"]),   # a view of the input: input bytes
        ("h", "activation", 64, "/mm", "h", ["nn.mul"]),
        ("hv", "activation", 64, "/view", "h", ["nn.reshape"]),   # a view of h: same storage
        ("e", "activation", 64, "/exp", "e", ["nn.exp"]),         # read by a recompute op
    ]  # the constant %k is not saved; %w is only read in the forward phase
    assert saved.saved_bytes_by_kind(fn) == {"activation": 128, "input": 48, "param": 0}


def test_mark_saved_sets_and_clears_the_attribute():
    module, fn = step(VIEWS)
    assert saved.mark_saved(fn) == 4
    marked = [op.get_node() for op in fn.walk() if "monet.saved" in op.attributes]
    assert marked == ["/flat", "/mm", "/view", "/exp"]  # the stale mark on the constant is gone
    assert all(op.attributes["monet.saved"] == UnitAttr() for op in fn.walk() if "monet.saved" in op.attributes)
    # the marks survive printing and parsing, and marking again changes nothing
    text = print_module(module)
    again = graph.step_function(parse_module(text))
    assert [op.get_node() for op in again.walk() if "monet.saved" in op.attributes] == marked
    assert saved.mark_saved(again) == 4 and print_module(again.parent_op()) == text
    module, fn = step()
    saved.mark_saved(fn)
    marked = {op.name for op in fn.walk() if "monet.saved" in op.attributes}
    assert marked == {"nn.conv", "nn.relu", "nn.dropout", "nn.softmax_cross_entropy"}


# ------------------------------------------------------------------------------ shared models


def test_resnet18_forward_flops_and_parameters_match_pytorch(shared_models):
    from monet_ir import import_onnx

    figures = json.loads((shared_models / "resnet18_b1.figures.json").read_text())["pytorch"]
    fn = graph.step_function(import_onnx(shared_models / "resnet18_b1.onnx"))
    assert accounting.flops_by_phase(fn)["forward"]["matmul_conv"] == figures["flops_fwd"]
    memory = accounting.memory_summary(fn)
    assert memory["parameter_bytes"] == figures["param_bytes"]
    # PyTorch's buffers also hold one int64 num_batches_tracked per batch norm, absent from ONNX
    batch_norms = sum(isinstance(op, nn.BatchNormOp) for op in fn.walk())
    assert memory["buffer_bytes"] + 8 * batch_norms == figures["buffer_bytes"]
    assert not any(isinstance(op, grad.GradOp) for op in fn.walk())
