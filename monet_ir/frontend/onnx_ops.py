"""Per-operator converters from ONNX nodes to MONET ops.

`CONVERTERS[(domain, op_type)]` takes the importer and one node, emits ops and binds the node's
outputs. Attribute-like inputs (a Reshape's shape, Slice bounds, ...) must be known at import;
their values become properties. A converter raises `Unsupported` with a short reason for a
semantic it does not model (never a silent approximation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, StringAttr, TensorType, f64
from xdsl.ir import Operation, SSAValue

from dialects import grad, nn, train
from dialects.base import (
    bool_attr,
    broadcast_shapes,
    shape_of,
    float_attr,
    int_attr,
    ints_attr,
)
from monet_ir.frontend.attrs import attr, node_name
from monet_ir.cost.conv_nest import same_pads


class Unsupported(Exception):
    """A node uses a semantic the importer does not model."""


class InputFailed(Unsupported):
    """An input comes from a node that failed to import; only that node's failure is reported."""


Converter = Callable[[Any, Any], None]
CONVERTERS: dict[tuple[str, str], Converter] = {}


def converts(*op_types: str, domain: str = "") -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            CONVERTERS[(domain, op_type)] = fn
        return fn

    return register


# ---------------------------------------------------------------------- helpers


def required_attr(node: Any, name: str) -> Any:
    """An attribute the op's schema requires; ONNX's checker knows no `com.microsoft` schema, so
    its converters check these themselves."""
    value = attr(node, name)
    if value is None:
        raise Unsupported(f"the required attribute '{name}' is missing")
    return value


def opt_input(node: Any, i: int) -> str | None:
    return node.input[i] if len(node.input) > i and node.input[i] else None


def const_input(imp: Any, node: Any, i: int, what: str) -> Any:
    """The import-time value of an attribute-like input."""
    name = opt_input(node, i)
    if name is None:
        return None
    t = imp.known(name)
    if t is not None and t.const is None:
        # a float initializer imports as a parameter, but one an attribute-like input reads (a
        # Resize's scales) is a constant: its data is used and the parameter dropped if unused
        value = imp.parameter_data(name)
        if value is not None:
            return value
    if t is None or t.const is None:
        raise Unsupported(f"{what} (input {i}, '{name}') must be a constant known at import")
    return imp.const_array(name)


def const_ints(imp: Any, node: Any, i: int, what: str) -> list[int] | None:
    value = const_input(imp, node, i, what)
    return None if value is None else [int(v) for v in value.reshape(-1)]


def const_float(imp: Any, node: Any, i: int, what: str) -> float | None:
    value = const_input(imp, node, i, what)
    return None if value is None else float(value.reshape(-1)[0])


def emit(
    imp: Any,
    node: Any,
    op_class: type[Operation],
    operands: Sequence[SSAValue | None],
    result_types: Sequence[TensorType],
    properties: dict[str, Any] | None = None,
    outputs: Sequence[str] | None = None,
) -> Operation:
    """Build, tag (origin node and phase), append and bind one op."""
    props = {k: v for k, v in (properties or {}).items() if v is not None}
    op = op_class.build(operands=list(operands), result_types=list(result_types), properties=props)
    origin, phase = imp_origin(imp, node)
    op.set_origin(origin, phase)  # type: ignore[attr-defined]
    imp.add(op)
    names = list(node.output) if outputs is None else list(outputs)
    for name, result in zip(names, op.results, strict=False):
        imp.bind(name, result)
    return op


def imp_origin(imp: Any, node: Any) -> tuple[str, str]:
    if imp.ort:
        from monet_ir.frontend import ort_training

        return ort_training.origin_of(node, imp.producers)
    return node_name(node), "forward"


def same_type(imp: Any, node: Any) -> list[TensorType]:
    return [imp.result_type(node.output[0])]


def check_no_extra_outputs(node: Any, keep: int, what: str) -> None:
    for extra in node.output[keep:]:
        if extra:
            # optional outputs used downstream would silently lose their producer otherwise
            raise Unsupported(f"optional output '{extra}' ({what}) is not modelled")


# ---------------------------------------------------------------------- element-wise


UNARY = {
    "Relu": nn.ReluOp, "Sigmoid": nn.SigmoidOp, "HardSwish": nn.HardSwishOp, "Tanh": nn.TanhOp,
    "Erf": nn.ErfOp, "Sqrt": nn.SqrtOp, "Neg": nn.NegOp, "Exp": nn.ExpOp, "Log": nn.LogOp, "Not": nn.NotOp,
    "Softplus": nn.SoftplusOp, "Softsign": nn.SoftsignOp, "Abs": nn.AbsOp, "Sign": nn.SignOp, "Sin": nn.SinOp,
    "Cos": nn.CosOp, "Floor": nn.FloorOp, "Ceil": nn.CeilOp, "Round": nn.RoundOp, "Mish": nn.MishOp,
}


@converts(*UNARY)
def convert_unary(imp: Any, node: Any) -> None:
    emit(imp, node, UNARY[node.op_type], [imp.value(node.input[0])], same_type(imp, node))


@converts("Elu", "Celu")
def convert_elu(imp: Any, node: Any) -> None:
    op = nn.EluOp if node.op_type == "Elu" else nn.CeluOp
    emit(imp, node, op, [imp.value(node.input[0])], same_type(imp, node),
         {"alpha": float_attr(attr(node, "alpha", 1.0))})


@converts("Selu")
def convert_selu(imp: Any, node: Any) -> None:
    emit(imp, node, nn.SeluOp, [imp.value(node.input[0])], same_type(imp, node), {
        "alpha": float_attr(attr(node, "alpha", 1.6732632423543772)),
        "gamma": float_attr(attr(node, "gamma", 1.0507009873554805)),
    })


@converts("LeakyRelu")
def convert_leaky_relu(imp: Any, node: Any) -> None:
    emit(imp, node, nn.LeakyReluOp, [imp.value(node.input[0])], same_type(imp, node),
         {"alpha": float_attr(attr(node, "alpha", 0.01))})


@converts("HardSigmoid")
def convert_hard_sigmoid(imp: Any, node: Any) -> None:
    emit(imp, node, nn.HardSigmoidOp, [imp.value(node.input[0])], same_type(imp, node),
         {"alpha": float_attr(attr(node, "alpha", 0.2)), "beta": float_attr(attr(node, "beta", 0.5))})


@converts("Gelu")
def convert_gelu(imp: Any, node: Any) -> None:
    emit(imp, node, nn.GeluOp, [imp.value(node.input[0])], same_type(imp, node),
         {"approximate": StringAttr(attr(node, "approximate", "none"))})


