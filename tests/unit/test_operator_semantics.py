"""The operators issue 28 added, imported from single-node ONNX models and run by monet-run's
interpreter, agree with ONNX's reference implementation (onnx.reference) of the node. Their
gradients are checked against finite differences in test_autodiff.py (the same cases)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from monet_ir import import_onnx
from monet_ir.interp.run import run_module

from onnx_cases import CASES

NEW = ("Softplus", "Softsign", "Abs", "Sin", "Cos", "Elu", "Celu", "Selu", "Mish", "Sign", "Floor", "Ceil", "Round",
       "Max", "Min", "Mod", "PRelu", "ReduceMax", "ReduceMin", "GlobalMaxPool", "ArgMax", "ArgMin", "Tile", "TopK",
       "ScatterElements", "OneHot", "NonZero")
SEMANTIC_CASES = [c for c in CASES if c.op_type in NEW or (c.op_type == "Resize" and c.attrs.get("mode") == "cubic")
                  or (c.op_type == "Pad" and (c.consts["pads"] < 0).any())
                  or (c.op_type == "GatherElements" and c.inputs[0][1] == TensorProto.FLOAT)]


def _feed(name: str, elem: int, shape: list[int], rng) -> np.ndarray:
    if elem == TensorProto.FLOAT:
        return rng.standard_normal(shape).astype(np.float32) * 2
    if elem == TensorProto.BOOL:
        return rng.random(shape) > 0.5
    return rng.integers(-2, 5, shape).astype(np.int64)


@pytest.mark.parametrize("case", SEMANTIC_CASES, ids=[f"{c.op_type}-{i}" for i, c in enumerate(SEMANTIC_CASES)])
def test_monet_run_agrees_with_the_onnx_reference(case):
    rng = np.random.default_rng(3)
    model = case.model()
    feeds = {n: _feed(n, e, s, rng) for n, e, s in case.inputs}
    if case.op_type == "Pad":  # onnx.reference's Pad takes no negative pads: crop, then pad
        expected = _pad_with_crops(feeds["x"], [int(p) for p in case.consts["pads"]])
    else:
        expected = ReferenceEvaluator(model).run(None, feeds)[0]
    module = import_onnx(model.SerializeToString())
    got = run_module(module, {k: v for k, v in feeds.items() if k not in {n for n, _, _ in case.inputs}}, feeds).outputs[0]
    if case.op_type == "NonZero":  # a static bound: the true coordinates first, then repeats of the last
        count = expected.shape[1]
        np.testing.assert_array_equal(got[:, :count], expected)
        assert (got[:, count:] == expected[:, -1:]).all()
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def _pad_with_crops(x: np.ndarray, pads: list[int]) -> np.ndarray:
    rank = x.ndim
    crop = tuple(slice(max(0, -b), x.shape[i] - max(0, -e)) for i, (b, e) in enumerate(zip(pads[:rank], pads[rank:])))
    return np.pad(x[crop], [(max(0, b), max(0, e)) for b, e in zip(pads[:rank], pads[rank:])])
