"""An ONNX Runtime training graph of a LoRA-adapted convolution imports, trains the low-rank
matrices only, and gets a report with no flag beyond --target.

The graph is built here in ORT's conventions (as ORT writes resnet18_full_training.onnx): the
base conv weight is a frozen float initializer; the trainable `delta_weight_A`/`delta_weight_B`
are graph inputs with accumulation buffers and Adam moments; the conv weight is
`W0 + Reshape(B @ A)`; backward nodes are named `<forward node>_Grad/...` (ConvGrad, ReluGrad,
SoftmaxCrossEntropyLossGrad, FusedMatMul with transposes for the MatMul's gradients) and
each parameter's Adam update is written out element-wise (`Adam_Optimizer_<P>_*`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from monet_ir import import_onnx, parse_module, print_module
from monet_ir.graph import arg_infos, step_function

F, I64 = TensorProto.FLOAT, TensorProto.INT64
MS = "com.microsoft"
OUT, IN, K, RANK, CLASSES = 4, 3, 3, 2, 4


def adam_nodes(p: str) -> list:
    """ORT's element-wise Adam of parameter p from p_summed_grad (as in resnet18_full_training)."""
    g, m, v = f"{p}_summed_grad", f"{p}_optimizer_first_moment", f"{p}_optimizer_second_moment"
    t = f"{p}_optimizer"
    node = helper.make_node
    return [
        node("Sum", [f"{p}_grad", f"{p}_grad.accumulation.buffer"], [g], name=f"Sum_Grad_{p}"),
        node("Mul", [m, "beta1"], [t + "11"], name=f"Adam_Optimizer_{p}_MulFirstMoment"),
        node("Mul", [g, "beta1"], [t + "10"], name=f"Adam_Optimizer_{p}_MulFirstMoment2"),
        node("Add", [t + "10", t + "11"], [t + "9"], name=f"Adam_Optimizer_{p}_First_Moment"),
        node("Div", [t + "9", "beta1"], [t + "1"], name=f"Adam_Optimizer_{p}_MeanFirst_Moment"),
        node("Mul", [g, g], [t + "8"], name=f"Adam_Optimizer_{p}_Mul3"),
        node("Mul", [t + "8", "beta2"], [t + "7"], name=f"Adam_Optimizer_{p}_Mul2"),
        node("Mul", [v, "beta2"], [t + "6"], name=f"Adam_Optimizer_{p}_Mul1"),
        node("Add", [t + "6", t + "7"], [t + "5"], name=f"Adam_Optimizer_{p}_Second_Moment"),
        node("Div", [t + "5", "beta2"], [t + "4"], name=f"Adam_Optimizer_{p}_MeanSecond_Moment"),
        node("Sqrt", [t + "4"], [t + "3"], name=f"Adam_Optimizer_{p}_second_moment1"),
        node("Add", [t + "3", "epsilon"], [t + "2"], name=f"Adam_Optimizer_{p}_second_moment"),
        node("Div", [t + "1", t + "2"], [t], name=f"Adam_Optimizer_{p}"),
        node("Mul", [t, "learning_rate"], [t + "0"], name=f"Adam_Optimizer_{p}_lr"),
        node("Sub", [p, t + "0"], [f"{p}_optimizer_end"], name=f"Adam_Update_{p}"),
    ]