@converts("Clip")
def convert_clip(imp: Any, node: Any) -> None:
    if imp.opset < 11:
        lo, hi = attr(node, "min"), attr(node, "max")
    else:
        lo, hi = const_float(imp, node, 1, "min"), const_float(imp, node, 2, "max")
    emit(imp, node, nn.ClipOp, [imp.value(node.input[0])], same_type(imp, node),
         {"min": None if lo is None else float_attr(lo), "max": None if hi is None else float_attr(hi)})


@converts("Softmax", "LogSoftmax")
def convert_softmax(imp: Any, node: Any) -> None:
    rank = len(imp.type_of(node.input[0]).get_shape())
    default_axis = -1 if imp.opset >= 13 else 1
    axis = attr(node, "axis", default_axis)
    if imp.opset < 13 and axis % rank != rank - 1:
        raise Unsupported(f"opset {imp.opset} {node.op_type} over flattened axes [{axis}:] is not modelled")
    op = nn.SoftmaxOp if node.op_type == "Softmax" else nn.LogSoftmaxOp
    emit(imp, node, op, [imp.value(node.input[0])], same_type(imp, node), {"axis": int_attr(axis)})


BINARY = {
    "Add": nn.AddOp, "Sub": nn.SubOp, "Mul": nn.MulOp, "Div": nn.DivOp, "Pow": nn.PowOp,
    "Equal": nn.EqualOp, "And": nn.AndOp, "Less": nn.LessOp, "Greater": nn.GreaterOp,
    "Or": nn.OrOp, "Xor": nn.XorOp, "PRelu": nn.PReluOp,
}


@converts(*BINARY)
def convert_binary(imp: Any, node: Any) -> None:
    lhs, rhs = imp.value(node.input[0]), imp.value(node.input[1])
    if node.op_type == "Pow" and lhs.type.get_element_type() != rhs.type.get_element_type():
        rhs = cast_to(imp, node, rhs, lhs.type.get_element_type())
    emit(imp, node, BINARY[node.op_type], [lhs, rhs], same_type(imp, node))


@converts("Max", "Min")
def convert_max_min(imp: Any, node: Any) -> None:
    """The element-wise maximum (minimum) of any number of operands, broadcasting: a chain of
    binary `nn.max` (`nn.min`), one operand is the identity."""
    op = nn.MaxOp if node.op_type == "Max" else nn.MinOp
    operands = [imp.value(n) for n in node.input if n]
    if not operands:
        raise Unsupported("needs at least one operand")
    out = imp.result_type(node.output[0])
    value = operands[0]
    for i, rhs in enumerate(operands[1:], start=2):
        shape = broadcast_shapes(shape_of(value.type), shape_of(rhs.type))
        t = out if i == len(operands) else TensorType(out.get_element_type(), shape)
        value = emit(imp, node, op, [value, rhs], [t], outputs=[] if i < len(operands) else None).results[0]
    if len(operands) == 1:
        imp.bind(node.output[0], value)


@converts("Mod")
def convert_mod(imp: Any, node: Any) -> None:
    emit(imp, node, nn.ModOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node),
         {"fmod": bool_attr(True) if attr(node, "fmod", 0) else None})


@converts("LessOrEqual", "GreaterOrEqual")
def convert_compare_or_equal(imp: Any, node: Any) -> None:
    op = nn.LessOp if node.op_type == "LessOrEqual" else nn.GreaterOp
    emit(imp, node, op, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node),
         {"or_equal": bool_attr(True)})


@converts("Reciprocal")
def convert_reciprocal(imp: Any, node: Any) -> None:
    """1 / x, as the division it is (PyTorch's rsqrt exports as Sqrt then Reciprocal)."""
    import numpy as np

    from monet_ir.types import numpy_dtype_of

    x = imp.value(node.input[0])
    elem = x.type.get_element_type()
    one = imp.materialize(f"{node_name(node)}/one", np.ones((), numpy_dtype_of(elem)), TensorType(elem, []))
    emit(imp, node, nn.DivOp, [one, x], same_type(imp, node))


@converts("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike")
def convert_random(imp: Any, node: Any) -> None:
    """Random numbers; the `*Like` forms take only the shape of their input (never its values)."""
    uniform = node.op_type.startswith("RandomUniform")
    props: dict[str, Any] = {"distribution": StringAttr("uniform" if uniform else "normal")}
    if uniform:
        props["low"], props["high"] = float_attr(attr(node, "low", 0.0)), float_attr(attr(node, "high", 1.0))
    else:
        props["mean"], props["scale"] = float_attr(attr(node, "mean", 0.0)), float_attr(attr(node, "scale", 1.0))
    seed = attr(node, "seed")
    if seed is not None:
        props["seed"] = int_attr(int(seed))
    emit(imp, node, nn.RandomOp, [], same_type(imp, node), props)


@converts("Resize")
def convert_resize(imp: Any, node: Any) -> None:
    """Nearest, (multi-)linear and cubic resizing to the output's static shape. Scales that do
    not give the output size exactly (a bicubic interpolation of position embeddings by a
    fractional factor) are kept: ONNX maps the coordinates with them."""
    from dialects.nn.data_movement import RESIZE_COORDINATES, RESIZE_NEAREST

    mode, coords = _text(attr(node, "mode", "nearest")), _text(attr(node, "coordinate_transformation_mode", "half_pixel"))
    nearest = _text(attr(node, "nearest_mode", "round_prefer_floor"))
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode '{mode}' is not an ONNX value")
    if coords not in RESIZE_COORDINATES:
        raise Unsupported(f"coordinate_transformation_mode '{coords}' is not modelled")
    if nearest not in RESIZE_NEAREST:
        raise Unsupported(f"nearest_mode '{nearest}' is not an ONNX value")
    if attr(node, "antialias", 0):
        raise Unsupported("antialias = 1 is not modelled")
    if attr(node, "axes") is not None:
        raise Unsupported("the axes attribute is not modelled")
    x_shape = list(imp.type_of(node.input[0]).get_shape())
    out = imp.result_type(node.output[0])
    if imp.opset >= 11:
        const_input(imp, node, 1, "roi")  # read only by tf_crop_and_resize, which is refused above
    scales = const_input(imp, node, 2, "scales") if imp.opset >= 11 else const_input(imp, node, 1, "scales")
    kept_scales = None
    if scales is not None and scales.size:
        factors = [float(v) for v in scales.reshape(-1)]
        if len(factors) != len(x_shape):
            raise Unsupported(f"{len(factors)} scales for an input of rank {len(x_shape)}")
        if any(abs(f * d - n) > 1e-6 for f, d, n in zip(factors, x_shape, out.get_shape(), strict=True)):
            kept_scales = factors
    emit(imp, node, nn.ResizeOp, [imp.value(node.input[0])], [out], {
        "mode": StringAttr(mode),
        "coordinate_transformation_mode": StringAttr(coords),
        "nearest_mode": StringAttr(nearest) if mode == "nearest" else None,
        "cubic_coeff_a": float_attr(attr(node, "cubic_coeff_a", -0.75)) if mode == "cubic" else None,
        "exclude_outside": bool_attr(True) if attr(node, "exclude_outside", 0) else None,
        "scales": DenseArrayBase.from_list(f64, kept_scales) if kept_scales else None,
    })


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@converts("CumSum")
def convert_cumsum(imp: Any, node: Any) -> None:
    axis = const_ints(imp, node, 1, "axis")
    if axis is None or len(axis) != 1:
        raise Unsupported("axis (input 1) must be one constant integer")
    emit(imp, node, nn.CumSumOp, [imp.value(node.input[0])], same_type(imp, node), {
        "axis": int_attr(axis[0]),
        "exclusive": bool_attr(True) if attr(node, "exclusive", 0) else None,
        "reverse": bool_attr(True) if attr(node, "reverse", 0) else None,
    })


