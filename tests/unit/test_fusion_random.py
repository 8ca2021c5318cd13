"""Fusion never builds a cyclic task graph: random convolutional networks (strided, depthwise,
residual, batch-normalized, like MobileNetV2's inverted residuals) with automatic stacks at
random tile counts, forward and backward, always extract to an acyclic graph that schedules."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context

from monet_ir import import_onnx
from monet_ir.graph import step_function
from monet_ir.schedule.scheduler import schedule
from monet_ir.schedule.taskgraph import extract
from passes.autodiff import AutodiffPass
from passes.fuse_layers import FuseLayersPass
from passes.insert_optimizer import InsertOptimizerPass
from targets import get_target


class NetBuilder:
    def __init__(self, rng: random.Random):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def weight(self, shape) -> str:
        name = self.name("w")
        self.inits.append(numpy_helper.from_array(np.full(shape, 0.01, dtype=np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"/{out}", **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int, depthwise: bool) -> str:
        groups = cin if depthwise else 1
        w = self.weight([cout, cin // groups, k, k])
        return self.node("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                         group=groups)

    def batch_norm(self, x: str, c: int) -> str:
        params = [self.weight([c]) for _ in range(4)]
        return self.node("BatchNormalization", [x, *params], training_mode=1)

    def activation(self, x: str) -> str:
        if self.rng.random() < 0.5:
            return self.node("Relu", [x])
        lo, hi = self.name("lo"), self.name("hi")
        self.inits += [numpy_helper.from_array(np.array(0, np.float32), lo),
                       numpy_helper.from_array(np.array(6, np.float32), hi)]
        return self.node("Clip", [x, lo, hi])


def random_net(seed: int) -> bytes:
    rng = random.Random(seed)
    b = NetBuilder(rng)
    height = size = rng.choice([16, 28, 32, 56])
    c = rng.choice([4, 8])
    stem_stride = rng.choice([1, 2])
    x = b.conv("x", 3, c, 3, stem_stride, False)
    size = -(-size // stem_stride)
    for _ in range(rng.randint(2, 5)):
        kind = rng.choice(["inverted", "plain", "pool"])
        if kind == "pool" and size >= 8:
            x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
            size //= 2
            continue
        stride = 2 if rng.random() < 0.35 and size >= 4 else 1
        cout = rng.choice([c, 2 * c])
        if kind == "inverted":
            hidden = c * rng.choice([2, 4, 6])
            y = b.activation(b.batch_norm(b.conv(x, c, hidden, 1, 1, False), hidden))
            y = b.activation(b.batch_norm(b.conv(y, hidden, hidden, rng.choice([3, 5]), stride, True), hidden))
            y = b.batch_norm(b.conv(y, hidden, cout, 1, 1, False), cout)
        else:
            y = b.activation(b.conv(x, c, cout, rng.choice([1, 3]), stride, rng.random() < 0.3 and cout == c))
        x = b.node("Add", [x, y]) if stride == 1 and cout == c else y
        size, c = (-(-size // stride)), cout
    pooled = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    out = b.node("Gemm", [pooled, b.weight([10, c]), b.weight([10])], transB=1)
    graph = helper.make_graph(
        b.nodes, f"net{seed}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, height, height])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("seed", range(40))
def test_fused_random_network_has_an_acyclic_task_graph(seed):
    rng = random.Random(1000 + seed)
    module = import_onnx(random_net(seed), source_name=f"net{seed}.onnx")
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass().apply(Context(), module)
    tiles = rng.choice([0, 2, 3, 5, 8, 13, 21, 37])
    FuseLayersPass(mode="auto", tiles=tiles, target="edge_npu").apply(Context(), module)
    graph = extract(step_function(module))
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(graph.tasks)))
    dag.add_edges_from((p, t.index) for t in graph.tasks for p in graph.predecessors(t.index))
    assert nx.is_directed_acyclic_graph(dag), nx.find_cycle(dag)
    if seed % 4 == 0:
        assert schedule(graph, get_target("edge_npu")).latency_cycles > 0
