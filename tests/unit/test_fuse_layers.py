"""fuse-layers: tiles do the same arithmetic, read only the rows they need, run depth-first, and
lower DRAM traffic on ResNet-18."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from xdsl.context import Context

from monet_ir import import_onnx, parse_module
from monet_ir.cost.signature import LoopNestSig
from monet_ir.emit.step_report import schedule_report
from monet_ir.graph import step_function
from monet_ir.schedule.scheduler import schedule
from monet_ir.schedule.taskgraph import extract
from passes.autodiff import AutodiffPass
from passes.fuse_layers import FuseLayersPass
from passes.insert_optimizer import InsertOptimizerPass
from targets import get_target

REPO = Path(__file__).resolve().parents[2]
CNN = (REPO / "tests" / "lit" / "passes" / "fuse_layers.mlir").read_text().split("// CHECK")[0]
CNN = "\n".join(line for line in CNN.splitlines() if not line.startswith("//"))


def training_step(fuse: bool, **options):
    module = import_onnx(REPO / "examples" / "models" / "resnet18_b1.onnx")
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass().apply(Context(), module)
    if fuse:
        FuseLayersPass(**options).apply(Context(), module)
    module.verify()
    return module


def arithmetic(graph):
    macs = sum(t.sig.macs for t in graph.tasks if isinstance(t.sig, LoopNestSig))
    vector = sum(t.sig.ops for t in graph.tasks if t.sig is not None and not isinstance(t.sig, LoopNestSig))
    return macs, vector


def test_fused_and_unfused_steps_do_the_same_arithmetic():
    plain = extract(step_function(training_step(False)))
    fused = extract(step_function(training_step(True, target="hetero_chip")))
    assert len(fused.tasks) > len(plain.tasks)
    macs, vector = arithmetic(plain)
    fused_macs, fused_vector = arithmetic(fused)
    assert fused_macs == macs
    assert fused_vector == pytest.approx(vector, rel=1e-9)


@pytest.mark.parametrize("target", ["edge_npu", "hetero_chip"])
def test_fusion_lowers_dram_traffic_on_resnet18(target):
    hw = get_target(target)
    reports = {}
    for fuse in (False, True):
        module = training_step(fuse, target=target)
        reports[fuse] = schedule_report(schedule(extract(step_function(module)), hw))
    assert reports[True]["dram_traffic_bytes"] < reports[False]["dram_traffic_bytes"]
    assert reports[True]["energy_breakdown_pj"]["offchip_memory"] < reports[False]["energy_breakdown_pj"]["offchip_memory"]
    for name, peak in reports[True]["memory"]["peak_bytes"].items():
        assert peak <= reports[True]["memory"]["capacity_bytes"][name]


def small_cnn(tiles=4):
    module = parse_module(CNN)
    FuseLayersPass(tiles=tiles).apply(Context(), module)
    return module, extract(step_function(module))


def test_tiles_read_only_the_rows_they_need():
    _, graph = small_cnn()
    conv2 = [t for t in graph.tasks if t.node == "/conv2"]
    relu1 = {graph.tensors[tid].name: tid for t in graph.tasks if t.node == "/relu1" for tid in t.writes}
    assert len(conv2) == 4
    # rows 0..7 of conv2 (3x3, pad 1) read rows 0..8 of relu1: tiles [0:8] and [8:16]
    first_reads = {graph.tensors[t].name for t in conv2[0].reads} & set(relu1)
    assert first_reads == {"r1[0:8]", "r1[8:16]"}
    middle_reads = {graph.tensors[t].name for t in conv2[1].reads} & set(relu1)
    assert middle_reads == {"r1[0:8]", "r1[8:16]", "r1[16:24]"}
    # the product after the flatten is not fused and reads every pooled tile
    fc = next(t for t in graph.tasks if t.node == "/fc")
    assert len([t for t in fc.reads if graph.tensors[t].name.startswith("p[")]) == 4


def test_tiles_of_a_stack_run_depth_first():
    _, graph = small_cnn(tiles=8)
    s = schedule(graph, get_target("edge_npu"))
    end = {t.task: t.end for t in s.tasks}
    start = {t.task: t.start for t in s.tasks}
    first = [t.index for t in graph.tasks if t.node == "/conv1"]
    last = [t.index for t in graph.tasks if t.node == "/pool"]
    depth = 5
    for j in range(depth + 1, len(first)):
        assert start[first[j]] >= end[last[j - depth - 1]] - 1e-6


def test_saved_activations_are_kept_whole_for_backward():
    module = parse_module(CNN)
    AutodiffPass(loss="sum").apply(Context(), module)
    FuseLayersPass(tiles=4).apply(Context(), module)
    graph = extract(step_function(module))
    relu_grad = next(t for t in graph.tasks if t.op == "grad.relu" and t.node == "/relu1")
    tiles_of_r1 = [tid for t in graph.tasks if t.node == "/relu1" and t.phase == "forward" for tid in t.writes]
    assert set(tiles_of_r1) <= set(relu_grad.reads)  # the backward reads all four tiles


def test_none_removes_fusion_and_bad_stacks_are_errors():
    from xdsl.utils.exceptions import PassFailedException

    module, _ = small_cnn()
    FuseLayersPass(mode="none").apply(Context(), module)
    assert "monet.tiling" not in str(module)
    with pytest.raises(PassFailedException, match="cannot be tiled"):
        FuseLayersPass(mode="explicit", stacks=("/conv1:/fc",)).apply(Context(), parse_module(CNN))


GATED = (REPO / "tests" / "lit" / "passes" / "fuse_layers_backward.mlir").read_text()
GATED = "\n".join(line for line in GATED.splitlines() if not line.startswith("//"))


def gated_step(**options):
    module = parse_module(GATED)
    AutodiffPass(loss="sum").apply(Context(), module)
    if options:
        FuseLayersPass(**options).apply(Context(), module)
    return extract(step_function(module))


def test_backward_stacks_tile_gradients_by_rows():
    graph = gated_step(tiles=4)
    per_op = Counter(t.op_index for t in graph.tasks)
    backward_tiles = [t for t in graph.tasks if t.phase == "backward" and per_op[t.op_index] > 1]
    assert {t.op for t in backward_tiles} == {"grad.matmul_lhs", "nn.mul", "grad.tanh", "nn.sum"}
    assert len(backward_tiles) == 5 * 4
    # a tile of dx = dy @ w2^T reads its 2 rows of dy (8 x 16 floats whole) and the whole weight
    lhs = [t for t in backward_tiles if t.op == "grad.matmul_lhs"]
    for tile in lhs:
        sizes = sorted(graph.tensors[r].bytes for r in tile.reads)
        assert sizes == [2 * 16 * 4, 32 * 16 * 4]
    # the weight gradients reduce over every row: one task reading all four tiles
    dw1 = next(t for t in graph.tasks if t.op == "grad.matmul_rhs" and t.node == "/fc1")
    assert len([r for r in dw1.reads if graph.tensors[r].name.startswith("d_h[")]) == 4


def test_backward_fusion_keeps_the_arithmetic():
    plain, fused, forward_only = gated_step(), gated_step(tiles=4), gated_step(tiles=4, backward=False)
    assert len(fused.tasks) > len(forward_only.tasks) > len(plain.tasks)
    macs, vector = arithmetic(plain)
    for graph in (fused, forward_only):
        assert arithmetic(graph)[0] == macs
        assert arithmetic(graph)[1] == pytest.approx(vector, rel=1e-9)
    s = schedule(fused, get_target("edge_npu"))
    assert len(s.tasks) == len(fused.tasks)


def test_recompute_inside_a_backward_stack_schedules():
    """A recompute copy placed between two ops of a backward stack waits for the first tile of
    the backward op before it, not its last: with the stack's depth-first pacing, waiting for
    the last tile would close a cycle (that tile waits for later layers' tiles, which read the
    copy)."""
    from passes.activation_checkpoint import ActivationCheckpointPass

    module = parse_module(GATED)
    AutodiffPass(loss="sum").apply(Context(), module)
    ActivationCheckpointPass(policy="list=/act").apply(Context(), module)
    FuseLayersPass(tiles=4).apply(Context(), module)
    graph = extract(step_function(module))
    copy = next(t for t in graph.tasks if t.phase == "recompute")
    before = [t for t in graph.tasks[:copy.index] if t.phase == "backward"]
    first_tile = next(t.index for t in before if t.op_index == before[-1].op_index)
    assert first_tile in copy.preds and before[-1].index != first_tile
    s = schedule(graph, get_target("edge_npu"))
    assert len(s.tasks) == len(graph.tasks)


def test_a_target_without_mac_arrays_sizes_tiles_by_its_vector_cores():
    # Stream's SIMD core file alone: no MAC-array core, so the fusion budget is the smallest top
    # memory of the cores it has (it was an internal error: min() of nothing)
    from passes.fuse_layers import _mac_array_memory
    from monet_ir.schedule.scheduler import top_memory

    simd = str(REPO / "tests" / "data" / "stream_hw" / "cores" / "simd.yaml")
    target = get_target(simd)
    assert all(c.kind != "mac_array" for c in target.cores)
    assert _mac_array_memory(simd, None) == min(int(top_memory(c)[1]) for c in target.cores) > 0
    module = import_onnx(REPO / "tests" / "data" / "models" / "mlp_b4.onnx")
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass().apply(Context(), module)
    FuseLayersPass(mode="auto", target=simd).apply(Context(), module)
    assert schedule(extract(step_function(module), bits=8), target).latency_cycles > 0  # (int8: ZigZag files)
