"""autodiff: gradients against PyTorch (reference files) and against finite differences for
every backward rule, FLOPs against PyTorch's counts, and the pass's structural guarantees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context

from monet_ir import import_onnx, print_module
from monet_ir.analysis.ir_signatures import matmul_conv_flops
from monet_ir.graph import ArgInfo, arg_infos, set_arg_infos, step_function
from monet_ir.interp.run import load_parameters, run_module
from onnx_cases import CASES, Case
from passes.autodiff import AutodiffPass

DATA = Path(__file__).resolve().parents[1] / "data"


def differentiate(module, **options):
    AutodiffPass(**options).apply(Context(), module)
    module.verify()
    return module


def grad_names(module) -> list[str]:
    fn = step_function(module)
    return [d.data["monet.grad"].data for d in fn.res_attrs.data[1:]]


@pytest.mark.parametrize("name", ["mlp_b4", "lenet5_b4"])
def test_gradients_match_pytorch(name):
    ref = np.load(DATA / "reference" / f"{name}.npz")
    onnx_path = DATA / "models" / f"{name}.onnx"
    module = differentiate(import_onnx(onnx_path))
    result = run_module(module, load_parameters(onnx_path), {"x": ref["x"], "labels": ref["labels"]}, keep_values=True)
    np.testing.assert_allclose(result.outputs[0], ref["loss"], rtol=1e-5)
    for param, g in zip(grad_names(module), result.outputs[1:], strict=True):
        expected = ref[f"grad_init:{param}"]
        np.testing.assert_allclose(g[: expected.shape[0]], expected, rtol=1e-4, atol=1e-6, err_msg=param)


def with_weighted_sum_loss(case: Case, rng) -> tuple[bytes, list[str]]:
    """The case's single node in float64, followed by loss = sum(y * R) for a random R."""
    f64 = TensorProto.DOUBLE
    inputs = [(n, f64 if e == TensorProto.FLOAT else e, s) for n, e, s in case.inputs]
    base = Case(case.op_type, inputs, case.output_shape, case.expect, case.attrs,
                {k: (v.astype(np.float64) if v.dtype == np.float32 and k not in ("roi", "scales") else v)
                 for k, v in case.consts.items()},  # Resize's roi and scales stay float32
                case.domain, f64, case.n_outputs, case.opset, case.order)
    model = base.model()
    graph = model.graph
    r = rng.standard_normal(case.output_shape).astype(np.float64)
    graph.node.append(helper.make_node("Constant", [], ["R"], name="/R", value=numpy_helper.from_array(r)))
    graph.node.append(helper.make_node("Mul", ["y0", "R"], ["weighted"], name="/weight"))
    graph.node.append(helper.make_node("ReduceSum", ["weighted"], ["loss"], name="/loss", keepdims=0))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("loss", f64, []))
    differentiable = [n for n, e, _ in inputs if e == f64]
    return model.SerializeToString(), differentiable


# (a RandomUniformLike reads only its input's shape: its output does not depend on it; Sign,
# Floor, Ceil and Round have zero gradients, so the loss depends on no parameter)
ZERO_GRADIENT = ("Sign", "Floor", "Ceil", "Round")
FD_CASES = [c for c in CASES if not c.domain and c.output_shape is not None and c.output_elem == TensorProto.FLOAT
            and any(e == TensorProto.FLOAT for _, e, _ in c.inputs) and not c.op_type.startswith("Random")
            and c.op_type not in ZERO_GRADIENT]


@pytest.mark.parametrize("case", FD_CASES, ids=[f"{c.op_type}-{i}" for i, c in enumerate(FD_CASES)])
def test_backward_rule_matches_finite_differences(case):
    rng = np.random.default_rng(7)
    data, float_inputs = with_weighted_sum_loss(case, rng)
    module = import_onnx(data)
    fn = step_function(module)
    # every float input becomes a trainable parameter so that autodiff differentiates it
    infos = [ArgInfo(i.index, "param", i.name, True) if i.name in float_inputs else i for i in arg_infos(fn)]
    set_arg_infos(fn, infos)
    differentiate(module, loss="none")
    values = {}
    for info, arg in zip(arg_infos(fn), fn.body.block.args, strict=True):
        shape = arg.type.get_shape()
        if info.name in float_inputs:
            x = np.asarray(rng.standard_normal(shape))
            if case.op_type in ("Relu", "LeakyRelu", "Clip", "MaxPool", "Abs", "Elu", "Celu", "Selu", "PRelu", "Mod"):
                x = x + np.sign(x) * 0.05  # keep away from kinks and ties
            if case.op_type in ("Sqrt", "Log", "Pow", "Div") or (case.op_type == "BatchNormalization"
                                                                  and info.name == "v"):
                x = np.abs(x) + 0.5  # a variance is positive
            values[info.name] = np.asarray(x, dtype=np.float64)
        elif info.name in ("i",):
            values[info.name] = rng.integers(0, 10, shape)
        elif arg.type.get_element_type().width.data == 1:
            values[info.name] = rng.random(shape) > 0.5
        else:
            values[info.name] = rng.integers(0, 3, shape)
    params = {k: v for k, v in values.items() if k in float_inputs}
    inputs = {k: v for k, v in values.items() if k not in float_inputs}
    if case.op_type == "Dropout":
        pytest.skip("dropout's mask is random per run; its rule is checked in test_interpreter")
    result = run_module(module, params, inputs)

    def loss_at(p):
        return float(run_module(module, p, inputs).outputs[0])

    for name, analytic in zip(grad_names(module), result.outputs[1:], strict=True):
        numeric = np.zeros_like(params[name])
        eps = 1e-6
        for index in np.ndindex(params[name].shape):
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[name][index] += eps
            minus[name][index] -= eps
            numeric[index] = (loss_at(plus) - loss_at(minus)) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7, err_msg=f"{case.op_type} d/d{name}")


