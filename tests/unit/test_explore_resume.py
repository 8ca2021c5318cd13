"""Determinism, checkpoints and resumption of `monet explore` and `monet sweep`, failed
candidates, a local worker that dies, and the progress line and log (no Ray needed)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from monet_ir.explore import dispatch, ga
from monet_ir.explore import state as saved
from monet_ir.explore.cli import Terminal
from monet_ir.explore.evaluate import Evaluator, StepConfig
from monet_ir.tools.monet import main as monet_main

DATA = Path(__file__).resolve().parents[1] / "data" / "models"
LENET = str(DATA / "lenet5_b4.onnx")
TARGET = "tpu_like_quad_core"
OUTPUTS = ("front.csv", "front.json", "evaluated.csv")


def explore(out: Path, *options: str, resume: bool = False) -> int:
    folder = ["--resume", str(out)] if resume else ["--out", str(out)]
    with pytest.raises(SystemExit) as exit_:
        monet_main(["explore", LENET, "--target", TARGET, *folder, "--population", "8", "--seed", "3",
                    "--no-plots", *options])
    return exit_.value.code


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explore") / "jobs1"
    assert explore(out, "--generations", "4", "--jobs", "1") == 0
    return out


def test_jobs_give_byte_identical_outputs(uninterrupted, tmp_path):
    out = tmp_path / "jobs2"
    assert explore(out, "--generations", "4", "--jobs", "2") == 0
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (uninterrupted / name).read_bytes(), name
    rows = list(csv.DictReader((out / "evaluated.csv").open()))
    assert len(rows) == json.loads((out / "chosen.json").read_text())["search"]["evaluations"] > 8


def test_state_and_log_after_every_generation(uninterrupted):
    state = saved.load(uninterrupted)
    assert state.generation == 4
    assert len(state.population) == 8 and len(state.order) == len(state.results)
    log = (uninterrupted / "search.log").read_text().splitlines()
    assert [line.split()[2] for line in log] == [f"{g}/4" for g in range(5)]
    assert all("evals_per_s" in line and "best_latency_cycles" in line and "workers 1" in line for line in log)


def test_resumed_search_equals_the_uninterrupted_one(uninterrupted, tmp_path, capsys):
    out = tmp_path / "resumed"
    assert explore(out, "--generations", "2", "--jobs", "1") == 0  # as if stopped after generation 2
    assert saved.load(out).generation == 2
    capsys.readouterr()
    assert explore(out, "--generations", "4", "--jobs", "2", resume=True) == 0
    assert "resuming after generation 2" in capsys.readouterr().err
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (uninterrupted / name).read_bytes(), name
    # a different setting is refused in one line
    assert explore(out, "--generations", "4", "--seed", "4", resume=True) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "the saved search has seed 3, this one 4" in err[0] and "Traceback" not in err[0]
    assert explore(tmp_path / "nothing", "--generations", "1", resume=True) == 1
    assert "no such folder" in capsys.readouterr().err
    # states saved before `--freeze` existed have no such step option: without it they resume as
    # before; frozen weights are another step
    assert "frozen" not in saved.load(out).settings["step"]
    assert explore(out, "--generations", "4", "--freeze", "fc3.bias", resume=True) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "the saved search has step" in err[0]


@pytest.fixture(scope="module")
def lenet() -> Evaluator:
    return Evaluator(StepConfig(LENET, TARGET))


@pytest.mark.parametrize("k", [0, 2])
def test_interrupted_after_generation_k(lenet, tmp_path, k):
    """A search stopped after generation k (its state saved) and continued ends as the
    uninterrupted one: same evaluations in the same order, same front."""
    options = dict(objective="schedule", population=8, generations=4, seed=11)
    whole = ga.run_search(lenet, **options)
    with pytest.raises(ga.SearchInterrupted):
        ga.run_search(lenet, **options, checkpoint=tmp_path, stop_after=k)
    state = saved.load(tmp_path)
    assert state.generation == k
    resumed = ga.run_search(lenet, **options, checkpoint=tmp_path, resume=state, jobs=2)
    assert resumed.order == whole.order
    assert resumed.front == whole.front
    assert resumed.results == whole.results
    assert resumed.final_population == whole.final_population


def test_a_candidate_that_raises_is_recorded_and_the_search_goes_on(lenet, monkeypatch, tmp_path):
    real = Evaluator.evaluate

    def raises_when_fused(self, candidate):
        if candidate.fusion:
            raise RuntimeError("lost the tiles\nsecond line")
        return real(self, candidate)

    monkeypatch.setattr(Evaluator, "evaluate", raises_when_fused)
    for jobs in (1, 2):
        result = ga.run_search(lenet, population=8, generations=2, seed=5, jobs=jobs)
        failed = [g for g in result.order if result.spec.decode(g).fusion]
        assert failed and len(result.order) > len(failed)
        for g in failed:
            assert result.results[g].error == "RuntimeError: lost the tiles"
            assert result.point(g)["error"] == "RuntimeError: lost the tiles"
        assert not set(failed) & set(result.front)
    # the checkpoint objective too
    real_cost = Evaluator.checkpoint_cost
    monkeypatch.setattr(Evaluator, "checkpoint_cost",
                        lambda self, recompute: 1 / 0 if len(recompute) == 1 else real_cost(self, recompute))
    result = ga.run_search(lenet, objective="checkpoint", population=8, generations=2, seed=5)
    failed = [g for g in result.order if sum(g) == 1]
    assert failed and all(result.results[g].error == "ZeroDivisionError: division by zero" for g in failed)
    assert all(not result.feasible(g, None) for g in failed) and not set(failed) & set(result.front)
    assert result.front


@dataclass
class _DiesOnce:
    """A work whose worker kills itself (SIGKILL) the first time it sees item 5."""

    marker: str
    key: str = "dies-once"

    def build(self):
        return "built"

    def run(self, state, item):
        if item == 5 and not os.path.exists(self.marker):
            Path(self.marker).write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        return (state, item * item, os.getpid())

    def failed(self, item, reason):
        return ("failed", reason)


def test_a_local_worker_that_dies_has_its_items_run_again(tmp_path):
    backend = dispatch.LocalBackend(_DiesOnce(str(tmp_path / "marker")), jobs=2)
    try:
        results = backend.map(list(range(12)))
    finally:
        backend.close()
    assert (tmp_path / "marker").exists() and backend.restarts == 1
    assert [r[:2] for r in results] == [("built", i * i) for i in range(12)]


def test_live_progress_as_results_arrive(lenet):
    lines: list[str] = []
    result = ga.run_search(lenet, population=8, generations=1, seed=2, jobs=2, live=lines.append)
    new = len(result.order) - 8
    assert any("generation 0: 8/8" in line for line in lines)
    assert any(f"generation 1: {new}/{new}" in line and f"evals {len(result.order)} " in line for line in lines)


def test_terminal_bar_redraws_one_line():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    terminal = Terminal(stream)
    terminal.bar("gen 1")
    terminal.bar("gen 2")
    terminal.say("done")
    assert stream.getvalue() == "\rgen 1\x1b[K\rgen 2\x1b[K\ndone\n"
    plain = io.StringIO()
    Terminal(plain).bar("gen 1")
    Terminal(plain).live("gen 1, 3/8")  # live redraws are for terminals only
    assert plain.getvalue() == "gen 1\n"


def test_shipped_files_are_materialized_where_missing(tmp_path):
    template = tmp_path / "hw" / "mine.yaml"
    template.parent.mkdir()
    from targets import builtin_target_path

    template.write_text(Path(builtin_target_path(TARGET)).read_text())
    config = StepConfig(LENET, str(template))
    files = ga.shipped_files(config)
    assert [(role, name) for role, name, _ in files] == [("model", "lenet5_b4.onnx"), ("target", "mine.yaml")]
    key = ga.work_key(config, "schedule", files)
    assert ga.materialize(config, files, key) == config  # this machine has them
    elsewhere = StepConfig(str(tmp_path / "gone" / "lenet5_b4.onnx"), str(tmp_path / "gone" / "mine.yaml"))
    there = ga.materialize(elsewhere, files, key)
    assert Path(there.model).read_bytes() == Path(LENET).read_bytes()
    assert Path(there.target).read_text() == template.read_text() and there.target != elsewhere.target


def test_ray_backend_without_ray_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert explore(tmp_path / "o", "--generations", "1", "--backend", "ray") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install -e '.[ray]'" in err[0]


# ---------------------------------------------------------------------- sweep

SWEEP = ["--target-template", "datacenter", "--set", "dram.bandwidth_GBps=400,800,1640", "--set",
         "cores.*.memories.*.size=1 MiB,4 MiB", "--no-plots"]


def sweep(out: Path, *options: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        monet_main(["sweep", str(DATA / "mlp_b4.onnx"), *SWEEP, *options])
    return exit_.value.code


def test_sweep_resumes_by_skipping_the_designs_in_its_csv(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert sweep(whole, "--out", str(whole)) == 0
    rows = (whole / "sweep.csv").read_text().splitlines()
    assert len(rows) == 7
    part = tmp_path / "part"
    part.mkdir()
    (part / "sweep.csv").write_text("\n".join(rows[:3]) + "\n")  # interrupted after two designs
    capsys.readouterr()
    assert sweep(part, "--resume", str(part), "--jobs", "2") == 0
    err = capsys.readouterr().err
    assert "2 already in" in err and "design 0/" not in err and "design 1/" not in err and "design 5/" in err
    for name in ("sweep.csv", "sweep.json"):
        assert (part / name).read_bytes() == (whole / name).read_bytes(), name
    # a CSV of another grid is refused in one line
    (part / "sweep.csv").write_text(rows[0] + "\n" + rows[1].replace("400", "300", 1) + "\n")
    assert sweep(part, "--resume", str(part)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "design 0 has dram.bandwidth_GBps=300" in err[0]
