"""A synthetic chain of fully connected layers as an ONNX file, for validating the checkpoint
search against the exact MILP (`monet explore --exact`) on a graph of known shape.

`write_chain_model(path, layers=10)`: `x [batch, w0]` -> layers of `Gemm` followed by an
activation (alternately `Relu` and `Tanh`), widths drawn from a fixed list so that layers
differ in cost and size, then a last `Gemm` to `classes` logits. Weights are deterministic.
"""

from __future__ import annotations

from pathlib import Path

WIDTHS = (96, 384, 64, 512, 160, 256, 48, 320, 128, 224, 80, 448)


def write_chain_model(path: str | Path, layers: int = 10, batch: int = 16, classes: int = 10) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    widths = [WIDTHS[i % len(WIDTHS)] for i in range(layers + 1)]
    nodes, inits = [], []
    current = "x"
    for i in range(layers):
        w_in, w_out = widths[i], widths[i + 1]
        w, b = f"fc{i}.weight", f"fc{i}.bias"
        inits.append(numpy_helper.from_array((rng.standard_normal((w_out, w_in)) * 0.05).astype(np.float32), w))
        inits.append(numpy_helper.from_array(np.zeros(w_out, dtype=np.float32), b))
        nodes.append(helper.make_node("Gemm", [current, w, b], [f"h{i}"], name=f"/fc{i}/Gemm", transB=1))
        act = "Relu" if i % 2 == 0 else "Tanh"
        nodes.append(helper.make_node(act, [f"h{i}"], [f"a{i}"], name=f"/act{i}/{act}"))
        current = f"a{i}"
    w, b = "head.weight", "head.bias"
    inits.append(numpy_helper.from_array((rng.standard_normal((classes, widths[layers])) * 0.05).astype(np.float32), w))
    inits.append(numpy_helper.from_array(np.zeros(classes, dtype=np.float32), b))
    nodes.append(helper.make_node("Gemm", [current, w, b], ["logits"], name="/head/Gemm", transB=1))
    graph = helper.make_graph(
        nodes, f"chain{layers}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, widths[0]])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = Path(path)
    onnx.save(model, path)
    return path
