"""Tensor parallelism (`parallelize{tp=T}`, `monet_ir.parallel.tensor`): Megatron's collectives
per transformer layer, FLOPs and memory per chip, errors, and the split step computing the same
loss and update as the whole step (the shards run in lock step on the interpreter)."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context

from conftest import SHARED
from monet_ir import graph
from monet_ir.analysis.accounting import op_flops
from monet_ir.parallel.plan import Plan
from monet_ir.parallel.step import memory_per_device
from passes.parallelize import ParallelizePass

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"
GPT2 = MODELS / "gpt2_small_b1.onnx"  # 4 layers, hidden 256, 4 heads, seq 128, batch 1


@lru_cache(maxsize=6)
def _step(path: str, optimizer: str = "adam"):
    from monet_ir.frontend.onnx_import import import_onnx
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass

    module = import_onnx(path)
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind=optimizer, lr=0.1 if optimizer == "sgd" else 1e-3).apply(Context(), module)
    return module


def split_step(path: Path, optimizer: str = "adam", **options):
    module = _step(str(path), optimizer).clone()
    ParallelizePass(**options).apply(Context(), module)
    module.verify()
    return module


def collectives(fn, group: str = "tp"):
    return [op for op in graph.compute_ops(fn) if op.name.startswith("collective.") and op.group.data == group]


def elements(t) -> int:
    return int(np.prod(t.get_shape()))


@pytest.mark.parametrize("tp", [2, 4])
def test_two_all_reduces_of_bsh_per_layer_in_each_direction(tp):
    fn = graph.step_function(split_step(GPT2, tp=tp))
    b, s, h, layers = 1, 128, 256, 4
    ops = collectives(fn)
    assert {op.name for op in ops} == {"collective.all_reduce"}  # no all-gather, no local shard
    per_layer = Counter()
    for op in ops:
        (x,) = op.operands
        assert elements(x.type) == b * s * h
        assert op.size.value.data == tp
        layer = re.match(r"/h\.(\d+)/", graph.op_node(op)).group(1)
        per_layer[(layer, graph.op_phase(op))] += 1
    assert per_layer == {(str(i), phase): 2 for i in range(layers) for phase in ("forward", "backward")}
    # forward: the partial sums of the attention output projection and of the second MLP product
    forward = sorted(graph.op_node(op) for op in ops if graph.op_phase(op) == "forward")
    assert forward[:2] == ["/h.0/attn/c_proj/MatMul", "/h.0/mlp/c_proj/MatMul"]


def _flops_by_op(fn):
    seen = Counter()
    out = {}
    for op in graph.compute_ops(fn):
        if op.name.startswith("collective."):
            continue
        key = (graph.op_node(op), graph.op_phase(op), op.name)
        out[key + (seen[key],)] = op_flops(op)
        seen[key] += 1
    return out


def test_flops_per_chip_are_one_tp_th_of_the_split_products():
    tp = 4
    whole = _flops_by_op(graph.step_function(_step(str(GPT2))))
    split = _flops_by_op(graph.step_function(split_step(GPT2, tp=tp)))
    assert whole.keys() == split.keys()
    products = divided = 0
    for key, f in whole.items():
        node, g = key[0], split[key]
        if f["matmul_conv"] == 0:
            continue
        products += 1
        if re.match(r"/h\.\d+/(attn|mlp)/", node):  # every product inside a block: QKV, QK^T, PV, c_proj, MLP
            assert g["matmul_conv"] * tp == f["matmul_conv"], key
            divided += 1
        else:  # the LM head (tied embedding) stays whole
            assert g["matmul_conv"] == f["matmul_conv"], key
    # 6 forward products per layer, each with its backward products
    assert divided == 4 * 6 * 3 and products > divided


def test_memory_per_chip_of_split_weights_is_one_tp_th():
    tp = 2
    whole_fn = graph.step_function(_step(str(GPT2)))
    split_fn = graph.step_function(split_step(GPT2, tp=tp))
    whole = memory_per_device(whole_fn, Plan(), bits=16)
    split = memory_per_device(split_fn, Plan(tp=tp), bits=16)
    infos = graph.arg_infos(whole_fn)
    in_blocks = sum(elements(a.type) for a, i in zip(whole_fn.body.block.args, infos, strict=True)
                    if i.role == "param" and re.match(r"h\.\d+\.(attn|mlp)\.", i.name))
    psi = whole["parameter_count"]
    # every weight and bias of the attention and MLP products is split, except the row products' biases
    row_biases = 4 * 2 * 256
    assert split["parameter_count"] == psi - (in_blocks - row_biases) // tp * (tp - 1)
    for key, per_param in (("parameter_bytes", 2), ("gradient_bytes", 2), ("optimizer_state_bytes", 12)):
        assert split[key] == per_param * split["parameter_count"], key
    assert split["activation_bytes"] < whole["activation_bytes"]


def test_tp_composes_with_dp_pp_and_zero():
    module = split_step(GPT2, tp=2, dp=2, pp=2, zero=3)
    from monet_ir.parallel.stages import stage_functions

    fns = stage_functions(module)
    assert len(fns) == 2
    groups = Counter((op.name, op.group.data) for fn in fns for op in graph.compute_ops(fn)
                     if op.name.startswith("collective."))
    # tensor parallelism first (its all-reduces go with their nodes' stage), then the pipeline
    # cut, then ZeRO-3 over the split parameters
    assert groups[("collective.all_reduce", "tp")] == 16
    assert groups[("collective.all_gather", "dp")] > 0 and groups[("collective.send", "pp")] > 0
    for fn in fns:
        for op in graph.compute_ops(fn):
            if op.name == "collective.all_gather" and op.group.data == "dp":
                assert op.results[0].type.get_shape() != (768, 256)  # QKV weights are gathered split: 384 x 256


def test_errors_name_the_axis_tp_does_not_divide():
    from xdsl.utils.exceptions import PassFailedException

    with pytest.raises(PassFailedException, match=r"tp=8 does not divide the 4 groups \(heads\) that /h.0/attn/Reshape"):
        split_step(GPT2, tp=8)
    with pytest.raises(PassFailedException, match=r"tp=3 does not divide dimension 2 \(256\)"):
        split_step(GPT2, tp=3)
    with pytest.raises(PassFailedException, match=r"tp=4 does not divide dimension 0 \(6\) of tensor<6x1x5x5xf32>"):
        split_step(MODELS / "lenet5_b4.onnx", tp=4)


def test_a_model_with_nothing_to_split_is_refused():
    from xdsl.utils.exceptions import PassFailedException

    text = """
