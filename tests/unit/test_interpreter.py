"""The NumPy interpreter of the nn/grad/train dialects (`monet_ir.interp.numpy_impl`, `.run`).

Reference data (`tests/data/reference/<model>.npz`, from `shared/models/<model>.reference.json`;
PyTorch values for the batch stored there):

- `x`, `labels`, `logits`, `loss` (mean cross-entropy), `grad_x` (d loss / d x),
  `loss_after_adam` (the loss after one Adam step on the same batch),
  `adam_hyperparameters` (lr, beta1, beta2, eps, weight_decay);
- `value:<onnx name>` / `grad:<onnx name>`: every node output and d loss / d it;
- `grad_init:<name>` (d loss / d initializer) and `adam:<name>` (the initializer after the Adam
  step). Arrays of more than 16384 elements keep only their first `rows:<name>` rows.

The weights are those inside `tests/data/models/<model>.onnx` (copies of the shared files).
`<model>_loss.stripped.onnx` is `shared/models/<model>_loss.onnx` (the net followed by
SoftmaxCrossEntropyLoss) with its initializers made external references to absent files; its
weights equal the plain model's, named `net.<name>`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from dialects.grad import GRAD
from dialects.mx import MX
from dialects.nn import NN
from dialects.train import TRAIN
from monet_ir import import_onnx, parse_module
from monet_ir.graph import step_function
from monet_ir.interp import kernels as K
from monet_ir.interp.numpy_impl import IMPLS, InterpreterError, run_function
from monet_ir.interp.run import (
    MissingWeightsError,
    bind_arguments,
    load_parameters,
    name_hint_of,
    run_module,
)

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = ("mlp_b4", "lenet5_b4")


@functools.cache
def reference(model: str) -> dict[str, np.ndarray]:
    with np.load(DATA / "reference" / f"{model}.npz") as z:
        return {k: z[k] for k in z.files}


@functools.cache
def weights(model: str) -> dict[str, np.ndarray]:
    return load_parameters(DATA / "models" / f"{model}.onnx")


def rows(ref: dict[str, np.ndarray], name: str, array: np.ndarray) -> np.ndarray:
    """The part of `array` that the reference keeps for initializer `name`."""
    key = f"rows:{name}"
    return array[: int(ref[key])] if key in ref else array


def module_of(text: str):
    module = parse_module(text)
    module.verify()
    return module


def functions(text: str) -> dict[str, object]:
    return {op.sym_name.data: op for op in module_of(text).ops}


def t(*shape: int, elem: str = "f64") -> str:
    return f"tensor<{'x'.join(str(d) for d in shape)}{'x' if shape else ''}{elem}>"


# ----------------------------------------------------------------------------- coverage


def test_every_op_of_the_computing_dialects_has_an_implementation():
    ops = [op for dialect in (NN, GRAD, TRAIN, MX) for op in dialect.operations]
    missing = [op.name for op in ops if op not in IMPLS]
    assert not missing, f"no numpy implementation for {missing}"
    assert set(IMPLS) <= set(ops), "implementations registered for ops outside the dialects"


# ----------------------------------------------------------------------------- imported models


@pytest.mark.parametrize("model", MODELS)
def test_forward_reproduces_pytorch_logits_and_every_intermediate(model):
    ref = reference(model)
    module = import_onnx(DATA / "models" / f"{model}.onnx")
    result = run_module(module, weights(model), {"x": ref["x"]}, keep_values=True)
    (logits,) = result.outputs
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, ref["logits"], rtol=1e-4, atol=1e-5)
    names = [k.split(":", 1)[1] for k in ref if k.startswith("value:")]
    assert len(names) == (3 if model == "mlp_b4" else 12)
    for name in names:
        got = result.value(name)
        assert got.dtype == np.float32, name
        np.testing.assert_allclose(got, ref[f"value:{name}"], rtol=1e-4, atol=1e-5, err_msg=name)
    assert result.state.keys() == weights(model).keys()


@pytest.mark.parametrize("model", MODELS)
def test_loss_model_forward_gives_the_cross_entropy(model):
    ref = reference(model)
    module = import_onnx(DATA / "reference" / f"{model}_loss.stripped.onnx")
    params = {f"net.{k}": v for k, v in weights(model).items()}
    result = run_module(module, params, {"x": ref["x"], "labels": ref["labels"]})
    (loss,) = result.outputs
    assert loss.shape == () and loss.dtype == np.float32
    np.testing.assert_allclose(loss, ref["loss"], rtol=1e-5)


def test_load_parameters_names_a_stripped_initializer():
    with pytest.raises(MissingWeightsError, match=r"initializer 'net\.fc1\.weight' has no data.*weight-stripped") as e:
        load_parameters(DATA / "reference" / "mlp_b4_loss.stripped.onnx")
    assert "\n" not in str(e.value) and "and 3 more" in str(e.value)


def test_load_parameters_reads_inline_weights():
    params = weights("mlp_b4")
    assert {k: v.shape for k, v in params.items()} == {
        "fc1.weight": (256, 784), "fc1.bias": (256,), "fc2.weight": (10, 256), "fc2.bias": (10,)}
    assert all(v.dtype == np.float32 for v in params.values())


def test_value_names_follow_the_importer():
    assert name_hint_of("/conv1/Conv_output_0") == "conv1_Conv_output"
    assert name_hint_of("logits") == "logits"


# ----------------------------------------------------------------------------- argument binding

STEP = f"""
func.func @step(%w: {t(2, 3, elem='f32')} {{monet.param = "w", monet.trainable}},
                %x: {t(2, 3, elem='f32')} {{monet.input = "x"}},
                %m: {t(2, 3, elem='f32')} {{monet.state = "w.exp_avg"}},
                %v: {t(2, 3, elem='f32')} {{monet.state = "w.exp_avg_sq"}},
                %n: {t(elem='f32')} {{monet.state = "w.step"}}) -> {t(2, 3, elem='f32')} {{
  %y = nn.mul %w, %x : ({t(2, 3, elem='f32')}, {t(2, 3, elem='f32')}) -> {t(2, 3, elem='f32')}
  train.adam %w, %x, %m, %v, %n {{lr = 0.1 : f64}} : {t(2, 3, elem='f32')}, {t(2, 3, elem='f32')}, {t(2, 3, elem='f32')}, {t(2, 3, elem='f32')}, {t(elem='f32')}
  func.return %y : {t(2, 3, elem='f32')}
}}
"""


def test_bind_arguments_by_role_name_with_fresh_state():
    fn = step_function(module_of(STEP))
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    args = bind_arguments(fn, {"w": w}, {"x": np.ones((2, 3))})
    assert [a.dtype for a in args] == [np.float32] * 5
    assert args[0] is not w and np.array_equal(args[0], w)
    assert not args[2].any() and not args[3].any() and args[4].shape == () and args[4] == 0


@pytest.mark.parametrize("params, inputs, message", [
    ({}, {"x": np.ones((2, 3))}, r"^argument 0 'w' \(monet.param\) has no value: 'w' is not among the parameters "
                                 r"\(expected shape \[2, 3\], dtype float32\)$"),
    ({"w": np.ones((2, 3))}, {}, r"^argument 1 'x' \(monet.input\) has no value"),
    ({"w": np.ones((3, 2))}, {"x": np.ones((2, 3))}, r"^argument 0 'w' \(monet.param\) has shape \[2, 3\]"),
    ({"w": np.ones((2, 3))}, {"x": np.ones((2, 3), complex)}, r"^argument 1 'x' .* element type float32"),
])
def test_bind_arguments_errors_are_one_line(params, inputs, message):
    fn = step_function(module_of(STEP))
    with pytest.raises(ValueError, match=message) as e:
        bind_arguments(fn, params, inputs)
    assert "\n" not in str(e.value)


def test_run_module_returns_updated_state_and_keeps_the_callers_arrays():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = np.full((2, 3), 0.5, np.float32)
    result = run_module(module_of(STEP), {"w": w}, {"x": g})
    assert np.array_equal(w, np.arange(6).reshape(2, 3))  # bound as a copy
    new_w, m, v = K.adam(w, g, np.zeros_like(w), np.zeros_like(w), step=1, lr=0.1)
    np.testing.assert_array_equal(result.state["w"], new_w)
    np.testing.assert_array_equal(result.state["w.exp_avg"], m)
    np.testing.assert_array_equal(result.state["w.exp_avg_sq"], v)
    assert result.state["w.step"] == 1
    np.testing.assert_array_equal(result.outputs[0], w * g)  # computed before the update
    again = run_module(module_of(STEP), result.state, {"x": g})
    assert again.state["w.step"] == 2
    np.testing.assert_array_equal(again.state["w"], K.adam(new_w, g, m, v, step=2, lr=0.1)[0])


# ----------------------------------------------------------------------------- hand-written training steps vs PyTorch


def _training_step(params, fwd: str, bwd: str, outputs: list[tuple[str, str]], inputs: str) -> str:
    """A step function: inputs, parameters and Adam state arguments, the given forward and
    backward ops, one train.adam per parameter (gradient %d<ssa name>)."""
    args = [inputs]
    adam = []
    for name, ssa, shape in params:
        ty = t(*shape, elem="f32")
        args.append(f'%{ssa}: {ty} {{monet.param = "{name}", monet.trainable}}')
        args.append(f'%m{ssa}: {ty} {{monet.state = "{name}.exp_avg"}}')
        args.append(f'%v{ssa}: {ty} {{monet.state = "{name}.exp_avg_sq"}}')
        args.append(f'%t{ssa}: {t(elem="f32")} {{monet.state = "{name}.step"}}')
        adam.append(f"train.adam %{ssa}, %d{ssa}, %m{ssa}, %v{ssa}, %t{ssa} {{lr = 1.0e-03 : f64, beta1 = 0.9 : f64, "
                    f"beta2 = 0.999 : f64, eps = 1.0e-08 : f64}} : {ty}, {ty}, {ty}, {ty}, {t(elem='f32')}")
    results = ", ".join(f"%{v}" for v, _ in outputs)
    types = ", ".join(ty for _, ty in outputs)
    body = "\n  ".join([*fwd.strip().splitlines(), *bwd.strip().splitlines(), *adam])
    return f"func.func @step({', '.join(args)}) -> ({types}) {{\n  {body}\n  func.return {results} : {types}\n}}"


F = functools.partial(t, elem="f32")
LOSS = f"""
%loss, %lp = nn.softmax_cross_entropy %z, %labels {{reduction = "mean"}} : ({F(4, 10)}, {t(4, elem='i64')}) -> ({F()}, {F(4, 10)})
%one = nn.constant dense<1.0> : {F()}
%dz = grad.softmax_cross_entropy %one, %lp, %labels {{reduction = "mean"}} : ({F()}, {F(4, 10)}, {t(4, elem='i64')}) -> {F(4, 10)}
"""


def _dense(x: str, w: str, b: str, y: str, n: int, k: int, relu: str | None = None) -> str:
    line = f"%{y} = nn.gemm %{x}, %{w}, %{b} {{trans_b = true}} : ({F(4, k)}, {F(n, k)}, {F(n)}) -> {F(4, n)}"
    if relu:
        line += f"\n%{relu} = nn.relu %{y} : {F(4, n)}"
    return line


def _dense_grad(dy: str, x: str, w: str, b: str, dx: str | None, n: int, k: int) -> str:
    lines = [
        f"%d{w} = grad.matmul_rhs %{dy}, %{x} {{trans_b = true}} : ({F(4, n)}, {F(4, k)}) -> {F(n, k)}",
        f"%d{b} = grad.unbroadcast %{dy} : ({F(4, n)}) -> {F(n)}",
    ]
    if dx:
        lines.append(f"%{dx} = grad.matmul_lhs %{dy}, %{w} {{trans_b = true}} : ({F(4, n)}, {F(n, k)}) -> {F(4, k)}")
    return "\n".join(lines)


INPUTS_MLP = f'%x: {F(4, 784)} {{monet.input = "x"}}, %labels: {t(4, elem="i64")} {{monet.input = "labels"}}'
MLP_PARAMS = [("fc1.weight", "wa", (256, 784)), ("fc1.bias", "ba", (256,)),
              ("fc2.weight", "wb", (10, 256)), ("fc2.bias", "bb", (10,))]
MLP_STEP = _training_step(
    MLP_PARAMS,
    _dense("x", "wa", "ba", "h", 256, 784, relu="r") + "\n" + _dense("r", "wb", "bb", "z", 10, 256) + LOSS,
    "\n".join([
        _dense_grad("dz", "r", "wb", "bb", "dr", 10, 256),
        f"%dh = grad.relu %dr, %h : {F(4, 256)}",
        _dense_grad("dh", "x", "wa", "ba", "dx", 256, 784),
    ]),
    [("loss", F()), ("dx", F(4, 784))],
    INPUTS_MLP,
)
MLP_NAMES = {"/fc1/Gemm_output_0": "h", "/Relu_output_0": "r", "logits": "z"}

INPUTS_LENET = f'%x: {F(4, 1, 28, 28)} {{monet.input = "x"}}, %labels: {t(4, elem="i64")} {{monet.input = "labels"}}'
LENET_PARAMS = [("conv1.weight", "ca", (6, 1, 5, 5)), ("conv1.bias", "cb", (6,)),
                ("conv2.weight", "cc", (16, 6, 5, 5)), ("conv2.bias", "cd", (16,)),
                ("fc1.weight", "fa", (120, 400)), ("fc1.bias", "fb", (120,)),
                ("fc2.weight", "fc", (84, 120)), ("fc2.bias", "fd", (84,)),
                ("fc3.weight", "fe", (10, 84)), ("fc3.bias", "ff", (10,))]
POOL = "{kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}"
PADS = "{pads = array<i64: 2, 2, 2, 2>}"
LENET_STEP = _training_step(
    LENET_PARAMS,
    f"""
