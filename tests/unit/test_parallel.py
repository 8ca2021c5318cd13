"""Data parallelism and ZeRO: per-device memory against the ZeRO paper's formulas, the step on
a system (collectives on the network, overlap with the backward pass), and the CLI."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
from xdsl.context import Context

from conftest import SHARED
from monet_ir.graph import step_function
from monet_ir.network.collectives import idle_time_s
from monet_ir.parallel.plan import Plan, parse_plan
from monet_ir.parallel.step import memory_per_device, run_step
from passes.parallelize import ParallelizePass
from targets import get_target
from targets.system import System, build_network, get_system

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


@lru_cache(maxsize=4)
def _training_step(path: str):
    from monet_ir.frontend.onnx_import import import_onnx
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass

    module = import_onnx(path)
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    return module


def parallel_step(path: Path, **options):
    module = _training_step(str(path)).clone()
    ParallelizePass(**options).apply(Context(), module)
    return step_function(module)


def zero_formula(psi: int, n: int, stage: int) -> int:
    """Mixed-precision Adam, ZeRO paper (Rajbhandari et al. 2020, fig. 1): 2 + 2 + 12 bytes per
    parameter, K = 12."""
    return {0: 16 * psi, 1: 4 * psi + 12 * psi // n, 2: 2 * psi + 14 * psi // n, 3: 16 * psi // n}[stage]


def check_zero_formulas(path: Path, psi_expected: int | None) -> None:
    for n in (1, 8, 64):
        for stage in (0, 1, 2, 3):
            fn = parallel_step(path, dp=n, zero=stage)
            mem = memory_per_device(fn, Plan(dp=n, zero=stage), bits=16)
            psi = mem["parameter_count"]
            if psi_expected is not None:
                assert psi == psi_expected
            assert psi % n == 0
            state = mem["parameter_bytes"] + mem["gradient_bytes"] + mem["optimizer_state_bytes"]
            assert state == zero_formula(psi, n, stage), (n, stage, mem)
            assert mem["model_state_bytes"] == state


def test_zero_memory_formulas_on_a_small_gpt2():
    check_zero_formulas(MODELS / "gpt2_small_b1.onnx", 5_289_472)


def test_zero_memory_formulas_on_gpt2_124m():
    path = SHARED / "models" / "gpt2_124m_b1.onnx"
    if not path.is_file():
        pytest.skip("../shared/models/gpt2_124m_b1.onnx is not present")
    figures = json.loads((SHARED / "models" / "gpt2_124m_b1.figures.json").read_text())
    check_zero_formulas(path, figures["pytorch"]["param_count"])


def test_fp32_adam_keeps_no_master_copy():
    fn = parallel_step(MODELS / "mlp_b4.onnx", dp=8, zero=1)
    mem = memory_per_device(fn, Plan(dp=8, zero=1), bits=None)
    psi = mem["parameter_count"]
    assert mem["master_weight_bytes"] == 0
    assert mem["parameter_bytes"] == 4 * psi and mem["gradient_bytes"] == 4 * psi
    # shards are rounded up per tensor: fc2.bias has 10 elements, 2 per chip of 8
    assert 8 * psi // 8 <= mem["optimizer_state_bytes"] <= 8 * (psi // 8 + 4)


def one_chip_system(chip: str, chips: int = 1) -> System:
    return System(f"{chips}x_{chip}", get_target(chip), chips, build_network("switch", chips, 50e9, 2e-6, 1.0))


def test_one_replica_is_the_single_chip_step():
    from monet_ir.schedule.scheduler import schedule
    from monet_ir.schedule.taskgraph import extract

    path = MODELS / "mlp_b4.onnx"
    system = one_chip_system("edge_npu")
    result = run_step(parallel_step(path, dp=1), system, Plan(), bits=None)
    alone = schedule(extract(step_function(_training_step(str(path)))), system.chip)
    assert result.collectives == []
    assert result.latency_cycles == pytest.approx(alone.latency_cycles)
    assert result.comm_cycles == 0


def test_a_collective_alone_costs_its_alpha_beta_time():
    # one bucket for every gradient: the all-reduce starts after the backward pass, alone
    system = one_chip_system("datacenter", 8)
    plan = Plan(dp=8, bucket=10**12)
    result = run_step(parallel_step(MODELS / "mlp_b4.onnx", dp=8, bucket=10**12), system, plan, bits=16)
    (run,) = result.collectives
    freq = system.chip.frequency_hz
    want = idle_time_s("all_reduce", "ring", 8, run.bytes, 50e9, 2e-6)
    assert (run.end - run.start) / freq == pytest.approx(want, rel=0.01)
    # nothing but the optimizer follows it: (almost) all of it is exposed
    assert 0.95 * (run.end - run.start) <= result.exposed_cycles <= run.end - run.start


def test_buckets_overlap_the_backward_pass():
    # a network about as fast as the backward pass is long
    system = System("8x_dc", get_target("datacenter"), 8, build_network("switch", 8, 100e9, 1e-6, 1.0))
    path = MODELS / "gpt2_small_b1.onnx"
    small = run_step(parallel_step(path, dp=8, bucket=2_000_000), system, Plan(dp=8, bucket=2_000_000), bits=16)
    whole = run_step(parallel_step(path, dp=8, bucket=10**12), system, Plan(dp=8, bucket=10**12), bits=16)
    assert len(small.collectives) > 3 and len(whole.collectives) == 1
    # the same bytes cross the network either way
    assert sum(r.bytes for r in small.collectives) == sum(r.bytes for r in whole.collectives)
    overlapped = small.comm_cycles - small.exposed_cycles
    assert overlapped > 0.2 * small.comm_cycles
    assert small.exposed_cycles < whole.exposed_cycles
    assert small.latency_cycles < whole.latency_cycles
    # one bucket starts when the backward pass is (nearly) over: little left to overlap
    assert whole.latency_cycles >= whole.chip_latency_cycles + 0.9 * whole.comm_cycles


def test_the_optimizer_barrier_retimes_as_explicit_edges(monkeypatch):
    # the step re-timed with the collectives reads the barrier's record (`TaskGraph.barrier`) as
    # the edges sink -> waiter it stands for: the same times, delays and collectives as with them
    import dataclasses

    import monet_ir.parallel.step as step

    # (small buckets on edge_npu: some waiter starts later for a sink it does not read)
    system = System("8x_edge", get_target("edge_npu"), 8, build_network("switch", 8, 100e9, 1e-6, 1.0))
    fn = parallel_step(MODELS / "gpt2_small_b1.onnx", dp=8, bucket=50_000)
    plan = Plan(dp=8, bucket=50_000)
    recorded = run_step(fn, system, plan, bits=16)
    extract = step.extract

    def explicit(*args, **options):
        g = extract(*args, **options)
        assert g.barrier is not None
        tasks = [dataclasses.replace(t.as_task(), preds=g.predecessors(t.index) | set()) for t in g.tasks]
        return dataclasses.replace(g, tasks=tasks, barrier=None)

    monkeypatch.setattr(step, "extract", explicit)
    written = run_step(fn, system, plan, bits=16)
    assert recorded.task_times == written.task_times and recorded.collectives == written.collectives
    assert (recorded.latency_cycles, recorded.exposed_cycles, recorded.exposed_by_group) == \
        (written.latency_cycles, written.exposed_cycles, written.exposed_by_group)


def test_zero3_moves_half_again_as_many_bytes_as_zero2():
    system = get_system("8x_datacenter")
    path = MODELS / "gpt2_small_b1.onnx"
    two = run_step(parallel_step(path, dp=8, zero=2), system, Plan(dp=8, zero=2), bits=16)
    three = run_step(parallel_step(path, dp=8, zero=3), system, Plan(dp=8, zero=3), bits=16)
    ratio = sum(r.bytes for r in three.collectives) / sum(r.bytes for r in two.collectives)
    # forward all-gather + backward all-gather (of the weights the backward reads) + reduce-scatter,
    # against reduce-scatter + all-gather: at most 3/2
    assert 1.3 < ratio <= 1.5
    assert three.memory["dram_peak_bytes"] < two.memory["dram_peak_bytes"]


def test_report_cli(tmp_path, capsys):
    from monet_ir.tools.monet import main

    out = tmp_path / "r"
    with pytest.raises(SystemExit) as code:
        main(["report", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--parallel", "dp=4,zero=2",
              "--out", str(out)])
    assert code.value.code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["plan"]["dp"] == 4 and report["chips"] == 4
    c = report["communication"]
    assert c["exposed_s"] + c["overlapped_s"] == pytest.approx(c["time_s"])
    assert report["energy_pj"] == pytest.approx(sum(report["energy_breakdown_pj"].values()))
    assert report["energy_breakdown_pj"]["network"] > 0
    mem = report["memory_per_device"]
    for key in ("parameter_bytes", "gradient_bytes", "optimizer_state_bytes", "activation_bytes", "buffer_bytes",
                "capacity_bytes", "fits"):
        assert key in mem
    trace = json.loads((out / "trace.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") in ("process_name", "thread_name")}
    assert {"chip0", "chip3", "network"} <= names
    assert any(n.startswith("link chip0->") for n in names)
    assert "MONET multi-chip training-step report" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--parallel", "dp=4,zero=7"], "zero must be 0, 1, 2 or 3"),
    (["--parallel", "dp=2"], "dp x tp x pp = 2 chips, system '2x2_edge_npu' has 4"),
    (["--parallel", "dp=4,pipeline=2"], "'pipeline=2' is not KEY=VALUE"),
    (["--parallel", "pp=4,schedule=zigzag"], "schedule must be gpipe or 1f1b"),
    (["--system", "nowhere"], "no such file and no built-in system"),
])
def test_report_cli_errors(tmp_path, capsys, argv, message):
    from monet_ir.tools.monet import main

    base = ["report", str(MODELS / "mlp_b4.onnx"), "--system", "2x2_edge_npu", "--out", str(tmp_path / "r")]
    args = base + argv if "--system" not in argv else base[:2] + argv + base[4:]
    with pytest.raises(SystemExit) as code:
        main(args)
    assert code.value.code == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("[")]  # progress
    assert len(err) == 1 and message in err[0], err


def test_parse_plan():
    plan = parse_plan("dp=8,tp=2,pp=2,zero=1,microbatches=4,bucket=10MB,algorithm=tree")
    assert (plan.dp, plan.tp, plan.pp, plan.zero, plan.microbatches, plan.bucket, plan.algorithm) == \
        (8, 2, 2, 1, 4, 10_000_000, "tree")
    assert plan.chips == 32
    assert sorted(c for g in plan.groups("dp") for c in g) == list(range(32))
