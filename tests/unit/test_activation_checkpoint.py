"""activation-checkpoint on real training steps: gradients are bit-identical with and without
recomputation, saved bytes go down by what is recomputed, the recompute phase carries exactly the
clones' FLOPs, budgets are met, and the scheduler sees the memory difference.

MLP and LeNet run through monet-run (in process) on the reference batches of tests/data; ResNet-18
and GPT-2 small (weight-stripped files in ../shared/models) run on random parameters."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import PassFailedException

from monet_ir import import_onnx, parse_module
from monet_ir.analysis import checkpoint_policies as plans
from monet_ir.analysis.accounting import flops_by_phase, op_flops
from monet_ir.analysis.saved import mark_saved, saved_bytes_by_kind
from monet_ir.graph import arg_infos, op_node, op_phase, step_function
from monet_ir.interp.run import run_module
from monet_ir.registry import all_passes
from monet_ir.schedule.scheduler import schedule
from monet_ir.schedule.taskgraph import extract
from monet_ir.tools import monet_run
from monet_ir.types import numpy_dtype_of
from conftest import SHARED as SHARED_ROOT
from passes.activation_checkpoint import ActivationCheckpointPass, Policy, choose, parse_policy
from passes.autodiff import AutodiffPass
from targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"
SHARED_MODELS = SHARED_ROOT / "models"
LOCAL = ["mlp_b4", "lenet5_b4"]
SHARED = ["resnet18_b1", "gpt2_small_b1"]
POLICIES = ["recompute-all", "sqrt", "memory-budget", "list"]


def model_path(name: str) -> Path:
    if name in LOCAL:
        return DATA / "models" / f"{name}.onnx"
    path = SHARED_MODELS / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    return path


@functools.cache
def step(name: str, policy: str = "store-all") -> ModuleOp:
    """The differentiated step of a model after the policy (shared between tests: read only)."""
    module = import_onnx(model_path(name))
    AutodiffPass().apply(Context(), module)
    ActivationCheckpointPass(policy=policy).apply(Context(), module)
    module.verify()
    return module


@functools.cache
def policy_text(name: str, kind: str) -> str:
    """A concrete policy of each kind for a model: a budget halfway between what recompute-all
    and store-all save, every third recomputable value by name."""
    problem = plans.CheckpointProblem(step_function(step(name)))
    if kind == "memory-budget":
        floor = problem.saved_activation_bytes(frozenset(problem.candidates))
        return f"memory-budget={(floor + problem.saved_activation_bytes(frozenset())) // 2}"
    if kind == "list":
        return "list=" + ",".join(dict.fromkeys(op_node(s.op) for s in problem.candidates[::3]))
    return kind


def checkpointed(name: str, kind: str) -> ModuleOp:
    return step(name, policy_text(name, kind))


def recompute_ops(module: ModuleOp) -> list:
    return [op for op in step_function(module).body.block.ops if op_phase(op) == "recompute"]


# ----------------------------------------------------------------------------- numerics


@functools.cache
def monet_run_outputs(name: str, policy: str, tmp: Path) -> dict[str, np.ndarray]:
    ref = np.load(DATA / "reference" / f"{name}.npz")
    inputs = tmp / f"{name}_inputs.npz"
    np.savez(inputs, x=ref["x"], labels=ref["labels"])
    out = tmp / f"{name}_{abs(hash(policy))}.npz"
    args = monet_run.build_parser().parse_args([
        str(model_path(name)), "-p", f'autodiff,activation-checkpoint{{policy="{policy}"}}',
        "--inputs", str(inputs), "--out", str(out),
    ])
    monet_run.run(args)
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("name", LOCAL)
def test_monet_run_gradients_are_identical(tmp_path_factory, name, kind):
    tmp = tmp_path_factory.getbasetemp()
    before = monet_run_outputs(name, "store-all", tmp)
    after = monet_run_outputs(name, policy_text(name, kind), tmp)
    assert sorted(after) == sorted(before) and any(k.startswith("grad/") for k in before)
    for key in before:
        assert np.array_equal(after[key], before[key]), key


def random_arguments(module: ModuleOp, scale: float = 0.05, ids: int = 10) -> tuple[dict, dict]:
    """Parameters and inputs of the right shapes (the shared files are weight-stripped): floats
    normal times `scale`, integers (token ids, labels) below `ids`."""
    rng = np.random.default_rng(0)
    params, inputs = {}, {}
    fn = step_function(module)
    for info, arg in zip(arg_infos(fn), fn.body.block.args, strict=True):
        shape = tuple(arg.type.get_shape())
        dtype = np.dtype(numpy_dtype_of(arg.type.get_element_type()))
        if dtype.kind == "f":
            value = (rng.standard_normal(shape) * scale).astype(dtype)
        elif dtype.kind == "b":
            value = np.ones(shape, dtype)
        else:  # token ids, labels
            value = rng.integers(0, ids, shape).astype(dtype)
        (params if info.role == "param" else inputs)[info.name] = value
    return params, inputs


@functools.cache
def run_outputs(name: str, policy: str) -> list[np.ndarray]:
    module = step(name, policy)
    params, inputs = random_arguments(step(name))
    return run_module(module, params, inputs).outputs


@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("name", SHARED)
def test_gradients_are_identical_on_random_parameters(name, kind):
    # the clones run the same kernels on the same arrays, so results are bit-identical
    before = run_outputs(name, "store-all")
    after = run_outputs(name, policy_text(name, kind))
    assert recompute_ops(checkpointed(name, kind))
    assert len(after) == len(before) > 1
    for i, (a, b) in enumerate(zip(after, before, strict=True)):
        assert np.array_equal(a, b), f"result {i}"


# ----------------------------------------------------------------------------- accounting


@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("name", LOCAL + SHARED)
def test_saved_bytes_drop_and_recompute_flops_are_the_clones(name, kind):
    base, module = step_function(step(name)), step_function(checkpointed(name, kind))
    clones = recompute_ops(module.parent_op())
    before, after = saved_bytes_by_kind(base), saved_bytes_by_kind(module)
    # recomputation reads inputs and weights the backward pass did not: aliases, not new memory
    assert after["input"] >= before["input"] and after["param"] >= before["param"]
    problem = plans.CheckpointProblem(base)
    assert problem.saved_activation_bytes(choose(problem, parse_policy(policy_text(name, kind)))) == after["activation"]
    if clones:
        assert after["activation"] < before["activation"]
    else:  # sqrt on a one-layer MLP keeps its only candidate
        assert kind == "sqrt" and after == before
    flops_before, flops_after = flops_by_phase(base), flops_by_phase(module)
    for phase in ("forward", "backward", "optimizer"):
        assert flops_after[phase] == flops_before[phase], phase
    clone_flops = {"matmul_conv": 0, "other": 0}
    originals = {(op.name, op_node(op), tuple(r.type for r in op.results)): op_flops(op)
                 for op in base.body.block.ops if op_phase(op) == "forward"}
    for op in clones:
        counts = op_flops(op)
        assert counts == originals[(op.name, op_node(op), tuple(r.type for r in op.results))]
        for key in clone_flops:
            clone_flops[key] += counts[key]
    assert flops_after["recompute"] == clone_flops


@pytest.mark.parametrize("name", SHARED)
def test_memory_budget_is_met(name):
    problem = plans.CheckpointProblem(step_function(step(name)))
    full = problem.saved_activation_bytes(frozenset())
    floor = problem.saved_activation_bytes(frozenset(problem.candidates))
    for budget in (floor, (floor + full) // 3, full - 1):
        module = step(name, f"memory-budget={budget}")
        assert saved_bytes_by_kind(step_function(module))["activation"] <= budget
    assert not recompute_ops(step(name, f"memory-budget={full}"))
    unreachable = f"budget of {floor - 1} bytes cannot be met.*still saves {floor} bytes"
    with pytest.raises(PassFailedException, match=unreachable):
        step(name, f"memory-budget={floor - 1}")


def peak_bytes(module: ModuleOp) -> int:
    """Peak of DRAM + on-chip occupancy together (events of every memory on one timeline)."""
    s = schedule(extract(step_function(module)), get_target("edge_npu"))
    level = peak = 0
    for _, _, delta in sorted(e for trace in s.memories.values() for e in trace.events):
        level += delta
        peak = max(peak, level)
    return peak


def test_scheduled_peak_is_lower_with_sqrt_segments():
    assert peak_bytes(step("resnet18_b1", "sqrt")) < peak_bytes(step("resnet18_b1"))


# ----------------------------------------------------------------------------- options


def parse(spec: str) -> ActivationCheckpointPass:
    (p,) = PassPipeline.parse_spec(all_passes(), spec).passes
    assert isinstance(p, ActivationCheckpointPass)
    return p


def test_option_spellings():
    assert parse("activation-checkpoint").parsed_policy() == Policy("store-all")
    assert parse("activation-checkpoint{policy=sqrt}").parsed_policy() == Policy("sqrt")
    assert parse("activation-checkpoint{policy=memory-budget budget=4000000}").parsed_policy() \
        == Policy("memory-budget", budget=4_000_000)
    assert parse('activation-checkpoint{policy="memory-budget=4MiB"}').parsed_policy() \
        == Policy("memory-budget", budget=4 * 2**20)
    names = ("/layer1/layer1.0/relu/Relu", "/fc/Gemm")
    assert parse('activation-checkpoint{policy=list recompute="/layer1/layer1.0/relu/Relu","/fc/Gemm"}') \
        .parsed_policy() == Policy("list", names=names)
    assert parse('activation-checkpoint{policy="list=/layer1/layer1.0/relu/Relu, /fc/Gemm"}').parsed_policy() \
        == Policy("list", names=names)
    # what `monet report --checkpoint TEXT` hands over
    assert ActivationCheckpointPass(policy="list=/a/B /c/D").parsed_policy() == Policy("list", names=("/a/B", "/c/D"))
    assert parse_policy("memory-budget=2GB") == Policy("memory-budget", budget=2 * 10**9)
    # the spec a pass prints (monet report records its pipeline) parses back to the same pass
    for options in ({"policy": "list=/a/B,/c/D"}, {"policy": "memory-budget", "budget": 5},
                    {"policy": "list", "recompute": ("/x.y/Z", "/q")}, {}):
        p = ActivationCheckpointPass(**options)
        assert parse(str(p.pipeline_pass_spec())) == p


@pytest.mark.parametrize(("policy", "budget", "recompute", "message"), [
    ("fancy", None, (), "unknown policy 'fancy'"),
    ("memory-budget", None, (), "policy=memory-budget needs a non-negative budget"),
    ("memory-budget", -5, (), "policy=memory-budget needs a non-negative budget"),
    ("memory-budget=12XB", None, (), "'12XB' is not a byte count"),
    ("memory-budget=1", 3, (), "the budget is given twice"),
    ("sqrt", 3, (), "the budget option only applies to policy=memory-budget"),
    ("sqrt=3", None, (), "policy 'sqrt' takes no value"),
    ("list", None, (), "policy=list needs node names"),
    ("recompute-all", None, ("/a",), "the recompute option only applies to policy=list"),
])
def test_option_errors(policy, budget, recompute, message):
    with pytest.raises(PassFailedException, match="^activation-checkpoint: " + message):
        ActivationCheckpointPass(policy=policy, budget=budget, recompute=recompute).apply(
            Context(), step("mlp_b4").clone())


@pytest.mark.parametrize(("names", "message"), [
    ("loss", "node 'loss' computes the loss"),
    ("/fc1/Gemm", "no result of node '/fc1/Gemm' is saved for the backward pass"),
    ("/Relu,/nowhere", "no forward op has node '/nowhere'"),
])
def test_list_errors(names, message):
    module = step("mlp_b4").clone()
    with pytest.raises(PassFailedException, match=message):
        ActivationCheckpointPass(policy=f"list={names}").apply(Context(), module)


# ----------------------------------------------------------------------------- idempotence, marks, views


def printed(module: ModuleOp) -> str:
    return str(module)


def test_store_all_is_a_no_op_and_other_policies_apply_once():
    once = step("lenet5_b4")
    twice = once.clone()
    ActivationCheckpointPass().apply(Context(), twice)
    assert printed(twice) == printed(once)
    done = checkpointed("lenet5_b4", "sqrt").clone()
    text = printed(done)
    ActivationCheckpointPass(policy="store-all").apply(Context(), done)
    assert printed(done) == text
    with pytest.raises(PassFailedException, match="already has recompute ops"):
        ActivationCheckpointPass(policy="recompute-all").apply(Context(), done)


def test_saved_marks_are_current():
    module = checkpointed("resnet18_b1", "sqrt").clone()
    text = printed(module)
    marked = [op for op in step_function(module).body.block.ops if "monet.saved" in op.attributes]
    assert marked and all(op_phase(op) == "forward" for op in marked)
    mark_saved(step_function(module))
    assert printed(module) == text


VIEW_STEP = """
func.func @view(%x: tensor<4x8xf32> {monet.input = "x"},
                %w1: tensor<16x8xf32> {monet.param = "fc1.weight", monet.trainable},
                %w2: tensor<8x8xf32> {monet.param = "fc2.weight", monet.trainable}) -> tensor<8x8xf32> {
  %h1 = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %r1 = nn.relu %h1 {node = "/relu1/Relu"} : tensor<4x16xf32>
  %v = nn.reshape %r1 {node = "/Reshape"} : (tensor<4x16xf32>) -> tensor<8x8xf32>
  %o = nn.matmul %v, %w2 {node = "/MatMul"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %o : tensor<8x8xf32>
}
"""


def test_naming_a_view_recomputes_the_storage_it_views():
    results = []
    for name in ("/Reshape", "/relu1/Relu"):
        module = parse_module(VIEW_STEP)
        AutodiffPass().apply(Context(), module)
        assert ActivationCheckpointPass(policy=f"list={name}").checkpoint(step_function(module)) == ["/relu1/Relu"]
        module.verify()
        results.append(printed(module))
        assert [op.name for op in recompute_ops(module)] == ["nn.gemm", "nn.relu", "nn.reshape"]
    assert results[0] == results[1]