%ya = nn.conv %x, %ca, %cb {PADS} : ({F(4, 1, 28, 28)}, {F(6, 1, 5, 5)}, {F(6)}) -> {F(4, 6, 28, 28)}
%ra = nn.relu %ya : {F(4, 6, 28, 28)}
%pa = nn.max_pool %ra {POOL} : ({F(4, 6, 28, 28)}) -> {F(4, 6, 14, 14)}
%yb = nn.conv %pa, %cc, %cd : ({F(4, 6, 14, 14)}, {F(16, 6, 5, 5)}, {F(16)}) -> {F(4, 16, 10, 10)}
%rb = nn.relu %yb : {F(4, 16, 10, 10)}
%pb = nn.max_pool %rb {POOL} : ({F(4, 16, 10, 10)}) -> {F(4, 16, 5, 5)}
%flat = nn.reshape %pb : ({F(4, 16, 5, 5)}) -> {F(4, 400)}
{_dense("flat", "fa", "fb", "ha", 120, 400, relu="sa")}
{_dense("sa", "fc", "fd", "hb", 84, 120, relu="sb")}
{_dense("sb", "fe", "ff", "z", 10, 84)}
{LOSS}""",
    f"""
{_dense_grad("dz", "sb", "fe", "ff", "dsb", 10, 84)}
%dhb = grad.relu %dsb, %hb : {F(4, 84)}
{_dense_grad("dhb", "sa", "fc", "fd", "dsa", 84, 120)}
%dha = grad.relu %dsa, %ha : {F(4, 120)}
{_dense_grad("dha", "flat", "fa", "fb", "dflat", 120, 400)}
%dpb = nn.reshape %dflat {{phase = "backward"}} : ({F(4, 400)}) -> {F(4, 16, 5, 5)}
%drb = grad.max_pool %dpb, %rb {POOL} : ({F(4, 16, 5, 5)}, {F(4, 16, 10, 10)}) -> {F(4, 16, 10, 10)}
%dyb = grad.relu %drb, %yb : {F(4, 16, 10, 10)}
%dcc = grad.conv_weight %dyb, %pa : ({F(4, 16, 10, 10)}, {F(4, 6, 14, 14)}) -> {F(16, 6, 5, 5)}
%dcd = grad.conv_bias %dyb : ({F(4, 16, 10, 10)}) -> {F(16)}
%dpa = grad.conv_input %dyb, %cc : ({F(4, 16, 10, 10)}, {F(16, 6, 5, 5)}) -> {F(4, 6, 14, 14)}
%dra = grad.max_pool %dpa, %ra {POOL} : ({F(4, 6, 14, 14)}, {F(4, 6, 28, 28)}) -> {F(4, 6, 28, 28)}
%dya = grad.relu %dra, %ya : {F(4, 6, 28, 28)}
%dca = grad.conv_weight %dya, %x {PADS} : ({F(4, 6, 28, 28)}, {F(4, 1, 28, 28)}) -> {F(6, 1, 5, 5)}
%dcb = grad.conv_bias %dya : ({F(4, 6, 28, 28)}) -> {F(6)}
%dx = grad.conv_input %dya, %ca {PADS} : ({F(4, 6, 28, 28)}, {F(6, 1, 5, 5)}) -> {F(4, 1, 28, 28)}""",
    [("loss", F()), ("dx", F(4, 1, 28, 28))],
    INPUTS_LENET,
)
LENET_NAMES = {
    "/conv1/Conv_output_0": "ya", "/Relu_output_0": "ra", "/MaxPool_output_0": "pa",
    "/conv2/Conv_output_0": "yb", "/Relu_1_output_0": "rb", "/MaxPool_1_output_0": "pb",
    "/Flatten_output_0": "flat", "/fc1/Gemm_output_0": "ha", "/Relu_2_output_0": "sa",
    "/fc2/Gemm_output_0": "hb", "/Relu_3_output_0": "sb", "logits": "z",
}


@pytest.mark.parametrize("model, text, params, names", [
    ("mlp_b4", MLP_STEP, MLP_PARAMS, MLP_NAMES),
    ("lenet5_b4", LENET_STEP, LENET_PARAMS, LENET_NAMES),
], ids=MODELS)
def test_hand_written_training_step_matches_pytorch(model, text, params, names):
    """Forward, loss, backward (grad ops with trans flags, pooling and convolution gradients)
    and one Adam step written by hand, against PyTorch's values, gradients and updated weights;
    then the loss of the updated weights through the imported loss model."""
    ref = reference(model)
    lr, beta1, beta2, eps, wd = ref["adam_hyperparameters"]
    assert (lr, beta1, beta2, eps, wd) == (1e-3, 0.9, 0.999, 1e-8, 0.0)
    result = run_module(module_of(text), weights(model), {"x": ref["x"], "labels": ref["labels"]},
                        keep_values=True)
    loss, dx = result.outputs
    np.testing.assert_allclose(loss, ref["loss"], rtol=1e-5)
    np.testing.assert_allclose(dx, ref["grad_x"], rtol=1e-4, atol=1e-7)
    by_name = result.values_by_name
    for onnx_name, ssa in names.items():
        np.testing.assert_allclose(by_name[ssa], ref[f"value:{onnx_name}"], rtol=1e-4, atol=1e-5, err_msg=onnx_name)
        np.testing.assert_allclose(by_name["d" + ssa], ref[f"grad:{onnx_name}"], rtol=1e-4, atol=1e-7, err_msg=onnx_name)
    for name, ssa, _ in params:
        np.testing.assert_allclose(rows(ref, name, by_name["d" + ssa]), ref[f"grad_init:{name}"],
                                   rtol=1e-4, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(rows(ref, name, result.state[name]), ref[f"adam:{name}"],
                                   rtol=1e-5, atol=1e-7, err_msg=name)
        assert result.state[f"{name}.step"] == 1
    loss_module = import_onnx(DATA / "reference" / f"{model}_loss.stripped.onnx")
    after = run_module(loss_module, {f"net.{k}": result.state[k] for k in weights(model)},
                       {"x": ref["x"], "labels": ref["labels"]})
    np.testing.assert_allclose(after.outputs[0], ref["loss_after_adam"], rtol=1e-5)


# ----------------------------------------------------------------------------- grad ops vs finite differences

EPS = 1e-6


def _fd_case(arg_types: dict[str, str], y_type: str, fwd: str, bwd: str, grads: dict[str, str]) -> str:
    """Module text: @fwd(args) -> %y, and @bwd(%dy, %y, args) -> the gradients, in `grads`
    order (argument name -> SSA name of its gradient in `bwd`)."""
    params = ", ".join(f"%{n}: {ty}" for n, ty in arg_types.items())
    gtypes = ", ".join(arg_types[a] for a in grads)
    return f"""
