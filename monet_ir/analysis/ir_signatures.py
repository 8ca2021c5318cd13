"""From MONET IR ops to the cost model's signatures.

`signature_of(op, bits=None)` describes one op of a training step as a `LoopNestSig`
(convolution- and matrix-product-like ops, forward and their gradients: the same loop nest with
the output in another role) or a `VectorSig` (everything else). Pure views (`nn.reshape`) and
`nn.constant` have no signature: they move no data and do no arithmetic.

`bits` is the report's precision: None (each tensor's own element type), a width in bits (every
float tensor), or a `PrecisionPolicy` (one format per tensor class, MX formats included). Under
a policy each value has a class (`value_class`): parameters are `master` where they are stored
and `weights` where a contraction reads them, optimizer state `state`, inputs and forward
results `activations`, backward results `gradients`, optimizer results `master`; its bytes are
its format's exact storage (`value_bytes`: MX elements plus one scale per block), its loop-nest
width the format's amortized bits (8.25 for MXFP8 at k = 32) and its MAC width the element bits.

The MAC count of a loop nest is also the `matmul_conv` FLOP count (2 per MAC), the convention
of PyTorch's FlopCounterMode.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from xdsl.ir import BlockArgument, Operation, SSAValue

from dialects import grad, mx, nn, train
from dialects.base import bool_of, ints_of, is_float_type, num_elements, shape_of
from monet_ir import graph
from monet_ir.cost.conv_nest import NotAConvNest, conv_loop_nest
from monet_ir.cost.signature import LoopNestSig, VectorSig
from monet_ir.precision import NumberFormat, PrecisionPolicy
from monet_ir.types import bits_of, tensor_bytes

# Arithmetic ops per output element of vector ops (multiply, add, compare, exp... each count 1;
# transcendental functions count as the handful of ops a vector unit spends on them).
OPS_PER_ELEMENT: dict[type[Operation], float] = {
    nn.ReluOp: 1, nn.LeakyReluOp: 2, nn.ClipOp: 2, nn.SigmoidOp: 4, nn.HardSigmoidOp: 3,
    nn.HardSwishOp: 4, nn.TanhOp: 5, nn.ErfOp: 8, nn.GeluOp: 8, nn.SqrtOp: 1, nn.NegOp: 1,
    nn.ExpOp: 4, nn.LogOp: 4, nn.NotOp: 1, nn.SoftmaxOp: 7, nn.LogSoftmaxOp: 7,
    nn.AddOp: 1, nn.SubOp: 1, nn.MulOp: 1, nn.DivOp: 1, nn.PowOp: 4, nn.EqualOp: 1, nn.AndOp: 1,
    nn.WhereOp: 1, nn.CastOp: 1, nn.BatchNormOp: 6, nn.LayerNormOp: 8, nn.ReduceSumOp: 1,
    nn.ReduceMeanOp: 1, nn.DropoutOp: 3, nn.LessOp: 1, nn.GreaterOp: 1, nn.RandomOp: 3, nn.CumSumOp: 1,
    nn.ResizeOp: 3, grad.ResizeGradOp: 3, nn.SoftmaxCrossEntropyOp: 8, nn.MseLossOp: 3,
    grad.ReluGradOp: 1, grad.LeakyReluGradOp: 2, grad.ClipGradOp: 2, grad.SigmoidGradOp: 3,
    grad.HardSigmoidGradOp: 2, grad.HardSwishGradOp: 4, grad.TanhGradOp: 3, grad.ErfGradOp: 6,
    grad.GeluGradOp: 12, grad.SqrtGradOp: 2, grad.ExpGradOp: 1, grad.LogGradOp: 1,
    grad.SoftmaxGradOp: 4, grad.LogSoftmaxGradOp: 4, grad.DropoutGradOp: 2, grad.DivRhsGradOp: 3,
    grad.PowBaseGradOp: 6, grad.PowExponentGradOp: 6, grad.UnbroadcastOp: 1, grad.ConvBiasGradOp: 1,
    grad.BatchNormGradOp: 10, grad.LayerNormGradOp: 12, grad.ReduceSumGradOp: 0,
    grad.ReduceMeanGradOp: 1, grad.SliceGradOp: 0, grad.GatherGradOp: 1,
    grad.SoftmaxCrossEntropyGradOp: 3, grad.MseLossGradOp: 2,
    train.SgdOp: 3, train.MomentumOp: 5, train.AdamOp: 12, train.AdamWOp: 13, train.AccumulateOp: 1,
    # an MX cast: |x| and the block's running max, x / scale, round to the element, clamp (the
    # scale's exponent, once per block, is noise); a requantize decodes (x * scale) first
    mx.QuantizeOp: 4, mx.RequantizeOp: 5,
}

VECTOR_KIND: dict[type[Operation], str] = {
    nn.SoftmaxOp: "softmax", nn.LogSoftmaxOp: "softmax", grad.SoftmaxGradOp: "softmax",
    grad.LogSoftmaxGradOp: "softmax", nn.BatchNormOp: "norm", nn.LayerNormOp: "norm",
    grad.BatchNormGradOp: "norm", grad.LayerNormGradOp: "norm", nn.ReduceSumOp: "reduction",
    nn.ReduceMeanOp: "reduction", grad.UnbroadcastOp: "reduction", grad.ConvBiasGradOp: "reduction",
    nn.MaxPoolOp: "pool", nn.AvgPoolOp: "pool", nn.GlobalAvgPoolOp: "pool", grad.MaxPoolGradOp: "pool",
    grad.AvgPoolGradOp: "pool", grad.GlobalAvgPoolGradOp: "pool", nn.SoftmaxCrossEntropyOp: "loss",
    nn.MseLossOp: "loss", grad.SoftmaxCrossEntropyGradOp: "loss", grad.MseLossGradOp: "loss",
    train.SgdOp: "optimizer", train.MomentumOp: "optimizer", train.AdamOp: "optimizer",
    train.AdamWOp: "optimizer", train.AccumulateOp: "elementwise",
    nn.TransposeOp: "data_movement", nn.ExpandOp: "data_movement", nn.ConcatOp: "data_movement",
    nn.SplitOp: "data_movement", nn.SliceOp: "data_movement", nn.GatherOp: "data_movement", nn.GatherElementsOp: "data_movement",
    nn.GatherNDOp: "data_movement", nn.ScatterNDOp: "data_movement",
    nn.PadOp: "data_movement", grad.SliceGradOp: "data_movement", grad.GatherGradOp: "data_movement",
    grad.ReduceSumGradOp: "data_movement", grad.ReduceMeanGradOp: "data_movement",
}

FREE_OPS = (nn.ReshapeOp, nn.ConstantOp)


class NoSignature(Exception):
    """The op has a form the cost model does not describe (e.g. a 3-D convolution)."""


def signature_of(op: Operation, bits: int | None = None) -> LoopNestSig | VectorSig | None:
    """The cost-model signature of one op; None for ops that move no data (views, constants).

    `bits` overrides the element width of every float tensor (the `--precision` of a report:
    the same step computed in bf16 or int8); integer tensors (labels, indices) keep theirs."""
    if isinstance(op, FREE_OPS):
        return None
    builder = LOOP_NESTS.get(type(op))
    if builder is not None:
        sig = builder(op)
        if isinstance(bits, PrecisionPolicy):
            return _policy_nest(op, sig, bits)
        if bits is not None:
            sig = replace(sig, w_bits=bits, i_bits=bits, o_bits=bits, psum_bits=psum_bits_for(bits))
        return sig
    return vector_signature(op, bits)


def value_class(value: SSAValue, stored: bool = True) -> str:
    """The tensor class of a value under a precision policy (see the module docstring); a
    parameter is `master` as `stored`, `weights` as a contraction's operand."""
    if isinstance(value, BlockArgument):
        info = graph.arg_info(value)
        role = info.role if info is not None else ""
        if role == "param":
            return "master" if stored else "weights"
        return "state" if role == "state" else "activations"
    owner = value.owner
    mx_class = getattr(owner, "mx_class", None)
    if mx_class is not None:
        return mx_class()
    phase = graph.op_phase(owner)
    return {"backward": "gradients", "optimizer": "master"}.get(phase, "activations")


