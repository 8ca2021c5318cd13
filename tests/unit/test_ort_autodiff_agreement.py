"""ORT's backward of MONET's GPT-2-like workload and our own autodiff of its forward part agree on
which parameters are trained: the same parameters get a weight gradient."""

from __future__ import annotations

from pathlib import Path

from xdsl.dialects.builtin import FunctionType

from monet_ir import import_onnx
from monet_ir.graph import arg_infos, op_phase, step_function
from monet_ir.registry import make_context

GPT2LIKE = Path(__file__).resolve().parents[1] / "data" / "ort" / "gpt2like_training.onnx"


def forward_part(module):
    """The imported training graph cut after its forward pass (the log-probabilities)."""
    fn = step_function(module)
    block = fn.body.block
    ops = list(block.ops)
    (log_probs,) = [op.results[0] for op in ops if op.name == "nn.log_softmax" and op_phase(op) == "forward"]
    ops[-1].operands = [log_probs]
    for op in reversed(ops[:-1]):
        if op_phase(op) != "forward":
            block.erase_op(op)
    fn.function_type = FunctionType.from_lists([a.type for a in block.args], [log_probs.type])
    fn.res_attrs = None
    return module


def test_autodiff_of_the_forward_part_trains_the_parameters_ort_trains():
    from passes.autodiff import AutodiffPass

    ort = import_onnx(GPT2LIKE)
    ort_trained = {i.name for i in arg_infos(step_function(ort)) if i.role == "param" and i.trainable}
    ort_updated = {op.param.index for op in ort.walk() if op.name == "train.adam"}
    assert len(ort_updated) == len(ort_trained) == 6

    ours = forward_part(import_onnx(GPT2LIKE))
    ours.verify()
    AutodiffPass(loss="sum").apply(make_context(), ours)
    ours.verify()
    fn = step_function(ours)
    grads = {attrs.data["monet.grad"].data for attrs in (fn.res_attrs or []) if "monet.grad" in attrs.data}
    assert grads == ort_trained
