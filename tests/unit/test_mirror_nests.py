"""The mirror-nest check (`monet_ir.cost.mirror`) on a small corpus: a layer's forward,
input-gradient and weight-gradient nests (the same MACs) are within 2x in cycles on a core, or
the spatial units the core's dataflow gives each (or operand sizes) explain the gap. Includes
the two cases users found: ResNet-18's 3x3 convs on Stream's fusemax (forward 13x slower than its
input gradient before a dataflow's roles were given to forward nests too) and a MobileNetV2
depthwise conv on edge_npu. bench/bench_mirror_nests.py runs it on the whole export corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from monet_ir.cost import LoopNestSig
from monet_ir.cost.mirror import LIMIT, mirror_check
from monet_ir.cost.onnx_layers import load_shaped_model, model_layer_sigs
from targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = [DATA / "models" / "lenet5_b4.onnx", DATA / "models" / "mlp_b4.onnx",
          DATA.parents[1] / "examples" / "models" / "resnet18_b1.onnx",
          DATA / "corpus" / "mobilenet_v2.ts.op13.onnx"]
TARGETS = ["edge_npu", "tpu_like_quad_core", str(DATA / "stream_hw" / "fusemax.yaml")]
INT8 = dict(w_bits=8, i_bits=8, o_bits=8, psum_bits=16)


def _mac_core(target: str):
    return next(c for c in get_target(target, precision="int8").cores if c.kind == "mac_array")


def _layers() -> list[LoopNestSig]:
    sigs = {}
    for path in MODELS:
        if path.exists():
            for _, sig in model_layer_sigs(load_shaped_model(str(path)), (8, 8, 8, 16)):
                sigs.setdefault(sig, None)
    return list(sigs)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: Path(t).stem)
def test_mirror_nests_agree_or_are_explained(target):
    core = _mac_core(target)
    checked = 0
    for sig in _layers():
        check = mirror_check(sig, core)
        if check is None:
            continue
        checked += 1
        assert not check.unexplained, (sig, check)
    assert checked >= 10


def test_resnet_conv_on_fusemax_forward_is_not_slower_than_its_gradients():
    conv = LoopNestSig(kind="conv", b=4, k=64, c=64, oy=56, ox=56, fy=3, fx=3, pads=(1, 1, 1, 1), **INT8)
    check = mirror_check(conv, _mac_core(str(DATA / "stream_hw" / "fusemax.yaml")))
    assert check.ratio <= LIMIT, check


def test_depthwise_on_edge_npu_is_explained_by_what_the_array_unrolls():
    depthwise = LoopNestSig(kind="conv", b=4, g=96, oy=56, ox=56, fy=3, fx=3, pads=(1, 1, 1, 1), **INT8)
    check = mirror_check(depthwise, _mac_core("edge_npu"))
    forward, input_grad, _ = check.cycles
    assert max(forward, input_grad) / min(forward, input_grad) <= LIMIT
    assert not check.unexplained and (check.ratio <= LIMIT or "unrolls" in check.explanation)