func.func @fwd({params}) -> {y_type} {{
  {fwd.strip()}
  func.return %y : {y_type}
}}
func.func @bwd(%dy: {y_type}, %y: {y_type}, {params}) -> ({gtypes}) {{
  {bwd.strip()}
  func.return {", ".join("%" + g for g in grads.values())} : {gtypes}
}}
"""


def check_fd(arg_types: dict[str, str], args: dict[str, np.ndarray], y_type: str, fwd: str, bwd: str,
             grads: dict[str, str], seed: int = 0) -> None:
    """The gradients `bwd` computes from a random dy equal central differences of
    sum(fwd(args) * dy) w.r.t. each argument in `grads` (float64 throughout)."""
    fns = functions(_fd_case(arg_types, y_type, fwd, bwd, grads))
    values = [np.array(args[n]) for n in arg_types]
    y = run_function(fns["fwd"], values).outputs[0]
    dy = np.random.default_rng(seed).standard_normal(y.shape)
    analytic = run_function(fns["bwd"], [dy, y, *values]).outputs
    names = list(arg_types)
    for (arg, _), got in zip(grads.items(), analytic):
        x = values[names.index(arg)]
        flat = x.reshape(-1)
        numeric = np.zeros(flat.size)
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + EPS
            up = np.sum(run_function(fns["fwd"], values).outputs[0] * dy)
            flat[i] = orig - EPS
            down = np.sum(run_function(fns["fwd"], values).outputs[0] * dy)
            flat[i] = orig
            numeric[i] = (up - down) / (2 * EPS)
        assert got.shape == x.shape and got.dtype == np.float64, arg
        np.testing.assert_allclose(got, numeric.reshape(x.shape), rtol=1e-6, atol=1e-8, err_msg=arg)


def rand(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def distinct(*shape: int, seed: int = 2) -> np.ndarray:
    """Values at least 0.1 apart (no ties in max pooling windows)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.1 - n * 0.05).reshape(shape)