def value_format(value: SSAValue, policy: PrecisionPolicy, stored: bool = True) -> NumberFormat | None:
    """The format of a float value under `policy` (None: not a float tensor, it keeps its type);
    an MX cast op's result has the format the op names."""
    if not is_float_type(value.type):
        return None
    owner = value.owner
    named = getattr(owner, "mx_format", None) if not isinstance(value, BlockArgument) else None
    if named is not None:
        return named(policy)
    return policy.format(value_class(value, stored))


def value_bytes(value: SSAValue, bits) -> int:
    """Storage bytes of a value at precision `bits` (None, a width, or a policy); an MX cast's
    result in its own format whatever `bits`."""
    named = getattr(value.owner, "mx_format", None) if not isinstance(value, BlockArgument) else None
    if named is not None:
        return named(bits).storage_bytes(num_elements(shape_of(value.type)))
    if isinstance(bits, PrecisionPolicy):
        fmt = value_format(value, bits)
        if fmt is None:
            return tensor_bytes(value.type)
        return fmt.storage_bytes(num_elements(shape_of(value.type)))
    return tensor_bytes(value.type) if bits is None else tensor_bytes_at(value.type, bits)


def _roles(op: Operation) -> tuple[SSAValue, SSAValue, SSAValue]:
    """The values in the roles W, I, O of a loop-nest op."""
    if isinstance(op, nn.ConvOp):
        return op.weight, op.input, op.result
    if isinstance(op, grad.ConvInputGradOp):
        return op.weight, op.result, op.grad
    if isinstance(op, grad.ConvWeightGradOp):
        return op.result, op.input, op.grad
    if isinstance(op, nn.ConvTransposeOp):
        return op.weight, op.result, op.input
    if isinstance(op, nn.MatMulOp | nn.GemmOp):
        return op.rhs, op.lhs, op.result
    if isinstance(op, grad.MatMulLhsGradOp):
        return op.rhs, op.result, op.grad
    return op.result, op.lhs, op.grad  # grad.MatMulRhsGradOp


