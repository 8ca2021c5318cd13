"""The ops exports use for masks and position ids (Less, Greater, CumSum, GatherElements,
Reciprocal, RandomUniform/Normal[Like]) upsampling (Resize) and matrix-product einsums compute what ONNX's reference evaluator computes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from monet_ir import import_onnx
from monet_ir.interp.run import run_module
from onnx_cases import CASES

DETERMINISTIC = [c for c in CASES if c.op_type in ("Less", "Greater", "CumSum", "GatherElements", "Reciprocal", "Resize", "Einsum", "GatherND", "ScatterND", "ReduceL2", "ReduceSumSquare")]


def random_inputs(case, rng):
    values = {}
    for name, elem, shape in case.inputs:
        if case.op_type == "GatherElements" and name == "i":
            values[name] = rng.integers(-8, 8, shape).astype(np.int64)
        elif elem == 7:
            values[name] = rng.integers(0, 100, shape).astype(np.int64)
        else:
            values[name] = (rng.standard_normal(shape) + 2.0).astype(np.float32)
    return values


@pytest.mark.parametrize("case", DETERMINISTIC, ids=[f"{c.op_type}-{i}" for i, c in enumerate(DETERMINISTIC)])
def test_matches_onnx_reference(case):
    rng = np.random.default_rng(3)
    model = case.model()
    inputs = random_inputs(case, rng)
    (expected,) = ReferenceEvaluator(model).run(None, inputs)
    result = run_module(import_onnx(model.SerializeToString()), {}, inputs)
    np.testing.assert_allclose(result.outputs[0], expected, rtol=1e-5)


def test_random_ops_draw_from_their_distribution():
    for case in (c for c in CASES if c.op_type.startswith("Random")):
        model = case.model()
        inputs = {n: np.zeros(s, np.float32) for n, _, s in case.inputs}
        module = import_onnx(model.SerializeToString())
        values = run_module(module, {}, inputs).outputs[0]
        assert values.shape == tuple(case.output_shape) and values.dtype == np.float32
        if case.op_type.startswith("RandomUniform"):
            assert values.min() >= case.attrs["low"] and values.max() < case.attrs["high"]
        # the same seeded op draws the same numbers; unseeded ones are not folded into constants
        assert not any(op.name == "nn.constant" for op in module.walk())


@pytest.mark.parametrize("equation", ["ij,jk,kl->il", "bij->bji", "ij,ij->ij", "...ij,...jk->...ik"])
def test_einsum_that_is_no_matrix_product_is_refused_in_one_line(equation):
    from onnx import TensorProto, helper

    from monet_ir.errors import MonetError

    n = equation.split("->")[0].count(",") + 1
    node = helper.make_node("Einsum", [f"x{i}" for i in range(n)], ["y"], name="/E", equation=equation)
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [2, 2, 2][: len(equation.split(',')[i].split('-')[0].replace('...', 'a'))]) for i in range(n)]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MonetError) as info:
        import_onnx(model.SerializeToString(), source_name="e.onnx")
    assert str(info.value).startswith("e.onnx: node '/E' (ai.onnx::Einsum)")