def test_conv_gradients_with_strides_pads_dilations_and_groups():
    geo = "{strides = array<i64: 2, 1>, pads = array<i64: 1, 0, 1, 2>, dilations = array<i64: 1, 2>, group = 2 : i64}"
    tx, tw, tb, ty = t(1, 4, 5, 6), t(6, 2, 3, 2), t(6), t(1, 6, 3, 6)
    check_fd(
        {"x": tx, "w": tw, "b": tb}, {"x": rand(1, 4, 5, 6), "w": rand(6, 2, 3, 2), "b": rand(6)}, ty,
        f"%y = nn.conv %x, %w, %b {geo} : ({tx}, {tw}, {tb}) -> {ty}",
        f"""
  %gx = grad.conv_input %dy, %w {geo} : ({ty}, {tw}) -> {tx}
  %gw = grad.conv_weight %dy, %x {geo} : ({ty}, {tx}) -> {tw}
  %gb = grad.conv_bias %dy : ({ty}) -> {tb}""",
        {"x": "gx", "w": "gw", "b": "gb"},
    )


@pytest.mark.parametrize("props, ta, tb, tc, ty", [
    # nn.gemm: alpha * A^T @ B^T + beta * C
    ("alpha = 0.7 : f64, trans_a = true, trans_b = true", (3, 4), (5, 3), (5,), (4, 5)),
    ("trans_b = true", (4, 3), (5, 3), (4, 1), (4, 5)),
])
def test_gemm_gradients_with_trans_flags_and_alpha(props, ta, tb, tc, ty):
    check_fd(
        {"a": t(*ta), "b": t(*tb), "c": t(*tc)}, {"a": rand(*ta), "b": rand(*tb), "c": rand(*tc)}, t(*ty),
        f"%y = nn.gemm %a, %b, %c {{{props}, beta = 0.3 : f64}} : ({t(*ta)}, {t(*tb)}, {t(*tc)}) -> {t(*ty)}",
        f"""
  %ga = grad.matmul_lhs %dy, %b {{{props}}} : ({t(*ty)}, {t(*tb)}) -> {t(*ta)}
  %gb = grad.matmul_rhs %dy, %a {{{props}}} : ({t(*ty)}, {t(*ta)}) -> {t(*tb)}""",
        {"a": "ga", "b": "gb"},
    )


