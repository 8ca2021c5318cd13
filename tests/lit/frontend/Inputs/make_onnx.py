"""Writes small ONNX models for the frontend lit tests: make_onnx.py KIND OUT.onnx"""

import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

F = TensorProto.FLOAT


def mlp():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "fc1.weight"),
             numpy_helper.from_array(np.zeros(16, np.float32), "fc1.bias"),
             numpy_helper.from_array(rng.standard_normal((4, 16)).astype(np.float32), "fc2.weight")]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="/Relu"),
             helper.make_node("MatMul", ["r", "fc2.weight_t"], ["logits"], name="/fc2/MatMul"),
             helper.make_node("Transpose", ["fc2.weight"], ["fc2.weight_t"], name="/fc2/Transpose", perm=[1, 0])]
    nodes = [nodes[0], nodes[1], nodes[3], nodes[2]]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F, ["batch", 8])],
                              [helper.make_tensor_value_info("logits", F, ["batch", 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def unsupported():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/relu"),
             helper.make_node("Hardmax", ["a"], ["b"], name="/hardmax"),
             helper.make_node("Det", ["b"], ["c"], name="/det")]
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", F, [3, 3])],
                              [helper.make_tensor_value_info("c", F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def instance_norm():
    """An affine instance norm (scale and bias are parameters) and GroupNorm(2, 4) as the
    TorchScript exporter writes it (Constant ones and zeros for the instance norm)."""
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "in.weight"),
             numpy_helper.from_array(np.zeros(4, np.float32), "in.bias"),
             numpy_helper.from_array(np.array([1, 2, -1], np.int64), "grouped"),
             numpy_helper.from_array(np.array([1, 4, 8], np.int64), "full")]
    nodes = [helper.make_node("InstanceNormalization", ["x", "in.weight", "in.bias"], ["a"], name="/in",
                              epsilon=1e-3),
             helper.make_node("Reshape", ["a", "grouped"], ["g"], name="/gn/Reshape"),
             helper.make_node("Constant", [], ["ones"], value=numpy_helper.from_array(np.ones(2, np.float32))),
             helper.make_node("Constant", [], ["zeros"], value=numpy_helper.from_array(np.zeros(2, np.float32))),
             helper.make_node("InstanceNormalization", ["g", "ones", "zeros"], ["n"], name="/gn/in"),
             helper.make_node("Reshape", ["n", "full"], ["y"], name="/gn/Reshape_1")]
    graph = helper.make_graph(nodes, "norms", [helper.make_tensor_value_info("x", F, [1, 4, 8])],
                              [helper.make_tensor_value_info("y", F, [1, 4, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


if __name__ == "__main__":
    kind, out = sys.argv[1], sys.argv[2]
    model = {"mlp": mlp, "unsupported": unsupported, "instance_norm": instance_norm}[kind]()
    save(model, out)
