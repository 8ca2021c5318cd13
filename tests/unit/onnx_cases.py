"""Tiny ONNX models built with onnx.helper, one per operator variant, for importer tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
BOOL = TensorProto.BOOL


@dataclass
class Case:
    """One single-node model: inputs (name, elem, shape), constant inputs, expected MONET op."""

    op_type: str
    inputs: list[tuple[str, int, list[int]]]
    output_shape: list[int] | None
    expect: str
    attrs: dict[str, Any] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    domain: str = ""
    output_elem: int = F
    n_outputs: int = 1
    opset: int = 17
    order: tuple[str, ...] = ()
    """The node's inputs in this order, when the constants do not all come last."""

    def model(self) -> onnx.ModelProto:
        names = list(self.order) or [n for n, _, _ in self.inputs] + list(self.consts)
        outs = [f"y{i}" for i in range(self.n_outputs)]
        node = helper.make_node(self.op_type, names, outs, name=f"/{self.op_type}", domain=self.domain, **self.attrs)
        graph_inputs = [helper.make_tensor_value_info(n, e, s) for n, e, s in self.inputs]
        inits = [numpy_helper.from_array(v, k) for k, v in self.consts.items()]
        shape = self.output_shape
        outputs = [helper.make_tensor_value_info(outs[0], self.output_elem, shape)]
        graph = helper.make_graph([node], f"case_{self.op_type}", graph_inputs, outputs, inits)
        opsets = [helper.make_opsetid("", self.opset)]
        if self.domain:
            opsets.append(helper.make_opsetid(self.domain, 1))
        return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


