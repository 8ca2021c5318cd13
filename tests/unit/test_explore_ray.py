"""The Ray backend of `monet explore` and `monet sweep` on a local Ray runtime with 2 CPUs
(nothing beyond this machine): the same results as the local backend, a worker process killed
mid-search (by its pid) changes nothing, a search interrupted on one backend continues on the
other."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
if not Path("/proc/self/cmdline").exists():
    pytest.skip("finds Ray's worker processes through /proc", allow_module_level=True)

from monet_ir.explore import dispatch, ga  # noqa: E402
from monet_ir.explore import state as saved  # noqa: E402
from monet_ir.explore.evaluate import Evaluator, StepConfig  # noqa: E402
from monet_ir.tools.monet import main as monet_main  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "models"
LENET = str(DATA / "lenet5_b4.onnx")
TARGET = "tpu_like_quad_core"
SEARCH = dict(objective="schedule", population=8, generations=3, seed=7)


@pytest.fixture(scope="module")
def local_ray():
    with dispatch.ray_session(num_cpus=2) as session:
        yield session


@pytest.fixture(scope="module")
def lenet() -> Evaluator:
    return Evaluator(StepConfig(LENET, TARGET))


@pytest.fixture(scope="module")
def local_result(lenet):
    return ga.run_search(lenet, **SEARCH, jobs=1)


def same(a, b) -> None:
    assert a.order == b.order
    assert a.results == b.results
    assert a.front == b.front
    assert a.evaluations == b.evaluations


def test_ray_equals_local(local_ray, lenet, local_result):
    same(ga.run_search(lenet, **SEARCH, backend="ray"), local_result)


def _task_workers() -> list[int]:
    """Pids of Ray worker processes running one of our tasks (Ray titles them after the task)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"ray::_ray_run_chunk"):
                found.append(int(entry.name))
    return found


def test_a_killed_worker_leaves_the_front_unchanged(local_ray, lenet, local_result):
    killed: list[int] = []
    outcome: dict = {}

    def search():
        try:
            outcome["result"] = ga.run_search(lenet, **SEARCH, backend="ray")
        except BaseException as e:  # noqa: BLE001
            outcome["error"] = e

    thread = threading.Thread(target=search)
    thread.start()
    deadline = time.monotonic() + 60
    while thread.is_alive() and not killed and time.monotonic() < deadline:
        for pid in _task_workers():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            break
        time.sleep(0.002)
    thread.join(120)
    assert killed, "no worker was running a task"
    assert "error" not in outcome, outcome.get("error")
    same(outcome["result"], local_result)


def test_interrupted_locally_resumed_on_ray(local_ray, lenet, local_result, tmp_path):
    with pytest.raises(ga.SearchInterrupted):
        ga.run_search(lenet, **SEARCH, checkpoint=tmp_path, stop_after=1)
    state = saved.load(tmp_path)
    assert state.generation == 1
    same(ga.run_search(lenet, **SEARCH, backend="ray", checkpoint=tmp_path, resume=state), local_result)


def test_cli_outputs_identical_across_backends(local_ray, tmp_path):
    outs = {}
    for backend in ("local", "ray"):
        out = outs[backend] = tmp_path / backend
        with pytest.raises(SystemExit) as exit_:
            monet_main(["explore", LENET, "--target", TARGET, "--out", str(out), "--population", "8",
                        "--generations", "2", "--seed", "1", "--no-plots", "--backend", backend, "--jobs", "2"])
        assert exit_.value.code == 0
    for name in ("front.csv", "front.json", "evaluated.csv"):
        assert (outs["ray"] / name).read_bytes() == (outs["local"] / name).read_bytes(), name
    assert "workers 2" in (outs["ray"] / "search.log").read_text()
    # a sweep on Ray gives the local sweep's designs
    for backend in ("local", "ray"):
        with pytest.raises(SystemExit) as exit_:
            monet_main(["sweep", str(DATA / "mlp_b4.onnx"), "--target-template", "datacenter", "--set",
                        "dram.bandwidth_GBps=400,1640", "--out", str(tmp_path / f"sweep_{backend}"), "--no-plots",
                        "--backend", backend])
        assert exit_.value.code == 0
    designs = [json.loads((tmp_path / f"sweep_{b}" / "sweep.json").read_text()) for b in ("local", "ray")]
    assert designs[0] == designs[1] and len(designs[0]["designs"]) == 2
