"""Seeded generator of valid-but-unusual and malformed inputs: ONNX models and target files.

    python tests/data/unusual/generate.py OUT_DIR [--seed N]

writes the files and `cases.json` (what each file is and what is expected of it);
`tests/unit/test_unusual_inputs.py` generates them into a temporary folder at test time.

Valid ONNX models are small networks (MLP, CNN, residual block, attention block, embedding,
decoder with upsampling, LSTM) written as users' exporters write them, each with a random mix of
what is unusual but legal:
* opsets 13..21 with each opset's forms (axes as inputs from 13/18, `Split` by `num_outputs`,
  `LayerNormalization` from 17) and an `ir_version` that matches or is newer;
* the TorchScript exporter's idioms (`/layer/Conv` names, `onnx::Conv_12` initializers,
  `Constant` nodes, shape arithmetic through `Shape`/`Gather`/`Concat`, no `value_info`) or the
  dynamo exporter's (`node_Conv_0` names, `value_info` for every value, constants as
  initializers, metadata), or neither;
* empty optional inputs and outputs (``""``), initializers also listed as graph inputs, symbolic
  dimensions pinned with --dim, scalar (rank-0) tensors, explicit default attributes, negative
  axes, `auto_pad`, unusual names (unicode, dots, slashes, spaces, digits first, very long,
  empty or repeated node names), external data inside the model's folder, unused extra opset
  imports, dead nodes, several outputs, doc strings and metadata.
Each malformed model is one mutation of a valid one (a node's arity, an attribute missing,
unknown or mistyped, `ir_version`, opsets, two producers, topological order, duplicate names,
initializer data, external data leaving the folder or not fitting, impossible shapes, stated
types that do not fit their node). Target files are Stream systems (2024 list, 2025 and 2026
formats), ZigZag cores and our own format with optional fields left out or written another
legal way, and single mutations of them that Stream's reader or ours refuses.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
REPO = DATA.parents[1]


@dataclass
class Case:
    """One generated file: `valid` ones must load; a malformed one must give one error line
    naming the file and holding every fragment of `expect`."""

    kind: str  # "onnx" or "target"
    name: str
    path: str
    valid: bool
    dims: dict[str, int] = field(default_factory=dict)
    expect: list[str] = field(default_factory=list)
    report: bool = False  # a valid model that also goes through `monet report`
    file: str = ""  # the file a malformed case's line names, when not `path` (a core file the system uses)
    notes: list[str] = field(default_factory=list)  # the unusual features (valid) or the mutation


# ====================================================================== ONNX models


OPSET_IR = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}
UNICODE = ["κλάση", "层", "ü_ber", "🙂", "名前", "ж"]


class Builder:
    """A graph written in one exporter's idioms, with its own naming scheme."""

    def __init__(self, rng: random.Random, opset: int, style: str, naming: str):
        self.rng, self.opset, self.style, self.naming = rng, opset, style, naming
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.counter = 0
        self.notes: list[str] = []
        self.scope = "layer"
        self.used: set[str] = set()

    def unique(self, name: str) -> str:
        """`name`, or with the exporters' `_1`, `_2`... suffix when taken."""
        candidate, k = name, 0
        while candidate in self.used:
            k += 1
            candidate = f"{name}_{k}"
        self.used.add(candidate)
        return candidate

    # -------------------------------------------------------------- names

    def _decorate(self, base: str) -> str:
        n = self.naming
        if n == "unicode":
            return f"{self.rng.choice(UNICODE)}/{base}"
        if n == "punctuated":
            return self.rng.choice([f"model.{base}", f"a/b.c:{base}", f"{base} with spaces", f"{base}::x"])
        if n == "digits":
            return f"{self.counter}{base}"
        if n == "long":
            return f"{base}_" + "x" * self.rng.randrange(200, 400)
        if n == "optype":
            return self.rng.choice(["Relu", "Add", "MatMul", "input", "output"]) + str(self.counter)
        return base

    def value_name(self, op: str) -> str:
        self.counter += 1
        if self.style == "ts":
            base = f"/{self.scope}/{op}_output_0" if self.counter % 3 else f"onnx::{op}_{self.counter}"
        elif self.style == "dynamo":
            base = op.lower()
        else:
            base = f"t{self.counter}"
        return self.unique(self._decorate(base))

    def node_name(self, op: str) -> str:
        if self.naming == "empty":
            return ""
        if self.naming == "repeated":
            return "node"  # ONNX does not ask node names to be unique
        if self.style == "ts":
            return self.unique(self._decorate(f"/{self.scope}/{op}"))
        if self.style == "dynamo":
            return self.unique(self._decorate(f"node_{op}_{self.counter}"))
        return self.unique(self._decorate(f"n{self.counter}"))

    def param_name(self, what: str) -> str:
        self.counter += 1
        if self.style == "ts" and self.rng.random() < 0.4:
            return self.unique(f"onnx::{what}_{self.counter}")
        return self.unique(self._decorate(f"{self.scope}.{what}"))

    # -------------------------------------------------------------- building

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        from onnx import helper

        outs = [self.value_name(op) for _ in range(n_out)]
        node = helper.make_node(op, inputs, outs, name=self.node_name(op), **attrs)
        if self.style == "dynamo" and self.rng.random() < 0.3:
            entry = node.metadata_props.add() if hasattr(node, "metadata_props") else None
            if entry is not None:
                entry.key, entry.value = "namespace", f"{self.scope}: torch.nn.Module"
        self.nodes.append(node)
        return outs

    def one(self, op: str, inputs: list[str], **attrs: Any) -> str:
        return self.node(op, inputs, 1, **attrs)[0]

    def weight(self, shape: list[int], what: str = "weight", dtype: Any = None) -> str:
        import numpy as np
        from onnx import numpy_helper

        name = self.param_name(what)
        array = (np.random.default_rng(self.counter).standard_normal(shape) * 0.1).astype(dtype or np.float32)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def const(self, values: Any, dtype: str = "int64") -> str:
        """A small constant the way the exporter writes it: a `Constant` node (TorchScript) or an
        initializer (dynamo)."""
        import numpy as np
        from onnx import helper, numpy_helper

        array = np.asarray(values, dtype=dtype)
        if self.style == "ts" or (self.style == "plain" and self.rng.random() < 0.5):
            if array.ndim == 0 and dtype.startswith("float") and self.rng.random() < 0.5:
                return self.one("Constant", [], value_float=float(array))
            if array.ndim == 1 and dtype == "int64" and self.rng.random() < 0.3:
                return self.one("Constant", [], value_ints=[int(v) for v in array])
            return self.one("Constant", [], value=numpy_helper.from_array(array, "c"))
        name = self.param_name("val")
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def axes_input_or_attr(self, op: str, x: str, axes: list[int], since: int, **attrs: Any) -> str:
        if self.opset >= since:
            return self.one(op, [x, self.const(axes)], **attrs)
        return self.one(op, [x], axes=axes, **attrs)

    def reduce_mean(self, x: str, axes: list[int], keepdims: int) -> str:
        return self.axes_input_or_attr("ReduceMean", x, axes, 18, keepdims=keepdims)

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        return self.axes_input_or_attr("Unsqueeze", x, axes, 13)

    def activation(self, x: str) -> str:
        choice = self.rng.choice(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "Gelu", "HardSwish", "Clip", "Erf-gelu"])
        if choice == "Gelu" and self.opset < 20:
            choice = "Erf-gelu"
        if choice == "HardSwish" and self.opset < 14:
            choice = "Relu"
        if choice == "LeakyRelu":
            return self.one("LeakyRelu", [x], **({"alpha": 0.1} if self.rng.random() < 0.5 else {}))
        if choice == "Clip":
            # empty optional min with a max: a ReLU6 written with "" for min, or both given
            if self.rng.random() < 0.5:
                self.notes.append("empty optional input")
                return self.one("Clip", [x, "", self.const(6.0, "float32")])
            return self.one("Clip", [x, self.const(0.0, "float32"), self.const(6.0, "float32")])
        if choice == "Erf-gelu":
            half = self.one("Div", [x, self.const(1.4142135, "float32")])
            erf = self.one("Erf", [half])
            plus = self.one("Add", [erf, self.const(1.0, "float32")])
            return self.one("Mul", [self.one("Mul", [x, plus]), self.const(0.5, "float32")])
        if choice == "Gelu":
            return self.one("Gelu", [x], **({"approximate": "tanh"} if self.rng.random() < 0.5 else {}))
        return self.one(choice, [x])

    def linear(self, x: str, d_in: int, d_out: int, rank: int = 2) -> str:
        if rank == 2 and self.rng.random() < 0.5:
            attrs = {"transB": 1} if self.rng.random() < 0.7 else {}
            shape = [d_out, d_in] if attrs else [d_in, d_out]
            if self.rng.random() < 0.3:
                attrs.update(alpha=1.0, beta=1.0)  # explicit defaults
                self.notes.append("explicit default attributes")
            return self.one("Gemm", [x, self.weight(shape), self.weight([d_out], "bias")], **attrs)
        if self.style == "ts" and self.rng.random() < 0.5:
            # TorchScript's Linear on 3-D inputs: a transposed weight initializer, MatMul, Add
            w = self.one("Transpose", [self.weight([d_out, d_in])], perm=[1, 0])
            return self.one("Add", [self.weight([d_out], "bias"), self.one("MatMul", [x, w])])
        return self.one("Add", [self.one("MatMul", [x, self.weight([d_in, d_out])]), self.weight([d_out], "bias")])