CASES: list[Case] = [
    Case("Conv", [("x", F, [1, 3, 8, 8]), ("w", F, [4, 3, 3, 3])], [1, 4, 8, 8], "nn.conv", {"pads": [1, 1, 1, 1]}),
    Case("Conv", [("x", F, [1, 4, 9, 9]), ("w", F, [4, 1, 3, 3])], [1, 4, 5, 5], "nn.conv",
         {"group": 4, "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    Case("Conv", [("x", F, [1, 2, 10, 10]), ("w", F, [4, 2, 3, 3]), ("b", F, [4])], [1, 4, 6, 6], "nn.conv",
         {"dilations": [2, 2]}),
    Case("ConvTranspose", [("x", F, [1, 4, 4, 4]), ("w", F, [4, 2, 3, 3])], [1, 2, 8, 8], "nn.conv_transpose",
         {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    Case("Gemm", [("a", F, [8, 4]), ("b", F, [6, 8]), ("c", F, [6])], [4, 6], "nn.gemm",
         {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    Case("MatMul", [("a", F, [2, 1, 4, 8]), ("b", F, [3, 8, 5])], [2, 3, 4, 5], "nn.matmul"),
    Case("BatchNormalization", [("x", F, [2, 3, 4, 4]), ("s", F, [3]), ("b", F, [3]), ("m", F, [3]), ("v", F, [3])],
         [2, 3, 4, 4], "nn.batch_norm", {"training_mode": 1}),
    Case("BatchNormalization", [("x", F, [2, 3, 4, 4]), ("s", F, [3]), ("b", F, [3]), ("m", F, [3]), ("v", F, [3])],
         [2, 3, 4, 4], "nn.batch_norm"),
    Case("LayerNormalization", [("x", F, [2, 5, 8]), ("s", F, [8]), ("b", F, [8])], [2, 5, 8], "nn.layer_norm",
         {"axis": -1, "epsilon": 1e-5}),
    Case("Relu", [("x", F, [2, 3])], [2, 3], "nn.relu"),
    Case("LeakyRelu", [("x", F, [2, 3])], [2, 3], "nn.leaky_relu", {"alpha": 0.1}),
    Case("Clip", [("x", F, [2, 3])], [2, 3], "nn.clip", consts={"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}),
    Case("Sigmoid", [("x", F, [2, 3])], [2, 3], "nn.sigmoid"),
    Case("HardSigmoid", [("x", F, [2, 3])], [2, 3], "nn.hard_sigmoid"),
    Case("HardSwish", [("x", F, [2, 3])], [2, 3], "nn.hard_swish"),
    Case("Tanh", [("x", F, [2, 3])], [2, 3], "nn.tanh"),
    Case("Erf", [("x", F, [2, 3])], [2, 3], "nn.erf"),
    Case("Gelu", [("x", F, [2, 3])], [2, 3], "nn.gelu", {"approximate": "tanh"}, opset=20),
    Case("Softmax", [("x", F, [2, 3, 5])], [2, 3, 5], "nn.softmax", {"axis": -1}),
    Case("LogSoftmax", [("x", F, [2, 5])], [2, 5], "nn.log_softmax", {"axis": 1}),
    Case("MaxPool", [("x", F, [1, 2, 7, 7])], [1, 2, 4, 4], "nn.max_pool",
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("MaxPool", [("x", F, [1, 2, 6, 6])], [1, 2, 3, 3], "nn.max_pool",
         {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    Case("AveragePool", [("x", F, [1, 2, 6, 6])], [1, 2, 3, 3], "nn.avg_pool",
         {"kernel_shape": [2, 2], "strides": [2, 2], "count_include_pad": 1}),
    Case("GlobalAveragePool", [("x", F, [1, 2, 6, 6])], [1, 2, 1, 1], "nn.global_avg_pool"),
    Case("ReduceMean", [("x", F, [2, 3, 4])], [2, 1, 4], "nn.reduce_mean", {"axes": [1]}),
    Case("ReduceSum", [("x", F, [2, 3, 4])], [2, 4], "nn.reduce_sum", {"keepdims": 0}, consts={"axes": i64(1)}),
    Case("Add", [("a", F, [2, 3]), ("b", F, [3])], [2, 3], "nn.add"),
    Case("Sub", [("a", F, [2, 3]), ("b", F, [2, 1])], [2, 3], "nn.sub"),
    Case("Mul", [("a", F, [2, 3]), ("b", F, [])], [2, 3], "nn.mul"),
    Case("Div", [("a", F, [2, 3]), ("b", F, [2, 3])], [2, 3], "nn.div"),
    Case("Pow", [("a", F, [2, 3]), ("b", F, [])], [2, 3], "nn.pow"),
    Case("Sqrt", [("x", F, [2, 3])], [2, 3], "nn.sqrt"),
    Case("Neg", [("x", F, [2, 3])], [2, 3], "nn.neg"),
    Case("Exp", [("x", F, [2, 3])], [2, 3], "nn.exp"),
    Case("Log", [("x", F, [2, 3])], [2, 3], "nn.log"),
    Case("Reshape", [("x", F, [2, 3, 4])], [6, 4], "nn.reshape", consts={"shape": i64(-1, 4)}),
    Case("Flatten", [("x", F, [2, 3, 4])], [2, 12], "nn.reshape", {"axis": 1}),
    Case("Transpose", [("x", F, [2, 3, 4])], [4, 2, 3], "nn.transpose", {"perm": [2, 0, 1]}),
    Case("Squeeze", [("x", F, [2, 1, 4])], [2, 4], "nn.reshape", consts={"axes": i64(1)}),
    Case("Unsqueeze", [("x", F, [2, 4])], [2, 1, 4], "nn.reshape", consts={"axes": i64(1)}),
    Case("Concat", [("a", F, [2, 3]), ("b", F, [2, 5])], [2, 8], "nn.concat", {"axis": 1}),
    Case("Split", [("x", F, [2, 8])], None, "nn.split", {"axis": 1}, consts={"split": i64(3, 5)}, n_outputs=2),
    Case("Slice", [("x", F, [4, 8])], [4, 3], "nn.slice",
         consts={"starts": i64(1), "ends": i64(7), "axes": i64(1), "steps": i64(2)}),
    Case("Gather", [("x", F, [10, 4]), ("i", I64, [2, 3])], [2, 3, 4], "nn.gather", {"axis": 0}),
    Case("Expand", [("x", F, [1, 4])], [3, 4], "nn.expand", consts={"shape": i64(3, 4)}),
    Case("Where", [("c", BOOL, [2, 3]), ("a", F, [2, 3]), ("b", F, [])], [2, 3], "nn.where"),
    Case("Equal", [("a", I64, [2, 3]), ("b", I64, [2, 3])], [2, 3], "nn.equal", output_elem=BOOL),
    Case("Less", [("a", F, [2, 3]), ("b", F, [])], [2, 3], "nn.less", output_elem=BOOL),
    Case("Greater", [("a", F, [2, 3]), ("b", F, [2, 3])], [2, 3], "nn.greater", output_elem=BOOL),
    Case("CumSum", [("x", F, [2, 5])], [2, 5], "nn.cumsum", consts={"axis": np.array(1, np.int64)}),
    Case("CumSum", [("x", F, [3, 4])], [3, 4], "nn.cumsum", {"exclusive": 1, "reverse": 1},
         consts={"axis": np.array(0, np.int64)}),
    Case("GatherElements", [("d", I64, [2, 8]), ("i", I64, [2, 5])], [2, 5], "nn.gather_elements", {"axis": 1},
         output_elem=I64),
    Case("RandomUniformLike", [("x", F, [2, 3])], [2, 3], "nn.random", {"low": -1.0, "high": 1.0, "seed": 4.0}),
    Case("RandomNormal", [], [2, 3], "nn.random", {"shape": [2, 3], "scale": 0.5}),
    Case("Reciprocal", [("x", F, [2, 3])], [2, 3], "nn.div"),
    Case("InstanceNormalization", [("x", F, [2, 3, 4, 5]), ("s", F, [3]), ("b", F, [3])], [2, 3, 4, 5],
         "nn.layer_norm", {"epsilon": 1e-3}),
    Case("InstanceNormalization", [("x", F, [2, 4, 6]), ("s", F, [4]), ("b", F, [4])], [2, 4, 6], "axis = 2"),
    Case("LSTM", [("x", F, [3, 2, 3]), ("w", F, [1, 8, 3]), ("r", F, [1, 8, 2]), ("b", F, [1, 16]),
                  ("h0", F, [1, 2, 2]), ("c0", F, [1, 2, 2])], [3, 1, 2, 2], "nn.split", {"hidden_size": 2},
         order=("x", "w", "r", "b", "", "h0", "c0")),
    Case("GRU", [("x", F, [3, 2, 3]), ("w", F, [1, 6, 3]), ("r", F, [1, 6, 2]), ("b", F, [1, 12]),
                 ("h0", F, [1, 2, 2])], [3, 1, 2, 2], "nn.split", {"hidden_size": 2, "linear_before_reset": 1},
         order=("x", "w", "r", "b", "", "h0")),
    Case("GRU", [("x", F, [3, 2, 3]), ("w", F, [1, 6, 3]), ("r", F, [1, 6, 2]), ("b", F, [1, 12])], [3, 1, 2, 2],
         "nn.split", {"hidden_size": 2, "direction": "reverse"}),
    Case("ReduceL2", [("x", F, [2, 3, 4])], [2, 3, 1], "nn.sqrt", {"axes": [-1]}),
    Case("ReduceSumSquare", [("x", F, [2, 3, 4])], [3], "nn.reduce_sum", {"axes": [0, 2], "keepdims": 0}),
    Case("GatherND", [("x", F, [5, 3])], [4, 3], "nn.gather_nd", consts={"i": np.array([[4], [0], [4], [2]], np.int64)}),
    Case("GatherND", [("x", F, [3, 4, 2])], [2, 2], "nn.gather_nd", consts={"i": np.array([[0, 1], [2, 3]], np.int64)}),
    Case("ScatterND", [("x", F, [5, 3]), ("u", F, [2, 3])], [5, 3], "nn.scatter_nd",
         consts={"i": np.array([[3], [1]], np.int64)}, order=("x", "i", "u")),
    Case("ScatterND", [("x", F, [4, 4]), ("u", F, [3])], [4, 4], "nn.scatter_nd", {"reduction": "add"},
         consts={"i": np.array([[0, 1], [3, 3], [0, 1]], np.int64)}, order=("x", "i", "u")),
    Case("Einsum", [("a", F, [2, 3, 4, 5]), ("b", F, [2, 3, 5, 6])], [2, 3, 4, 6], "nn.matmul",
         {"equation": "bhij,bhjd->bhid"}),
    Case("Einsum", [("a", F, [2, 4, 5]), ("b", F, [2, 6, 5])], [2, 4, 6], "trans_b = true",
         {"equation": "B I D, B J D -> B I J"}),
    Case("Einsum", [("a", F, [5, 4]), ("b", F, [5, 6])], [4, 6], "trans_a = true", {"equation": "ki,kj->ij"}),
    Case("Resize", [("x", F, [1, 2, 3, 4])], [1, 2, 7, 8], "nn.resize", {"mode": "linear"},
         consts={"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                 "sizes": np.array([1, 2, 7, 8], np.int64)}),
    Case("Resize", [("x", F, [1, 2, 3, 4])], [1, 2, 6, 8], "nn.resize",
         {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
         consts={"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2, 2], np.float32)}),
    Case("Resize", [("x", F, [2, 3, 5])], [2, 3, 9], "nn.resize",
         {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
         consts={"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                 "sizes": np.array([2, 3, 9], np.int64)}),
    Case("Resize", [("x", F, [1, 1, 8, 8])], [1, 1, 3, 5], "nn.resize",
         {"mode": "nearest", "coordinate_transformation_mode": "pytorch_half_pixel"},
         consts={"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                 "sizes": np.array([1, 1, 3, 5], np.int64)}),
    Case("And", [("a", BOOL, [2, 3]), ("b", BOOL, [2, 3])], [2, 3], "nn.and", output_elem=BOOL),
    Case("Not", [("a", BOOL, [2, 3])], [2, 3], "nn.not", output_elem=BOOL),
    Case("Cast", [("a", BOOL, [2, 3])], [2, 3], "nn.cast", {"to": F}),
    Case("Identity", [("x", F, [2, 3])], [2, 3], "func.return"),
    Case("Dropout", [("x", F, [2, 3])], [2, 3], "nn.dropout",
         consts={"ratio": np.array(0.1, np.float32), "training": np.array(True)}, n_outputs=2),
    Case("Pad", [("x", F, [1, 2, 4, 4])], [1, 2, 6, 6], "nn.pad", {"mode": "constant"},
         consts={"pads": i64(0, 0, 1, 1, 0, 0, 1, 1)}),
    Case("Sum", [("a", F, [2, 3]), ("b", F, [2, 3]), ("c", F, [3])], [2, 3], "nn.sum"),
    Case("SoftmaxCrossEntropyLoss", [("s", F, [4, 10]), ("l", I64, [4])], [], "nn.softmax_cross_entropy",
         {"reduction": "mean"}),
    # issue 28's operators (the float ones are also checked against finite differences)
    Case("Softplus", [("x", F, [2, 3])], [2, 3], "nn.softplus"),
    Case("Softsign", [("x", F, [2, 3])], [2, 3], "nn.softsign"),
    Case("Abs", [("x", F, [2, 3])], [2, 3], "nn.abs"),
    Case("Sin", [("x", F, [2, 3])], [2, 3], "nn.sin"),
    Case("Cos", [("x", F, [2, 3])], [2, 3], "nn.cos"),
    Case("Elu", [("x", F, [2, 3])], [2, 3], "nn.elu", {"alpha": 0.7}),
    Case("Celu", [("x", F, [2, 3])], [2, 3], "nn.celu", {"alpha": 1.5}),
    Case("Selu", [("x", F, [2, 3])], [2, 3], "nn.selu"),
    Case("Mish", [("x", F, [2, 3])], [2, 3], "nn.mish", opset=18),
    Case("Sign", [("x", F, [2, 3])], [2, 3], "nn.sign"),
    Case("Floor", [("x", F, [2, 3])], [2, 3], "nn.floor"),
    Case("Ceil", [("x", F, [2, 3])], [2, 3], "nn.ceil"),
    Case("Round", [("x", F, [2, 3])], [2, 3], "nn.round"),
    Case("Max", [("a", F, [2, 3]), ("b", F, [3]), ("c", F, [])], [2, 3], "nn.max"),
    Case("Min", [("a", F, [2, 3]), ("b", F, [2, 1])], [2, 3], "nn.min"),
    Case("Mod", [("a", F, [2, 3]), ("b", F, [2, 3])], [2, 3], "nn.mod", {"fmod": 1}),
    Case("PRelu", [("x", F, [2, 3, 4]), ("s", F, [3, 1])], [2, 3, 4], "nn.prelu"),
    Case("ReduceMax", [("x", F, [2, 3, 4])], [2, 4], "nn.reduce_max", {"keepdims": 0}, consts={"axes": i64(1)}, opset=18),
    Case("ReduceMin", [("x", F, [2, 3, 4])], [2, 3, 1], "nn.reduce_min", {"axes": [-1]}),
    Case("GlobalMaxPool", [("x", F, [1, 2, 3, 3])], [1, 2, 1, 1], "nn.reduce_max"),
    Case("ArgMax", [("x", F, [2, 5])], [2], "nn.argmax", {"axis": 1, "keepdims": 0}, output_elem=I64),
    Case("ArgMin", [("x", F, [2, 5])], [1, 5], "nn.argmin", {"axis": 0, "select_last_index": 1}, output_elem=I64),
    Case("Tile", [("x", F, [2, 3])], [4, 9], "nn.tile", consts={"r": i64(2, 3)}),
    Case("TopK", [("x", F, [2, 5])], [2, 2], "nn.topk", {"axis": -1}, consts={"k": i64(2)}, n_outputs=2),
    Case("ScatterElements", [("d", F, [4, 3]), ("u", F, [2, 3])], [4, 3], "nn.scatter_elements", {"axis": 0},
         consts={"i": np.array([[1, 0, 3], [2, 3, 0]], np.int64)}, order=("d", "i", "u")),
    Case("ScatterElements", [("d", F, [4, 3]), ("u", F, [3, 3])], [4, 3], "nn.scatter_elements",
         {"axis": 0, "reduction": "add"}, consts={"i": np.array([[1, 0, 3], [1, 3, 0], [1, 1, 1]], np.int64)},
         order=("d", "i", "u"), opset=18),
    Case("ScatterElements", [("d", F, [4, 3]), ("u", F, [3, 3])], [4, 3], "nn.scatter_elements",
         {"axis": 0, "reduction": "max"}, consts={"i": np.array([[1, 0, 3], [1, 3, 0], [2, 1, 1]], np.int64)},
         order=("d", "i", "u"), opset=18),
    Case("GatherElements", [("d", F, [3, 4])], [3, 2], "nn.gather_elements", {"axis": 1},
         consts={"i": np.array([[0, 2], [1, 1], [3, 0]], np.int64)}),
    Case("OneHot", [("i", I64, [2, 3])], [2, 3, 5], "nn.one_hot",
         consts={"depth": np.array(5, np.int64), "values": np.array([0.0, 2.0], np.float32)}),
    Case("NonZero", [("m", BOOL, [2, 3])], [2, 6], "nn.nonzero", output_elem=I64),
    Case("Resize", [("x", F, [1, 1, 3, 4])], [1, 1, 6, 8], "cubic", {"mode": "cubic"},
         consts={"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2, 2], np.float32)}),
    Case("Resize", [("x", F, [1, 1, 5, 5])], [1, 1, 3, 3], "scales = array<f64", {"mode": "cubic",
         "exclude_outside": 1, "cubic_coeff_a": -0.5},
         consts={"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 0.7, 0.7], np.float32)}),
    Case("Pad", [("x", F, [1, 2, 5, 5])], [1, 2, 5, 5], "nn.slice", {"mode": "constant"},
         consts={"pads": i64(0, 0, -1, 1, 0, 0, 1, -1)}),
    Case("Pad", [("x", F, [1, 2, 5])], [1, 2, 4], "nn.slice", consts={"pads": i64(0, 0, 0, 0, 0, -1)}),
    Case("ReluGrad", [("dy", F, [2, 3]), ("x", F, [2, 3])], [2, 3], "grad.relu", domain="com.microsoft"),
    Case("GeluGrad", [("dy", F, [2, 3]), ("x", F, [2, 3])], [2, 3], "grad.gelu", domain="com.microsoft"),
    Case("FastGeluGrad", [("dy", F, [2, 3]), ("x", F, [2, 3])], [2, 3], "grad.gelu", domain="com.microsoft"),
    Case("SoftmaxGrad_13", [("dy", F, [2, 3]), ("y", F, [2, 3])], [2, 3], "grad.softmax", {"axis": -1},
         domain="com.microsoft"),
    Case("SoftmaxCrossEntropyLossGrad", [("dl", F, []), ("lp", F, [4, 10]), ("l", I64, [4])], [4, 10],
         "grad.softmax_cross_entropy", domain="com.microsoft"),
    Case("AveragePoolGrad", [("dy", F, [1, 2, 2, 2])], [1, 2, 4, 4], "grad.avg_pool",
         {"kernel_shape": [2, 2], "strides": [2, 2]}, domain="com.microsoft"),
    Case("ConvGrad", [("dy", F, [1, 4, 8, 8]), ("x", F, [1, 3, 8, 8]), ("w", F, [4, 3, 3, 3])], [1, 3, 8, 8],
         "grad.conv_weight", {"pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1},
         domain="com.microsoft", n_outputs=2),
    Case("FusedMatMul", [("a", F, [4, 8]), ("b", F, [6, 8])], [4, 6], "nn.matmul", {"transB": 1, "alpha": 2.0},
         domain="com.microsoft"),
    Case("LayerNormalizationGrad", [("dy", F, [2, 8]), ("x", F, [2, 8]), ("s", F, [8])], [2, 8], "grad.layer_norm",
         {"axis": -1}, domain="com.microsoft", n_outputs=3),
    Case("GatherGrad", [("i", I64, [2, 3]), ("dy", F, [2, 3, 4])], [10, 4], "grad.gather", {"axis": 0},
         consts={}, domain="com.microsoft"),
]


def gather_grad_model() -> onnx.ModelProto:
    """GatherGrad takes the data shape as its first input, which must be a constant."""
    node = helper.make_node("GatherGrad", ["shape", "i", "dy"], ["y0"], name="/GatherGrad", domain="com.microsoft", axis=0)
    graph = helper.make_graph(
        [node], "gather_grad",
        [helper.make_tensor_value_info("i", I64, [2, 3]), helper.make_tensor_value_info("dy", F, [2, 3, 4])],
        [helper.make_tensor_value_info("y0", F, [10, 4])],
        [numpy_helper.from_array(i64(10, 4), "shape")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)