def lora_training_graph(batch: int = 2, hw: int = 8) -> bytes:
    node = helper.make_node
    a, b = "delta_weight_A", "delta_weight_B"
    shapes = {a: [RANK, IN * K * K], b: [OUT, RANK]}
    forward = [
        node("MatMul", [b, a], ["delta"], name="/lora/MatMul"),
        node("Reshape", ["delta", "w_shape"], ["delta_w"], name="/lora/Reshape"),
        node("Add", ["conv.base_weight", "delta_w"], ["w"], name="/lora/Add"),
        node("Conv", ["x", "w"], ["y"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        node("Relu", ["y"], ["r"], name="/relu/Relu"),
        node("ReduceMean", ["r"], ["logits"], name="/pool/ReduceMean", axes=[2, 3], keepdims=0),
        node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss", "log_prob"], name="/loss/SCE",
             reduction="mean"),
    ]
    backward = [
        node("SoftmaxCrossEntropyLossGrad", ["loss_grad", "log_prob", "labels"], ["logits_grad"],
             name="/loss/SCE_Grad/SoftmaxCrossEntropyLossGrad_0", domain=MS, reduction="mean"),
        node("Unsqueeze", ["logits_grad", "hw_axes"], ["logits_grad_4d"], name="/pool/ReduceMean_Grad/Unsqueeze_0"),
        node("Expand", ["logits_grad_4d", "r_shape"], ["r_grad_sum"], name="/pool/ReduceMean_Grad/Expand_0"),
        node("Div", ["r_grad_sum", "hw_count"], ["r_grad"], name="/pool/ReduceMean_Grad/Div_0"),
        node("ReluGrad", ["r_grad", "r"], ["y_grad"], name="/relu/Relu_Grad/ReluGrad_0", domain=MS),
        node("ConvGrad", ["y_grad", "x", "w"], ["", "w_grad"], name="/conv/Conv_Grad/ConvGrad_0", domain=MS,
             pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1, kernel_shape=[K, K]),
        node("Identity", ["w_grad"], ["delta_w_grad"], name="/lora/Add_Grad/Identity_0"),
        node("Reshape", ["delta_w_grad", "delta_shape"], ["delta_grad"], name="/lora/Reshape_Grad/Reshape_0"),
        node("FusedMatMul", ["delta_grad", a], [f"{b}_grad"], name="/lora/MatMul_Grad/FusedMatMul_0", domain=MS,
             transA=0, transB=1, alpha=1.0),
        node("FusedMatMul", [b, "delta_grad"], [f"{a}_grad"], name="/lora/MatMul_Grad/FusedMatMul_1", domain=MS,
             transA=1, transB=0, alpha=1.0),
    ]
    optimizer = adam_nodes(a) + adam_nodes(b)
    inputs = [helper.make_tensor_value_info("x", F, [batch, IN, hw, hw]),
              helper.make_tensor_value_info("labels", I64, [batch])]
    for p in (a, b):
        inputs.append(helper.make_tensor_value_info(p, F, shapes[p]))
        for suffix in ("_grad.accumulation.buffer", "_optimizer_first_moment", "_optimizer_second_moment"):
            inputs.append(helper.make_tensor_value_info(p + suffix, F, shapes[p]))
    outputs = [helper.make_tensor_value_info("loss", F, [])]
    outputs += [helper.make_tensor_value_info(f"{p}_optimizer_end", F, shapes[p]) for p in (a, b)]
    consts = {
        "w_shape": np.array([OUT, IN, K, K], np.int64), "delta_shape": np.array(shapes[b][:1] + shapes[a][1:], np.int64),
        "hw_axes": np.array([2, 3], np.int64), "r_shape": np.array([batch, OUT, hw, hw], np.int64),
        "hw_count": np.array(hw * hw, np.float32), "loss_grad": np.array(1.0, np.float32),
        "beta1": np.array(0.9, np.float32), "beta2": np.array(0.999, np.float32),
        "epsilon": np.array(1e-8, np.float32), "learning_rate": np.array(1e-3, np.float32),
    }
    initializers = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    base = TensorProto(name="conv.base_weight", data_type=F, dims=[OUT, IN, K, K])
    base.data_location = TensorProto.EXTERNAL  # weight-stripped, as the shared ORT graphs are
    for key, value in (("location", "lora.weights.bin"), ("offset", "0"), ("length", str(OUT * IN * K * K * 4))):
        entry = base.external_data.add()
        entry.key, entry.value = key, value
    initializers.append(base)
    graph = helper.make_graph(forward + backward + optimizer, "lora_training", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    return model.SerializeToString()


def test_lora_graph_trains_the_low_rank_matrices_only():
    module = import_onnx(lora_training_graph(), source_name="lora_training.onnx")
    module.verify()
    params = {i.name: i.trainable for i in arg_infos(step_function(module)) if i.role == "param"}
    assert params == {"delta_weight_A": True, "delta_weight_B": True, "conv.base_weight": False}
    updated = {op.properties["node"].data for op in module.walk() if op.name == "train.adam"}
    assert updated == {"delta_weight_A", "delta_weight_B"}
    names = [op.name for op in module.walk()]
    assert names.count("grad.conv_weight") == 1 and "grad.conv_input" not in names  # x needs no gradient
    assert names.count("nn.matmul") == 3  # B @ A forward, and the two FusedMatMul gradients
    text = print_module(module)
    assert print_module(parse_module(text)) == text


def test_lora_graph_reports_on_the_stream_file(tmp_path):
    from monet_ir.tools.monet import Progress, build_parser, make_report

    path = tmp_path / "lora_training.onnx"
    path.write_bytes(lora_training_graph())
    stream_file = Path(__file__).resolve().parents[1] / "data" / "stream_hw" / "tpu_like_quad_core.yaml"
    args = build_parser().parse_args(["report", str(path), "--target", str(stream_file), "--out", str(tmp_path)])
    report, _ = make_report(args, Progress(enabled=False))
    assert report["pipeline"] == "as imported"
    assert report["ops"]["backward"] > 0 and report["ops"]["optimizer"] == 2
    assert report["latency_cycles"] > 0 and report["precision"] == "int8"


def test_autodiff_of_the_forward_part_trains_what_ort_trains():
    """Our autodiff of the graph's forward part (cut at the logits, cross-entropy appended)
    gives weight gradients for exactly the parameters ORT's backward updates."""
    from xdsl.dialects.builtin import FunctionType

    from monet_ir.graph import op_node, op_phase
    from monet_ir.registry import make_context
    from passes.autodiff import AutodiffPass

    module = import_onnx(lora_training_graph(), source_name="lora_training.onnx")
    ort_updated = {op.properties["node"].data for op in module.walk() if op.name == "train.adam"}
    fn = step_function(module)
    block = fn.body.block
    ops = list(block.ops)
    (logits,) = [op.results[0] for op in ops if op_node(op) == "/pool/ReduceMean" and op_phase(op) == "forward"]
    ops[-1].operands = [logits]
    for op in reversed(ops[:-1]):
        if op_phase(op) != "forward" or op_node(op) == "/loss/SCE":
            block.erase_op(op)
    fn.function_type = FunctionType.from_lists([a.type for a in block.args], [logits.type])
    fn.res_attrs = None
    AutodiffPass(loss="cross-entropy", labels="labels2").apply(make_context(), module)
    module.verify()
    grads = {attrs.data["monet.grad"].data for attrs in (step_function(module).res_attrs or [])
             if "monet.grad" in attrs.data}
    assert grads == ort_updated == {"delta_weight_A", "delta_weight_B"}


def test_an_adam_cluster_whose_intermediate_is_read_elsewhere_stays_element_wise():
    """The collapse checks that no node outside a parameter's cluster reads one of its
    intermediate values (here a node exports A's bias-corrected first moment)."""
    import onnx

    model = onnx.load_from_string(lora_training_graph())
    peek = "delta_weight_A_optimizer1"
    model.graph.node.append(helper.make_node("Identity", [peek], ["peek"], name="/peek/Identity"))
    model.graph.output.append(helper.make_tensor_value_info("peek", F, [RANK, IN * K * K]))
    module = import_onnx(model.SerializeToString(), source_name="lora_peek.onnx")
    module.verify()
    updated = {op.properties["node"].data for op in module.walk() if op.name == "train.adam"}
    assert updated == {"delta_weight_B"}
    assert sum(op.name == "nn.sqrt" for op in module.walk()) == 1  # A's update, imported node by node