@pytest.mark.parametrize("workload", ["mlp_b128", "lenet5_b128", "resnet18_b32", "gpt2_small_b8", "gpt2_124m_b1"])
def test_backward_matmul_conv_flops_equal_pytorch(shared_models, workload):
    figures = json.loads((shared_models / f"{workload}.figures.json").read_text())["pytorch"]
    module = differentiate(import_onnx(shared_models / f"{workload}.onnx"))
    by_phase = {"forward": 0, "backward": 0}
    for op in module.walk():
        if hasattr(op, "get_phase"):
            by_phase[op.get_phase()] += matmul_conv_flops(op)
    assert by_phase["forward"] == figures.get("flops_fwd_fixed", figures["flops_fwd"])
    assert by_phase["backward"] == figures.get("flops_bwd_fixed", figures["flops_bwd"])


def test_first_convolution_has_no_input_gradient_and_residuals_accumulate(shared_models):
    module = differentiate(import_onnx(shared_models / "resnet18_b1.onnx"))
    ops = list(module.walk())
    conv_inputs = [op for op in ops if op.name == "grad.conv_input"]
    assert len(conv_inputs) == 19  # 20 convolutions, the first reads the data input
    assert "/conv1/Conv" not in {op.get_node() for op in conv_inputs}
    sums = [op for op in ops if op.name == "nn.sum" and op.get_phase() == "backward"]
    assert len(sums) == 8  # one gradient accumulation per residual block


def test_tied_embedding_gradient_accumulates(shared_models):
    module = differentiate(import_onnx(shared_models / "gpt2_small_b1.onnx"))
    fn = step_function(module)
    ret = fn.body.block.last_op
    wte = ret.operands[1 + grad_names(module).index("wte.weight")]
    assert wte.owner.name == "nn.sum"
    kinds = sorted(v.owner.name for v in wte.owner.operands)
    assert kinds == ["grad.gather", "grad.matmul_rhs"] or kinds == ["grad.gather", "nn.transpose"]


def test_gradients_survive_dce_and_canonicalize():
    from xdsl.transforms.canonicalize import CanonicalizePass
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    module = differentiate(import_onnx(DATA / "models" / "mlp_b4.onnx"))
    before = print_module(module)
    DeadCodeElimination().apply(Context(), module)
    CanonicalizePass().apply(Context(), module)
    assert print_module(module).count("grad.") == before.count("grad.")


def test_loss_options(shared_models):
    mse = differentiate(import_onnx(DATA / "models" / "mlp_b4.onnx"), loss="mse", labels="target")
    assert "nn.mse_loss" in print_module(mse) and 'monet.input = "target"' in print_module(mse)
    total = differentiate(import_onnx(DATA / "models" / "mlp_b4.onnx"), loss="sum")
    assert "nn.reduce_sum" in print_module(total)
    existing = differentiate(import_onnx(shared_models / "mlp_b4_loss.onnx"), loss="mse")
    text = print_module(existing)
    assert "nn.mse_loss" not in text and "grad.softmax_cross_entropy" in text


def test_errors_are_clear():
    from xdsl.utils.exceptions import PassFailedException

    module = differentiate(import_onnx(DATA / "models" / "mlp_b4.onnx"))
    with pytest.raises(PassFailedException, match="already has backward ops"):
        differentiate(module)
    with pytest.raises(PassFailedException, match="must be a scalar loss"):
        differentiate(import_onnx(DATA / "models" / "mlp_b4.onnx"), loss="none")
