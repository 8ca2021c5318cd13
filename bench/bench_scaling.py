"""Benchmark: does the cost of a report grow linearly with the size of the step?

    python bench/bench_scaling.py [--layers 2 4 8 16 32 48] [--target datacenter] [--batch 1]
                                  [--seq 1024] [--embd 1600] [--heads 25] [--vocab 50257]
                                  [--repeat N] [--cost-cache]

Generates GPT-2-shaped, weight-free ONNX models (GPT-2 XL's width by default: n_embd 1600, 25
heads, vocab 50257, 1024 positions, tied LM head, tanh-GELU written out as PyTorch exports it; the
initializers keep their shapes and point to external data that does not exist, so the files are
a few kB) with 2..48 blocks, and runs `monet report` (Adam, no plots, cost cache off unless
--cost-cache) on each in a fresh process. Prints per layer count: parameters, ops of the
training step, the report time in the process (import, autodiff, optimizer, costing,
scheduling, writing; the Python modules loaded beforehand), the whole process's wall time,
peak RSS, the report time per op and the marginal time per op (the time the ops added since the
previous layer count took each: it rises if anything grows faster than the step); then the ratio of the largest to the smallest time per
op (target: ≤ 1.5) and the 48-layer (1.5 B parameter) time against the 20 s target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.5
TARGET_XL_S = 20.0

# run in the child: load the modules first, then time the report alone
DRIVER = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import onnx, onnx.shape_inference
import monet_ir.tools.monet as monet
from monet_ir.cost import disk_cache, model
from targets import get_target
from monet_ir.emit import step_report
from monet_ir.frontend import onnx_import
from monet_ir.schedule import scheduler
from passes import autodiff, insert_optimizer
loaded = time.perf_counter() - t0
args = monet.build_parser().parse_args(sys.argv[1:])
t0 = time.perf_counter()
monet.run_report(args)
report = time.perf_counter() - t0
ops = json.load(open(args.out + "/report.json"))["ops"]
print(json.dumps({"loaded": loaded, "report": report, "ops": sum(ops.values()),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
"""