@converts("CastLike")
def convert_cast_like(imp: Any, node: Any) -> None:
    convert_cast(imp, node)


def cast_to(imp: Any, node: Any, value: SSAValue, elem: Any) -> SSAValue:
    """An explicit cast for ONNX ops that accept mixed element types (Pow's exponent)."""
    t = TensorType(elem, value.type.get_shape())
    op = emit(imp, node, nn.CastOp, [value], [t], outputs=[])
    return op.results[0]


@converts("Where")
def convert_where(imp: Any, node: Any) -> None:
    emit(imp, node, nn.WhereOp, [imp.value(n) for n in node.input[:3]], same_type(imp, node))


@converts("Sum")
def convert_sum(imp: Any, node: Any) -> None:
    if len(node.input) == 1:
        imp.bind(node.output[0], imp.value(node.input[0]))
        return
    emit(imp, node, nn.SumOp, [[imp.value(n) for n in node.input]], same_type(imp, node))


@converts("Cast")
def convert_cast(imp: Any, node: Any) -> None:
    source = imp.value(node.input[0])
    target = imp.result_type(node.output[0])
    if source.type == target:
        imp.bind(node.output[0], source)
        return
    emit(imp, node, nn.CastOp, [source], [target])


@converts("Identity")
def convert_identity(imp: Any, node: Any) -> None:
    imp.bind(node.output[0], imp.value(node.input[0]))


@converts("Dropout")
def convert_dropout(imp: Any, node: Any) -> None:
    ratio = const_float(imp, node, 1, "ratio") if imp.opset >= 12 else attr(node, "ratio", 0.5)
    ratio = 0.5 if ratio is None else ratio
    training = const_input(imp, node, 2, "training_mode") if imp.opset >= 12 else None
    is_training = bool(training.reshape(-1)[0]) if training is not None else imp.opset < 7
    x = imp.value(node.input[0])
    if not is_training or ratio == 0.0:
        # inference-mode dropout (or p = 0) is the identity; its mask, if used, is all true
        imp.bind(node.output[0], x)
        if len(node.output) > 1 and node.output[1]:
            import numpy as np

            mask_type = imp.result_type(node.output[1])
            imp.bind(node.output[1], imp.materialize(node.output[1], np.ones(mask_type.get_shape(), bool), mask_type))
        return
    seed = attr(node, "seed")
    t = imp.result_type(node.output[0])
    has_mask = len(node.output) > 1 and node.output[1]
    mask_type = imp.result_type(node.output[1]) if has_mask else _bool_type(t)
    emit(imp, node, nn.DropoutOp, [x], [t, mask_type],
         {"ratio": float_attr(ratio), "seed": None if seed is None else int_attr(seed)})


def _bool_type(t: TensorType) -> Any:
    from xdsl.dialects.builtin import i1

    return TensorType(i1, t.get_shape())


# ---------------------------------------------------------------------- contractions


def check_window_attributes(node: Any, spatial: int, strides: list[int], dilations: list[int], pads: list[int]) -> None:
    """A sliding window's attributes as ONNX defines them: one stride and dilation per spatial
    axis, both positive, and a non-negative begin and end pad per axis."""
    for name, values, count in (("strides", strides, spatial), ("dilations", dilations, spatial),
                                ("pads", pads, 2 * spatial)):
        if len(values) != count:
            raise Unsupported(f"attribute '{name}' has {len(values)} values; {spatial} spatial axes need {count}")
    if any(v <= 0 for v in strides + dilations):
        raise Unsupported(f"strides {strides} and dilations {dilations} must be positive")
    if any(p < 0 for p in pads):
        raise Unsupported(f"pads {pads} must not be negative")


def check_window_fits(node: Any, x: Sequence[int], kernel: Sequence[int], dilations: Sequence[int],
                      pads: Sequence[int]) -> None:
    """Refuse a window that does not fit its padded input: the output would have no elements."""
    spatial = len(kernel)
    if len(x) != spatial + 2:
        raise Unsupported(f"a {spatial}-d window on an input of rank {len(x)} (expected {spatial + 2})")
    for i in range(spatial):
        extent = dilations[i] * (kernel[i] - 1) + 1
        padded = x[2 + i] + pads[i] + pads[spatial + i]
        if extent > padded:
            raise Unsupported(f"the window along spatial axis {i} ({kernel[i]} wide, dilation {dilations[i]}: "
                              f"{extent}) is larger than the padded input ({x[2 + i]} + pads {pads[i]} + "
                              f"{pads[spatial + i]} = {padded}): the output would be empty")


