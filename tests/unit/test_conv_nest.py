"""One nest builder for convolutions (`monet_ir.cost.conv_nest`): the Python API's ONNX reader
(`cost.onnx_layers`) and the command line's IR signatures (`analysis.ir_signatures`) give the same
loop nest for every Conv of the export corpus and of ../shared's models, stride-2 end padding cut
to what the last window reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from monet_ir.cost.conv_nest import conv_loop_nest, reached_end_padding

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus"
SHARED_MODELS = ROOT.parent / "shared" / "models"


def _models() -> list[Path]:
    found = sorted(CORPUS.glob("*.onnx"))
    if SHARED_MODELS.is_dir():
        found += sorted(SHARED_MODELS.glob("*.onnx"))
    return found


def _has_conv(path: Path) -> bool:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return any(node.op_type == "Conv" for node in model.graph.node)


def test_stride_two_end_padding_is_cut():
    # ResNet's 3x3 stride-2 conv on 56x56 with pads 1: 28 outputs read rows -1..55, so one row of
    # begin padding and none at the end
    sig = conv_loop_nest("conv", (1, 64, 56, 56), (128, 64, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "O", (8, 8, 8, 16))
    assert (sig.oy, sig.ox, sig.pads) == (28, 28, (1, 1, 0, 0))
    assert sig.input_extent == (56, 56)
    # a stride-1 3x3 conv uses both paddings
    same = conv_loop_nest("conv", (1, 8, 10, 10), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "O", (8, 8, 8, 16))
    assert same.pads == (1, 1, 1, 1) and same.input_extent == (10, 10)
    assert reached_end_padding(7, 4, 3, 2, 1, 1, 1) == 1  # odd input: the last window reaches the pad


def test_one_d_conv_is_a_row():
    sig = conv_loop_nest("conv", (2, 4, 16), (8, 2, 5), (2,), (2, 2), (1,), 2, "O", (8, 8, 8, 16))
    assert (sig.b, sig.g, sig.k, sig.c, sig.oy, sig.ox, sig.fy, sig.fx) == (2, 2, 4, 2, 1, 8, 1, 5)
    assert sig.stride == (1, 2) and sig.pads == (0, 2, 0, 1)


def test_three_d_conv_has_a_depth_window():
    # Conv3d 3x3x3, stride (1, 2, 2), pads 1 on a 8x16x16 clip
    sig = conv_loop_nest("conv", (2, 4, 8, 16, 16), (8, 4, 3, 3, 3), (1, 2, 2), (1, 1, 1, 1, 1, 1), (1, 1, 1), 1, "O",
                         (8, 8, 8, 16))
    assert (sig.oz, sig.fz, sig.stride_z, sig.pads_z) == (8, 3, 1, (1, 1))
    assert (sig.oy, sig.ox, sig.fy, sig.fx, sig.pads) == (8, 8, 3, 3, (1, 1, 0, 0))
    assert sig.macs == 2 * 8 * 4 * 8 * 8 * 8 * 27 and sig.input_depth == 8
    assert sig.tensor_elements("W") == 8 * 4 * 27 and sig.tensor_elements("O") == 2 * 8 * 8 * 8 * 8
    assert set(sig.dims) >= {"OZ", "FZ"}
    # a 2-D nest keeps its eight dims (its price is unchanged)
    assert "OZ" not in conv_loop_nest("conv", (1, 8, 10, 10), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "O",
                                      (8, 8, 8, 16)).dims


@pytest.mark.parametrize("target", ["edge_npu", "datacenter", "tpu_like_quad_core"])
@pytest.mark.parametrize("output", ["O", "I", "W"])
def test_depth_without_a_window_costs_as_more_batch(target, output):
    """A 3-D convolution whose depth kernel is 1 at stride 1 reuses its operands along the depth
    exactly as along the batch: for every loop order, the loop-nest model prices it as the 2-D
    convolution of depth x batch images with the batch loop cut into batch and depth loops,
    forward and both gradients (the depth dim plays the batch's role in every tensor: relevant
    to the output, a window of one plane of the input, irrelevant to the weights)."""
    from monet_ir.cost.loopnest import InvalidMapping, NestModel, candidate_orderings, loop_prime_factors
    from monet_ir.cost.model import cost_of
    from targets import get_target

    cores = get_target(target).cores
    core = next((c for c in cores if c.kind == "mac_array"), cores[0])
    bits = (8, 8, 8, 16)
    three = conv_loop_nest("conv", (2, 16, 4, 12, 12), (32, 16, 1, 3, 3), (1, 1, 1), (0, 1, 1, 0, 1, 1), (1, 1, 1), 1,
                           output, bits)
    two = conv_loop_nest("conv", (8, 16, 12, 12), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, output, bits)
    assert three.macs == two.macs and three.has_depth
    model3, model2 = NestModel(three, core), NestModel(two, core)
    assert model3.unrolls == model2.unrolls
    batch = model2.temporal.get("B", 1)
    compared = 0
    for order in candidate_orderings(loop_prime_factors(model2.temporal), 60, seed=1):
        if ("B", batch) not in order:
            continue  # the batch loop was split into factors: no one-to-one depth order
        i = order.index(("B", batch))
        # the same order, the batch loop cut in two: the depth nest's batch and depth loops
        order = order[:i] + (("B", batch // 4), ("B", 4)) + order[i + 1:]
        cut = order[:i] + (("B", batch // 4), ("OZ", 4)) + order[i + 2:]
        try:
            a = model3.evaluate(model3.allocate(cut))
        except InvalidMapping:
            with pytest.raises(InvalidMapping):
                model2.allocate(order)
            continue
        b = model2.evaluate(model2.allocate(order))
        assert a.latency == pytest.approx(b.latency, rel=1e-9) and a.energy == pytest.approx(b.energy, rel=1e-9)
        compared += 1
    assert compared >= 20
    assert cost_of(three, core).latency_cycles > 0  # and the search prices it


def test_four_spatial_axes_are_refused():
    from monet_ir.cost.conv_nest import NotAConvNest

    with pytest.raises(NotAConvNest, match="4-D convolutions"):
        conv_loop_nest("conv", (1, 2, 3, 3, 3, 3), (2, 2, 1, 1, 1, 1), (), (), (), 1, "O", (8, 8, 8, 16))


@pytest.mark.parametrize("path", [p for p in _models() if _has_conv(p)], ids=lambda p: p.name)
def test_api_and_command_line_agree_on_every_conv(path):
    from xdsl.dialects import builtin  # noqa: F401  (the importer's dialects)

    from dialects import nn
    from monet_ir import graph, import_onnx
    from monet_ir.analysis.ir_signatures import signature_of
    from monet_ir.cost.onnx_layers import conv_sig, load_shaped_model, tensor_shapes

    model = load_shaped_model(str(path))
    shapes = tensor_shapes(model)
    api = {}
    for node in model.graph.node:
        if node.op_type == "Conv":
            try:
                api[node.name or node.output[0]] = conv_sig(node, shapes, (32, 32, 32, 32))
            except ValueError:  # ONNX's shape inference left a shape symbolic: the API cannot read it
                continue
    if not api:
        pytest.skip("ONNX's static shape inference knows no Conv's shapes (the API reader needs them)")
    module = import_onnx(path)
    command_line = {}
    for op in module.walk():
        if isinstance(op, nn.ConvOp):
            command_line[graph.op_node(op)] = signature_of(op, 32)
    assert api and set(api) <= set(command_line), sorted(set(api) - set(command_line))[:3]
    for name, sig in api.items():
        assert replace(command_line[name], psum_bits=sig.psum_bits) == sig, name
