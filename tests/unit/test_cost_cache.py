"""The persistent cost cache (monet_ir/cost/disk_cache.py): identical reports with it cold, warm
and disabled; keys that do not depend on the process; a broken cache file costs nothing."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from monet_ir.cost import LoopNestSig, VectorSig, cost_of, disk_cache, model
from targets import get_target

from test_report_digests import REPORT_FILES, REPORTS, _recorded, digests_of

REPO = Path(__file__).resolve().parents[2]
CASES = [c for c in REPORTS if c[0] in ("lenet-hetero-sqrt", "lenet-edge-fusion", "lenet-zigzag-inference")]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process state with no memoized cost and the cost cache at tmp_path/costs.sqlite."""
    path = tmp_path / "costs.sqlite"
    monkeypatch.setenv(disk_cache.ENV, str(path))
    model.clear_cache()
    disk_cache.reset()
    yield path
    model.clear_cache()
    disk_cache.reset()


def _rows(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(path) as db:
        return db.execute(f"SELECT COUNT(*) FROM {disk_cache.TABLE}").fetchone()[0]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_reports_identical_cold_warm_and_off(case, fresh, monkeypatch, tmp_path):
    expected = _recorded()[case[0]]
    assert digests_of(case, REPORT_FILES, "report", tmp_path / "cold") == expected
    stored = _rows(fresh)
    assert stored > 0
    # warm: a new process state, every cost from the file, none priced
    model.clear_cache()
    disk_cache.reset()

    def no_pricing(*args):
        raise AssertionError("priced although the cost cache holds it")

    with monkeypatch.context() as m:
        m.setattr(model, "loop_nest_cost", no_pricing)
        m.setattr(model, "vector_cost", no_pricing)
        assert digests_of(case, REPORT_FILES, "report", tmp_path / "warm") == expected
    assert _rows(fresh) == stored
    # disabled: nothing read or written
    monkeypatch.setenv(disk_cache.ENV, "off")
    model.clear_cache()
    disk_cache.reset()
    fresh.unlink()
    assert digests_of(case, REPORT_FILES, "report", tmp_path / "off") == expected
    assert not fresh.exists()


def test_stored_cost_equals_priced_cost_and_carries_the_asking_core(fresh):
    target = get_target("tpu_like_quad_core")
    sig = LoopNestSig(kind="conv", b=2, k=64, c=32, oy=14, ox=14, fy=3, fx=3, pads=(1, 1, 1, 1))
    vec = VectorSig(kind="elementwise", elements=12544, ops_per_element=1.5, bytes_read=50176, bytes_written=50176)
    simd = next(c for c in target.cores if c.kind == "simd")
    priced = [cost_of(sig, target.cores[0]), cost_of(vec, simd)]
    model.clear_cache()
    disk_cache.reset()
    # core 1 has core 0's hardware: served from the file, with its own id
    for s, core, cost in ((sig, target.cores[1], priced[0]), (vec, simd, priced[1])):
        stored = disk_cache.get(s, core)
        assert stored == replace(cost, core=core.id)
        assert list(stored.breakdown_pj.items()) == list(cost.breakdown_pj.items())


def test_keys_do_not_depend_on_the_process(fresh):
    code = ("from targets import get_target; from monet_ir.cost import disk_cache; "
            "print([disk_cache.core_key(c) for c in get_target('hetero_chip').cores])")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                           env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout for seed in (1, 2, 3)}
    assert len(keys) == 1
    cores = get_target("hetero_chip").cores
    # different hardware, different key; same hardware under another id and name, same key
    assert disk_cache.core_key(cores[0]) != disk_cache.core_key(replace(cores[0], clock_hz=cores[0].clock_hz * 2))
    assert disk_cache.core_key(cores[0]) == disk_cache.core_key(replace(cores[0], id=7, name="other"))


def test_a_broken_cache_file_is_not_used(fresh):
    fresh.write_bytes(b"this is not a database" * 100)
    target = get_target("edge_npu")
    sig = LoopNestSig(kind="gemm", b=8, k=64, c=64)
    assert cost_of(sig, target.cores[0]).latency_cycles > 0
    assert disk_cache.get(sig, target.cores[0]) is None


@pytest.mark.parametrize("value", ["off", "0", "false"])
def test_disabled_by_the_environment(monkeypatch, value):
    monkeypatch.setenv(disk_cache.ENV, value)
    assert disk_cache.cache_path() is None


def test_default_location_is_under_the_xdg_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(disk_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert disk_cache.cache_path() == tmp_path / "monet" / "costs.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert disk_cache.cache_path() == Path.home() / ".cache" / "monet" / "costs.sqlite"


def test_no_cost_cache_flag(tmp_path):
    env = {**__import__("os").environ, disk_cache.ENV: str(tmp_path / "costs.sqlite")}
    run = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", "tests/data/models/mlp_b4.onnx",
                          "--target", "edge_npu", "--out", str(tmp_path / "out"), "--no-plots", "--no-cost-cache"],
                         capture_output=True, text=True, cwd=REPO, env=env)
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "costs.sqlite").exists()