def conv_geometry(imp: Any, node: Any, spatial: int, kernel: Sequence[int], transpose: bool = False,
                  data_input: int = 0) -> dict[str, Any]:
    """The geometry properties of a convolution-like node; `data_input` is the index of its
    data (x) input, whose size a forward window must fit."""
    strides = list(attr(node, "strides", [1] * spatial))
    dilations = list(attr(node, "dilations", [1] * spatial))
    pads = list(attr(node, "pads", [0] * (2 * spatial)))
    auto_pad = attr(node, "auto_pad", "NOTSET")
    check_window_attributes(node, spatial, strides, dilations, pads)
    stated = attr(node, "kernel_shape")
    if stated is not None and list(stated) != list(kernel):
        raise Unsupported(f"kernel_shape {list(stated)} does not match the weight's kernel {list(kernel)}")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") and not transpose:
        x = imp.type_of(node.input[data_input]).get_shape()
        pads = same_pads(x[2:], kernel, strides, dilations, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pads = [0] * (2 * spatial)
    elif auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad '{auto_pad}' is not an ONNX value")
    props = {"group": int_attr(attr(node, "group", 1))}
    if any(s != 1 for s in strides):
        props["strides"] = ints_attr(strides)
    if any(p != 0 for p in pads):
        props["pads"] = ints_attr(pads)
    if any(d != 1 for d in dilations):
        props["dilations"] = ints_attr(dilations)
    if props["group"].value.data == 1:
        del props["group"]
    if not transpose:
        check_window_fits(node, imp.type_of(node.input[data_input]).get_shape(), kernel, dilations, pads)
    return props


@converts("Conv")
def convert_conv(imp: Any, node: Any) -> None:
    w = imp.type_of(node.input[1]).get_shape()
    props = conv_geometry(imp, node, len(w) - 2, w[2:])
    bias = opt_input(node, 2)
    operands = [imp.value(node.input[0]), imp.value(node.input[1])] + [imp.value(bias) if bias else None]
    emit(imp, node, nn.ConvOp, operands, same_type(imp, node), props)


@converts("ConvTranspose")
def convert_conv_transpose(imp: Any, node: Any) -> None:
    if imp.ort and imp_origin(imp, node)[1] == "backward" and not opt_input(node, 2):
        # ORT writes a convolution's input gradient as ConvTranspose(dY, W) whose declared
        # output is the forward input (output_padding left implicit): that is grad.conv_input
        w = imp.type_of(node.input[1]).get_shape()
        props = conv_geometry(imp, node, len(w) - 2, w[2:], transpose=True)
        emit(imp, node, grad.ConvInputGradOp, [imp.value(node.input[0]), imp.value(node.input[1])],
             same_type(imp, node), props)
        return
    x = imp.type_of(node.input[0]).get_shape()
    w = imp.type_of(node.input[1]).get_shape()
    spatial = len(w) - 2
    props = conv_geometry(imp, node, spatial, w[2:], transpose=True)
    out = imp.result_type(node.output[0]).get_shape()
    output_padding = list(attr(node, "output_padding", [0] * spatial))
    if attr(node, "output_shape") is not None or attr(node, "auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX derives the padding from the requested output size
        strides = list(attr(node, "strides", [1] * spatial))
        dilations = list(attr(node, "dilations", [1] * spatial))
        upper = attr(node, "auto_pad", "SAME_UPPER") != "SAME_LOWER"
        begins, ends = [], []
        for i in range(spatial):
            total = strides[i] * (x[2 + i] - 1) + output_padding[i] + (w[2 + i] - 1) * dilations[i] + 1 - out[2 + i]
            small, big = total // 2, total - total // 2
            begins.append(small if upper else big)
            ends.append(big if upper else small)
        props["pads"] = ints_attr(begins + ends)
    if any(p != 0 for p in output_padding):
        props["output_padding"] = ints_attr(output_padding)
    bias = opt_input(node, 2)
    operands = [imp.value(node.input[0]), imp.value(node.input[1])] + [imp.value(bias) if bias else None]
    emit(imp, node, nn.ConvTransposeOp, operands, same_type(imp, node), props)


@converts("Gemm")
def convert_gemm(imp: Any, node: Any) -> None:
    bias = opt_input(node, 2)
    operands = [imp.value(node.input[0]), imp.value(node.input[1])] + [imp.value(bias) if bias else None]
    alpha, beta = attr(node, "alpha", 1.0), attr(node, "beta", 1.0)
    emit(imp, node, nn.GemmOp, operands, same_type(imp, node), {
        "alpha": float_attr(alpha) if alpha != 1.0 else None,
        "beta": float_attr(beta) if beta != 1.0 and bias else None,
        "trans_a": bool_attr(True) if attr(node, "transA", 0) else None,
        "trans_b": bool_attr(True) if attr(node, "transB", 0) else None,
    })


@converts("MatMul")
def convert_matmul(imp: Any, node: Any) -> None:
    # PyTorch exports Linear on 3-D inputs as Transpose(W) -> MatMul; the transpose is a view
    # there, and folding it into the product's trans flag keeps it one here (no copy of the
    # weight is computed, saved for backward or costed)
    lhs, trans_a = untransposed(imp, node.input[0])
    rhs, trans_b = untransposed(imp, node.input[1])
    emit(imp, node, nn.MatMulOp, [lhs, rhs], same_type(imp, node), {
        "trans_a": bool_attr(True) if trans_a else None,
        "trans_b": bool_attr(True) if trans_b else None,
    })


def untransposed(imp: Any, name: str) -> tuple[SSAValue, bool]:
    """The value of `name`, or the input of the nn.transpose that produced it when that
    transpose only swaps the last two axes (then the product reads it transposed)."""
    value = imp.value(name)
    op = value.owner
    if isinstance(op, nn.TransposeOp):
        perm = list(op.perm.get_values())
        rank = len(perm)
        if rank >= 2 and perm == [*range(rank - 2), rank - 1, rank - 2]:
            imp.maybe_dead.add(op)
            return op.input, True
    return value, False


@converts("FusedMatMul", domain="com.microsoft")
def convert_fused_matmul(imp: Any, node: Any) -> None:
    if attr(node, "transBatchA", 0) or attr(node, "transBatchB", 0):
        raise Unsupported("transBatchA/transBatchB are not modelled")
    alpha = attr(node, "alpha", 1.0)
    emit(imp, node, nn.MatMulOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node), {
        "alpha": float_attr(alpha) if alpha != 1.0 else None,
        "trans_a": bool_attr(True) if attr(node, "transA", 0) else None,
        "trans_b": bool_attr(True) if attr(node, "transB", 0) else None,
    })


@converts("Einsum")
def convert_einsum(imp: Any, node: Any) -> None:
    """An einsum that is a (batched) matrix product: two operands sharing their leading batch
    letters in the output's order, one contracted letter, one free letter each, either operand
    possibly transposed ('bhij,bhjd->bhid', 'bhid,bhjd->bhij'). Other einsums are refused."""
    equation = str(attr(node, "equation", "")).replace(" ", "")
    if "->" not in equation or "..." in equation or len(node.input) != 2:
        raise Unsupported(f"einsum '{equation}' is not a product of two operands with an explicit output")
    operands, out = equation.split("->")
    lhs, rhs = operands.split(",") if operands.count(",") == 1 else ("", "")
    batch = [c for c in out if c in lhs and c in rhs]
    contracted = [c for c in lhs if c in rhs and c not in out]
    free_l = [c for c in lhs if c not in rhs]
    free_r = [c for c in rhs if c not in lhs]
    shapes_ok = (len(contracted) == len(free_l) == len(free_r) == 1 and out == "".join(batch) + free_l[0] + free_r[0]
                 and len(set(lhs)) == len(lhs) and len(set(rhs)) == len(rhs))
    b, k, i, j = "".join(batch), "".join(contracted), "".join(free_l), "".join(free_r)
    if not shapes_ok or lhs not in (b + i + k, b + k + i) or rhs not in (b + k + j, b + j + k):
        raise Unsupported(f"einsum '{equation}' is not a (batched) matrix product")
    emit(imp, node, nn.MatMulOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node), {
        "trans_a": bool_attr(True) if lhs == b + k + i else None,
        "trans_b": bool_attr(True) if rhs == b + j + k else None,
    })