def _policy_nest(op: Operation, sig: LoopNestSig, policy: PrecisionPolicy) -> LoopNestSig:
    """`sig` with each role at its class's format: amortized bits as stored and moved, element
    bits at the multipliers, FP32 partial sums when an operand is MX (MX accumulates in FP32)."""
    formats = [value_format(v, policy, stored=False) for v in _roles(op)]
    widths = [sig.w_bits, sig.i_bits, sig.o_bits]
    stored = [f.amortized_bits if f is not None else w for f, w in zip(formats, widths)]
    elements = [f.element_bits if f is not None else w for f, w in zip(formats, widths)]
    inputs = [i for i, role in enumerate("WIO") if role != sig.output_operand]
    widest = max(inputs, key=lambda i: elements[i])  # the W role first on a tie
    mac_format = formats[widest].name if formats[widest] is not None and formats[widest].is_mx else ""
    any_mx = any(f is not None and f.is_mx for f in formats)
    return replace(sig, w_bits=stored[0], i_bits=stored[1], o_bits=stored[2],
                   psum_bits=32 if any_mx else psum_bits_for(max(elements)), mac_width=elements[widest],
                   mac_format=mac_format)


def psum_bits_for(bits: int) -> int:
    """Partial-sum width: ZigZag's 16-bit accumulators for 8-bit operands, else the operand width
    (floating-point accumulation in the operand format)."""
    return max(2 * bits, 16) if bits <= 8 else bits