func.func @step(%x: tensor<2x3xf32> {monet.input = "x"}, %t: tensor<2x4xf32> {monet.input = "t"},
                %w: tensor<4x3xf32> {monet.param = "fc.weight", monet.trainable}) -> (tensor<f32> {monet.loss}) {
  %y = nn.gemm %x, %w {trans_b = true, node = "/fc/Gemm"} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %loss = nn.mse_loss %y, %t {node = "/loss"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
  %dy = grad.mse_loss %one, %y, %t {node = "/loss"} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %dw = grad.matmul_rhs %dy, %x {trans_b = true, node = "/fc/Gemm"} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  train.sgd %w, %dw {lr = 0.1 : f64} : tensor<4x3xf32>, tensor<4x3xf32>
  func.return %loss : tensor<f32>
}"""
    from monet_ir import parse_module

    module = parse_module(text)
    with pytest.raises(PassFailedException, match="tp=2: the model has nothing tensor parallelism can split"):
        ParallelizePass(tp=2).apply(Context(), module)


# ----------------------------------------------------------------------------- numerics


def _shard(array: np.ndarray, axis: int, blocks: int, tp: int, rank: int) -> np.ndarray:
    """Chip `rank`'s part of a parameter split along `axis`: 1/tp of each of its `blocks` parts."""
    parts = np.split(array, blocks, axis=axis)
    return np.concatenate([np.split(p, tp, axis=axis)[rank] for p in parts], axis=axis)


def _unshard(parts: list[np.ndarray], axis: int, blocks: int) -> np.ndarray:
    per_chip = [np.split(p, blocks, axis=axis) for p in parts]
    return np.concatenate([np.concatenate([c[b] for c in per_chip], axis=axis) for b in range(blocks)], axis=axis)


def run_lockstep(fn, args_per_chip: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Run the step on every chip at once: ops per chip with the interpreter's kernels, the
    collectives across the chips."""
    from xdsl.dialects import func

    from dialects import collective as c
    from monet_ir.interp.numpy_impl import IMPLS, _conform

    block = fn.body.block
    envs = [dict(zip(block.args, args, strict=True)) for args in args_per_chip]
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            return [[env[v] for v in op.operands] for env in envs]
        if isinstance(op, c.AllReduceOp):
            for i, (x, r) in enumerate(zip(op.operands, op.results, strict=True)):
                total = sum(env[x] for env in envs)
                for env in envs:
                    env[r] = np.array(total)
            continue
        if isinstance(op, c.AllGatherOp | c.ShardOp):
            raise AssertionError(f"a transformer step needs no {op.name}")
        for env in envs:
            produced = IMPLS[type(op)](op, env)
            if not op.results:  # an optimizer step: updates its operands in place
                continue
            if len(op.results) == 1:
                produced = (produced,)
            for i, (res, value) in enumerate(zip(op.results, produced, strict=True)):
                env[res] = np.array(_conform(op, i, res.type, value))
    raise AssertionError("no return")


def _arguments(fn, rng_seed: int = 0) -> list[np.ndarray]:
    from monet_ir.types import numpy_dtype_of

    rng = np.random.default_rng(rng_seed)
    args = []
    for info, arg in zip(graph.arg_infos(fn), fn.body.block.args, strict=True):
        shape = tuple(arg.type.get_shape())
        dtype = np.dtype(numpy_dtype_of(arg.type.get_element_type()))
        if np.issubdtype(dtype, np.integer):
            args.append(rng.integers(0, 10, shape).astype(dtype))
        elif info.role == "state":
            args.append(np.zeros(shape, dtype))
        elif info.role == "param" and not info.trainable:  # running statistics: a variance is positive
            args.append((0.5 + np.abs(rng.standard_normal(shape))).astype(dtype))
        else:
            args.append((rng.standard_normal(shape) * (0.3 if info.role == "param" else 1.0)).astype(dtype))
    return args


@pytest.mark.parametrize("model,tp", [("mlp_b4.onnx", 4), ("lenet5_b4.onnx", 2), ("gpt2_small_b1.onnx", 2)])
def test_the_split_step_computes_the_whole_steps_loss_and_update(model, tp):
    assert_split_step_computes_the_whole_steps_loss_and_update(MODELS / model, tp)


def assert_split_step_computes_the_whole_steps_loss_and_update(path: Path, tp: int) -> None:
    from monet_ir.parallel.tensor import select

    whole_module = _step(str(path), "sgd").clone()
    whole_fn = graph.step_function(whole_module)
    sel = select(whole_fn, tp)
    by_name = {graph.arg_info(a).name: (ax, sel.blocks.get(a, 1)) for a, ax in sel.split_params.items()}
    split_fn = graph.step_function(split_step(path, "sgd", tp=tp))
    infos = graph.arg_infos(whole_fn)
    full = _arguments(whole_fn)
    chips = []
    for rank in range(tp):
        args = []
        for info, a, sa in zip(infos, full, split_fn.body.block.args, strict=True):
            ax, blocks = by_name.get(info.name, (None, 1))
            if info.role == "state" and info.name.rsplit(".", 1)[0] in by_name:
                ax, blocks = by_name[info.name.rsplit(".", 1)[0]]
            part = a.copy() if ax is None or info.role not in ("param", "state") else _shard(a, ax, blocks, tp, rank)
            assert part.shape == tuple(sa.type.get_shape()), info.name
            args.append(part)
        chips.append(args)
    whole_args = [a.copy() for a in full]
    (whole_out,) = run_lockstep(whole_fn, [whole_args])
    outs = run_lockstep(split_fn, chips)
    for out in outs:
        np.testing.assert_allclose(out[0], whole_out[0], rtol=2e-5)  # the loss
    # the updated parameters (SGD: the gradients exactly)
    for i, info in enumerate(infos):
        if info.role != "param" or not info.trainable:
            continue
        moved = whole_args[i] - full[i]
        assert np.abs(moved).max() > 0, info.name
        if info.name in by_name:
            ax, blocks = by_name[info.name]
            got = _unshard([chip[i] for chip in chips], ax, blocks)
        else:
            got = chips[0][i]
            for chip in chips[1:]:
                np.testing.assert_array_equal(chip[i], got)
        # fp32: the update is rounded at the parameter's magnitude
        floor = 2 * float(np.spacing(np.abs(full[i]).max()))
        np.testing.assert_allclose(got - full[i], moved, rtol=1e-3, atol=max(1e-4 * np.abs(moved).max(), floor),
                                   err_msg=info.name)


# ----------------------------------------------------------------------------- CLI


def test_report_cli_with_tensor_parallelism(tmp_path, capsys):
    import json

    from monet_ir.tools.monet import main

    out = tmp_path / "r"
    with pytest.raises(SystemExit) as code:
        main(["report", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--parallel", "dp=2,tp=2",
              "--out", str(out)])
    assert code.value.code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["plan"]["tp"] == 2 and report["plan"]["dp"] == 2
    by_group = Counter((r["group"], r["phase"]) for r in report["collective_ops"])
    # fc1 by columns, fc2 by rows: one all-reduce of the logits in forward (the input needs no gradient)
    assert by_group[("tp", "forward")] == 1 and by_group[("tp", "backward")] == 0
    assert report["communication"]["by_group"]["tp"]["collectives"] == 1
    capsys.readouterr()


def test_report_cli_refuses_a_tp_that_does_not_divide_the_channels(tmp_path, capsys):
    from monet_ir.tools.monet import main

    with pytest.raises(SystemExit) as code:
        main(["report", str(MODELS / "lenet5_b4.onnx"), "--system", "2x2_edge_npu", "--parallel", "tp=4",
              "--out", str(tmp_path / "r")])
    assert code.value.code == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("[")]
    assert len(err) == 1 and "lenet5_b4.onnx: --parallel dp=1,tp=4" in err[0] and "tp=4 does not divide dimension 0 (6)" in err[0], err


# ----------------------------------------------------------------------------- another block


def separate_qkv_block(path: Path) -> Path:
    """One pre-LN block with separate Q, K, V projections without biases, SiLU MLP and an LM
    head (a LLaMA-like layout, not GPT-2's fused QKV): batch 2, seq 8, hidden 16, 4 heads."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    b, s, h, heads, ff, vocab = 2, 8, 16, 4, 32, 10
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("ln1.weight", np.ones(h)), ("ln1.bias", np.zeros(h)), ("ln2.weight", np.ones(h)), ("ln2.bias", np.zeros(h)),
        ("q.weight", rng.standard_normal((h, h))), ("k.weight", rng.standard_normal((h, h))),
        ("v.weight", rng.standard_normal((h, h))), ("o.weight", rng.standard_normal((h, h))),
        ("up.weight", rng.standard_normal((h, ff))), ("down.weight", rng.standard_normal((ff, h))),
        ("head.weight", rng.standard_normal((h, vocab))), ("scale", np.array(0.5)))]
    inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), n)
              for n, v in (("heads_shape", [b, s, heads, h // heads]), ("merge_shape", [b, s, h]))]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1.weight", "ln1.bias"], ["a"], name="/ln1", axis=-1),
        n("MatMul", ["a", "q.weight"], ["q"], name="/q"), n("MatMul", ["a", "k.weight"], ["k"], name="/k"),
        n("MatMul", ["a", "v.weight"], ["v"], name="/v"),
        n("Reshape", ["q", "heads_shape"], ["qh"], name="/qh"), n("Reshape", ["k", "heads_shape"], ["kh"], name="/kh"),
        n("Reshape", ["v", "heads_shape"], ["vh"], name="/vh"),
        n("Transpose", ["qh"], ["qt"], name="/qt", perm=[0, 2, 1, 3]),
        n("Transpose", ["kh"], ["kt"], name="/kt", perm=[0, 2, 3, 1]),
        n("Transpose", ["vh"], ["vt"], name="/vt", perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["sc"], name="/qk"), n("Mul", ["sc", "scale"], ["sc2"], name="/scale"),
        n("Softmax", ["sc2"], ["p"], name="/softmax", axis=-1), n("MatMul", ["p", "vt"], ["o"], name="/pv"),
        n("Transpose", ["o"], ["ot"], name="/ot", perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge_shape"], ["om"], name="/merge"), n("MatMul", ["om", "o.weight"], ["attn"], name="/o"),
        n("Add", ["x", "attn"], ["r1"], name="/res1"),
        n("LayerNormalization", ["r1", "ln2.weight", "ln2.bias"], ["c"], name="/ln2", axis=-1),
        n("MatMul", ["c", "up.weight"], ["u"], name="/up"), n("Sigmoid", ["u"], ["sg"], name="/sig"),
        n("Mul", ["u", "sg"], ["silu"], name="/silu"), n("MatMul", ["silu", "down.weight"], ["d"], name="/down"),
        n("Add", ["r1", "d"], ["r2"], name="/res2"), n("MatMul", ["r2", "head.weight"], ["logits"], name="/head"),
    ]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, h])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [b, s, vocab])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_separate_q_k_v_projections_share_one_backward_all_reduce(tmp_path):
    path = separate_qkv_block(tmp_path / "block.onnx")
    fn = graph.step_function(split_step(path, tp=2))
    ops = collectives(fn)
    assert {op.name for op in ops} == {"collective.all_reduce"}
    assert all(elements(op.operands[0].type) == 2 * 8 * 16 for op in ops)
    assert Counter(graph.op_phase(op) for op in ops) == {"forward": 2, "backward": 2}
    # the gradients of Q, K and V's common input are summed first, then all-reduced once
    (after_qkv,) = [op for op in ops if graph.op_phase(op) == "backward" and graph.op_node(op) == "/ln1"]
    assert after_qkv.operands[0].owner.name in ("nn.sum", "nn.add")


