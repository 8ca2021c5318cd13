"""Per-op and per-phase accounting of a training step: FLOPs, op counts and memory by category.

FLOPs (`flops_by_phase`, `per_op_rows`) come in two classes:

- `matmul_conv`: 2 x the multiply-accumulates of convolution and matrix-product ops (the
  `LoopNestOp`s), forward and gradient (`nn.conv`, `nn.conv_transpose`, `nn.gemm`, `nn.matmul`, `grad.conv_input`,
  `grad.conv_weight`, `grad.matmul_lhs`, `grad.matmul_rhs`). This is the convention of
  PyTorch's `FlopCounterMode`, which counts only these ops; a GEMM's bias addition is not
  counted (as `aten.addmm`'s count in FlopCounterMode). For a 3-D convolution, which the
  cost model's loop nest does not describe, the MACs are computed directly.
- `other`: the arithmetic of every other MONET op, from its cost-model vector signature
  (`VectorSig.ops` = output elements x ops per element x window; the ops per element are
  each op's `VectorWork` trait, `dialects.interfaces`), rounded to an integer per op. Free views
  (`nn.reshape`) and `nn.constant` count 0, so do ops of other dialects.

Each op counts in the phase it carries (`forward`, `backward`, `optimizer`, `recompute`);
every phase is present in the results, with zeros when it has no op.

Memory (`memory_summary`), in bytes (`monet_ir.types.tensor_bytes`; booleans take one byte):

- `parameter_bytes`: trainable parameters (`monet.param` + `monet.trainable` arguments);
  PyTorch's `param_bytes`.
- `buffer_bytes`: non-trainable `monet.param` arguments (batch-norm running statistics, frozen
  parameters); PyTorch's `buffer_bytes` (which also counts BN's `num_batches_tracked`, absent
  from ONNX).
- `gradient_bytes`: one gradient per trainable parameter that has one: the `monet.grad`
  results of the step (after `autodiff`) and the gradient operands of `train` optimizer ops
  (after `insert-optimizer`), each parameter counted once; 0 before `autodiff`.
- `optimizer_state_bytes`: `monet.state` arguments (momentum buffers, Adam moments and steps).
- `input_bytes`: `monet.input` arguments (the batch).
- `saved_activation_bytes`, `saved_input_bytes`, `saved_param_bytes`: bytes kept from the
  forward to the backward pass, by kind (`monet_ir.analysis.saved`); only the first is new
  memory, the other two alias inputs and parameters.

Under a precision policy (`monet_ir.precision.PrecisionPolicy`) each category takes its tensor
class's format, stored exactly (MX: elements plus one E8M0 scale per block): parameters and
buffers `master`, gradients `gradients`, optimizer state `state`, inputs and saved activations
`activations`, saved parameters `weights`; and `weight_copy_bytes` is the trainable
parameters in the `weights` format when that differs from `master` (the quantized copy the MAC
arrays read, beside the master weights the optimizer updates).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation

from dialects import train
from dialects.base import PHASES, MonetOp, is_float_type, num_elements, shape_of
from monet_ir import graph
from monet_ir.analysis.saved import saved_activations, saved_bytes_by_kind
from monet_ir.analysis.ir_signatures import NoSignature, signature_of
from monet_ir.cost.signature import LoopNestSig
from monet_ir.precision import PrecisionPolicy
from monet_ir.types import tensor_bytes

FLOP_CLASSES = ("matmul_conv", "other")
GRAD_ATTR = "monet.grad"


def op_flops(op: Operation) -> dict[str, int]:
    """{"matmul_conv": int, "other": int} of one op (see the module docstring)."""
    if not isinstance(op, MonetOp):
        return {"matmul_conv": 0, "other": 0}
    try:
        sig = signature_of(op)
    except NoSignature:  # a loop nest the cost model cannot describe (a 3-D convolution): its MACs
        return {"matmul_conv": 2 * op.direct_macs(), "other": 0}
    if sig is None:
        return {"matmul_conv": 0, "other": 0}
    if isinstance(sig, LoopNestSig):
        return {"matmul_conv": 2 * sig.macs, "other": 0}
    return {"matmul_conv": 0, "other": int(round(sig.ops))}


def _empty_flops() -> dict[str, dict[str, int]]:
    return {phase: dict.fromkeys(FLOP_CLASSES, 0) for phase in PHASES}


def flops_by_phase(fn: func.FuncOp) -> dict[str, dict[str, int]]:
    """{phase: {"matmul_conv": int, "other": int}} for the four phases."""
    totals = _empty_flops()
    for op in graph.compute_ops(fn):
        counts = op_flops(op)
        phase = totals.setdefault(graph.op_phase(op), dict.fromkeys(FLOP_CLASSES, 0))
        for key in FLOP_CLASSES:
            phase[key] += counts[key]
    return totals


def op_counts_by_phase(fn: func.FuncOp) -> dict[str, int]:
    """{phase: number of ops} for the four phases (the `func.return` is not counted)."""
    counts = dict.fromkeys(PHASES, 0)
    for op in graph.compute_ops(fn):
        phase = graph.op_phase(op)
        counts[phase] = counts.get(phase, 0) + 1
    return counts


def per_op_rows(fn: func.FuncOp) -> list[dict[str, Any]]:
    """One row per op in program order: name (the op's node), op, phase, matmul_conv, other."""
    rows = []
    for op in graph.compute_ops(fn):
        counts = op_flops(op)
        rows.append({
            "name": graph.op_node(op),
            "op": op.name,
            "phase": graph.op_phase(op),
            "matmul_conv": counts["matmul_conv"],
            "other": counts["other"],
        })
    return rows


def _sizer(bits, cls: str = "activations"):
    """Storage bytes of a tensor type, with float elements `bits` wide when given (a report's
    `--precision`), or in the format of tensor class `cls` under a precision policy."""
    if isinstance(bits, PrecisionPolicy):
        fmt = bits.format(cls)
        return lambda t: fmt.storage_bytes(num_elements(shape_of(t))) if is_float_type(t) else tensor_bytes(t)
    if bits is None:
        return tensor_bytes
    from monet_ir.analysis.ir_signatures import tensor_bytes_at

    return lambda t: tensor_bytes_at(t, bits)


def gradient_bytes(fn: func.FuncOp, bits=None) -> int:
    """Bytes of the trainable parameters' gradients (see the module docstring)."""
    tensor_bytes = _sizer(bits, "gradients")
    infos = graph.arg_infos(fn)
    grads: dict[str, int] = {}
    if fn.res_attrs is not None:
        for attrs, t in zip(fn.res_attrs.data, fn.function_type.outputs.data):
            name = attrs.data.get(GRAD_ATTR)
            if name is not None:
                grads[getattr(name, "data", str(name))] = tensor_bytes(t)
    for op in fn.walk():
        if isinstance(op, train.OptimizerOp):
            p = op.operands[0]
            if isinstance(p, BlockArgument) and p.block is fn.body.block and infos[p.index].role == "param":
                key = infos[p.index].name
            else:
                key = f"<operand of {op.name} #{id(op)}>"
            grads.setdefault(key, tensor_bytes(op.operands[1].type))
    return sum(grads.values())


def memory_summary(fn: func.FuncOp, bits=None) -> dict[str, int]:
    """Bytes by category (see the module docstring); `bits` sets the width of float tensors
    (or is a precision policy)."""
    sizers = {cls: _sizer(bits, cls) for cls in ("master", "state", "activations", "gradients", "weights")}
    summary = dict.fromkeys(
        ("parameter_bytes", "buffer_bytes", "gradient_bytes", "optimizer_state_bytes", "input_bytes"), 0)
    copies = 0
    for info, arg in zip(graph.arg_infos(fn), fn.body.block.args):
        if info.role == "param":
            summary["parameter_bytes" if info.trainable else "buffer_bytes"] += sizers["master"](arg.type)
            copies += sizers["weights"](arg.type) if info.trainable else 0
        elif info.role == "state":
            summary["optimizer_state_bytes"] += sizers["state"](arg.type)
        elif info.role == "input":
            summary["input_bytes"] += sizers["activations"](arg.type)
    summary["gradient_bytes"] = gradient_bytes(fn, bits)
    saved = {"activation": 0, "input": 0, "param": 0}
    seen = set()
    for value in saved_activations(fn):
        if value.storage not in seen:
            seen.add(value.storage)
            sizer = sizers["weights" if value.kind == "param" else "activations"]
            saved[value.kind] = saved.get(value.kind, 0) + sizer(value.storage.type)
    summary["saved_activation_bytes"] = saved["activation"]
    summary["saved_input_bytes"] = saved["input"]
    summary["saved_param_bytes"] = saved["param"]
    if isinstance(bits, PrecisionPolicy):
        summary["weight_copy_bytes"] = copies if bits.format("weights") != bits.format("master") else 0
    return summary
