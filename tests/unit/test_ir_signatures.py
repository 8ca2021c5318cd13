"""IR ops → cost-model signatures: MAC counts match PyTorch's FLOP counts on real workloads."""

from __future__ import annotations

import json

import pytest

from monet_ir import import_onnx, parse_module
from monet_ir.analysis.ir_signatures import matmul_conv_flops, signature_of
from monet_ir.cost.signature import LoopNestSig, VectorSig


@pytest.mark.parametrize("workload", ["mlp_b4", "lenet5_b128", "resnet18_b32", "gpt2_small_b8", "gpt2_124m_b1"])
def test_forward_matmul_conv_flops_equal_pytorch(shared_models, workload):
    figures = json.loads((shared_models / f"{workload}.figures.json").read_text())["pytorch"]
    module = import_onnx(shared_models / f"{workload}.onnx")
    flops = sum(matmul_conv_flops(op) for op in module.walk())
    assert flops == figures.get("flops_fwd_fixed", figures["flops_fwd"])


def test_gradient_nests_have_the_forward_mac_count():
    module = parse_module("""
    func.func @f(%x: tensor<2x8x16x16xf32>, %w: tensor<4x8x3x3xf32>, %dy: tensor<2x4x8x8xf32>, %a: tensor<6x5xf32>, %b: tensor<7x5xf32>, %dm: tensor<6x7xf32>) {
      %y = nn.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x8x8xf32>
      %dx = grad.conv_input %dy, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x8x3x3xf32>) -> tensor<2x8x16x16xf32>
      %dw = grad.conv_weight %dy, %x {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x8x8xf32>, tensor<2x8x16x16xf32>) -> tensor<4x8x3x3xf32>
      %m = nn.matmul %a, %b {trans_b = true} : (tensor<6x5xf32>, tensor<7x5xf32>) -> tensor<6x7xf32>
      %da = grad.matmul_lhs %dm, %b {trans_b = true} : (tensor<6x7xf32>, tensor<7x5xf32>) -> tensor<6x5xf32>
      %db = grad.matmul_rhs %dm, %a {trans_b = true} : (tensor<6x7xf32>, tensor<6x5xf32>) -> tensor<7x5xf32>
      %r = nn.relu %y : tensor<2x4x8x8xf32>
      func.return
    }""")
    sigs = {op.name + str(i): signature_of(op) for i, op in enumerate(module.walk()) if op.name.startswith(("nn", "grad"))}
    convs = [s for s in sigs.values() if isinstance(s, LoopNestSig) and s.kind.startswith("conv")]
    mms = [s for s in sigs.values() if isinstance(s, LoopNestSig) and "matmul" in s.kind]
    assert {s.macs for s in convs} == {2 * 4 * 8 * 8 * 8 * 3 * 3}
    assert [s.output_operand for s in convs] == ["O", "I", "W"]
    assert {s.macs for s in mms} == {6 * 7 * 5}
    relu = [s for s in sigs.values() if isinstance(s, VectorSig)]
    assert relu[0].elements == 2 * 4 * 8 * 8 and relu[0].bytes_read == relu[0].bytes_written == 2 * 4 * 8 * 8 * 4


def test_pooling_signatures_carry_their_window_shape():
    module = parse_module("""
func.func @pools(%x: tensor<1x8x16x16xf32>, %a: tensor<1x8x7x7xf32>) -> (tensor<1x8x8x8xf32>, tensor<1x8x1x1xf32>) {
  %p = nn.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x16x16xf32>) -> tensor<1x8x8x8xf32>
  %g = nn.global_avg_pool %a : (tensor<1x8x7x7xf32>) -> tensor<1x8x1x1xf32>
  func.return %p, %g : tensor<1x8x8x8xf32>, tensor<1x8x1x1xf32>
}""")
    pool, gap = (signature_of(op) for op in list(module.body.block.ops)[0].body.block.ops if op.results)
    assert (pool.window, pool.window_shape, pool.elements) == (9, (3, 3), 8 * 8 * 8)
    assert (gap.window, gap.window_shape, gap.elements) == (49, (7, 7), 8)