@pytest.mark.parametrize("props, ta, tb, ty", [
    # batched, broadcast batch axes on both sides, both operands transposed, scaled
    ("alpha = 0.5 : f64, trans_a = true, trans_b = true", (2, 1, 3, 4), (3, 5, 3), (2, 3, 4, 5)),
    ("trans_a = true", (3, 2, 4), (2, 5), (3, 4, 5)),
    ("", (3,), (2, 3, 4), (2, 4)),  # 1-D lhs
    ("alpha = 2.0 : f64", (2, 4, 3), (3,), (2, 4)),  # 1-D rhs
])
def test_matmul_gradients_with_batch_broadcast_trans_and_alpha(props, ta, tb, ty):
    attrs = f"{{{props}}}" if props else ""
    check_fd(
        {"a": t(*ta), "b": t(*tb)}, {"a": rand(*ta), "b": rand(*tb)}, t(*ty),
        f"%y = nn.matmul %a, %b {attrs} : ({t(*ta)}, {t(*tb)}) -> {t(*ty)}",
        f"""
  %ga = grad.matmul_lhs %dy, %b {attrs} : ({t(*ty)}, {t(*tb)}) -> {t(*ta)}
  %gb = grad.matmul_rhs %dy, %a {attrs} : ({t(*ty)}, {t(*ta)}) -> {t(*tb)}""",
        {"a": "ga", "b": "gb"},
    )


@pytest.mark.parametrize("axis, td, indices, ty", [
    (0, (5, 3), [[0, 4, 0], [2, 4, 1]], (2, 3, 3)),  # repeated indices accumulate
    (1, (2, 4, 3), [-1, 0, 3], (2, 3, 3)),  # negative index, inner axis
])
def test_gather_gradient_scatter_adds(axis, td, indices, ty):
    idx = np.array(indices, np.int64)
    ti = t(*idx.shape, elem="i64")
    check_fd(
        {"d": t(*td), "i": ti}, {"d": rand(*td), "i": idx}, t(*ty),
        f"%y = nn.gather %d, %i {{axis = {axis} : i64}} : ({t(*td)}, {ti}) -> {t(*ty)}",
        f"%g = grad.gather %dy, %i {{axis = {axis} : i64}} : ({t(*ty)}, {ti}) -> {t(*td)}",
        {"d": "g"},
    )


@pytest.mark.parametrize("op, props, tx, ty", [
    ("max_pool", "kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>",
     (1, 2, 5, 5), (1, 2, 3, 3)),
    ("max_pool", "kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 2, 2>, "
     "pads = array<i64: 1, 1, 0, 0>", (1, 2, 6, 6), (1, 2, 3, 3)),
    ("max_pool", "kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, ceil_mode = true", (1, 1, 6, 6), (1, 1, 3, 3)),
    ("avg_pool", "kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, "
     "count_include_pad = true", (1, 2, 5, 5), (1, 2, 3, 3)),
    ("avg_pool", "kernel_shape = array<i64: 3, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 1, 1>, "
     "ceil_mode = true", (1, 1, 6, 5), (1, 1, 4, 3)),
])
def test_pooling_gradients(op, props, tx, ty):
    saved = ", %x" if op == "max_pool" else ""
    saved_t = f", {t(*tx)}" if op == "max_pool" else ""
    check_fd(
        {"x": t(*tx)}, {"x": distinct(*tx)}, t(*ty),
        f"%y = nn.{op} %x {{{props}}} : ({t(*tx)}) -> {t(*ty)}",
        f"%g = grad.{op} %dy{saved} {{{props}}} : ({t(*ty)}{saved_t}) -> {t(*tx)}",
        {"x": "g"},
    )


def test_global_avg_pool_gradient():
    check_fd(
        {"x": t(2, 3, 4, 5)}, {"x": rand(2, 3, 4, 5)}, t(2, 3, 1, 1),
        f"%y = nn.global_avg_pool %x : ({t(2, 3, 4, 5)}) -> {t(2, 3, 1, 1)}",
        f"%g = grad.global_avg_pool %dy : ({t(2, 3, 1, 1)}) -> {t(2, 3, 4, 5)}",
        {"x": "g"},
    )


def test_batch_norm_gradients_recompute_batch_statistics():
    tx, tc = t(3, 2, 2, 3), t(2)
    args = {"x": rand(3, 2, 2, 3), "s": rand(2), "b": rand(2), "m": rand(2), "v": np.abs(rand(2))}
    check_fd(
        {"x": tx, "s": tc, "b": tc, "m": tc, "v": tc}, args, tx,
        f"%y = nn.batch_norm %x, %s, %b, %m, %v {{epsilon = 1.0e-03 : f64, training = true}} "
        f": ({tx}, {tc}, {tc}, {tc}, {tc}) -> {tx}",
        f"%gx, %gs, %gb = grad.batch_norm %dy, %x, %s {{epsilon = 1.0e-03 : f64}} : ({tx}, {tx}, {tc}) -> ({tx}, {tc}, {tc})",
        {"x": "gx", "s": "gs", "b": "gb"},
    )


@pytest.mark.parametrize("axis, tx, tc", [(-1, (2, 3, 4), (4,)), (1, (2, 3, 4), (3, 4)), (-2, (2, 3, 4), (4,))])
def test_layer_norm_gradients(axis, tx, tc):
    check_fd(
        {"x": t(*tx), "s": t(*tc), "b": t(*tc)}, {"x": rand(*tx), "s": rand(*tc), "b": rand(*tc)}, t(*tx),
        f"%y = nn.layer_norm %x, %s, %b {{axis = {axis} : i64, epsilon = 1.0e-03 : f64}} "
        f": ({t(*tx)}, {t(*tc)}, {t(*tc)}) -> {t(*tx)}",
        f"%gx, %gs, %gb = grad.layer_norm %dy, %x, %s {{axis = {axis} : i64, epsilon = 1.0e-03 : f64}} "
        f": ({t(*tx)}, {t(*tx)}, {t(*tc)}) -> ({t(*tx)}, {t(*tc)}, {t(*tc)})",
        {"x": "gx", "s": "gs", "b": "gb"},
    )