# ---------------------------------------------------------------------- loop nests


def _conv_nest(kind: str, x: tuple[int, ...], w: tuple[int, ...], op, output: str, bits: tuple[int, int, int]) -> LoopNestSig:
    strides, pads, dilations, group = op.geometry(len(x) - 2)
    try:
        return conv_loop_nest(kind, x, w, strides, pads, dilations, group, output, (*bits, psum_bits_for(max(bits))))
    except NotAConvNest as error:
        raise NoSignature(f"{op.name}: {error}") from None


def _bits(*types) -> tuple[int, ...]:
    return tuple(bits_of(t.get_element_type()) for t in types)


def conv_forward(op: nn.ConvOp) -> LoopNestSig:
    x, w = shape_of(op.input.type), shape_of(op.weight.type)
    return _conv_nest("conv", x, w, op, "O", _bits(op.weight.type, op.input.type, op.result.type))


def conv_input_grad(op: grad.ConvInputGradOp) -> LoopNestSig:
    x, w = shape_of(op.result.type), shape_of(op.weight.type)
    return _conv_nest("conv_grad_input", x, w, op, "I", _bits(op.weight.type, op.result.type, op.grad.type))


def conv_weight_grad(op: grad.ConvWeightGradOp) -> LoopNestSig:
    x, w = shape_of(op.input.type), shape_of(op.result.type)
    return _conv_nest("conv_grad_weight", x, w, op, "W", _bits(op.result.type, op.input.type, op.grad.type))


def conv_transpose(op: nn.ConvTransposeOp) -> LoopNestSig:
    # conv_transpose(x, w) is the input gradient of the convolution of y (the result) with w:
    # that convolution's input is y, its weight w [Cin, Cout/g, ...], its output x
    y, w = shape_of(op.result.type), shape_of(op.weight.type)
    return _conv_nest("conv_transpose", y, w, op, "I", _bits(op.weight.type, op.result.type, op.input.type))


def _matmul_nest(kind: str, a: tuple[int, ...], b: tuple[int, ...], trans_a: bool, trans_b: bool,
                 output: str, bits: tuple[int, int, int]) -> LoopNestSig:
    a, b = list(a), list(b)
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    if trans_a:
        a[-1], a[-2] = a[-2], a[-1]
    if trans_b:
        b[-1], b[-2] = b[-2], b[-1]
    m, k_red, n = a[-2], a[-1], b[-1]
    batch_a, batch_b = num_elements(a[:-2]), num_elements(b[:-2])
    if batch_b == 1:
        # a weight shared across the batch: the batch rows are more rows of the product
        m, groups = m * batch_a, 1
    else:
        groups = max(batch_a, batch_b)
    w_bits, i_bits, o_bits = bits
    return LoopNestSig(
        kind=kind, b=m, g=groups, k=n, c=k_red, w_bits=w_bits, i_bits=i_bits, o_bits=o_bits,
        psum_bits=psum_bits_for(max(bits)), output_operand=output,
    )


def matmul_forward(op: nn.MatMulOp | nn.GemmOp) -> LoopNestSig:
    kind = "gemm" if isinstance(op, nn.GemmOp) else "matmul"
    return _matmul_nest(kind, shape_of(op.lhs.type), shape_of(op.rhs.type), bool_of(op.trans_a), bool_of(op.trans_b),
                        "O", _bits(op.rhs.type, op.lhs.type, op.result.type))


def matmul_lhs_grad(op: grad.MatMulLhsGradOp) -> LoopNestSig:
    return _matmul_nest("matmul_grad_lhs", shape_of(op.result.type), shape_of(op.rhs.type), bool_of(op.trans_a),
                        bool_of(op.trans_b), "I", _bits(op.rhs.type, op.result.type, op.grad.type))


