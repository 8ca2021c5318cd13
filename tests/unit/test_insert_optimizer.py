"""insert-optimizer on a hand-written training step (tiny MLP, forward + backward with grad ops),
run through the numpy interpreter and compared with the reference optimizer kernels
(monet_ir.interp.kernels_optim, PyTorch semantics) and with onnx.reference's
ai.onnx.preview.training Momentum / Adam where the conventions coincide."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from xdsl.dialects.builtin import StringAttr, TensorType, f32
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import PassFailedException

from dialects import nn, train
from monet_ir import graph, make_context, parse_module, print_module
from monet_ir.interp import kernels_optim as K
from monet_ir.interp.run import run_module
from monet_ir.registry import all_passes
from passes.insert_optimizer import InsertOptimizerPass

MLP = """
func.func @step(%x: tensor<4x3xf32> {monet.input = "x"}, %y: tensor<4xi64> {monet.input = "y"},
                %w1: tensor<5x3xf32> {monet.param = "fc1.weight", monet.trainable},
                %b1: tensor<5xf32> {monet.param = "fc1.bias", monet.trainable},
                %w2: tensor<2x5xf32> {monet.param = "fc2.weight", monet.trainable},
                %b2: tensor<2xf32> {monet.param = "fc2.bias", monet.trainable})
    -> (tensor<f32> {monet.loss}, tensor<5x3xf32> {monet.grad = "fc1.weight"}, tensor<5xf32> {monet.grad = "fc1.bias"},
        tensor<2x5xf32> {monet.grad = "fc2.weight"}, tensor<2xf32> {monet.grad = "fc2.bias"}) {
  %h = nn.gemm %x, %w1, %b1 {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %r = nn.relu %h {node = "/Relu"} : tensor<4x5xf32>
  %s = nn.gemm %r, %w2, %b2 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x5xf32>, tensor<2x5xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %loss, %logp = nn.softmax_cross_entropy %s, %y {reduction = "mean", node = "/loss"} : (tensor<4x2xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x2xf32>)
  %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
  %ds = grad.softmax_cross_entropy %one, %logp, %y {reduction = "mean", node = "/loss"} : (tensor<f32>, tensor<4x2xf32>, tensor<4xi64>) -> tensor<4x2xf32>
  %dw2 = grad.matmul_rhs %ds, %r {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x2xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  %db2 = grad.unbroadcast %ds {node = "/fc2/Gemm"} : (tensor<4x2xf32>) -> tensor<2xf32>
  %dr = grad.matmul_lhs %ds, %w2 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x2xf32>, tensor<2x5xf32>) -> tensor<4x5xf32>
  %dh = grad.relu %dr, %h {node = "/Relu"} : tensor<4x5xf32>
  %dw1 = grad.matmul_rhs %dh, %x {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %db1 = grad.unbroadcast %dh {node = "/fc1/Gemm"} : (tensor<4x5xf32>) -> tensor<5xf32>
  func.return %loss, %dw1, %db1, %dw2, %db2 : tensor<f32>, tensor<5x3xf32>, tensor<5xf32>, tensor<2x5xf32>, tensor<2xf32>
}
"""
PARAMS = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")

# A weight used twice: its gradient is an nn.sum of two contributions.
SHARED = """
func.func @step(%x: tensor<2x3xf32> {monet.input = "x"}, %x2: tensor<2x3xf32> {monet.input = "x2"},
                %t: tensor<2x4xf32> {monet.input = "t"}, %w: tensor<3x4xf32> {monet.param = "w", monet.trainable})
    -> (tensor<f32> {monet.loss}, tensor<3x4xf32> {monet.grad = "w"}) {
  %h1 = nn.matmul %x, %w {node = "/mm1"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %h2 = nn.matmul %x2, %w {node = "/mm2"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %s = nn.add %h1, %h2 {node = "/add"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = nn.mse_loss %s, %t {node = "/loss"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
  %ds = grad.mse_loss %one, %s, %t {node = "/loss"} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %dw1 = grad.matmul_rhs %ds, %x {node = "/mm1"} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<3x4xf32>
  %dw2 = grad.matmul_rhs %ds, %x2 {node = "/mm2"} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<3x4xf32>
  %dw = nn.sum %dw1, %dw2 {node = "w", phase = "backward"} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %loss, %dw : tensor<f32>, tensor<3x4xf32>
}
"""


def optimized(text: str = MLP, **options):
    module = parse_module(text)
    InsertOptimizerPass(**options).apply(make_context(), module)
    module.verify()
    return module


def mlp_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    params = {
        "fc1.weight": rng.standard_normal((5, 3)).astype(np.float32),
        "fc1.bias": (0.5 + rng.random(5)).astype(np.float32),  # positive: no dead ReLU unit
        "fc2.weight": rng.standard_normal((2, 5)).astype(np.float32),
        "fc2.bias": rng.standard_normal(2).astype(np.float32),
    }
    inputs = {"x": (0.5 * rng.standard_normal((4, 3))).astype(np.float32), "y": np.array([0, 1, 1, 0], np.int64)}
    return params, inputs


def gradients(params, inputs, text: str = MLP):
    """Loss and gradients by parameter name, from the step without optimizer."""
    module = parse_module(text)
    out = run_module(module, params, inputs).outputs
    fn = graph.step_function(module)
    names = [attrs.data["monet.grad"].data for attrs in fn.res_attrs.data[1:]]
    grads = dict(zip(names, out[1:]))
    assert all(np.all(g != 0) for g in grads.values()), "pick data without zero gradients"
    return out[0], grads


def run_steps(module, params, inputs, n):
    """n training steps; returns the persistent values (params and state) after each."""
    state, history = dict(params), []
    for _ in range(n):
        result = run_module(module, state, inputs, state=state)
        state = result.state
        history.append({k: v.copy() for k, v in state.items()})
    return history


# ------------------------------------------------------------------------------ structure


@pytest.mark.parametrize("kind, suffixes", [
    ("sgd", ()), ("momentum", ("momentum_buffer",)),
    ("adam", ("exp_avg", "exp_avg_sq", "step")), ("adamw", ("exp_avg", "exp_avg_sq", "step")),
])
def test_state_arguments_ops_and_results(kind, suffixes):
    module = optimized(kind=kind)
    fn = graph.step_function(module)
    infos = graph.arg_infos(fn)
    state = [(i.name, fn.body.block.args[i.index].type) for i in infos if i.role == "state"]
    param_types = {i.name: fn.body.block.args[i.index].type for i in infos if i.role == "param"}
    assert [name for name, _ in state] == [f"{p}.{s}" for p in PARAMS for s in suffixes]
    for name, t in state:
        param = name.rsplit(".", 1)[0]
        if name.endswith(".step"):
            assert t == TensorType(f32, [])
        else:
            assert t == param_types[param]
    assert all(i.role != "state" for i in infos[:6]) and len(infos) == 6 + len(state)
    # one op per parameter, before the return, named after the parameter, updating it
    ops = [op for op in fn.body.block.ops if isinstance(op, train.OptimizerOp)]
    assert [op.name for op in ops] == [f"train.{kind}"] * 4
    assert [op.get_node() for op in ops] == list(PARAMS)
    assert [op.get_phase() for op in ops] == ["optimizer"] * 4
    assert list(fn.body.block.ops)[-5:-1] == ops
    for op, name in zip(ops, PARAMS):
        assert graph.arg_info(op.param).name == name
        assert [graph.arg_info(s).name for s in op.state_operands()] == [f"{name}.{s}" for s in suffixes]
    # only the loss is left among the results
    assert [str(t) for t in fn.function_type.outputs.data] == ["tensor<f32>"]
    assert list(fn.res_attrs.data[0].data) == ["monet.loss"]
    assert len(fn.body.block.last_op.operands) == 1


def test_hyper_parameters_and_weight_decay_rule():
    def props(**options):
        fn = graph.step_function(optimized(**options))
        op = next(op for op in fn.body.block.ops if isinstance(op, train.OptimizerOp))
        return {k: getattr(v, "value", v).data for k, v in op.properties.items() if k != "node"}

    assert props(kind="sgd", lr=0.5) == {"lr": 0.5}
    assert props(kind="sgd", weight_decay=0.25) == {"lr": 1e-3, "weight_decay": 0.25}
    nesterov = props(kind="momentum", nesterov=True, momentum=0.5)
    assert nesterov.pop("nesterov") != 0 and nesterov == {"lr": 1e-3, "momentum": 0.5}
    assert props(kind="adam") == {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    # -1 (default) = PyTorch's default for the kind: AdamW 0.01, always written for adamw
    assert props(kind="adamw")["weight_decay"] == 0.01
    assert props(kind="adamw", weight_decay=0)["weight_decay"] == 0.0
    assert props(kind="adamw", weight_decay=-1)["weight_decay"] == 0.01
    assert "weight_decay" not in props(kind="adam", weight_decay=-1)


@pytest.mark.parametrize("options, message", [
    (dict(kind="adam", nesterov=True), "nesterov applies to kind=momentum only"),
    (dict(kind="momentum", nesterov=True, momentum=0), "nesterov needs a positive momentum"),
    (dict(weight_decay=-0.5), "weight-decay must be non-negative"),
    (dict(lr=-1.0), "lr must be non-negative"),
    (dict(kind="adamw", beta2=1.0), "beta2 must be in [0, 1)"),
])
def test_bad_options(options, message):
    with pytest.raises(PassFailedException, match=message.replace("[", r"\[").replace(")", r"\)")):
        optimized(**options)


def test_pipeline_spec_and_integer_literals():
    pipeline = PassPipeline.parse_spec(all_passes(), "insert-optimizer{kind=adamw lr=1 weight-decay=0 eps=1.0e-6}")
    (p,) = pipeline.passes
    assert p == InsertOptimizerPass(kind="adamw", lr=1, weight_decay=0, eps=1e-6)
    assert p.resolved_weight_decay() == 0.0


def test_idempotent():
    once = print_module(optimized(kind="momentum"))
    module = optimized(kind="momentum")
    InsertOptimizerPass(kind="adam").apply(make_context(), module)
    assert print_module(module) == once
    again = parse_module(once)
    InsertOptimizerPass(kind="sgd").apply(make_context(), again)
    assert print_module(again) == once
    # a forward-only function (no monet.grad result) is left alone too
    forward = "func.func @f(%x: tensor<2xf32> {monet.input = \"x\"}) -> tensor<2xf32> {\n" \
              "  %r = nn.relu %x : tensor<2xf32>\n  func.return %r : tensor<2xf32>\n}\n"
    assert print_module(optimized(forward)) == print_module(parse_module(forward))


PARTIAL = """
func.func @step(%w: tensor<4xf32> {monet.param = "w", monet.trainable}, %b: tensor<4xf32> {monet.param = "b", monet.trainable},
                %gw: tensor<4xf32> {monet.input = "gw"}, %gb: tensor<4xf32> {monet.input = "gb"}) -> (%RESULTS%) {
  train.sgd %w, %gw {lr = 1.000000e-01 : f64} : tensor<4xf32>, tensor<4xf32>
  func.return %VALUES% : %TYPES%
}
"""


def _partial(grads: list[tuple[str, str]]) -> str:
    return (PARTIAL.replace("%RESULTS%", ", ".join(f'tensor<4xf32> {{monet.grad = "{n}"}}' for n, _ in grads))
            .replace("%VALUES%", ", ".join(v for _, v in grads))
            .replace("%TYPES%", ", ".join("tensor<4xf32>" for _ in grads)))


def test_partly_optimized_step_is_rejected_and_left_unchanged():
    text = _partial([("b", "%gb")])
    module = parse_module(text)
    before = print_module(module)
    with pytest.raises(PassFailedException, match=r"partly optimized: 1 parameter\(s\) already have an optimizer op "
                                                   r"\(e.g. 'w'\) but the gradients of 1 do not \(e.g. 'b'\)"):
        InsertOptimizerPass().apply(make_context(), module)
    assert print_module(module) == before
    # gradients whose parameters all have an optimizer op already: nothing to do
    done = _partial([("w", "%gw")])
    assert print_module(optimized(done)) == print_module(parse_module(done))


@pytest.mark.parametrize("edit, message", [
    (('monet.grad = "fc2.bias"', 'monet.grad = "fc9.bias"'), "no monet.param argument has that name"),
    (('{monet.param = "fc2.bias", monet.trainable}', '{monet.param = "fc2.bias"}'), "which is not monet.trainable"),
    (('monet.grad = "fc2.bias"', 'monet.grad = "fc1.bias"'), "several results carry monet.grad for 'fc1.bias'"),
    (('%b2: tensor<2xf32> {monet.param = "fc2.bias", monet.trainable})',
      '%b2: tensor<2xf32> {monet.param = "fc2.bias", monet.trainable}, %m: tensor<2xf32> {monet.state = "fc2.bias.exp_avg"})'),
     "a monet.state argument 'fc2.bias.exp_avg' already exists"),
])
def test_malformed_steps(edit, message):
    with pytest.raises(PassFailedException, match=message):
        optimized(MLP.replace(*edit))


def test_gradients_survive_dce_and_canonicalize():
    module = optimized(kind="adam")
    grad_ops = lambda m: sorted(op.name for op in graph.step_function(m).walk() if op.name.startswith("grad."))  # noqa: E731
    before = grad_ops(module)
    assert len(before) == 7
    PassPipeline.parse_spec(all_passes(), "dce,canonicalize").apply(make_context(), module)
    assert grad_ops(module) == before


def test_accumulated_gradient_feeds_the_optimizer():
    module = optimized(SHARED, kind="sgd", lr=0.1)
    fn = graph.step_function(module)
    (op,) = [op for op in fn.body.block.ops if isinstance(op, train.SgdOp)]
    assert isinstance(op.grad.owner, nn.SumOp) and op.get_node() == "w"
    rng = np.random.default_rng(3)
    params = {"w": rng.standard_normal((3, 4)).astype(np.float32)}
    inputs = {k: rng.standard_normal(s).astype(np.float32) for k, s in (("x", (2, 3)), ("x2", (2, 3)), ("t", (2, 4)))}
    _, grads = gradients(params, inputs, SHARED)
    # the accumulated gradient is the gradient of the shared weight
    ds = 2 * ((inputs["x"] + inputs["x2"]) @ params["w"] - inputs["t"]) / 8
    np.testing.assert_allclose(grads["w"], (inputs["x"] + inputs["x2"]).T @ ds, rtol=1e-5)
    (after,) = run_steps(module, params, inputs, 1)
    np.testing.assert_allclose(after["w"], K.sgd(params["w"], grads["w"], lr=0.1)[0], rtol=1e-6)


# ------------------------------------------------------------------------------ numerics


KINDS = {
    "sgd": dict(kind="sgd", lr=0.1, weight_decay=0.01),
    "momentum": dict(kind="momentum", lr=0.1, momentum=0.8, weight_decay=0.01),
    "nesterov": dict(kind="momentum", lr=0.1, momentum=0.8, nesterov=True),
    "adam": dict(kind="adam", lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.05),
    "adamw": dict(kind="adamw", lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6),
}


def reference_update(options, p, g, state, step):
    kind = options["kind"]
    wd = InsertOptimizerPass(**options).resolved_weight_decay()
    if kind == "sgd":
        return K.sgd(p, g, lr=options["lr"], weight_decay=wd)[0], state
    if kind == "momentum":
        new_p, v = K.momentum(p, g, state, lr=options["lr"], momentum=options["momentum"], weight_decay=wd,
                              nesterov=options.get("nesterov", False))
        return new_p, v
    m, v = state if state is not None else (np.zeros_like(p), np.zeros_like(p))
    fn = K.adam if kind == "adam" else K.adamw
    new_p, m, v = fn(p, g, m, v, step=step, lr=options["lr"], beta1=options["beta1"], beta2=options["beta2"],
                     eps=options["eps"], weight_decay=wd)
    return new_p, (m, v)


@pytest.mark.parametrize("name", list(KINDS))
def test_three_steps_match_the_reference_kernels(name):
    options = KINDS[name]
    module = optimized(**options)
    params, inputs = mlp_data()
    history = run_steps(module, params, inputs, 3)
    ref, states = dict(params), dict.fromkeys(PARAMS)
    for step, got in enumerate(history, start=1):
        loss, grads = gradients(ref, inputs)
        for p in PARAMS:
            ref[p], states[p] = reference_update(options, ref[p], grads[p], states[p], step)
            np.testing.assert_allclose(got[p], ref[p], rtol=1e-5, atol=1e-7, err_msg=f"{p} after step {step}")
        if options["kind"] in ("adam", "adamw"):
            for p in PARAMS:
                assert got[f"{p}.step"] == step and got[f"{p}.step"].dtype == np.float32
                np.testing.assert_allclose(got[f"{p}.exp_avg"], states[p][0], rtol=1e-5, atol=1e-7)
                np.testing.assert_allclose(got[f"{p}.exp_avg_sq"], states[p][1], rtol=1e-5, atol=1e-8)
        elif options["kind"] == "momentum":
            for p in PARAMS:
                np.testing.assert_allclose(got[f"{p}.momentum_buffer"], states[p], rtol=1e-5, atol=1e-7)
    # the step still returns the loss, computed before the update
    first = run_module(module, params, inputs).outputs
    assert len(first) == 1
    np.testing.assert_allclose(first[0], gradients(params, inputs)[0], rtol=1e-6)


def onnx_training_op(op: str, inputs: list, attrs: dict) -> list:
    """Run one ai.onnx.preview.training node through onnx.reference."""
    names = [f"in{i}" for i in range(len(inputs))]
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.shape(a))
             for n, a in zip(names, inputs)]
    outs = [f"out{i}" for i in range({"Adam": 3, "Momentum": 2}[op])]
    node = helper.make_node(op, names, outs, domain="ai.onnx.preview.training", **attrs)
    g = helper.make_graph([node], "g", infos, [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18),
                                                helper.make_opsetid("ai.onnx.preview.training", 1)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_onnx_momentum(nesterov):
    """ONNX Momentum(alpha=mu, beta=1, norm_coefficient=wd) from a zero buffer == PyTorch SGD momentum."""
    lr, mu, wd = 0.1, 0.875, 0.0625
    module = optimized(kind="momentum", lr=lr, momentum=mu, weight_decay=wd, nesterov=nesterov)
    params, inputs = mlp_data(1)
    history = run_steps(module, params, inputs, 3)
    ref = dict(params)
    buf = {p: np.zeros_like(v) for p, v in params.items()}
    for t, got in enumerate(history):
        _, grads = gradients(ref, inputs)
        for p in PARAMS:
            ref[p], buf[p] = onnx_training_op(
                "Momentum", [np.array(lr, np.float32), np.array(t, np.int64), ref[p], grads[p], buf[p]],
                dict(alpha=mu, beta=1.0, norm_coefficient=wd, mode="nesterov" if nesterov else "standard"))
            np.testing.assert_allclose(got[p], ref[p], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[f"{p}.momentum_buffer"], buf[p], rtol=1e-5, atol=1e-6)


def test_adam_matches_onnx_adam_without_epsilon():
    """ONNX Adam adds epsilon before the bias correction; with eps = 0 it is PyTorch's Adam
    (L2 weight decay = ONNX norm_coefficient). See kernels_optim."""
    lr, b1, b2, wd = 0.02, 0.875, 0.96875, 0.0625
    module = optimized(kind="adam", lr=lr, beta1=b1, beta2=b2, eps=0, weight_decay=wd)
    params, inputs = mlp_data(2)
    history = run_steps(module, params, inputs, 3)
    ref = dict(params)
    m = {p: np.zeros_like(v) for p, v in params.items()}
    v = {p: np.zeros_like(a) for p, a in params.items()}
    for t, got in enumerate(history, start=1):
        _, grads = gradients(ref, inputs)
        for p in PARAMS:
            ref[p], m[p], v[p] = onnx_training_op(
                "Adam", [np.array(lr, np.float32), np.array(t, np.int64), ref[p], grads[p], m[p], v[p]],
                dict(alpha=b1, beta=b2, epsilon=0.0, norm_coefficient=wd, norm_coefficient_post=0.0))
            np.testing.assert_allclose(got[p], ref[p], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[f"{p}.exp_avg"], m[p], rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(got[f"{p}.exp_avg_sq"], v[p], rtol=1e-5, atol=1e-8)


def test_state_names_and_hints_for_unnamed_arguments():
    text = MLP.replace("%w1", "%0").replace("%dw1", "%dw_first")
    fn = graph.step_function(optimized(text, kind="momentum"))
    hints = [a.name_hint for a in fn.body.block.args[6:]]
    assert hints == ["fc1.weight_momentum_buffer", "b1_momentum_buffer", "w2_momentum_buffer", "b2_momentum_buffer"]
    assert isinstance(fn.arg_attrs.data[6].data["monet.state"], StringAttr)