# ---------------------------------------------------------------------- normalization


@converts("BatchNormalization")
def convert_batch_norm(imp: Any, node: Any) -> None:
    training = attr(node, "training_mode", 1 if len([o for o in node.output if o]) > 1 else 0)
    if imp.opset < 14 and len([o for o in node.output if o]) > 1:
        training = 1
    for extra in node.output[1:]:
        if extra and imp_uses(imp, extra):
            raise Unsupported(f"the running statistics output '{extra}' is used; it is not modelled as a value")
    emit(imp, node, nn.BatchNormOp, [imp.value(n) for n in node.input[:5]], same_type(imp, node), {
        "epsilon": float_attr(attr(node, "epsilon", 1e-5)),
        "momentum": float_attr(attr(node, "momentum", 0.9)),
        "training": bool_attr(bool(training)),
    }, outputs=node.output[:1])


def imp_uses(imp: Any, name: str) -> bool:
    return any(name in n.input for n in imp.graph.node) or any(o.name == name for o in imp.graph.output)


@converts("LayerNormalization")
def convert_layer_norm(imp: Any, node: Any) -> None:
    from monet_ir.frontend.ort_training import statistics_read_only_by_gradient

    # in an ORT training graph LayerNormalizationGrad reads the saved mean and inverse standard
    # deviation; grad.layer_norm re-derives them from the input
    if not statistics_read_only_by_gradient(imp, node):
        for extra in node.output[1:]:
            if extra and imp_uses(imp, extra):
                raise Unsupported(f"the statistics output '{extra}' is used; it is not modelled as a value")
    bias = opt_input(node, 2)
    operands = [imp.value(node.input[0]), imp.value(node.input[1])] + [imp.value(bias) if bias else None]
    if attr(node, "stash_type", 1) != 1:
        raise Unsupported("stash_type other than float32 is not modelled")
    emit(imp, node, nn.LayerNormOp, operands, same_type(imp, node), {
        "axis": int_attr(attr(node, "axis", -1)),
        "epsilon": float_attr(attr(node, "epsilon", 1e-5)),
    }, outputs=node.output[:1])


@converts("InstanceNormalization")
def convert_instance_norm(imp: Any, node: Any) -> None:
    """Normalization of each (sample, channel) over the spatial axes, then a per-channel scale
    and bias: a layer norm over axes [2, rank) with a unit scale, then the scale and bias
    reshaped to (C, 1, ..., 1) for the multiply and add (both exporters write PyTorch's
    GroupNorm as Reshape, InstanceNormalization, Reshape, Mul, Add). A scale of constant ones
    or a bias of constant zeros (GroupNorm's) emits no multiply or add."""
    import numpy as np

    from monet_ir.types import numpy_dtype_of

    x = imp.value(node.input[0])
    rank = len(x.type.get_shape())
    if rank < 3:
        raise Unsupported(f"input of rank {rank}: InstanceNormalization needs (N, C, D1, ...)")
    elem = x.type.get_element_type()
    unit = imp.materialize(f"{node_name(node)}/unit_scale", np.ones((1,), numpy_dtype_of(elem)),
                           TensorType(elem, [1]))
    y = emit(imp, node, nn.LayerNormOp, [x, unit, None], [x.type], {
        "axis": int_attr(2), "epsilon": float_attr(attr(node, "epsilon", 1e-5)),
    }, outputs=[]).results[0]
    channel_type = TensorType(elem, [x.type.get_shape()[1]] + [1] * (rank - 2))
    for i, op_class, identity in ((1, nn.MulOp, 1.0), (2, nn.AddOp, 0.0)):
        name = node.input[i]
        known = imp.known(name)
        if known is not None and known.const is not None and np.all(imp.const_array(name) == identity):
            continue
        operand = emit(imp, node, nn.ReshapeOp, [imp.value(name)], [channel_type], outputs=[]).results[0]
        y = emit(imp, node, op_class, [y, operand], [x.type], outputs=[]).results[0]
    imp.bind(node.output[0], y)


# ---------------------------------------------------------------------- pooling