@pytest.mark.parametrize("op, props, ty", [
    ("reduce_sum", "axes = array<i64: 1>, keepdims = false", (2, 4)),
    ("reduce_mean", "axes = array<i64: -1>", (2, 3, 1)),
    ("reduce_mean", "axes = array<i64: 0, 2>, keepdims = false", (3,)),
    ("reduce_sum", "keepdims = false", ()),
])
def test_reduction_gradients(op, props, ty):
    check_fd(
        {"x": t(2, 3, 4)}, {"x": rand(2, 3, 4)}, t(*ty),
        f"%y = nn.{op} %x {{{props}}} : ({t(2, 3, 4)}) -> {t(*ty)}",
        f"%g = grad.{op} %dy {{{props}}} : ({t(*ty)}) -> {t(2, 3, 4)}",
        {"x": "g"},
    )


def test_slice_gradient_with_negative_steps():
    props = "starts = array<i64: 1, -1>, ends = array<i64: 4, 0>, axes = array<i64: 0, 1>, steps = array<i64: 2, -2>"
    check_fd(
        {"x": t(4, 6)}, {"x": rand(4, 6)}, t(2, 3),
        f"%y = nn.slice %x {{{props}}} : ({t(4, 6)}) -> {t(2, 3)}",
        f"%g = grad.slice %dy {{{props}}} : ({t(2, 3)}) -> {t(4, 6)}",
        {"x": "g"},
    )


def test_div_and_pow_gradients_at_the_broadcast_shape_then_unbroadcast():
    ta, tb, ty = t(2, 3), t(3), t(2, 3)
    args = {"a": np.abs(rand(2, 3)) + 0.5, "b": rand(3)}
    check_fd(
        {"a": ta, "b": tb}, args, ty,
        f"%y = nn.div %a, %b : ({ta}, {tb}) -> {ty}",
        f"""
  %full = grad.div_rhs %dy, %a, %b : ({ty}, {ta}, {tb}) -> {ty}
  %gb = grad.unbroadcast %full : ({ty}) -> {tb}""",
        {"b": "gb"},
    )
    check_fd(
        {"a": ta, "b": tb}, args, ty,
        f"%y = nn.pow %a, %b : ({ta}, {tb}) -> {ty}",
        f"""
  %ga = grad.pow_base %dy, %a, %b : ({ty}, {ta}, {tb}) -> {ty}
  %full = grad.pow_exponent %dy, %a, %b : ({ty}, {ta}, {tb}) -> {ty}
  %gb = grad.unbroadcast %full : ({ty}) -> {tb}""",
        {"a": "ga", "b": "gb"},
    )


UNARY = [
    # (op, properties, saved value, input transform keeping away from kinks and the domain edge)
    ("relu", "", "x", lambda x: np.sign(x) * (np.abs(x) + 0.1)),
    ("leaky_relu", "{alpha = 0.2 : f64}", "x", lambda x: np.sign(x) * (np.abs(x) + 0.1)),
    ("clip", "{min = -0.5 : f64, max = 0.6 : f64}", "x", lambda x: np.where(np.abs(np.abs(x) - 0.55) < 0.1, x * 2, x)),
    ("sigmoid", "", "y", None),
    ("hard_sigmoid", "{alpha = 0.3 : f64, beta = 0.4 : f64}", "x", lambda x: x * 2.0 + 0.05),
    ("hard_swish", "", "x", lambda x: x * 3.1 + 0.01),
    ("tanh", "", "y", None),
    ("erf", "", "x", None),
    ("gelu", "", "x", None),
    ("gelu", '{approximate = "tanh"}', "x", None),
    ("sqrt", "", "y", lambda x: np.abs(x) + 0.5),
    ("exp", "", "y", None),
    ("log", "", "x", lambda x: np.abs(x) + 0.5),
    ("softmax", "{axis = 1 : i64}", "y", None),
    ("log_softmax", "{axis = -1 : i64}", "y", None),
]


@pytest.mark.parametrize("op, props, saved, prepare", UNARY, ids=[f"{u[0]}{u[1][:12]}" for u in UNARY])
def test_unary_gradients(op, props, saved, prepare):
    x = rand(2, 3, 4, seed=7)
    if prepare is not None:
        x = prepare(x)
    ty = t(2, 3, 4)
    check_fd(
        {"x": ty}, {"x": x}, ty,
        f"%y = nn.{op} %x {props} : {ty}",
        f"%g = grad.{op} %dy, %{saved} {props} : {ty}",
        {"x": "g"},
    )


def test_dropout_gradient_uses_the_mask_of_the_same_seed():
    ty, tm = t(3, 4), t(3, 4, elem="i1")
    drop = f"nn.dropout %x {{ratio = 0.3 : f64, seed = 5 : i64}} : ({ty}) -> ({ty}, {tm})"
    check_fd(
        {"x": ty}, {"x": rand(3, 4)}, ty,
        f"%y, %m = {drop}",
        f"""
  %y2, %m = {drop}
  %g = grad.dropout %dy, %m {{ratio = 0.3 : f64}} : ({ty}, {tm}) -> {ty}""",
        {"x": "g"},
    )


@pytest.mark.parametrize("reduction, ts, tl, labels, ty", [
    ("mean", (3, 4), (3,), [1, -100, 3], ()),
    ("sum", (3, 4), (3,), [1, 0, 3], ()),
    ("none", (2, 3, 2), (2, 2), [[0, 2], [-100, 1]], (2, 2)),
])
def test_softmax_cross_entropy_gradient(reduction, ts, tl, labels, ty):
    lab = np.array(labels, np.int64)
    til = t(*tl, elem="i64")
    sce = (f'nn.softmax_cross_entropy %s, %l, %w {{reduction = "{reduction}", ignore_index = -100 : i64}} '
           f": ({t(*ts)}, {til}, {t(ts[1])}) -> ({t(*ty)}, {t(*ts)})")
    check_fd(
        {"s": t(*ts), "l": til, "w": t(ts[1])}, {"s": rand(*ts), "l": lab, "w": np.abs(rand(ts[1])) + 0.5}, t(*ty),
        f"%y, %lp = {sce}",
        f"""
  %y2, %lp = {sce}
  %g = grad.softmax_cross_entropy %dy, %lp, %l, %w {{reduction = "{reduction}", ignore_index = -100 : i64}} : ({t(*ty)}, {t(*ts)}, {til}, {t(ts[1])}) -> {t(*ts)}""",
        {"s": "g"},
    )