def tensor_input(b: Builder, name: str, elem: int, shape: list[Any]) -> str:
    from onnx import helper

    b.inputs.append(helper.make_tensor_value_info(name, elem, shape))
    return name


# ---------------------------------------------------------------------- architectures
# each returns (graph input shape, output name); the output is [batch, classes] unless noted


def arch_mlp(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    d = b.rng.choice([8, 12, 16])
    x = tensor_input(b, b._decorate("input") if b.naming != "plain" else "x", TensorProto.FLOAT, [batch, d])
    h = x
    for _ in range(b.rng.randint(1, 3)):
        b.scope = f"fc{b.counter}"
        h = b.activation(b.linear(h, d, d))
    b.scope = "head"
    return b.linear(h, d, classes)


def conv(b: Builder, x: str, c_in: int, c_out: int, k: int, hw: int, **extra: Any) -> tuple[str, int]:
    """A convolution in one of the legal spellings; returns the output and its spatial size."""
    group = extra.pop("group", 1)
    w = b.weight([c_out, c_in // group, k, k])
    bias = b.weight([c_out], "bias") if b.rng.random() < 0.6 else ""
    inputs = [x, w] + ([bias] if bias or b.rng.random() < 0.3 else [])
    if not bias and len(inputs) == 3:
        b.notes.append("empty optional input")
    attrs: dict[str, Any] = {"group": group} if group != 1 or b.rng.random() < 0.3 else {}
    style = b.rng.random()
    if style < 0.25:
        attrs.update(auto_pad="SAME_UPPER", strides=[1, 1])
        b.notes.append("auto_pad")
        out_hw = hw
    elif style < 0.5 and hw > k:
        attrs.update(auto_pad="VALID")
        out_hw = hw - k + 1
    else:
        pad = k // 2
        attrs.update(pads=[pad] * 4)
        if b.rng.random() < 0.5:
            attrs.update(kernel_shape=[k, k], strides=[1, 1], dilations=[1, 1])
        out_hw = hw + 2 * pad - k + 1
    attrs.update(extra)
    return b.one("Conv", inputs, **attrs), out_hw


def batch_norm(b: Builder, x: str, c: int) -> str:
    import numpy as np

    params = [b.weight([c], "scale"), b.weight([c], "bias")]
    mean = b.param_name("running_mean")
    var = b.param_name("running_var")
    from onnx import numpy_helper

    b.inits.append(numpy_helper.from_array(np.zeros(c, np.float32), mean))
    b.inits.append(numpy_helper.from_array(np.ones(c, np.float32), var))
    attrs = {"epsilon": 1e-5} if b.rng.random() < 0.5 else {}
    if b.rng.random() < 0.3:
        attrs["momentum"] = 0.9
    return b.one("BatchNormalization", [x, *params, mean, var], **attrs)


def arch_cnn(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    c, hw = b.rng.choice([1, 3]), b.rng.choice([8, 12, 16])
    x = tensor_input(b, "image" if b.style == "ts" else "x", TensorProto.FLOAT, [batch, c, hw, hw])
    b.scope = "features"
    width = b.rng.choice([4, 8])
    h, hw = conv(b, x, c, width, 3, hw)
    if b.rng.random() < 0.6:
        h = batch_norm(b, h, width)
    h = b.activation(h)
    pool = b.rng.choice(["MaxPool", "AveragePool", "none"])
    if pool != "none" and hw >= 4:
        attrs: dict[str, Any] = {"kernel_shape": [2, 2], "strides": [2, 2]}
        if b.rng.random() < 0.3:
            attrs["pads"] = [0, 0, 0, 0]
        if b.rng.random() < 0.3 and b.opset >= 10:
            attrs["ceil_mode"] = 0
        if pool == "MaxPool" and b.rng.random() < 0.3:
            outs = b.node("MaxPool", [h], 2, **attrs)  # the Indices output present, unused
            b.nodes[-1].output[1] = ""
            b.notes.append("empty optional output")
            h = outs[0]
        else:
            h = b.one(pool, [h], **attrs)
        hw //= 2
    if b.rng.random() < 0.5:
        # a depthwise convolution
        h, hw = conv(b, h, width, width, 3, hw, group=width)
        h = b.activation(h)
    b.scope = "head"
    h = b.one("GlobalAveragePool", [h])
    if b.style == "ts" and b.rng.random() < 0.5:
        # TorchScript's flatten through shape arithmetic
        shape = b.one("Shape", [h])
        first = b.one("Gather", [shape, b.const(0)], axis=0)
        dims = b.one("Concat", [b.unsqueeze(first, [0]), b.const([-1])], axis=0)
        h = b.one("Reshape", [h, dims])
        b.notes.append("shape arithmetic")
    else:
        h = b.one("Flatten", [h], **({"axis": 1} if b.rng.random() < 0.5 else {}))
    return b.linear(h, width, classes)


def arch_residual(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    c, hw = 4, b.rng.choice([6, 8])
    x = tensor_input(b, "x", TensorProto.FLOAT, [batch, c, hw, hw])
    b.scope = "block"
    h = b.one("Relu", [batch_norm(b, conv_same(b, x, c), c)])
    h2 = conv_same(b, h, c)
    skip = b.one("Add", [batch_norm(b, h2, c), x] if b.rng.random() < 0.5 else [x, h2])
    h = b.one("Relu", [skip])
    b.scope = "head"
    pooled = b.reduce_mean(h, [-2, -1] if b.rng.random() < 0.5 else [2, 3], keepdims=0)
    b.notes.append("negative axes" if "-2" in str(b.nodes[-1]) else "axes")
    return b.linear(pooled, c, classes)


def conv_same(b: Builder, x: str, c_out: int, c_in: int | None = None) -> str:
    """A 3x3 convolution that keeps the spatial size."""
    return b.one("Conv", [x, b.weight([c_out, c_in or c_out, 3, 3])], pads=[1, 1, 1, 1], kernel_shape=[3, 3])


def layer_norm(b: Builder, x: str, d: int) -> str:
    if b.opset >= 17 and b.rng.random() < 0.7:
        scale = b.weight([d], "ln_weight")
        if b.rng.random() < 0.3:
            b.notes.append("optional input left out")
            return b.one("LayerNormalization", [x, scale], axis=-1, epsilon=1e-5)
        return b.one("LayerNormalization", [x, scale, b.weight([d], "ln_bias")], axis=-1)
    # the decomposition older exporters write
    mean = b.reduce_mean(x, [-1], keepdims=1)
    centred = b.one("Sub", [x, mean])
    var = b.reduce_mean(b.one("Pow", [centred, b.const(2.0, "float32")]), [-1], keepdims=1)
    std = b.one("Sqrt", [b.one("Add", [var, b.const(1e-5, "float32")])])
    return b.one("Add", [b.one("Mul", [b.one("Div", [centred, std]), b.weight([d], "ln_weight")]),
                         b.weight([d], "ln_bias")])


def arch_attention(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    t, heads, dh = b.rng.choice([4, 6]), 2, b.rng.choice([4, 8])
    d = heads * dh
    x = tensor_input(b, "hidden_states", TensorProto.FLOAT, [batch, t, d])
    b.scope = "attn"
    h = layer_norm(b, x, d)
    n = batch if isinstance(batch, int) else 0  # 0: copy the dimension (Reshape's rule)
    if isinstance(batch, str):
        b.notes.append("Reshape copying a symbolic dim (0)")

    def heads_of(v: str) -> str:
        r = b.one("Reshape", [v, b.const([n, t, heads, dh])])
        return b.one("Transpose", [r], perm=[0, 2, 1, 3])

    q, k, v = (heads_of(b.linear(h, d, d, rank=3)) for _ in range(3))
    kt = b.one("Transpose", [k], perm=[0, 1, 3, 2])
    scores = b.one("Div", [b.one("MatMul", [q, kt]), b.const(float(dh) ** 0.5, "float32")])
    b.notes.append("scalar constant")
    probs = b.one("Softmax", [scores], **({"axis": -1} if b.rng.random() < 0.5 or b.opset < 13 else {}))
    ctx = b.one("Transpose", [b.one("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.one("Reshape", [ctx, b.const([n, t, d])])
    out = b.one("Add", [x, b.linear(merged, d, d, rank=3)])
    b.scope = "head"
    pooled = b.reduce_mean(out, [1], keepdims=0)
    return b.linear(pooled, d, classes)


def arch_embedding(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    vocab, t, d = b.rng.choice([20, 50]), b.rng.choice([5, 7]), 8
    ids = tensor_input(b, "input_ids", TensorProto.INT64, [batch, t])
    b.scope = "embed"
    table = b.weight([vocab, d], "embedding")
    h = b.one("Gather", [table, ids], **({"axis": 0} if b.rng.random() < 0.5 else {}))
    positions = b.weight([t, d], "position")
    h = b.one("Add", [h, positions])
    b.scope = "head"
    if b.opset >= 18 and b.rng.random() < 0.5:
        parts = b.node("Split", [h], 2, axis=-1, num_outputs=2)
        b.notes.append("Split num_outputs")
    elif b.opset >= 13:
        parts = b.node("Split", [h, b.const([d // 2, d // 2])], 2, axis=2)
    else:
        parts = b.node("Split", [h], 2, axis=2, split=[d // 2, d // 2])
    h = b.one("Concat", [parts[1], parts[0]], axis=-1)
    pooled = b.reduce_mean(h, [1], keepdims=0)
    return b.linear(pooled, d, classes)


def arch_decoder(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    c, hw = 4, 4
    x = tensor_input(b, "latent", TensorProto.FLOAT, [batch, c, hw, hw])
    b.scope = "up"
    if b.rng.random() < 0.5:
        scales = b.const([1.0, 1.0, 2.0, 2.0], "float32")
        roi = "" if b.rng.random() < 0.7 else b.const([], "float32")
        mode = b.rng.choice(["nearest", "linear"])
        attrs: dict[str, Any] = {"mode": mode}
        if mode == "linear":
            attrs["coordinate_transformation_mode"] = b.rng.choice(["half_pixel", "align_corners", "asymmetric"])
        up = b.one("Resize", [x, roi, scales], **attrs)
        b.notes.append("Resize with an empty roi" if roi == "" else "Resize")
    else:
        up = b.one("ConvTranspose", [x, b.weight([c, c, 2, 2]), b.weight([c], "bias")], strides=[2, 2],
                   kernel_shape=[2, 2])
    skip = b.one("Resize", [x, "", b.const([1.0, 1.0, 2.0, 2.0], "float32")], mode="nearest")
    h = conv_same(b, b.one("Concat", [up, skip], axis=1), c, 2 * c)
    if b.rng.random() < 0.5:
        pad = b.one("Pad", [h, b.const([0, 0, 1, 1, 0, 0, 1, 1]), ""], mode="constant")
        b.notes.append("Pad with an empty constant_value")
        h = b.one("MaxPool", [pad], kernel_shape=[3, 3], strides=[1, 1])
    b.scope = "head"
    h = b.one("Flatten", [b.one("GlobalAveragePool", [h])])
    return b.linear(h, c, classes)


def arch_lstm(b: Builder, batch: Any, classes: int) -> str:
    from onnx import TensorProto

    t, d, hidden = 4, 6, 5
    x = tensor_input(b, "sequence", TensorProto.FLOAT, [t, batch, d])
    b.scope = "rnn"
    w, r, bias = b.weight([1, 4 * hidden, d]), b.weight([1, 4 * hidden, hidden]), b.weight([1, 8 * hidden], "bias")
    outs = b.node("LSTM", [x, w, r, bias], 3, hidden_size=hidden)
    b.nodes[-1].output[1] = ""
    b.nodes[-1].output[2] = ""
    b.notes.append("trailing empty optional outputs")
    # Y is [T, directions, N, hidden]: the mean over time, then the one direction squeezed out
    last = b.axes_input_or_attr("Squeeze", b.reduce_mean(outs[0], [0], keepdims=0), [0], 13)
    b.scope = "head"
    return b.linear(last, hidden, classes)


ARCHITECTURES = {"mlp": arch_mlp, "cnn": arch_cnn, "residual": arch_residual, "attention": arch_attention,
                 "embedding": arch_embedding, "decoder": arch_decoder, "lstm": arch_lstm}


def build_valid_model(rng: random.Random, index: int, folder: Path) -> tuple[Case, Any]:
    """One valid-but-unusual model written into `folder` (it may add external data files)."""
    import onnx
    from onnx import TensorProto, helper

    arch = rng.choice(sorted(ARCHITECTURES))
    opset = rng.choice(sorted(OPSET_IR))
    style = rng.choice(["ts", "dynamo", "plain"])
    naming = rng.choice(["plain"] * 4 + ["unicode", "punctuated", "digits", "long", "optype", "empty", "repeated"])
    b = Builder(rng, opset, style, naming)
    notes = [f"{arch}", f"opset {opset}", f"{style} style", f"{naming} names"]
    symbolic = rng.random() < 0.35
    batch: Any = rng.choice([1, 2, 3]) if not symbolic else rng.choice(["batch", "s0", "N", "batch_size"])
    dims = {batch: rng.choice([1, 2, 4])} if symbolic else {}
    if symbolic:
        notes.append(f"symbolic dim {batch} (--dim)")
    classes = rng.choice([3, 5, 10])
    out = ARCHITECTURES[arch](b, batch, classes)
    out_name = out
    if rng.random() < 0.3:
        # a scalar graph input: a temperature dividing the logits
        temperature = tensor_input(b, "temperature", TensorProto.FLOAT, [])
        out = b.one("Div", [out, temperature])
        notes.append("scalar input")
    if rng.random() < 0.2:
        out = b.one("Identity", [out])
    if rng.random() < 0.2:
        b.one("Relu", [out])  # a dead node
        notes.append("dead node")
    if rng.random() < 0.15 and arch in ("mlp", "cnn"):
        ratio = b.const(0.1, "float32")
        out = b.node("Dropout", [out, ratio, ""] if opset >= 12 else [out], 2)[0]
        b.nodes[-1].output[1] = ""
        notes.append("Dropout, training_mode ''")
    final = "logits" if style != "dynamo" else "output"
    if b.naming in ("unicode", "punctuated"):
        final = b._decorate("logits")
    b.nodes.append(helper.make_node("Identity", [out], [final], name=b.node_name("Identity")))
    out_shape = [batch, classes]
    b.outputs.append(helper.make_tensor_value_info(final, TensorProto.FLOAT, out_shape if rng.random() < 0.8 else None))
    if rng.random() < 0.2:
        b.outputs.append(helper.make_tensor_value_info(out_name if out_name != final else out, TensorProto.FLOAT, None))
        notes.append("two outputs")
    graph = helper.make_graph(b.nodes, b._decorate("main_graph"), b.inputs, b.outputs, initializer=b.inits)
    ir = OPSET_IR[opset] if rng.random() < 0.7 else rng.choice([OPSET_IR[opset], 9, 10])
    imports = [helper.make_opsetid("", opset)]
    if rng.random() < 0.25:
        imports += [helper.make_opsetid("ai.onnx.ml", 3), helper.make_opsetid("com.microsoft", 1)]
        notes.append("unused opset imports")
    model = helper.make_model(graph, opset_imports=imports, ir_version=max(ir, 7),
                              producer_name="pytorch" if style != "plain" else "", producer_version="2.5.0")
    if style == "dynamo":
        entry = model.metadata_props.add()
        entry.key, entry.value = "pkg.torch.export.ExportedProgram", "yes"
        model.doc_string = "exported by a generator in the dynamo exporter's style"
    # types of intermediates: all (dynamo), some, none (TorchScript), from ONNX's inference
    typing = "all" if style == "dynamo" else rng.choice(["none", "none", "some"])
    if typing != "none":
        inferred = onnx.shape_inference.infer_shapes(model)
        known = [v for v in inferred.graph.value_info]
        if typing == "some":
            known = [v for v in known if rng.random() < 0.5]
        model.graph.value_info.extend(known)
        notes.append(f"value_info: {typing}")
    if rng.random() < 0.2:
        # initializers also listed as graph inputs (inputs with default values)
        for init in list(model.graph.initializer)[: rng.randint(1, len(model.graph.initializer))]:
            model.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        notes.append("initializers as graph inputs")
    name = f"valid_{index:03d}_{arch}_op{opset}_{style}.onnx"
    path = folder / name
    external = rng.random() < 0.25
    if external:
        location = rng.choice([f"{name}.data", "weights/params.bin", "w.bin"])
        (folder / "weights").mkdir(exist_ok=True)
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=location, size_threshold=rng.choice([0, 64, 1024]))
        notes.append(f"external data '{location}'")
    else:
        path.write_bytes(model.SerializeToString())
    model = onnx.load(str(path), load_external_data=False)
    report = out_shape == [batch, classes] and arch != "embedding" and index % 4 == 0
    return Case("onnx", name, str(path), True, {str(k): v for k, v in dims.items()}, report=report,
                notes=notes + b.notes), model


# ---------------------------------------------------------------------- malformed models


def _node_with(model: Any, rng: random.Random, test) -> tuple[int, Any] | None:
    found = [(i, n) for i, n in enumerate(model.graph.node) if test(n)]
    return rng.choice(found) if found else None


def _fragment(index: int, node: Any) -> str:
    """What the error must name of a node: its position."""
    return f"node #{index} "


MUTATIONS: dict[str, Any] = {}


def mutation(name: str):
    def register(fn):
        MUTATIONS[name] = fn
        return fn

    return register


UNARY = ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Neg", "Softmax", "Identity", "Flatten", "GlobalAveragePool")


@mutation("extra input")
def _extra_input(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in UNARY and n.domain == "")
    if not hit:
        return None
    i, n = hit
    n.input.append(n.input[0])
    return [_fragment(i, n), "inputs, but ONNX's"]


@mutation("missing input")
def _missing_input(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in ("Add", "Mul", "MatMul", "Div", "Sub", "Conv", "Gemm"))
    if not hit:
        return None
    i, n = hit
    del n.input[1:]
    return [_fragment(i, n), "inputs, but ONNX's"]


@mutation("extra output")
def _extra_output(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in ("Relu", "Add", "MatMul", "Sigmoid", "Conv", "Gemm"))
    if not hit:
        return None
    i, n = hit
    n.output.append(f"{n.output[0]}_extra")
    return [_fragment(i, n), "outputs, but ONNX's"]


@mutation("required attribute removed")
def _required_removed(m, rng, folder):
    required = {"Concat": "axis", "Cast": "to", "MaxPool": "kernel_shape", "AveragePool": "kernel_shape",
                "LSTM": None}
    hit = _node_with(m, rng, lambda n: required.get(n.op_type) and any(a.name == required[n.op_type]
                                                                      for a in n.attribute))
    if not hit:
        return None
    i, n = hit
    keep = [a for a in n.attribute if a.name != required[n.op_type]]
    del n.attribute[:]
    n.attribute.extend(keep)
    return [_fragment(i, n), f"required attribute '{required[n.op_type]}' is missing"]


@mutation("unknown attribute")
def _unknown_attribute(m, rng, folder):
    from onnx import helper

    hit = _node_with(m, rng, lambda n: n.domain == "" and n.op_type not in ("LayerNormalization", "Constant"))
    if not hit:
        return None
    i, n = hit
    n.attribute.append(helper.make_attribute(rng.choice(["foo", "axiss", "kernel"]), 1))
    return [_fragment(i, n), "unknown attribute"]


@mutation("attribute of the wrong type")
def _wrong_type(m, rng, folder):
    hit = _node_with(m, rng, lambda n: any(a.type == 2 for a in n.attribute) and n.op_type != "Constant")
    if not hit:
        return None
    i, n = hit
    a = next(a for a in n.attribute if a.type == 2)
    value = a.i
    a.ClearField("i")
    a.type = 1
    a.f = float(value) + 0.5
    return [_fragment(i, n), f"attribute '{a.name}' is of type FLOAT"]


@mutation("attribute value in another field")
def _wrong_field(m, rng, folder):
    hit = _node_with(m, rng, lambda n: any(a.type == 7 and len(a.ints) for a in n.attribute))
    if not hit:
        return None
    i, n = hit
    a = next(a for a in n.attribute if a.type == 7 and len(a.ints))
    a.floats.extend(float(v) for v in a.ints)
    a.ClearField("ints")
    return [_fragment(i, n), f"attribute '{a.name}'"]


@mutation("attribute given twice")
def _twice(m, rng, folder):
    hit = _node_with(m, rng, lambda n: len(n.attribute) > 0 and n.op_type != "Constant")
    if not hit:
        return None
    i, n = hit
    n.attribute.append(n.attribute[0])
    return [_fragment(i, n), "given twice"]


@mutation("ir_version removed")
def _no_ir(m, rng, folder):
    m.ClearField("ir_version")
    return ["ir_version is missing"]


@mutation("ir_version from the future")
def _future_ir(m, rng, folder):
    m.ir_version = rng.choice([99, 1000])
    return ["is newer than this ONNX"]


@mutation("opset from the future")
def _future_opset(m, rng, folder):
    for entry in m.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = rng.choice([40, 99])
    return ["is not supported"]


@mutation("no default opset")
def _no_opset(m, rng, folder):
    keep = [e for e in m.opset_import if e.domain not in ("", "ai.onnx")]
    del m.opset_import[:]
    m.opset_import.extend(keep)
    return ["default ONNX domain"]


@mutation("two producers")
def _two_producers(m, rng, folder):
    nodes = m.graph.node
    candidates = [i for i in range(1, len(nodes)) if nodes[i].output and nodes[i].output[0]]
    if len(candidates) < 2:
        return None
    a, b = sorted(rng.sample(candidates, 2))
    nodes[b].output[0] = nodes[a].output[0]
    return [f"node #{b} ", "is already produced by"]


@mutation("output redefines a graph input")
def _redefines_input(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in ("Relu", "Add", "MatMul", "Identity") and n.output[0])
    if not hit or not m.graph.input:
        return None
    i, n = hit
    n.output[0] = m.graph.input[0].name
    return [f"node #{i} ", "is already a graph input"]


@mutation("nodes out of order")
def _out_of_order(m, rng, folder):
    nodes = list(m.graph.node)
    producers = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    pairs = [(producers[x], j) for j, n in enumerate(nodes) for x in n.input if x in producers and producers[x] < j]
    if not pairs:
        return None
    p, c = rng.choice(pairs)
    node = nodes.pop(c)
    nodes.insert(p, node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return ["topological order"]


@mutation("undefined input")
def _undefined(m, rng, folder):
    hit = _node_with(m, rng, lambda n: len(n.input) > 0 and n.input[0])
    if not hit:
        return None
    i, n = hit
    n.input[0] = "no_such_tensor"
    return [f"node #{i} ", "input 'no_such_tensor' is not defined"]


@mutation("graph outputs removed")
def _no_outputs(m, rng, folder):
    del m.graph.output[:]
    return ["the graph has no outputs"]


@mutation("graph output listed twice")
def _output_twice(m, rng, folder):
    m.graph.output.append(m.graph.output[0])
    return [f"graph output '{m.graph.output[0].name}' is listed twice"]


@mutation("graph output nothing produces")
def _output_undefined(m, rng, folder):
    m.graph.output[0].name = "nowhere"
    return ["graph output 'nowhere' is not produced"]


@mutation("initializer defined twice")
def _init_twice(m, rng, folder):
    inline = [t for t in m.graph.initializer if t.data_location != 1]
    if not inline:
        return None
    t = copy.deepcopy(rng.choice(inline))
    m.graph.initializer.append(t)
    return [f"initializer '{t.name}' is defined twice"]


@mutation("initializer data truncated")
def _truncated(m, rng, folder):
    raw = [t for t in m.graph.initializer if t.raw_data and len(t.raw_data) >= 8]
    if not raw:
        return None
    t = rng.choice(raw)
    t.raw_data = t.raw_data[: len(t.raw_data) - rng.choice([1, 4, len(t.raw_data) // 2])]
    return [f"initializer '{t.name}'", "bytes of data"]


def _data_inputs(m: Any) -> list[Any]:
    """The graph inputs that are not initializers (inputs with default values)."""
    inits = {t.name for t in m.graph.initializer}
    return [v for v in m.graph.input if v.name not in inits]


@mutation("input whose initializer has another shape")
def _input_initializer_mismatch(m, rng, folder):
    inits = {t.name: t for t in m.graph.initializer}
    listed = [v for v in m.graph.input if v.name in inits and len(v.type.tensor_type.shape.dim)]
    if not listed:
        return None
    v = rng.choice(listed)
    v.type.tensor_type.shape.dim[0].dim_value += 1
    return [f"graph input '{v.name}' states a type other than its initializer's"]


@mutation("input dimension zero")
def _zero_dim(m, rng, folder):
    shaped = [v for v in _data_inputs(m) if len(v.type.tensor_type.shape.dim) >= 2]
    if not shaped:
        return None
    v = rng.choice(shaped)
    d = v.type.tensor_type.shape.dim[-1]
    d.ClearField("dim_param")
    d.dim_value = 0
    return [f"input '{v.name}'", "no elements"]


@mutation("input dimension negative")
def _negative_dim(m, rng, folder):
    shaped = [v for v in _data_inputs(m) if len(v.type.tensor_type.shape.dim) >= 1]
    if not shaped:
        return None
    v = rng.choice(shaped)
    v.type.tensor_type.shape.dim[-1].dim_value = -rng.choice([1, 7])
    return [f"input '{v.name}'", "negative"]


@mutation("input dimensions overflowing")
def _overflow(m, rng, folder):
    shaped = [v for v in _data_inputs(m) if len(v.type.tensor_type.shape.dim) >= 2]
    if not shaped:
        return None
    v = rng.choice(shaped)
    for d in v.type.tensor_type.shape.dim:
        d.dim_value = 1 << 31
    return [f"input '{v.name}'", "2**53"]


@mutation("stated type that does not fit its node")
def _bad_value_info(m, rng, folder):
    infos = [v for v in m.graph.value_info if v.type.tensor_type.HasField("shape")
             and len(v.type.tensor_type.shape.dim) >= 2 and all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)]
    producers = {o: (i, n) for i, n in enumerate(m.graph.node) for o in n.output}
    infos = [v for v in infos if v.name in producers and producers[v.name][1].op_type in
             ("Conv", "MatMul", "Gemm", "Relu", "Add", "Transpose")]
    if not infos:
        return None
    v = rng.choice(infos)
    v.type.tensor_type.shape.dim[-1].dim_value += rng.choice([1, 3])
    i, n = producers[v.name]
    return [f"node #{i} "]


@mutation("conv window larger than its input")
def _big_kernel(m, rng, folder):
    import numpy as np
    from onnx import numpy_helper

    inits = {t.name: t for t in m.graph.initializer}
    hit = _node_with(m, rng, lambda n: n.op_type == "Conv" and n.input[1] in inits and inits[n.input[1]].data_location != 1
                     and not any(a.name in ("kernel_shape", "auto_pad") for a in n.attribute))
    if not hit:
        return None
    i, n = hit
    w = inits[n.input[1]]
    dims = list(w.dims)
    dims[2] = dims[3] = 41
    w.CopyFrom(numpy_helper.from_array(np.zeros(dims, np.float32), w.name))
    infos = [v for v in m.graph.value_info if v.name == n.output[0]]
    for v in infos:  # a stated output type would be refused first, also naming the node
        m.graph.value_info.remove(v)
    return [f"'{n.name or n.output[0]}'"[:20], "larger than the padded input"]


@mutation("stride zero")
def _stride_zero(m, rng, folder):
    from onnx import helper

    hit = _node_with(m, rng, lambda n: n.op_type in ("Conv", "MaxPool", "AveragePool"))
    if not hit:
        return None
    i, n = hit
    keep = [a for a in n.attribute if a.name != "strides"]
    del n.attribute[:]
    n.attribute.extend(keep)
    n.attribute.append(helper.make_attribute("strides", [0, 0]))
    for v in [v for v in m.graph.value_info if v.name in n.output]:
        m.graph.value_info.remove(v)
    return ["must be positive"]


@mutation("empty single input")
def _empty_single(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in ("Add", "Mul", "MatMul", "Sub", "Div") and len(n.input) == 2)
    if not hit:
        return None
    i, n = hit
    n.input[1] = ""
    return [f"node #{i} ", "input 1 is empty"]


@mutation("undeclared domain")
def _undeclared_domain(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in ("Relu", "Sigmoid", "Tanh"))
    if not hit:
        return None
    i, n = hit
    n.domain = "com.example.custom"
    return [f"(com.example.custom::{n.op_type})", "neither declared nor supported"]


@mutation("operator ONNX does not have")
def _no_such_operator(m, rng, folder):
    hit = _node_with(m, rng, lambda n: n.op_type in ("Relu", "Sigmoid", "Tanh", "Neg"))
    if not hit:
        return None
    i, n = hit
    n.op_type = rng.choice(["Frobnicate", "Relu6", "Swish"])
    return [f"::{n.op_type})", "unsupported operator"]


EXTERNAL_MUTATIONS = ("external data length", "external data past the end", "external data outside the folder",
                      "external data absolute path", "external data link out of the folder")


def mutate_external(m, rng, folder, kind):
    external = [t for t in m.graph.initializer if t.data_location == 1]
    if not external:
        return None
    t = rng.choice(external)
    entries = {e.key: e for e in t.external_data}
    if kind == "external data length":
        if "length" not in entries:
            return None
        entries["length"].value = str(int(entries["length"].value) + rng.choice([4, -4]))
        return [f"initializer '{t.name}'", "does not match"]
    if kind == "external data past the end":
        size = os.path.getsize(folder / entries["location"].value)
        if "offset" not in entries:
            entries["offset"] = t.external_data.add(key="offset", value="0")
        entries["offset"].value = str(size)
        return [f"initializer '{t.name}'", "needs bytes"]
    if kind == "external data outside the folder":
        entries["location"].value = "../" + rng.choice(["secrets.bin", "weights/params.bin", "x"])
        return [f"initializer '{t.name}'", "outside the model's folder"]
    if kind == "external data absolute path":
        entries["location"].value = rng.choice(["/etc/passwd", "/tmp/w.bin"])
        return [f"initializer '{t.name}'", "absolute path"]
    link = folder / f"link_{rng.randrange(10**6)}.bin"
    outside = folder.parent / "outside_data.bin"
    outside.write_bytes(b"\0" * 1_000_000)
    os.symlink(outside, link)
    entries["location"].value = link.name
    return [f"initializer '{t.name}'", "outside the model's folder"]


def build_malformed_model(rng: random.Random, index: int, base: Case, model: Any, folder: Path) -> Case | None:
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    external = any(t.data_location == 1 for t in m.graph.initializer)
    kinds = sorted(MUTATIONS) + (list(EXTERNAL_MUTATIONS) * 3 if external else [])
    rng.shuffle(kinds)
    for kind in kinds:
        trial = onnx.ModelProto()
        trial.CopyFrom(m)
        if kind in EXTERNAL_MUTATIONS:
            expect = mutate_external(trial, rng, Path(base.path).parent, kind)
        else:
            expect = MUTATIONS[kind](trial, rng, folder)
        if expect is None:
            continue
        name = f"bad_{index:03d}_{kind.replace(' ', '_')}.onnx"
        path = Path(base.path).parent / name
        path.write_bytes(trial.SerializeToString())
        symbols = {d.dim_param for v in trial.graph.input for d in v.type.tensor_type.shape.dim}
        dims = {k: v for k, v in base.dims.items() if k in symbols}  # (a mutation may replace one)
        return Case("onnx", name, str(path), False, dims, expect, notes=[kind, f"of {base.name}"])
    return None


def onnx_cases(rng: random.Random, folder: Path, count: int) -> list[Case]:
    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    for index in range(count):
        sub = folder / f"m{index:03d}"  # its own folder: external data files stay apart
        sub.mkdir()
        valid, model = build_valid_model(rng, index, sub)
        cases.append(valid)
        bad = build_malformed_model(rng, index, valid, model, sub)
        if bad is not None:
            cases.append(bad)
    return cases


# ====================================================================== target files


STREAM_DIR = DATA / "stream_hw"
STREAM_2026 = DATA / "stream_hw_2026" / "inputs" / "examples" / "hardware"
ZIGZAG_DIR = DATA / "zigzag_hw"
BUILTIN_DIR = REPO / "targets" / "builtin"
ZIGZAG_VALID = ("ascend_like", "edge_tpu_like", "eyeriss_like", "gemm_l1", "gemm_l1_l3", "meta_prototype",
                "tesla_npu_like", "tpu_like")


def _yaml_dump(data: Any, rng: random.Random) -> str:
    import yaml

    flow = rng.random() < 0.2
    text = yaml.safe_dump(data, sort_keys=rng.random() < 0.5, default_flow_style=flow, allow_unicode=True)
    if rng.random() < 0.3:
        text = "# written by tests/data/unusual/generate.py\n" + text + "\n# end\n"
    return text


def _load(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def stream_system_cases(rng: random.Random, folder: Path, index: int) -> tuple[Case, Case | None]:
    """A Stream system (2025 `offchip_core` format or 2026 `offchip_core_id` format) with optional
    fields left out or written another legal way, and one mutation of it."""
    sub = folder / f"s{index:03d}"
    shutil.copytree(STREAM_DIR / "cores", sub / "cores")
    notes = []
    n = rng.choice([1, 2, 3, 4])
    compute = rng.choice(["tpu_like.yaml", "eyeriss_like.yaml", "meta_prototype.yaml"])
    fmt = rng.choice(["2025", "2025", "2026"])
    spell = rng.choice(["bare", "./cores/", "cores/"])
    ref = (lambda f: f) if spell == "bare" else (lambda f: f"{spell}{f}")
    cores = {i: ref(compute) for i in range(n)}
    extra = rng.random() < 0.5
    if extra:
        cores[n] = ref(rng.choice(["simd.yaml", "pooling.yaml"]))
    ids = list(cores)
    data: dict[str, Any] = {"name": rng.choice(["sys", "ünïcode system", "a.b/c", "x" * 80])}
    data["cores"] = cores
    pairs = [(a, b) for a in ids for b in ids if a < b]
    links = rng.sample(pairs, k=min(len(pairs), rng.randint(0, len(pairs)))) if pairs else []
    if fmt == "2025":
        data["offchip_core"] = ref("offchip.yaml")
        conn: list[Any] = [rng.choice([f"{a}, {b}", f"{a},{b}", f"{a} ,  {b}"]) for a, b in links]
        if len(ids) >= 3 and rng.random() < 0.3:
            conn.append(", ".join(str(i) for i in ids))
            notes.append("bus")
        data["core_connectivity"] = conn
        data["bandwidth"] = rng.choice([32, 64.0, "128", 1e3])
        if not conn:
            notes.append("core_connectivity: []")
    else:
        off = len(ids)
        data["cores"][off] = ref("offchip.yaml")
        data["offchip_core_id"] = off
        conn = [{"type": "link", "cores": [a, b], "bandwidth": rng.choice([32, 64])} for a, b in links]
        conn += [{"cores": [i, off], "bandwidth": 64} for i in ids if rng.random() < 0.5]
        for c in conn:
            if rng.random() < 0.4:
                c["unit_energy_cost"] = rng.choice([0, 0.5])
            if rng.random() < 0.3:
                c.pop("type", None)
        data["core_connectivity"] = conn
    if rng.random() < 0.5:
        data["unit_energy_cost"] = rng.choice([0, 1, 0.25])
    else:
        notes.append("unit_energy_cost left out")
    # two cores with the same file and no link between them may share their top memory
    unlinked = [(a, b) for a, b in pairs if (a, b) not in links and cores[a] == cores[b]]
    if unlinked and rng.random() < 0.3 and fmt == "2025" and not any("," in c and len(c.split(",")) > 2 for c in conn):
        a, b = rng.choice(unlinked)
        data["core_memory_sharing"] = [f"{a}, {b}"]
        notes.append("core_memory_sharing")
    path = sub / f"system_{index:03d}.yaml"
    path.write_text(_yaml_dump(data, rng))
    valid = Case("target", path.name, str(path), True, notes=[f"Stream {fmt}", f"{n} cores", spell, *notes])
    bad = _mutated_stream(rng, data, sub, index, fmt)
    return valid, bad


def _mutated_stream(rng: random.Random, data: dict, sub: Path, index: int, fmt: str) -> Case | None:
    d = copy.deepcopy(data)
    kinds = ["empty core file", "core id gap", "nan number", "absurd number", "unknown core in a link",
             "string number", "missing connectivity", "dram without ports", "dram without write port"]
    if fmt == "2025":
        kinds += ["missing bandwidth", "shared and connected"]
    else:
        kinds += ["missing offchip id"]
    kind = rng.choice(kinds)
    first = min(d["cores"])
    expect: list[str]
    named = ""
    if kind == "empty core file":
        (sub / "cores" / "empty.yaml").write_text(rng.choice(["", "# nothing here\n", "\n\n"]))
        d["cores"][first] = "empty.yaml"
        expect = [f"cores[{first}]", "is empty"]
    elif kind == "core id gap":
        if fmt == "2026":
            return None
        last = max(d["cores"])
        d["cores"][last + 2] = d["cores"].pop(last)
        d["core_connectivity"] = [c for c in d["core_connectivity"] if str(last) not in str(c)]
        d.pop("core_memory_sharing", None)
        expect = ["core ids must be"]
    elif kind in ("nan number", "absurd number", "string number"):
        value = {"nan number": rng.choice([float("nan"), float("inf"), float("-inf")]),
                 "absurd number": rng.choice([1e300, -5, 0, 2**80]), "string number": "fast"}[kind]
        if fmt == "2025":
            d["bandwidth"] = value
            expect = ["bandwidth"]
        else:
            if not d["core_connectivity"]:
                return None
            d["core_connectivity"][0]["bandwidth"] = value
            expect = ["core_connectivity[0].bandwidth"]
    elif kind == "unknown core in a link":
        if fmt == "2025":
            d["core_connectivity"] = list(d["core_connectivity"]) + [f"{first}, 17"]
        else:
            d["core_connectivity"] = list(d["core_connectivity"]) + [{"cores": [first, 17], "bandwidth": 8}]
        expect = ["unknown core 17"]
    elif kind == "missing connectivity":
        d.pop("core_connectivity")
        expect = ["core_connectivity: missing required field"]
    elif kind == "missing bandwidth":
        d.pop("bandwidth")
        expect = ["bandwidth: missing required field"]
    elif kind == "missing offchip id":
        off = d.pop("offchip_core_id")
        d["cores"].pop(off)
        d["core_connectivity"] = [c for c in d["core_connectivity"] if off not in c["cores"]] or [
            {"cores": [first, first + 1], "bandwidth": 8}] if len(d["cores"]) > 1 else []
        if not d["core_connectivity"]:
            return None
        expect = ["offchip_core_id: missing required field"]
    elif kind == "shared and connected":
        ids = sorted(d["cores"])
        same = [(a, b) for a in ids for b in ids if a < b and d["cores"][a] == d["cores"][b]]
        if not same:
            return None
        a, b = same[0]
        d["core_connectivity"] = list(d["core_connectivity"]) + [f"{a}, {b}"]
        d["core_memory_sharing"] = [f"{a}, {b}"]
        expect = ["core_memory_sharing[0]", "also connected"]
    else:  # the DRAM
        offchip = _load(sub / "cores" / "offchip.yaml")
        ports = offchip["memories"]["dram"]["ports"]
        if kind == "dram without ports":
            offchip["memories"]["dram"]["ports"] = []
            expect = ["memories.dram.ports", "no ports"]
        else:
            ports[0]["type"] = "read"
            expect = ["memories.dram.ports", "no write port"]
        (sub / "cores" / "offchip_bad.yaml").write_text(_yaml_dump(offchip, rng))
        named = str(sub / "cores" / "offchip_bad.yaml")
        if fmt == "2025":
            d["offchip_core"] = "offchip_bad.yaml"
        else:
            d["cores"][d["offchip_core_id"]] = "offchip_bad.yaml"
    path = sub / f"bad_system_{index:03d}.yaml"
    path.write_text(_yaml_dump(d, rng))
    return Case("target", path.name, str(path), False, expect=expect, notes=[kind, f"Stream {fmt}"], file=named)


def _numeric_leaves(data: Any, path: tuple = ()) -> list[tuple]:
    found = []
    if isinstance(data, dict):
        for k, v in data.items():
            found += _numeric_leaves(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found += _numeric_leaves(v, (*path, i))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        found.append(path)
    return found


def _set(data: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def zigzag_core_cases(rng: random.Random, folder: Path, index: int) -> tuple[Case, Case | None]:
    """A ZigZag core used alone, with optional fields left out, and one numeric or structural
    mutation of it."""
    sub = folder / f"z{index:03d}"
    sub.mkdir()
    source = rng.choice(ZIGZAG_VALID)
    data = _load(ZIGZAG_DIR / f"{source}.yaml")
    notes = [source]
    if "dataflows" in data and rng.random() < 0.4:
        data.pop("dataflows")
        notes.append("dataflows left out")
    for memory in data.get("memories", {}).values():
        for key in ("area", "latency", "auto_cost_extraction"):
            if key in memory and rng.random() < 0.3:
                memory.pop(key)
                notes.append(f"{key} left out")
    array = data.get("operational_array", {})
    if "unit_area" in array and rng.random() < 0.4:
        array.pop("unit_area")
        notes.append("unit_area left out")
    if rng.random() < 0.3:
        items = list(data["memories"].items())
        rng.shuffle(items)
        data["memories"] = dict(items)
        notes.append("memories in another order")
    if rng.random() < 0.2:
        data["name"] = rng.choice(["κύριος", "core with spaces", "a/b"])
        notes.append("unusual name")
    path = sub / f"core_{index:03d}.yaml"
    path.write_text(_yaml_dump(data, rng))
    valid = Case("target", path.name, str(path), True, notes=notes)
    d = copy.deepcopy(data)
    kind = rng.choice(["number", "number", "operand", "port type", "missing r_cost", "type"])
    if kind == "number":
        leaf = rng.choice(_numeric_leaves(d))
        value = rng.choice([float("nan"), float("inf"), -1e300, 1e300, 2**70, "many"])
        if leaf[-1] in ("r_cost", "w_cost", "unit_energy", "area", "unit_area", "latency") and value == -1e300:
            value = -1
        if leaf[-2:] == ("operational_array", "unit_area") or leaf[-1] in ("area", "unit_area"):
            return valid, None  # fields MONET does not read
        _set(d, leaf, value)
        expect = [".".join(str(k) for k in leaf if not isinstance(k, int)).split(".")[-1]]
    elif kind == "operand":
        memory = rng.choice(list(d["memories"].values()))
        memory["operands"] = list(memory["operands"]) + ["I3"]
        expect = ["unknown operand 'I3'"]
    elif kind == "port type":
        memory = rng.choice([m for m in d["memories"].values() if isinstance(m.get("ports"), list)
                             and m["ports"] and "name" in m["ports"][0]] or [None])
        if memory is None:
            return valid, None
        memory["ports"][0]["type"] = "read_sometimes"
        expect = ["unknown port type 'read_sometimes'"]
    elif kind == "missing r_cost":
        name, memory = rng.choice(list(d["memories"].items()))
        memory.pop("r_cost")
        memory.pop("auto_cost_extraction", None)
        expect = [f"memories.{name}.r_cost: missing required field"]
    else:
        d["memories"] = rng.choice([[], "sram", 7])
        expect = ["memories"]
    bad = sub / f"bad_core_{index:03d}.yaml"
    bad.write_text(_yaml_dump(d, rng))
    return valid, Case("target", bad.name, str(bad), False, expect=expect, notes=[kind, f"of {source}"])


def own_format_cases(rng: random.Random, folder: Path, index: int) -> tuple[Case, Case | None]:
    """One of our built-in targets with optional fields left out, and one mutation of it."""
    sub = folder / f"o{index:03d}"
    sub.mkdir()
    source = rng.choice(sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml")))
    data = _load(BUILTIN_DIR / f"{source}.yaml")
    notes = [source]
    for key in ("description", "default_precision", "storage"):
        if key in data and rng.random() < 0.4 and not (key == "storage" and "paging" in str(data)):
            data.pop(key)
            notes.append(f"{key} left out")
    path = sub / f"own_{index:03d}.yaml"
    path.write_text(_yaml_dump(data, rng))
    valid = Case("target", path.name, str(path), True, notes=notes)
    d = copy.deepcopy(data)
    kind = rng.choice(["number", "number", "typo", "unknown operand"])
    if kind == "number":
        leaves = [leaf for leaf in _numeric_leaves(d) if "templates" not in leaf]
        leaf = rng.choice(leaves)
        _set(d, leaf, rng.choice([float("nan"), float("-inf"), 1e300, "'1e999'", True]))
        expect = [str(leaf[-1]) if not isinstance(leaf[-1], int) else str(leaf[-2])]
    elif kind == "typo":
        d["frequnecy_hz"] = 1e9
        expect = ["frequnecy_hz: unknown field"]
    else:
        core = d["cores"][0]
        if not isinstance(core, dict) or "memories" not in core:
            return valid, None
        memory = next(iter(core["memories"].values()))
        memory["operands"] = list(memory.get("operands", [])) + ["X"]
        expect = ["unknown operand 'X'"]
    bad = sub / f"bad_own_{index:03d}.yaml"
    bad.write_text(_yaml_dump(d, rng))
    return valid, Case("target", bad.name, str(bad), False, expect=expect, notes=[kind, f"of {source}"])


def list_system_cases(rng: random.Random, folder: Path, index: int) -> tuple[Case, Case | None]:
    """A Stream system of 2024 (`cores` as a list, a generated `graph`)."""
    sub = folder / f"l{index:03d}"
    shutil.copytree(DATA / "stream_hw_2024" / "cores", sub / "cores")
    rows, cols = rng.choice([(1, 1), (1, 2), (2, 2), (2, 1)])
    grid = ["cores/tpu_like.yaml"] * (rows * cols)
    files = grid + ["cores/pooling.yaml", "cores/simd.yaml", "cores/offchip.yaml"]
    kind = rng.choice(["2d_mesh", "bus"])
    graph: dict[str, Any] = {"type": kind, "bandwidth": rng.choice([32, 64]), "pooling_core_id": len(grid),
                             "simd_core_id": len(grid) + 1, "offchip_core_id": len(grid) + 2}
    if kind == "2d_mesh":
        graph.update(nb_rows=rows, nb_cols=cols)
    if rng.random() < 0.5:
        graph["unit_energy_cost"] = 0
    data = {"name": "listed", "cores": files, "graph": graph}
    path = sub / f"listed_{index:03d}.yaml"
    path.write_text(_yaml_dump(data, rng))
    valid = Case("target", path.name, str(path), True, notes=["Stream 2024 list", kind, f"{rows}x{cols}"])
    d = copy.deepcopy(data)
    choice = rng.choice(["bandwidth", "offchip id", "graph type"])
    if choice == "bandwidth":
        d["graph"]["bandwidth"] = rng.choice([float("nan"), -3, "wide"])
        expect = ["graph.bandwidth"]
    elif choice == "offchip id":
        d["graph"]["offchip_core_id"] = 40
        expect = ["graph.offchip_core_id", "is not an index of `cores`"]
    else:
        d["graph"]["type"] = "torus"
        expect = ["unknown graph type 'torus'"]
    bad = sub / f"bad_listed_{index:03d}.yaml"
    bad.write_text(_yaml_dump(d, rng))
    return valid, Case("target", bad.name, str(bad), False, expect=expect, notes=[choice, "Stream 2024 list"])


TARGET_KINDS = (("stream", stream_system_cases, 4), ("zigzag", zigzag_core_cases, 3), ("own", own_format_cases, 2),
                ("listed", list_system_cases, 1))


def target_cases(rng: random.Random, folder: Path, count: int) -> list[Case]:
    folder.mkdir(parents=True, exist_ok=True)
    pool = [fn for _, fn, weight in TARGET_KINDS for _ in range(weight)]
    cases = []
    for index in range(count):
        valid, bad = rng.choice(pool)(rng, folder, index)
        cases.append(valid)
        if bad is not None:
            cases.append(bad)
    return cases


# ====================================================================== driver


def generate(out: Path, seed: int, models: int = 120, targets: int = 110) -> list[Case]:
    """Every case for `seed` under `out` (which must not exist or be empty)."""
    rng = random.Random(seed)
    cases = onnx_cases(random.Random(rng.random()), out / "onnx", models)
    cases += target_cases(random.Random(rng.random()), out / "targets", targets)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--models", type=int, default=120)
    parser.add_argument("--targets", type=int, default=110)
    args = parser.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"{args.out} is not empty")
    sys.path.insert(0, str(REPO))
    cases = generate(args.out, args.seed, args.models, args.targets)
    (args.out / "cases.json").write_text(json.dumps([asdict(c) for c in cases], indent=1, ensure_ascii=False))
    valid = sum(c.valid for c in cases)
    print(f"{len(cases)} cases ({valid} valid, {len(cases) - valid} malformed) in {args.out}")


if __name__ == "__main__":
    main()