def matmul_rhs_grad(op: grad.MatMulRhsGradOp) -> LoopNestSig:
    return _matmul_nest("matmul_grad_rhs", shape_of(op.lhs.type), shape_of(op.result.type), bool_of(op.trans_a),
                        bool_of(op.trans_b), "W", _bits(op.result.type, op.lhs.type, op.grad.type))


LOOP_NESTS = {
    nn.ConvOp: conv_forward,
    nn.ConvTransposeOp: conv_transpose,
    grad.ConvInputGradOp: conv_input_grad,
    grad.ConvWeightGradOp: conv_weight_grad,
    nn.MatMulOp: matmul_forward,
    nn.GemmOp: matmul_forward,
    grad.MatMulLhsGradOp: matmul_lhs_grad,
    grad.MatMulRhsGradOp: matmul_rhs_grad,
}


# ---------------------------------------------------------------------- vector ops


def vector_signature(op: Operation, bits: int | PrecisionPolicy | None = None) -> VectorSig:
    reads = sum(value_bytes(v, bits) for v in op.operands)
    writes = sum(value_bytes(r, bits) for r in op.results)
    outputs = list(op.results) or [op.operands[0]]  # in-place updates write their first operand
    if not op.results and isinstance(op, train.OptimizerOp | train.AccumulateOp):
        written = [op.operands[0], *getattr(op, "state_operands", lambda: ())()]
        writes = sum(value_bytes(v, bits) for v in written)
    elements = num_elements(shape_of(outputs[0].type))
    if VECTOR_KIND.get(type(op)) == "loss":
        # a loss reduces its scores to a scalar: the work is per score, not per result
        elements = num_elements(shape_of(op.operands[0].type))
        if isinstance(op, grad.SoftmaxCrossEntropyGradOp | grad.MseLossGradOp):
            elements = num_elements(shape_of(op.operands[1].type))
    window, window_shape = 1, ()
    if isinstance(op, nn.PoolOp | grad.PoolGradOp):
        window_shape = tuple(ints_of(op.kernel_shape))
        window = num_elements(window_shape)
    elif isinstance(op, nn.GlobalAvgPoolOp):
        window_shape = tuple(shape_of(op.input.type)[2:])
        window = num_elements(window_shape)
    elif isinstance(op, nn.ReduceSumOp | nn.ReduceMeanOp | grad.UnbroadcastOp | grad.ConvBiasGradOp):
        # a reduction does one op per element it reads
        source = op.operands[0]
        window = max(1, num_elements(shape_of(source.type)) // max(1, elements))
    kind = VECTOR_KIND.get(type(op), "elementwise")
    ops = OPS_PER_ELEMENT.get(type(op), 0.0 if kind == "data_movement" else 1.0)
    widths = [bits_of(v.type.get_element_type()) for v in op.operands if is_float_type(v.type)]
    if isinstance(bits, PrecisionPolicy):
        formats = [value_format(v, bits) for v in (*op.operands, *op.results)]
        width = max((f.element_bits for f in formats if f is not None), default=max(widths, default=32))
    else:
        width = bits if bits is not None else max(widths, default=32)
    return VectorSig(kind=kind, elements=elements, ops_per_element=ops, bytes_read=reads, bytes_written=writes,
                     window=window, bits=width, window_shape=window_shape)


@lru_cache(maxsize=65536)
def tensor_bytes_at(t, bits: int) -> int:
    """Storage bytes of a tensor type when its float elements are `bits` wide."""
    if not is_float_type(t):
        return tensor_bytes(t)
    return (num_elements(shape_of(t)) * bits + 7) // 8


def matmul_conv_flops(op: Operation) -> int:
    """2 x multiply-adds of convolution and matrix-product ops; 0 for every other op."""
    builder = LOOP_NESTS.get(type(op))
    return 2 * builder(op).macs if builder is not None else 0