def pool_properties(imp: Any, node: Any) -> dict[str, Any]:
    kernel = list(attr(node, "kernel_shape"))
    n = len(kernel)
    strides = list(attr(node, "strides", [1] * n))
    dilations = list(attr(node, "dilations", [1] * n))
    pads = list(attr(node, "pads", [0] * (2 * n)))
    auto_pad = attr(node, "auto_pad", "NOTSET")
    check_window_attributes(node, n, strides, dilations, pads)
    x = imp.type_of(node.input[0]).get_shape()
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(x[2:], kernel, strides, dilations, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pads = [0] * (2 * n)
    check_window_fits(node, x, kernel, dilations, pads)
    props: dict[str, Any] = {"kernel_shape": ints_attr(kernel)}
    if any(s != 1 for s in strides):
        props["strides"] = ints_attr(strides)
    if any(p != 0 for p in pads):
        props["pads"] = ints_attr(pads)
    if any(d != 1 for d in dilations):
        props["dilations"] = ints_attr(dilations)
    if attr(node, "ceil_mode", 0):
        props["ceil_mode"] = bool_attr(True)
    return props


@converts("MaxPool")
def convert_max_pool(imp: Any, node: Any) -> None:
    if len(node.output) > 1 and node.output[1] and imp_uses(imp, node.output[1]):
        if imp.ort:
            imp.values[node.output[1]] = imp.known(node.input[0])  # MaxPoolGrad reads x instead
        else:
            raise Unsupported("the Indices output is not modelled")
    if attr(node, "storage_order", 0):
        raise Unsupported("storage_order=1 is not modelled")
    props = pool_properties(imp, node)  # (first: it says why a window has no output)
    emit(imp, node, nn.MaxPoolOp, [imp.value(node.input[0])], same_type(imp, node), props, outputs=node.output[:1])


@converts("AveragePool")
def convert_avg_pool(imp: Any, node: Any) -> None:
    props = pool_properties(imp, node)
    if attr(node, "count_include_pad", 0):
        props["count_include_pad"] = bool_attr(True)
    emit(imp, node, nn.AvgPoolOp, [imp.value(node.input[0])], same_type(imp, node), props)


@converts("GlobalAveragePool")
def convert_global_avg_pool(imp: Any, node: Any) -> None:
    emit(imp, node, nn.GlobalAvgPoolOp, [imp.value(node.input[0])], same_type(imp, node))


# ---------------------------------------------------------------------- reductions


@converts("ReduceSum", "ReduceMean")
def convert_reduce(imp: Any, node: Any) -> None:
    axes_from_input = (node.op_type == "ReduceSum" and imp.opset >= 13) or imp.opset >= 18
    axes = const_ints(imp, node, 1, "axes") if axes_from_input else attr(node, "axes")
    if not axes and attr(node, "noop_with_empty_axes", 0):
        imp.bind(node.output[0], imp.value(node.input[0]))
        return
    op = nn.ReduceSumOp if node.op_type == "ReduceSum" else nn.ReduceMeanOp
    emit(imp, node, op, [imp.value(node.input[0])], same_type(imp, node), {
        "axes": ints_attr(axes) if axes else None,
        "keepdims": bool_attr(bool(attr(node, "keepdims", 1))),
    })


@converts("ReduceMax", "ReduceMin")
def convert_reduce_max_min(imp: Any, node: Any) -> None:
    axes = const_ints(imp, node, 1, "axes") if imp.opset >= 18 else attr(node, "axes")
    if not axes and attr(node, "noop_with_empty_axes", 0):
        imp.bind(node.output[0], imp.value(node.input[0]))
        return
    op = nn.ReduceMaxOp if node.op_type == "ReduceMax" else nn.ReduceMinOp
    emit(imp, node, op, [imp.value(node.input[0])], same_type(imp, node), {
        "axes": ints_attr(axes) if axes else None,
        "keepdims": bool_attr(bool(attr(node, "keepdims", 1))),
    })


@converts("GlobalMaxPool")
def convert_global_max_pool(imp: Any, node: Any) -> None:
    """The maximum over every spatial axis, kept as size 1: a `reduce_max`."""
    rank = len(imp.type_of(node.input[0]).get_shape())
    emit(imp, node, nn.ReduceMaxOp, [imp.value(node.input[0])], same_type(imp, node),
         {"axes": ints_attr(range(2, rank)), "keepdims": bool_attr(True)})


@converts("ArgMax", "ArgMin")
def convert_arg_reduce(imp: Any, node: Any) -> None:
    from monet_ir.frontend.routing import balanced_choices

    op = nn.ArgMaxOp if node.op_type == "ArgMax" else nn.ArgMinOp
    x = imp.value(node.input[0])
    axis, keepdims = attr(node, "axis", 0), bool(attr(node, "keepdims", 1))
    emit(imp, node, op, [x], same_type(imp, node), {
        "axis": int_attr(axis),
        "keepdims": bool_attr(keepdims),
        "select_last_index": bool_attr(True) if attr(node, "select_last_index", 0) else None,
    })
    # a top-1 routing decision (Switch Transformer): its balanced value bounds what follows
    choice = balanced_choices(list(x.type.get_shape()), axis, 1)
    imp.routing.set_decisions(node.output[0], choice if keepdims else choice.squeeze(axis))


@converts("ReduceL2", "ReduceSumSquare")
def convert_reduce_l2(imp: Any, node: Any) -> None:
    """sqrt(sum(x * x)) and sum(x * x) as the element-wise ops and sum they are (Swin V2's
    cosine attention normalizes with ReduceL2)."""
    axes = const_ints(imp, node, 1, "axes") if imp.opset >= 18 else attr(node, "axes")
    x = imp.value(node.input[0])
    if not axes and attr(node, "noop_with_empty_axes", 0):
        raise Unsupported("noop_with_empty_axes = 1 without axes is not modelled")
    out = imp.result_type(node.output[0])
    square = emit(imp, node, nn.MulOp, [x, x], [x.type], outputs=[]).results[0]
    total = emit(imp, node, nn.ReduceSumOp, [square], [out], {
        "axes": ints_attr(axes) if axes else None,
        "keepdims": bool_attr(bool(attr(node, "keepdims", 1))),
    }, outputs=[] if node.op_type == "ReduceL2" else None).results[0]
    if node.op_type == "ReduceL2":
        emit(imp, node, nn.SqrtOp, [total], [out])


# ---------------------------------------------------------------------- data movement


@converts("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def convert_reshape(imp: Any, node: Any) -> None:
    x = imp.value(node.input[0])
    t = imp.result_type(node.output[0])
    if x.type == t:
        imp.bind(node.output[0], x)
        return
    emit(imp, node, nn.ReshapeOp, [x], [t])


@converts("Expand")
def convert_expand(imp: Any, node: Any) -> None:
    x = imp.value(node.input[0])
    t = imp.result_type(node.output[0])
    if x.type == t:
        imp.bind(node.output[0], x)
        return
    emit(imp, node, nn.ExpandOp, [x], [t])


@converts("Transpose")
def convert_transpose(imp: Any, node: Any) -> None:
    rank = len(imp.type_of(node.input[0]).get_shape())
    perm = list(attr(node, "perm", list(reversed(range(rank)))))
    emit(imp, node, nn.TransposeOp, [imp.value(node.input[0])], same_type(imp, node), {"perm": ints_attr(perm)})


@converts("Concat")
def convert_concat(imp: Any, node: Any) -> None:
    emit(imp, node, nn.ConcatOp, [[imp.value(n) for n in node.input if n]], same_type(imp, node),
         {"axis": int_attr(attr(node, "axis"))})


@converts("Split")
def convert_split(imp: Any, node: Any) -> None:
    types = [imp.result_type(o) for o in node.output]
    emit(imp, node, nn.SplitOp, [imp.value(node.input[0])], [types], {"axis": int_attr(attr(node, "axis", 0))})


@converts("Slice")
def convert_slice(imp: Any, node: Any) -> None:
    if imp.opset < 10:
        starts, ends, axes, steps = attr(node, "starts"), attr(node, "ends"), attr(node, "axes"), None
    else:
        starts = const_ints(imp, node, 1, "starts")
        ends = const_ints(imp, node, 2, "ends")
        axes = const_ints(imp, node, 3, "axes")
        steps = const_ints(imp, node, 4, "steps")
    clamp = 2**62  # ONNX exporters write INT64_MAX for "to the end"; keep it printable
    emit(imp, node, nn.SliceOp, [imp.value(node.input[0])], same_type(imp, node), {
        "starts": ints_attr([max(min(s, clamp), -clamp) for s in starts]),
        "ends": ints_attr([max(min(e, clamp), -clamp) for e in ends]),
        "axes": ints_attr(axes) if axes is not None else None,
        "steps": ints_attr(steps) if steps is not None else None,
    })


@converts("GatherElements")
def convert_gather_elements(imp: Any, node: Any) -> None:
    emit(imp, node, nn.GatherElementsOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node),
         {"axis": int_attr(attr(node, "axis", 0))})


@converts("GatherND")
def convert_gather_nd(imp: Any, node: Any) -> None:
    if attr(node, "batch_dims", 0):
        raise Unsupported("batch_dims > 0 is not modelled")
    emit(imp, node, nn.GatherNDOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node))