def gpt2_model(layers: int, embd: int, heads: int, vocab: int, seq: int, batch: int):
    """A GPT-2 (HF GPT2LMHeadModel export shape) with `layers` blocks and no weight data."""
    from onnx import TensorProto, helper

    nodes, inits = [], []
    params = 0

    def weight(name: str, dims: list[int]) -> str:
        nonlocal params
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "absent.weights.bin"), ("offset", "0"), ("length", str(4 * _prod(dims)))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        inits.append(t)
        params += _prod(dims)
        return name

    def const(name: str, dtype: int, dims: list[int], values: list) -> str:
        inits.append(helper.make_tensor(name, dtype, dims, values))
        return name

    def node(op: str, inputs: list[str], name: str, outputs: int = 1, **attrs) -> list[str]:
        outs = [f"{name}_out{i}" for i in range(outputs)]
        nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs

    head = embd // heads
    wte = weight("wte.weight", [vocab, embd])
    wpe = weight("wpe.weight", [seq, embd])
    positions = const("position_ids", TensorProto.INT64, [seq], list(range(seq)))
    split = const("split_sizes", TensorProto.INT64, [3], [embd, embd, embd])
    to_heads = const("to_heads", TensorProto.INT64, [4], [batch, seq, heads, head])
    to_embd = const("to_embd", TensorProto.INT64, [3], [batch, seq, embd])
    scale = const("scale", TensorProto.FLOAT, [], [1.0 / head ** 0.5])
    masked = const("masked", TensorProto.FLOAT, [], [-1e4])
    causal = const("causal", TensorProto.BOOL, [1, 1, seq, seq],
                   [j <= i for i in range(seq) for j in range(seq)])
    half, one = const("half", TensorProto.FLOAT, [], [0.5]), const("one", TensorProto.FLOAT, [], [1.0])
    three, c1 = const("three", TensorProto.FLOAT, [], [3.0]), const("c1", TensorProto.FLOAT, [], [0.044715])
    c2 = const("c2", TensorProto.FLOAT, [], [(2 / 3.141592653589793) ** 0.5])

    x = node("Add", [node("Gather", [wte, "input_ids"], "/wte/Gather")[0],
                     node("Gather", [wpe, positions], "/wpe/Gather")[0]], "/Add")[0]

    def layer_norm(x: str, prefix: str) -> str:
        g, b = weight(f"{prefix}.weight", [embd]), weight(f"{prefix}.bias", [embd])
        return node("LayerNormalization", [x, g, b], f"/{prefix}/LayerNormalization", axis=-1, epsilon=1e-5)[0]

    def linear(x: str, prefix: str, n_in: int, n_out: int) -> str:
        w, b = weight(f"{prefix}.weight", [n_in, n_out]), weight(f"{prefix}.bias", [n_out])
        return node("Add", [node("MatMul", [x, w], f"/{prefix}/MatMul")[0], b], f"/{prefix}/Add")[0]

    for i in range(layers):
        p = f"h.{i}"
        h = layer_norm(x, f"{p}.ln_1")
        q, k, v = node("Split", [linear(h, f"{p}.attn.c_attn", embd, 3 * embd), split], f"/{p}/attn/Split",
                       outputs=3, axis=2)
        q, k, v = (node("Reshape", [t, to_heads], f"/{p}/attn/Reshape_{n}")[0] for n, t in enumerate((q, k, v)))
        q = node("Transpose", [q], f"/{p}/attn/Transpose_q", perm=[0, 2, 1, 3])[0]
        k = node("Transpose", [k], f"/{p}/attn/Transpose_k", perm=[0, 2, 3, 1])[0]
        v = node("Transpose", [v], f"/{p}/attn/Transpose_v", perm=[0, 2, 1, 3])[0]
        a = node("Mul", [node("MatMul", [q, k], f"/{p}/attn/MatMul")[0], scale], f"/{p}/attn/Mul")[0]
        a = node("Where", [causal, a, masked], f"/{p}/attn/Where")[0]
        a = node("Softmax", [a], f"/{p}/attn/Softmax", axis=-1)[0]
        a = node("MatMul", [a, v], f"/{p}/attn/MatMul_1")[0]
        a = node("Transpose", [a], f"/{p}/attn/Transpose_o", perm=[0, 2, 1, 3])[0]
        a = node("Reshape", [a, to_embd], f"/{p}/attn/Reshape_o")[0]
        x = node("Add", [x, linear(a, f"{p}.attn.c_proj", embd, embd)], f"/{p}/Add")[0]
        h = linear(layer_norm(x, f"{p}.ln_2"), f"{p}.mlp.c_fc", embd, 4 * embd)
        # tanh-GELU as PyTorch's export writes it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = node("Mul", [node("Pow", [h, three], f"/{p}/mlp/act/Pow")[0], c1], f"/{p}/mlp/act/Mul")[0]
        inner = node("Mul", [node("Add", [h, cube], f"/{p}/mlp/act/Add")[0], c2], f"/{p}/mlp/act/Mul_1")[0]
        gate = node("Add", [node("Tanh", [inner], f"/{p}/mlp/act/Tanh")[0], one], f"/{p}/mlp/act/Add_1")[0]
        h = node("Mul", [node("Mul", [h, half], f"/{p}/mlp/act/Mul_2")[0], gate], f"/{p}/mlp/act/Mul_3")[0]
        x = node("Add", [x, linear(h, f"{p}.mlp.c_proj", 4 * embd, embd)], f"/{p}/Add_1")[0]
    x = layer_norm(x, "ln_f")
    head_w = node("Transpose", [wte], "/lm_head/Transpose", perm=[1, 0])[0]
    logits = node("MatMul", [x, head_w], "/lm_head/MatMul")[0]
    graph = helper.make_graph(
        nodes, f"gpt2_{layers}l",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [batch, seq, vocab])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, params


