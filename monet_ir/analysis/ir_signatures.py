"""From MONET IR ops to the cost model's signatures.

`signature_of(op, bits=None)` describes one op of a training step as the cost model's
signature, from the facts on the op's class (`dialects.interfaces`): a `LoopNestSig` for a
`LoopNestOp` (convolution- and matrix-product-like ops, forward and their gradients: the same
loop nest with the output in another role), a `VectorSig` from an op's `VectorWork` trait
(everything else), None for `CostFree` ops (views, constants: they move no data and do no
arithmetic). An op with none of these is an error (`NoCostInterface`), never priced by a guess.

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

from dialects.base import is_float_type, num_elements, shape_of
from dialects.interfaces import CostFree, InPlaceUpdate, LoopNestOp, VectorWork
from monet_ir import graph
from monet_ir.errors import MonetError
from monet_ir.cost.conv_nest import NotAConvNest
from monet_ir.cost.signature import LoopNestSig, VectorSig, psum_bits_for
from monet_ir.precision import NumberFormat, PrecisionPolicy
from monet_ir.types import bits_of, tensor_bytes


class NoSignature(Exception):
    """The op has a form the cost model does not describe (e.g. a 3-D convolution)."""


class NoCostInterface(MonetError):
    """An op without a cost interface (`dialects.interfaces`): nothing says how to price it."""


def signature_of(op: Operation, bits: int | None = None) -> LoopNestSig | VectorSig | None:
    """The cost-model signature of one op, from its cost interface (`dialects.interfaces`): a
    loop nest, a vector op's work, or None for ops that move no data (`CostFree`: views,
    constants). An op with none of them is a `NoCostInterface` error.

    `bits` overrides the element width of every float tensor (the `--precision` of a report:
    the same step computed in bf16 or int8); integer tensors (labels, indices) keep theirs."""
    if isinstance(op, LoopNestOp):
        sig = loop_nest_of(op)
        if isinstance(bits, PrecisionPolicy):
            return _policy_nest(op, sig, bits)
        if bits is not None:
            sig = replace(sig, w_bits=bits, i_bits=bits, o_bits=bits, psum_bits=psum_bits_for(bits))
        return sig
    if _cost_free(op):
        return None
    return vector_signature(op, bits)


def loop_nest_of(op: LoopNestOp) -> LoopNestSig:
    """The op's loop nest at its own element widths (`NoSignature` when the nest cannot describe it)."""
    try:
        return op.loop_nest()
    except NotAConvNest as error:
        raise NoSignature(f"{op.name}: {error}") from None


def _cost_free(op: Operation) -> bool:
    get_trait = getattr(op, "get_trait", None)
    return get_trait is not None and get_trait(CostFree) is not None


def vector_work(op: Operation) -> VectorWork:
    """The op's `VectorWork` trait; `NoCostInterface` when it has none (and is no loop nest)."""
    work = op.get_trait(VectorWork) if hasattr(op, "get_trait") else None
    if work is None:
        raise NoCostInterface(f"{op.name} has no cost interface: it is neither a loop nest, nor a vector op "
                              f"(VectorWork), nor free (CostFree); see dialects/interfaces.py")
    return work


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


def _policy_nest(op: LoopNestOp, sig: LoopNestSig, policy: PrecisionPolicy) -> LoopNestSig:
    """`sig` with each role at its class's format: amortized bits as stored and moved, element
    bits at the multipliers, FP32 partial sums when an operand is MX (MX accumulates in FP32)."""
    formats = [value_format(v, policy, stored=False) for v in op.nest_values()]
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


# ---------------------------------------------------------------------- vector ops


def vector_signature(op: Operation, bits: int | PrecisionPolicy | None = None) -> VectorSig:
    """A vector op's signature from its `VectorWork` (kind, work per element, elements, window)
    and its operands' and results' bytes at precision `bits`."""
    work = vector_work(op)
    reads = sum(value_bytes(v, bits) for v in op.operands)
    writes = sum(value_bytes(r, bits) for r in op.results)
    outputs = list(op.results) or [op.operands[0]]  # in-place updates write their first operand
    if not op.results and isinstance(op, InPlaceUpdate):
        writes = sum(value_bytes(v, bits) for v in op.updated_operands())
    elements = work.elements(op)
    if elements is None:
        elements = num_elements(shape_of(outputs[0].type))
    window, window_shape = work.window(op, elements)
    widths = [bits_of(v.type.get_element_type()) for v in op.operands if is_float_type(v.type)]
    if isinstance(bits, PrecisionPolicy):
        formats = [value_format(v, bits) for v in (*op.operands, *op.results)]
        width = max((f.element_bits for f in formats if f is not None), default=max(widths, default=32))
    else:
        width = bits if bits is not None else max(widths, default=32)
    return VectorSig(kind=work.kind, elements=elements, ops_per_element=work.work(op), bytes_read=reads,
                     bytes_written=writes, window=window, bits=width, window_shape=window_shape)


@lru_cache(maxsize=65536)
def tensor_bytes_at(t, bits: int) -> int:
    """Storage bytes of a tensor type when its float elements are `bits` wide."""
    if not is_float_type(t):
        return tensor_bytes(t)
    return (num_elements(shape_of(t)) * bits + 7) // 8


def matmul_conv_flops(op: Operation) -> int:
    """2 x multiply-adds of convolution and matrix-product ops; 0 for every other op."""
    return 2 * loop_nest_of(op).macs if isinstance(op, LoopNestOp) else 0