def test_separate_q_k_v_block_computes_the_whole_steps_update(tmp_path):
    assert_split_step_computes_the_whole_steps_loss_and_update(separate_qkv_block(tmp_path / "block.onnx"), 2)


def test_tensor_parallel_groups_sit_inside_a_node():
    from targets.system import get_system

    system = get_system("4x8_datacenter")
    k = system.network.node_chips
    for plan in (Plan(dp=8, tp=4), Plan(dp=4, tp=8), Plan(dp=2, tp=4, pp=4)):
        for group in plan.groups("tp"):
            assert len({chip // k for chip in group}) == 1, (plan, group)


def test_a_forward_all_reduce_alone_costs_its_alpha_beta_time():
    from monet_ir.network.collectives import idle_time_s
    from monet_ir.parallel.step import run_step
    from targets import get_target
    from targets.system import System, build_network

    system = System("4x_dc", get_target("datacenter"), 4, build_network("switch", 4, 50e9, 2e-6, 1.0))
    fn = graph.step_function(split_step(GPT2, tp=4))
    result = run_step(fn, system, Plan(tp=4), bits=16)
    runs = [r for r in result.collectives if r.group == "tp"]
    assert len(runs) == 16
    first = min(runs, key=lambda r: r.start)  # the first layer's attention projection: nothing else in flight
    assert first.phase == "forward" and first.bytes == 128 * 256 * 2
    want = idle_time_s("all_reduce", "ring", 4, first.bytes, 50e9, 2e-6)
    assert (first.net_end - first.start) / system.chip.frequency_hz == pytest.approx(want, rel=0.01)
    # a forward all-reduce blocks its consumers: the step is longer than the chip's alone
    assert result.latency_cycles > result.chip_latency_cycles


def residual_conv_block(path: Path) -> Path:
    """A stem convolution and one ResNet basic block with batch norms, global pooling and a
    classifier: batch 2, 8 x 8 images, 8 channels."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    c = 8
    arrays = {"stem.weight": rng.standard_normal((c, 3, 3, 3)), "conv1.weight": rng.standard_normal((c, c, 3, 3)),
              "conv2.weight": rng.standard_normal((c, c, 3, 3)), "fc.weight": rng.standard_normal((10, c)),
              "fc.bias": rng.standard_normal(10), "flat": np.array([2, c])}
    for bn in ("bn0", "bn1", "bn2"):
        arrays.update({f"{bn}.weight": 1 + 0.1 * rng.standard_normal(c), f"{bn}.bias": 0.1 * rng.standard_normal(c),
                       f"{bn}.running_mean": np.zeros(c), f"{bn}.running_var": np.ones(c)})
    inits = [numpy_helper.from_array(a.astype(np.int64 if k == "flat" else np.float32), k) for k, a in arrays.items()]
    n = helper.make_node

    def bn(x, name, y):
        return n("BatchNormalization", [x, f"{name}.weight", f"{name}.bias", f"{name}.running_mean",
                                        f"{name}.running_var"], [y], name=f"/{name}")

    nodes = [
        n("Conv", ["x", "stem.weight"], ["s0"], name="/stem", pads=[1, 1, 1, 1]), bn("s0", "bn0", "s1"),
        n("Relu", ["s1"], ["s2"], name="/relu0"),
        n("Conv", ["s2", "conv1.weight"], ["a0"], name="/conv1", pads=[1, 1, 1, 1]), bn("a0", "bn1", "a1"),
        n("Relu", ["a1"], ["a2"], name="/relu1"),
        n("Conv", ["a2", "conv2.weight"], ["b0"], name="/conv2", pads=[1, 1, 1, 1]), bn("b0", "bn2", "b1"),
        n("Add", ["b1", "s2"], ["r"], name="/add"), n("Relu", ["r"], ["r1"], name="/relu2"),
        n("GlobalAveragePool", ["r1"], ["g"], name="/pool"), n("Reshape", ["g", "flat"], ["f"], name="/flatten"),
        n("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc", transB=1),
    ]
    graph_ = helper.make_graph(nodes, "resblock", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                               [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])], inits)
    onnx.save(helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_residual_conv_block_splits_channels_and_computes_the_same_update(tmp_path):
    path = residual_conv_block(tmp_path / "resblock.onnx")
    fn = graph.step_function(split_step(path, tp=2))
    ops = collectives(fn)
    assert {op.name for op in ops} == {"collective.all_reduce"}
    assert_split_step_computes_the_whole_steps_loss_and_update(path, 2)


def test_exposed_time_per_group():
    from monet_ir.parallel.step import run_step
    from targets import get_target
    from targets.system import System, build_network

    # a slow network: the tp all-reduces in forward are on the critical path
    system = System("8x_dc", get_target("datacenter"), 8, build_network("switch", 8, 5e9, 2e-6, 1.0))
    fn = graph.step_function(split_step(GPT2, tp=2, dp=4))
    result = run_step(fn, system, Plan(tp=2, dp=4), bits=16)
    assert set(result.exposed_by_group) == {"dp", "tp"}
    total = result.latency_cycles - result.chip_latency_cycles
    for kind, exposed in result.exposed_by_group.items():
        assert 0 < exposed <= total * (1 + 1e-9), kind
    # 16 blocking all-reduces of 64 KiB at 5 GB/s on 2 chips: at least their sum of alpha-beta times
    tp_runs = [r for r in result.collectives if r.group == "tp" and r.phase == "forward"]
    assert result.exposed_by_group["tp"] >= 0.9 * sum(r.net_end - r.start for r in tp_runs)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_formulas_hold_over_the_split_parameters(zero):
    # ZeRO shards what tensor parallelism left on a chip: the paper's figures with Psi = the
    # parameters of one tensor-parallel chip
    tp, dp = 2, 8
    psi_tp = memory_per_device(graph.step_function(split_step(GPT2, tp=tp)), Plan(tp=tp), bits=16)["parameter_count"]
    fn = graph.step_function(split_step(GPT2, tp=tp, dp=dp, zero=zero))
    mem = memory_per_device(fn, Plan(tp=tp, dp=dp, zero=zero), bits=16)
    assert mem["parameter_count"] == psi_tp
    want = {1: 4 * psi_tp + 12 * psi_tp // dp, 2: 2 * psi_tp + 14 * psi_tp // dp, 3: 16 * psi_tp // dp}[zero]
    assert mem["parameter_bytes"] + mem["gradient_bytes"] + mem["optimizer_state_bytes"] == want
