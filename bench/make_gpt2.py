"""Generate a weight-free GPT-2-shaped ONNX model (shapes only: initializers point to external
data that does not exist, as the shared weight-stripped exports do).

    python bench/make_gpt2.py OUT.onnx [--layers 48 --hidden 1600 --heads 25 --vocab 50257 --seq 1024 --batch 1]

The defaults are GPT-2 XL (1.56 B parameters). The graph is GPT-2's: learned token and position
embeddings, pre-LN blocks (LayerNorm, fused QKV MatMul+Add, per-head causal attention as
MatMul -> Mul(1/sqrt(d)) -> Where(mask, -inf) -> Softmax -> MatMul, output projection,
residual; LayerNorm, MLP with GELU), a final LayerNorm and an LM head tied to the token
embedding (Transpose -> MatMul). Opset 20 (Gelu with approximate="tanh"); `build(...,
gelu="written")` gives the tanh chain PyTorch's exporter writes below opset 20, at opset 17
(bench/bench_scaling.py uses that form).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weight(name: str, dims: list[int]) -> onnx.TensorProto:
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(4 * math.prod(dims)))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def const(name: str, array: np.ndarray) -> onnx.TensorProto:
    # as raw bytes, the way PyTorch's exporters write initializers
    return numpy_helper.from_array(array, name)


def build(layers: int, hidden: int, heads: int, vocab: int, seq: int, batch: int,
          gelu: str = "op") -> onnx.ModelProto:
    """gelu="op": one Gelu(approximate="tanh") node (opset 20); gelu="written": the
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) chain PyTorch's exporter writes below opset 20
    (opset 17)."""
    if gelu not in ("op", "written"):
        raise ValueError(f"gelu must be 'op' or 'written', not {gelu!r}")
    d = hidden // heads
    nodes, inits = [], []
    inits += [weight("wte.weight", [vocab, hidden]), weight("wpe.weight", [seq, hidden])]
    inits.append(const("pos_ids", np.arange(seq, dtype=np.int64)))
    inits.append(const("mask", np.tril(np.ones((seq, seq), dtype=bool))[None, None]))
    inits.append(const("neg_inf", np.array(-np.inf, dtype=np.float32)))
    inits.append(const("scale", np.array(1.0 / math.sqrt(d), dtype=np.float32)))
    inits.append(const("heads_shape", np.array([batch, seq, heads, d], dtype=np.int64)))
    inits.append(const("merge_shape", np.array([batch, seq, hidden], dtype=np.int64)))
    inits.append(const("qkv_split", np.array([hidden, hidden, hidden], dtype=np.int64)))
    if gelu == "written":
        for name, value in (("half", 0.5), ("one", 1.0), ("three", 3.0), ("gelu_c1", 0.044715),
                            ("gelu_c2", math.sqrt(2 / math.pi))):
            inits.append(const(name, np.array(value, dtype=np.float32)))
    nodes.append(helper.make_node("Gather", ["wte.weight", "input_ids"], ["tok"], name="/wte/Gather"))
    nodes.append(helper.make_node("Gather", ["wpe.weight", "pos_ids"], ["pos"], name="/wpe/Gather"))
    nodes.append(helper.make_node("Add", ["tok", "pos"], ["h0"], name="/embed/Add"))
    x = "h0"
    for i in range(layers):
        p = f"h.{i}"
        inits += [weight(f"{p}.ln_1.weight", [hidden]), weight(f"{p}.ln_1.bias", [hidden]),
                  weight(f"{p}.attn.c_attn.weight", [hidden, 3 * hidden]), weight(f"{p}.attn.c_attn.bias", [3 * hidden]),
                  weight(f"{p}.attn.c_proj.weight", [hidden, hidden]), weight(f"{p}.attn.c_proj.bias", [hidden]),
                  weight(f"{p}.ln_2.weight", [hidden]), weight(f"{p}.ln_2.bias", [hidden]),
                  weight(f"{p}.mlp.c_fc.weight", [hidden, 4 * hidden]), weight(f"{p}.mlp.c_fc.bias", [4 * hidden]),
                  weight(f"{p}.mlp.c_proj.weight", [4 * hidden, hidden]), weight(f"{p}.mlp.c_proj.bias", [hidden])]
        n = f"/{p}"

        def node(op, ins, outs, name, **attrs):
            nodes.append(helper.make_node(op, ins, outs, name=f"{n}/{name}", **attrs))

        node("LayerNormalization", [x, f"{p}.ln_1.weight", f"{p}.ln_1.bias"], [f"{p}.a"], "ln_1", axis=-1, epsilon=1e-5)
        node("MatMul", [f"{p}.a", f"{p}.attn.c_attn.weight"], [f"{p}.qkv0"], "attn/c_attn/MatMul")
        node("Add", [f"{p}.qkv0", f"{p}.attn.c_attn.bias"], [f"{p}.qkv"], "attn/c_attn/Add")
        node("Split", [f"{p}.qkv", "qkv_split"], [f"{p}.q", f"{p}.k", f"{p}.v"], "attn/Split", axis=2)
        for t in ("q", "k", "v"):
            node("Reshape", [f"{p}.{t}", "heads_shape"], [f"{p}.{t}h"], f"attn/Reshape_{t}")
        node("Transpose", [f"{p}.qh"], [f"{p}.qt"], "attn/Transpose_q", perm=[0, 2, 1, 3])
        node("Transpose", [f"{p}.kh"], [f"{p}.kt"], "attn/Transpose_k", perm=[0, 2, 3, 1])
        node("Transpose", [f"{p}.vh"], [f"{p}.vt"], "attn/Transpose_v", perm=[0, 2, 1, 3])
        node("MatMul", [f"{p}.qt", f"{p}.kt"], [f"{p}.s0"], "attn/MatMul_qk")
        node("Mul", [f"{p}.s0", "scale"], [f"{p}.s1"], "attn/Mul")
        node("Where", ["mask", f"{p}.s1", "neg_inf"], [f"{p}.s2"], "attn/Where")
        node("Softmax", [f"{p}.s2"], [f"{p}.pr"], "attn/Softmax", axis=-1)
        node("MatMul", [f"{p}.pr", f"{p}.vt"], [f"{p}.o0"], "attn/MatMul_pv")
        node("Transpose", [f"{p}.o0"], [f"{p}.o1"], "attn/Transpose_o", perm=[0, 2, 1, 3])
        node("Reshape", [f"{p}.o1", "merge_shape"], [f"{p}.o2"], "attn/Reshape_o")
        node("MatMul", [f"{p}.o2", f"{p}.attn.c_proj.weight"], [f"{p}.o3"], "attn/c_proj/MatMul")
        node("Add", [f"{p}.o3", f"{p}.attn.c_proj.bias"], [f"{p}.o4"], "attn/c_proj/Add")
        node("Add", [x, f"{p}.o4"], [f"{p}.r1"], "Add_1")
        node("LayerNormalization", [f"{p}.r1", f"{p}.ln_2.weight", f"{p}.ln_2.bias"], [f"{p}.b"], "ln_2", axis=-1, epsilon=1e-5)
        node("MatMul", [f"{p}.b", f"{p}.mlp.c_fc.weight"], [f"{p}.f0"], "mlp/c_fc/MatMul")
        node("Add", [f"{p}.f0", f"{p}.mlp.c_fc.bias"], [f"{p}.f1"], "mlp/c_fc/Add")
        if gelu == "op":
            node("Gelu", [f"{p}.f1"], [f"{p}.f2"], "mlp/Gelu", approximate="tanh")
        else:
            h = f"{p}.f1"
            node("Pow", [h, "three"], [f"{p}.g0"], "mlp/act/Pow")
            node("Mul", [f"{p}.g0", "gelu_c1"], [f"{p}.g1"], "mlp/act/Mul")
            node("Add", [h, f"{p}.g1"], [f"{p}.g2"], "mlp/act/Add")
            node("Mul", [f"{p}.g2", "gelu_c2"], [f"{p}.g3"], "mlp/act/Mul_1")
            node("Tanh", [f"{p}.g3"], [f"{p}.g4"], "mlp/act/Tanh")
            node("Add", [f"{p}.g4", "one"], [f"{p}.g5"], "mlp/act/Add_1")
            node("Mul", [h, "half"], [f"{p}.g6"], "mlp/act/Mul_2")
            node("Mul", [f"{p}.g6", f"{p}.g5"], [f"{p}.f2"], "mlp/act/Mul_3")
        node("MatMul", [f"{p}.f2", f"{p}.mlp.c_proj.weight"], [f"{p}.f3"], "mlp/c_proj/MatMul")
        node("Add", [f"{p}.f3", f"{p}.mlp.c_proj.bias"], [f"{p}.f4"], "mlp/c_proj/Add")
        node("Add", [f"{p}.r1", f"{p}.f4"], [f"{p}.out"], "Add_2")
        x = f"{p}.out"
    inits += [weight("ln_f.weight", [hidden]), weight("ln_f.bias", [hidden])]
    nodes.append(helper.make_node("LayerNormalization", [x, "ln_f.weight", "ln_f.bias"], ["hf"], name="/ln_f",
                                  axis=-1, epsilon=1e-5))
    nodes.append(helper.make_node("Transpose", ["wte.weight"], ["wte_t"], name="/lm_head/Transpose", perm=[1, 0]))
    nodes.append(helper.make_node("MatMul", ["hf", "wte_t"], ["logits"], name="/lm_head/MatMul"))
    graph = helper.make_graph(nodes, "gpt2", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, seq, vocab])], inits)
    opset = 20 if gelu == "op" else 17
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="monet bench/make_gpt2.py")


def parameter_count(model: onnx.ModelProto) -> int:
    """The weights' elements (the initializers that point to external data)."""
    return sum(math.prod(t.dims) for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--hidden", type=int, default=1600)
    parser.add_argument("--heads", type=int, default=25)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1)
    a = parser.parse_args()
    model = build(a.layers, a.hidden, a.heads, a.vocab, a.seq, a.batch)
    onnx.save(model, a.out)
    params = parameter_count(model)
    print(f"{a.out}: {params:,} parameters ({a.layers} layers, hidden {a.hidden}, {a.heads} heads, vocab {a.vocab}, seq {a.seq})")


if __name__ == "__main__":
    main()