@converts("ScatterND")
def convert_scatter_nd(imp: Any, node: Any) -> None:
    reduction = attr(node, "reduction", "none")
    if reduction not in ("none", "add"):
        raise Unsupported(f"reduction '{reduction}' is not modelled (none and add are)")
    emit(imp, node, nn.ScatterNDOp, [imp.value(n) for n in node.input[:3]], same_type(imp, node),
         {"reduction": StringAttr(reduction) if reduction != "none" else None})


@converts("Gather")
def convert_gather(imp: Any, node: Any) -> None:
    emit(imp, node, nn.GatherOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node),
         {"axis": int_attr(attr(node, "axis", 0))})


@converts("Pad")
def convert_pad(imp: Any, node: Any) -> None:
    rank = len(imp.type_of(node.input[0]).get_shape())
    if imp.opset < 11:
        pads, value, axes = list(attr(node, "pads")), attr(node, "value", 0.0), None
    else:
        pads = const_ints(imp, node, 1, "pads")
        value = const_float(imp, node, 2, "constant_value") or 0.0
        axes = const_ints(imp, node, 3, "axes")
    if axes is not None:
        full = [0] * (2 * rank)
        for i, a in enumerate(axes):
            full[a % rank] = pads[i]
            full[rank + a % rank] = pads[len(axes) + i]
        pads = full
    x = imp.value(node.input[0])
    if any(p < 0 for p in pads):
        # a negative pad crops: the slice that keeps what remains, then the positive pads
        shape = list(x.type.get_shape())
        starts = [max(0, -p) for p in pads[:rank]]
        ends = [d - max(0, -p) for d, p in zip(shape, pads[rank:], strict=True)]
        if any(e < s for s, e in zip(starts, ends, strict=True)):
            raise Unsupported(f"pads {pads} crop more than the input's {shape}")
        cropped = TensorType(x.type.get_element_type(), [e - s for s, e in zip(starts, ends, strict=True)])
        pads = [max(0, p) for p in pads]
        final = not any(pads)
        x = emit(imp, node, nn.SliceOp, [x], [imp.result_type(node.output[0]) if final else cropped],
                 {"starts": ints_attr(starts), "ends": ints_attr(ends)}, outputs=None if final else []).results[0]
        if final:
            return
    emit(imp, node, nn.PadOp, [x], same_type(imp, node), {
        "pads": ints_attr(pads),
        "mode": StringAttr(attr(node, "mode", "constant")),
        "value": float_attr(value) if value else None,
    })


# ---------------------------------------------------------------------- losses


@converts("SoftmaxCrossEntropyLoss")
def convert_sce(imp: Any, node: Any) -> None:
    weights = opt_input(node, 2)
    operands = [imp.value(node.input[0]), imp.value(node.input[1])] + [imp.value(weights) if weights else None]
    log_prob = [imp.result_type(node.output[1])] if len(node.output) > 1 and node.output[1] else []
    types = [imp.result_type(node.output[0]), log_prob]
    ignore = attr(node, "ignore_index")
    emit(imp, node, nn.SoftmaxCrossEntropyOp, operands, types, {
        "reduction": StringAttr(attr(node, "reduction", "mean")),
        "ignore_index": None if ignore is None else int_attr(ignore),
        "class_axis": _class_axis(imp, node, scores=0, labels=1) if imp.ort else None,
    })


# ---------------------------------------------------------------------- ONNX Runtime gradient ops


MS = "com.microsoft"


@converts("ReluGrad", domain=MS)
def convert_relu_grad(imp: Any, node: Any) -> None:
    emit(imp, node, grad.ReluGradOp, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node))


@converts("GeluGrad", "FastGeluGrad", "BiasGeluGrad_dX", "BiasFastGeluGrad_dX", domain=MS)
def convert_gelu_grad(imp: Any, node: Any) -> None:
    approximate = "tanh" if "Fast" in node.op_type else "none"
    x = imp.value(node.input[1])
    bias = opt_input(node, 2)
    if bias:  # the fused forward was gelu(X + B): the gradient recomputes the sum, as ORT's kernel does
        x = emit(imp, node, nn.AddOp, [x, imp.value(bias)], [x.type], outputs=[]).results[0]
    emit(imp, node, grad.GeluGradOp, [imp.value(node.input[0]), x], same_type(imp, node),
         {"approximate": StringAttr(approximate)})


@converts("SoftmaxGrad", "SoftmaxGrad_13", "LogSoftmaxGrad", "LogSoftmaxGrad_13", domain=MS)
def convert_softmax_grad(imp: Any, node: Any) -> None:
    op = grad.LogSoftmaxGradOp if node.op_type.startswith("Log") else grad.SoftmaxGradOp
    rank = len(imp.type_of(node.input[0]).get_shape())
    axis = attr(node, "axis", -1 if node.op_type.endswith("_13") else 1)
    if not node.op_type.endswith("_13") and axis % rank != rank - 1:
        raise Unsupported("softmax gradient over flattened axes is not modelled")
    emit(imp, node, op, [imp.value(node.input[0]), imp.value(node.input[1])], same_type(imp, node),
         {"axis": int_attr(axis)})


@converts("SoftmaxCrossEntropyLossGrad", domain=MS)
def convert_sce_grad(imp: Any, node: Any) -> None:
    weights = opt_input(node, 3)
    operands = [imp.value(n) for n in node.input[:3]] + [imp.value(weights) if weights else None]
    ignore = attr(node, "ignore_index")
    emit(imp, node, grad.SoftmaxCrossEntropyGradOp, operands, same_type(imp, node), {
        "reduction": StringAttr(attr(node, "reduction", "mean")),
        "ignore_index": None if ignore is None else int_attr(ignore),
        "class_axis": _class_axis(imp, node),
    })


def _class_axis(imp: Any, node: Any, scores: int = 1, labels: int = 2) -> Any:
    """The axis of the classes: ONNX's axis 1, or the last axis when the labels have the shape
    of the log-probabilities (or scores) without it (ORT training graphs of language models)."""
    log_prob = list(imp.type_of(node.input[scores]).get_shape())
    labels = list(imp.type_of(node.input[labels]).get_shape())
    if labels == log_prob[:1] + log_prob[2:]:
        return None
    last = len(log_prob) - 1
    if last > 1 and labels == log_prob[:last]:
        return int_attr(last)
    raise Unsupported(
        f"labels of shape {labels} fit neither the classes on axis 1 nor on the last axis of "
        f"log-probabilities of shape {log_prob}"
    )