def _prod(dims: list[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 16, 32, 48])
    parser.add_argument("--target", default="datacenter")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--embd", type=int, default=1600)
    parser.add_argument("--heads", type=int, default=25)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--repeat", type=int, default=1, help="runs per layer count; the fastest counts")
    parser.add_argument("--cost-cache", action="store_true",
                        help="price through a fresh persistent cost cache, warmed by an untimed run of the "
                             "smallest model (default: no cache, every run prices its ops)")
    args = parser.parse_args()
    import onnx

    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["MONET_COST_CACHE"] = "off"
    print(f"GPT-2 shape: n_embd {args.embd}, {args.heads} heads, vocab {args.vocab}, {args.seq} positions, "
          f"batch {args.batch}; target {args.target}; cost cache {'on' if args.cost_cache else 'off'}")
    print(f"{'layers':>6}{'params':>15}{'ops':>7}{'report s':>10}{'process s':>11}{'peak RSS MB':>13}{'ms/op':>8}{'marginal ms/op':>15}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = sorted(args.layers)
        if args.cost_cache:
            env["MONET_COST_CACHE"] = str(Path(tmp) / "costs.sqlite")
            runs = [-runs[0]] + runs  # the warm-up run, untimed
        for layers in runs:
            warm_up, layers = layers < 0, abs(layers)
            model, params = gpt2_model(layers, args.embd, args.heads, args.vocab, args.seq, args.batch)
            path = Path(tmp) / f"gpt2_{layers}l.onnx"
            onnx.save(model, path)
            out = Path(tmp) / f"out_{layers}"
            best = None
            for _ in range(1 if warm_up else max(1, args.repeat)):
                t0 = time.perf_counter()
                run = subprocess.run([sys.executable, "-c", DRIVER, "report", str(path), "--target", args.target,
                                      "--out", str(out), "--no-plots"], capture_output=True, text=True, cwd=REPO, env=env)
                wall = time.perf_counter() - t0
                if run.returncode != 0:
                    break
                figures = json.loads(run.stderr.strip().splitlines()[-1])
                figures["wall"] = wall
                if best is None or figures["report"] < best["report"]:
                    best = figures
            if run.returncode != 0:
                print(f"{layers:>6} failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}")
                continue
            figures, wall = best, best["wall"]
            if warm_up:
                continue
            per_op = figures["report"] / figures["ops"] * 1e3
            # the time each op added since the previous layer count: it grows if the cost is superlinear
            marginal = ((figures["report"] - rows[-1][2]["report"]) / (figures["ops"] - rows[-1][2]["ops"]) * 1e3
                        if rows and figures["ops"] > rows[-1][2]["ops"] else float("nan"))
            rows.append((layers, params, figures, per_op))
            print(f"{layers:>6}{params:>15,}{figures['ops']:>7}{figures['report']:>10.2f}{wall:>11.2f}"
                  f"{figures['rss_mb']:>13.0f}{per_op:>8.2f}{marginal:>13.2f}", flush=True)
    if len(rows) >= 2:
        per_ops = [r[3] for r in rows]
        ratio = max(per_ops) / min(per_ops)
        print(f"time per op: {min(per_ops):.2f}-{max(per_ops):.2f} ms, max/min {ratio:.2f} "
              f"(target ≤ {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'NOT met'})")
    xl = [r for r in rows if r[0] == 48]
    if xl:
        seconds = xl[0][2]["report"]
        print(f"48 layers ({xl[0][1] / 1e9:.2f} B params): report {seconds:.1f} s "
              f"(target ≤ {TARGET_XL_S:.0f} s: {'met' if seconds <= TARGET_XL_S else 'NOT met'})")


if __name__ == "__main__":
    main()
