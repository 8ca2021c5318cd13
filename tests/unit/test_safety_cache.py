"""Adversarial persistent cost caches (monet_ir/cost/disk_cache.py): an entry edited in place,
with a flipped bit, moved under another key or forged with fields of the wrong type is never
used: the op is priced afresh (the report is the one without the cache), one notice on stderr,
and the entry is written again. Seeded."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

from monet_ir.cost import LoopNestSig, VectorSig, cost_of, disk_cache, model
from targets import get_target

from test_cost_cache import fresh  # noqa: F401  (the fixture: a fresh cache file, no memoized cost)

REPO = Path(__file__).resolve().parents[2]
MLP = str(REPO / "tests" / "data" / "models" / "mlp_b4.onnx")


def _entries(path: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(path) as db:
        return list(db.execute(f"SELECT core, sig, cost, checksum FROM {disk_cache.TABLE} ORDER BY sig"))


def _set(path: Path, core: str, sig: str, cost: str, checksum: str | None = None) -> None:
    with sqlite3.connect(path) as db:
        if checksum is None:
            db.execute(f"UPDATE {disk_cache.TABLE} SET cost = ? WHERE core = ? AND sig = ?", (cost, core, sig))
        else:
            db.execute(f"UPDATE {disk_cache.TABLE} SET cost = ?, checksum = ? WHERE core = ? AND sig = ?",
                       (cost, checksum, core, sig))


def _priced(path: Path):
    target = get_target("tpu_like_quad_core")
    sigs = [LoopNestSig(kind="gemm", b=8, k=64, c=32), LoopNestSig(kind="gemm", b=16, k=32, c=64),
            VectorSig(kind="elementwise", elements=4096, ops_per_element=1.0, bytes_read=4096, bytes_written=4096)]
    simd = next(c for c in target.cores if c.kind == "simd")
    cores = [target.cores[0], target.cores[0], simd]
    costs = [cost_of(s, c) for s, c in zip(sigs, cores, strict=True)]
    assert len(_entries(path)) == 3
    return sigs, cores, costs


def _restart() -> None:
    model.clear_cache()
    disk_cache.reset()


def test_an_edited_entry_is_ignored_with_one_notice_and_rewritten(fresh, capsys):
    sigs, cores, costs = _priced(fresh)
    key = disk_cache.core_key(cores[0])
    for entry in _entries(fresh):
        core, sig, cost, _ = entry
        values = json.loads(cost)
        values["latency_cycles"] *= 3  # what the issue saw: a cheaper or dearer op, SQLite none the wiser
        _set(fresh, core, sig, json.dumps(values))
    _restart()
    capsys.readouterr()
    assert [disk_cache.get(s, c) for s, c in zip(sigs, cores, strict=True)] == [None] * 3
    assert [cost_of(s, c) for s, c in zip(sigs, cores, strict=True)] == costs  # priced afresh
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fail their checksum" in err[0] and str(fresh) in err[0]
    _restart()
    assert [disk_cache.get(s, c) for s, c in zip(sigs, cores, strict=True)] == costs  # written again, whole
    assert key in {e[0] for e in _entries(fresh)}


def test_flipped_bits_moved_and_forged_entries_are_never_used(fresh):
    sigs, cores, costs = _priced(fresh)
    rng = random.Random(41)
    good = _entries(fresh)
    for trial in range(24):
        core, sig, cost, checksum = good[trial % len(good)]
        field = trial % 2
        text = [cost, checksum][field]
        position = rng.randrange(len(text))
        flipped = text[:position] + chr(ord(text[position]) ^ (1 << rng.randrange(7))) + text[position + 1:]
        _set(fresh, core, sig, *((flipped, None) if field == 0 else (cost, flipped)))
        _restart()
        index = [repr(s) for s in sigs].index(sig)
        assert disk_cache.get(sigs[index], cores[index]) is None, (trial, flipped)
        _set(fresh, core, sig, cost, checksum)
    # an entry moved under another signature: its checksum names its own key
    (core_a, sig_a, cost_a, sum_a), (core_b, sig_b, _, _) = good[0], good[1]
    assert core_a == core_b
    _set(fresh, core_b, sig_b, cost_a, sum_a)
    _restart()
    index = [repr(s) for s in sigs].index(sig_b)
    assert disk_cache.get(sigs[index], cores[index]) is None
    # forged with a matching checksum but fields that are not a Cost's: refused by type
    for forged in ('{"latency_cycles": "fast"}', json.dumps({**json.loads(cost_a), "latency_cycles": "1"}),
                   json.dumps({**json.loads(cost_a), "breakdown_pj": {"mac": 1}}), "[" * 100_000, "null"):
        _set(fresh, core_a, sig_a, forged, disk_cache.entry_checksum(core_a, sig_a, forged))
        _restart()
        index = [repr(s) for s in sigs].index(sig_a)
        assert disk_cache.get(sigs[index], cores[index]) is None
        assert cost_of(sigs[index], cores[index]) == costs[index]


def test_a_report_on_an_edited_cache_equals_the_report_without_it(fresh, tmp_path, capsys):
    from monet_ir.tools.monet import main as monet_main

    def report(out: str) -> list[str]:
        _restart()  # a new process as far as costs go: every cost from the file
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            monet_main(["report", MLP, "--target", "edge_npu", "--out", str(tmp_path / out), "--no-plots"])
        assert exit_.value.code == 0
        return [line for line in capsys.readouterr().err.splitlines() if "notice" in line]

    assert report("first") == []
    for core, sig, cost, _ in _entries(fresh):
        values = json.loads(cost)
        values["latency_cycles"] = values["latency_cycles"] * 3 + 1
        _set(fresh, core, sig, json.dumps(values))
    notices = report("second")
    assert len(notices) == 1 and "checksum" in notices[0]
    assert (tmp_path / "second" / "report.json").read_bytes() == (tmp_path / "first" / "report.json").read_bytes()