@converts("AveragePoolGrad", "MaxPoolGrad", domain=MS)
@converts("AveragePoolGrad", "MaxPoolGrad")  # ORT registers them in the standard domain too
def convert_pool_grad(imp: Any, node: Any) -> None:
    props = _pool_grad_properties(node)
    t = same_type(imp, node)
    if node.op_type == "AveragePoolGrad":
        if attr(node, "count_include_pad", 0):
            props["count_include_pad"] = bool_attr(True)
        emit(imp, node, grad.AvgPoolGradOp, [imp.value(node.input[0])], t, props)
    else:
        # ORT passes MaxPool's indices; our op re-derives the arg-max from the pooled input
        emit(imp, node, grad.MaxPoolGradOp, [imp.value(node.input[0]), imp.value(node.input[1])], t, props)


def _pool_grad_properties(node: Any) -> dict[str, Any]:
    kernel = list(required_attr(node, "kernel_shape"))
    n = len(kernel)
    props: dict[str, Any] = {"kernel_shape": ints_attr(kernel)}
    strides = list(attr(node, "strides", [1] * n))
    pads = list(attr(node, "pads", [0] * (2 * n)))
    if any(s != 1 for s in strides):
        props["strides"] = ints_attr(strides)
    if any(p != 0 for p in pads):
        props["pads"] = ints_attr(pads)
    if attr(node, "auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise Unsupported("auto_pad SAME_* on a pooling gradient is not modelled")
    if attr(node, "ceil_mode", 0):
        props["ceil_mode"] = bool_attr(True)
    return props


@converts("ConvGrad", domain=MS)
def convert_conv_grad(imp: Any, node: Any) -> None:
    w = imp.type_of(node.input[2]).get_shape()
    props = conv_geometry(imp, node, len(w) - 2, w[2:], data_input=1)
    dy, x, wv = (imp.value(n) for n in node.input[:3])
    if node.output[0]:
        emit(imp, node, grad.ConvInputGradOp, [dy, wv], [imp.result_type(node.output[0])], props, outputs=node.output[:1])
    if len(node.output) > 1 and node.output[1]:
        emit(imp, node, grad.ConvWeightGradOp, [dy, x], [imp.result_type(node.output[1])], props, outputs=node.output[1:2])
    if len(node.output) > 2 and node.output[2]:
        emit(imp, node, grad.ConvBiasGradOp, [dy], [imp.result_type(node.output[2])], outputs=node.output[2:3])


@converts("LayerNormalizationGrad", domain=MS)
def convert_layer_norm_grad(imp: Any, node: Any) -> None:
    types = [imp.result_type(o) for o in node.output[:3]]
    emit(imp, node, grad.LayerNormGradOp, [imp.value(n) for n in node.input[:3]], types, {
        "axis": int_attr(attr(node, "axis", -1)),
        "epsilon": float_attr(attr(node, "epsilon", 1e-5)),
    })


@converts("BatchNormalizationGrad", domain=MS)
def convert_batch_norm_grad(imp: Any, node: Any) -> None:
    types = [imp.result_type(o) for o in node.output[:3]]
    emit(imp, node, grad.BatchNormGradOp, [imp.value(n) for n in node.input[:3]], types, {
        "epsilon": float_attr(attr(node, "epsilon", 1e-5)),
        "training": bool_attr(True),
    })


@converts("GatherGrad", domain=MS)
def convert_gather_grad(imp: Any, node: Any) -> None:
    shape = const_ints(imp, node, 0, "shape")
    dy = imp.value(node.input[2])
    t = TensorType(dy.type.get_element_type(), shape)
    emit(imp, node, grad.GatherGradOp, [dy, imp.value(node.input[1])], [t], {"axis": int_attr(attr(node, "axis", 0))})


@converts("InPlaceAccumulator", "InPlaceAccumulatorV2", domain=MS)
def convert_accumulator(imp: Any, node: Any) -> None:
    """buffer += value, in place. V2's overwrite flag (`lazy_reset_grad` in generate_artifacts'
    graphs) makes the first step after a reset a copy instead: the same bytes, no additions; the
    step is costed as the accumulation. V1's update signal (skip the update) is refused."""
    v2 = node.op_type == "InPlaceAccumulatorV2"
    if not v2 and len(node.input) > 2 and node.input[2]:
        raise Unsupported("the update signal input is not modelled")
    buffer = imp.value(node.input[0])
    emit(imp, node, train.AccumulateOp, [buffer, imp.value(node.input[1])], [], outputs=[])
    # the op updates the buffer in place; later readers of the output see the buffer
    outputs = list(node.output)
    if v2:
        if outputs and outputs[0]:  # `updated_flag`: a boolean the op sets to true
            import numpy as np

            flag = imp.result_type(outputs[0])
            imp.bind(outputs[0], imp.materialize(outputs[0], np.ones(flag.get_shape(), bool), flag))
        outputs = outputs[1:]
    for out in outputs[:1]:
        imp.bind(out, buffer)


@converts("SGDOptimizer", domain=MS)
def convert_sgd_optimizer(imp: Any, node: Any) -> None:
    lr = const_float(imp, node, 0, "learning rate")
    param = imp.value(node.input[1])
    emit(imp, node, train.SgdOp, [param, imp.value(node.input[2])], [], {"lr": float_attr(lr)}, outputs=[])
    imp.bind(node.output[0], param)


@converts("AdamOptimizer", domain=MS)
def convert_adam_optimizer(imp: Any, node: Any) -> None:
    lr = const_float(imp, node, 0, "learning rate")
    param, g, m, v = (imp.value(n) for n in node.input[2:6])
    step = imp.value(node.input[1])
    if step.type.get_shape() != () or not isinstance(step.type, TensorType):
        raise Unsupported("the update count must be a scalar")
    if attr(node, "do_bias_correction", 1) != 1:
        raise Unsupported("Adam without bias correction is not modelled")
    op_class = train.AdamWOp if attr(node, "weight_decay_mode", 0) == 1 else train.AdamOp
    emit(imp, node, op_class, [param, g, m, v, step], [], {
        "lr": float_attr(lr),
        "beta1": float_attr(attr(node, "alpha", 0.9)),
        "beta2": float_attr(attr(node, "beta", 0.999)),
        "eps": float_attr(attr(node, "epsilon", 1e-8)),
        "weight_decay": float_attr(attr(node, "lambda", 0.0)),
    }, outputs=[])
    for out, value in zip(node.output, [step, m, v, param], strict=False):
        if out:
            imp.bind(out, value)