def test_mse_loss_gradient():
    tp = t(3, 4)
    check_fd(
        {"p": tp, "q": tp}, {"p": rand(3, 4), "q": rand(3, 4, seed=3)}, t(),
        f'%y = nn.mse_loss %p, %q {{reduction = "mean"}} : ({tp}, {tp}) -> {t()}',
        f'%g = grad.mse_loss %dy, %p, %q {{reduction = "mean"}} : ({t()}, {tp}, {tp}) -> {tp}',
        {"p": "g"},
    )


# ----------------------------------------------------------------------------- other forward ops


def test_data_movement_logic_and_constant_ops():
    f2 = functools.partial(t, elem="f32")
    text = f"""
func.func @f(%a: {f2(2, 3)}, %b: {f2(3)}, %m: {t(2, 3, elem='i1')}, %i: {t(2, 3, elem='i64')},
             %x: {f2(1, 2, 3, 3)}, %w: {f2(2, 3, 2, 2)}) -> ({f2(3, 2)}, {f2(2, 3)}, {f2(1, 3)}, {f2(3, 3)},
             {f2(2, 3)}, {t(2, 3, elem='i1')}, {f2(2, 3)}, {f2(3, 4)}, {f2(4, 5)}, {f2(1, 3, 6, 3)}, {f2(2)},
             {t(3, elem='i1')}, {f2(2, 3)}, {f2(4)}) {{
  %t = nn.transpose %a {{perm = array<i64: 1, 0>}} : ({f2(2, 3)}) -> {f2(3, 2)}
  %e = nn.expand %b : ({f2(3)}) -> {f2(2, 3)}
  %c = nn.concat %a, %e {{axis = 0 : i64}} : ({f2(2, 3)}, {f2(2, 3)}) -> {f2(4, 3)}
  %p, %q = nn.split %c {{axis = 0 : i64}} : ({f2(4, 3)}) -> ({f2(1, 3)}, {f2(3, 3)})
  %s = nn.sum %a, %b, %e : ({f2(2, 3)}, {f2(3)}, {f2(2, 3)}) -> {f2(2, 3)}
  %n = nn.not %m : {t(2, 3, elem='i1')}
  %cast = nn.cast %i : ({t(2, 3, elem='i64')}) -> {f2(2, 3)}
  %eq = nn.equal %cast, %a : ({f2(2, 3)}, {f2(2, 3)}) -> {t(2, 3, elem='i1')}
  %and = nn.and %eq, %n : ({t(2, 3, elem='i1')}, {t(2, 3, elem='i1')}) -> {t(2, 3, elem='i1')}
  %wh = nn.where %and, %a, %b : ({t(2, 3, elem='i1')}, {f2(2, 3)}, {f2(3)}) -> {f2(2, 3)}
  %pc = nn.pad %a {{pads = array<i64: 0, 1, 1, 0>, value = 2.5 : f64}} : ({f2(2, 3)}) -> {f2(3, 4)}
  %pr = nn.pad %a {{pads = array<i64: 1, 1, 1, 1>, mode = "reflect"}} : ({f2(2, 3)}) -> {f2(4, 5)}
  %ct = nn.conv_transpose %x, %w {{strides = array<i64: 2, 1>, pads = array<i64: 0, 1, 1, 0>, output_padding = array<i64: 1, 0>}} : ({f2(1, 2, 3, 3)}, {f2(2, 3, 2, 2)}) -> {f2(1, 3, 6, 3)}
  %k = nn.constant dense<"0x0000803F000080FF"> : {f2(2)}
  %kb = nn.constant dense<[true, false, true]> : {t(3, elem='i1')}
  %ng = nn.neg %a : {f2(2, 3)}
  %big = nn.constant dense<"0x000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041"> : {f2(19)}
  %sl = nn.slice %big {{starts = array<i64: 15>, ends = array<i64: 4611686018427387904>}} : ({f2(19)}) -> {f2(4)}
  func.return %t, %e, %p, %q, %s, %and, %wh, %pc, %pr, %ct, %k, %kb, %ng, %sl : {f2(3, 2)}, {f2(2, 3)}, {f2(1, 3)}, {f2(3, 3)}, {f2(2, 3)}, {t(2, 3, elem='i1')}, {f2(2, 3)}, {f2(3, 4)}, {f2(4, 5)}, {f2(1, 3, 6, 3)}, {f2(2)}, {t(3, elem='i1')}, {f2(2, 3)}, {f2(4)}
}}
"""
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, (2, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    m = rng.random((2, 3)) < 0.5
    i = rng.integers(-2, 3, (2, 3))
    x, w = rng.standard_normal((1, 2, 3, 3), np.float32), rng.standard_normal((2, 3, 2, 2), np.float32)
    out = run_function(functions(text)["f"], [a, b, m, i, x, w]).outputs
    e = np.broadcast_to(b, (2, 3))
    c = np.concatenate([a, e])
    and_ = (i == a) & ~m
    want = [a.T, e, c[:1], c[1:], a + b + e, and_, np.where(and_, a, b),
            np.pad(a, ((0, 1), (1, 0)), constant_values=2.5), np.pad(a, 1, mode="reflect"),
            K.conv_transpose(x, w, strides=(2, 1), pads=(0, 1, 1, 0), output_padding=(1, 0)),
            np.array([1.0, -np.inf], np.float32), np.array([True, False, True]), -a,
            np.arange(15, 19, dtype=np.float32)]
    assert len(out) == len(want)
    for k, (got, exp) in enumerate(zip(out, want)):
        assert got.dtype == np.asarray(exp).dtype, k
        np.testing.assert_allclose(got, exp, rtol=1e-6, err_msg=str(k))


def test_constants_are_read_only_and_results_never_alias_updated_parameters():
    text = f"""
func.func @f(%w: {t(2, 3, elem='f32')} {{monet.param = "w"}}, %g: {t(2, 3, elem='f32')} {{monet.input = "g"}})
    -> ({t(6, elem='f32')}, {t(2, 3, elem='f32')}) {{
  %r = nn.reshape %w : ({t(2, 3, elem='f32')}) -> {t(6, elem='f32')}
  %c = nn.constant dense<2.0> : {t(2, 3, elem='f32')}
  train.sgd %w, %g {{lr = 1.0 : f64}} : {t(2, 3, elem='f32')}, {t(2, 3, elem='f32')}
  func.return %r, %c : {t(6, elem='f32')}, {t(2, 3, elem='f32')}
}}
"""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = run_module(module_of(text), {"w": w}, {"g": np.ones((2, 3), np.float32)}, keep_values=True)
    r, c = result.outputs
    np.testing.assert_array_equal(r, np.arange(6))  # the value before the update
    np.testing.assert_array_equal(result.state["w"], w - 1)
    assert not c.flags.writeable and (c == 2).all()
    assert set(result.values_by_name) >= {"w", "g", "r", "c"}


def test_unknown_ops_and_bad_arguments_raise_interpreter_errors():
    text = f"""
func.func @f(%a: {t(2)}) -> {t(2)} {{
  %b = "test.op"(%a) : ({t(2)}) -> {t(2)}
  func.return %b : {t(2)}
}}
"""
    fn = functions(text)["f"]
    with pytest.raises(InterpreterError, match="no numpy implementation for 'test.op'"):
        run_function(fn, [np.zeros(2)])
    with pytest.raises(InterpreterError, match=r"expected float64\[2\], got float32\[2\]"):
        run_function(fn, [np.zeros(2, np.float32)])
    with pytest.raises(InterpreterError, match="takes 1 arguments, got 0"):
        run_function(fn, [])


# ----------------------------------------------------------------------------- optimizer ops


def _optimizer_fn(op_text: str, n_state: int, step: str | None = None):
    """@f(%p, %g, %s0.. [, %n]) running one optimizer op; step: None, "arg" or "const" (%n = 3)."""
    ty = t(3, 4, elem="f32")
    states = "".join(f", %s{k}: {ty}" for k in range(n_state))
    step_arg = f", %n: {t(elem='f32')}" if step == "arg" else ""
    step_def = f"%n = nn.constant dense<3.0> : {t(elem='f32')}\n  " if step == "const" else ""
    return functions(f"""
func.func @f(%p: {ty}, %g: {ty}{states}{step_arg}) {{
  {step_def}{op_text}
  func.return
}}
""")["f"]


def _arrays(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(n)]


def test_sgd_and_accumulate_update_in_place():
    ty = t(3, 4, elem="f32")
    p, g = _arrays(2)
    p0 = p.copy()
    fn = _optimizer_fn(f"train.sgd %p, %g {{lr = 0.1 : f64, weight_decay = 0.01 : f64}} : {ty}, {ty}", 0)
    assert run_function(fn, [p, g]).outputs == []
    np.testing.assert_array_equal(p, K.sgd(p0, g, lr=0.1, weight_decay=0.01)[0])
    fn = _optimizer_fn(f"train.accumulate %p, %g : {ty}, {ty}", 0)
    before = p.copy()
    run_function(fn, [p, g])
    np.testing.assert_array_equal(p, before + g)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_from_a_zero_buffer_equals_pytorchs_first_step(nesterov):
    ty = t(3, 4, elem="f32")
    flag = ", nesterov = true" if nesterov else ""
    fn = _optimizer_fn(f"train.momentum %p, %g, %s0 {{lr = 0.1 : f64, momentum = 0.8 : f64, weight_decay = 0.01 : f64{flag}}}"
                       f" : {ty}, {ty}, {ty}", 1)
    p, g, g2 = _arrays(3)
    v = np.zeros_like(p)
    kw = dict(lr=0.1, momentum=0.8, weight_decay=0.01, nesterov=nesterov)
    want_p, want_v = K.momentum(p, g, None, **kw)  # PyTorch: buffer = g on the first step
    want_p, want_v = K.momentum(want_p, g2, want_v, **kw)
    run_function(fn, [p, g, v])
    run_function(fn, [p, g2, v])
    np.testing.assert_allclose(p, want_p, rtol=1e-6)
    np.testing.assert_allclose(v, want_v, rtol=1e-6)


@pytest.mark.parametrize("op, kernel", [("adam", K.adam), ("adamw", K.adamw)])
def test_adam_increments_its_step_in_place_before_the_update(op, kernel):
    ty = t(3, 4, elem="f32")
    props = "{lr = 0.01 : f64, beta1 = 0.8 : f64, beta2 = 0.99 : f64, eps = 1.0e-06 : f64, weight_decay = 0.1 : f64}"
    fn = _optimizer_fn(f"train.{op} %p, %g, %s0, %s1, %n {props} : {ty}, {ty}, {ty}, {ty}, {t(elem='f32')}", 2,
                       step="arg")
    p, g, g2 = _arrays(3, seed=4)
    m, v, n = np.zeros_like(p), np.zeros_like(p), np.zeros((), np.float32)
    kw = dict(lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1)
    want = kernel(p, g, m, v, step=1, **kw)
    want = kernel(want[0], g2, want[1], want[2], step=2, **kw)
    ids = [id(a) for a in (p, m, v, n)]
    run_function(fn, [p, g, m, v, n])
    assert n == 1
    run_function(fn, [p, g2, m, v, n])
    assert n == 2 and n.dtype == np.float32 and [id(a) for a in (p, m, v, n)] == ids
    for got, exp in zip((p, m, v), want):
        np.testing.assert_allclose(got, exp, rtol=1e-6)


def test_adam_with_a_constant_step_does_not_write_the_constant():
    ty = t(3, 4, elem="f32")
    fn = _optimizer_fn(f"train.adam %p, %g, %s0, %s1, %n {{lr = 0.01 : f64}} : {ty}, {ty}, {ty}, {ty}, {t(elem='f32')}",
                       2, step="const")
    p, g = _arrays(2)
    m, v = np.zeros_like(p), np.zeros_like(p)
    want = K.adam(p, g, m.copy(), v.copy(), step=4, lr=0.01)  # the constant 3 plus this update
    run_function(fn, [p, g, m, v])
    np.testing.assert_allclose(p, want[0], rtol=1e-6)
    with pytest.raises(InterpreterError, match="read-only"):
        run_function(_optimizer_fn(f"train.sgd %n, %n {{lr = 0.1 : f64}} : {t(elem='f32')}, {t(elem='f32')}", 0,
                                   step="const"), [p, g])
