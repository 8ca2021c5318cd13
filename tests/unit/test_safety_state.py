"""Adversarial search states (`monet explore --resume DIR`, monet_ir/explore/state.py): a crafted
file never runs code (a payload would create a canary file), a corrupted or edited one is
refused in one line before anything is used, an old pickle state is refused unread. Seeded."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import random
from pathlib import Path

import pytest

from monet_ir.explore import state as saved
from monet_ir.explore.evaluate import CheckpointCost, Evaluation, FailedCost
from monet_ir.tools.monet import main as monet_main

DATA = Path(__file__).resolve().parents[1] / "data" / "models"
LENET = str(DATA / "lenet5_b4.onnx")
SIZES = (2, 2, 3, 2)


def a_state(objective: str = "schedule") -> saved.SearchState:
    """A state as `run_search` saves it (every kind of value: ints and floats, infinities, a
    failed evaluation, peaks, a random state), without building a training step."""
    rng = random.Random(7)
    genomes = [(0, 0, 0, 0), (1, 0, 2, 1), (0, 1, 1, 0), (1, 1, 0, 1), (0, 0, 2, 1)]
    if objective == "schedule":
        results = {g: Evaluation(1000 + i, 2.5e9 / (i + 1), 4096 * (i + 1), i % 2 == 0,
                                 (("core0", 512 * i), ("dram", 2**20 + i)))
                   for i, g in enumerate(genomes[:-1])}
        results[genomes[-1]] = Evaluation.failed("ScheduleError: no core can run nn.conv")
    else:
        results = {g: CheckpointCost(12.5 * i, 100 * i) for i, g in enumerate(genomes[:-1])}
        results[genomes[-1]] = FailedCost("ZeroDivisionError: division by zero")
    settings = {"objective": objective, "population": 4, "seed": 3, "budget": None, "cxpb": 0.9, "mutpb": 1.0,
                "greedy_seed": True, "step": {"target": "tpu_like_quad_core", "lr": 0.001, "dims": ()},
                "genes": {"sizes": SIZES}}
    rng_state = rng.getstate()
    return saved.SearchState(
        settings=settings, generation=2,
        population=[(g, c) for g, c in zip(genomes[:4], (math.inf, 0.5, 0.25, math.inf), strict=True)],
        random_state=rng_state, results=results, order=list(genomes), seeds={"store-all": genomes[0]},
        history=[{"generation": 1, "evaluations": 4, "best": [1000.0, 2.5e9, 4096.0]},
                 {"generation": 2, "evaluations": 5, "best": [1000.0, 1.25e9, 4096.0]}],
        eval_seconds=1.25, seconds=3.5)


def test_a_state_reads_back_equal(tmp_path):
    for objective in ("schedule", "checkpoint"):
        state = a_state(objective)
        saved.save(state, tmp_path)
        back = saved.load(tmp_path)
        assert back.results == state.results and list(back.results) == list(state.results)
        assert [type(r.latency_cycles if objective == "schedule" else r.saved_bytes) for r in back.results.values()] \
            == [type(r.latency_cycles if objective == "schedule" else r.saved_bytes) for r in state.results.values()]
        assert back.population == state.population and back.order == state.order
        assert back.random_state == state.random_state and back.history == state.history
        assert back.seeds == state.seeds and (back.eval_seconds, back.seconds) == (1.25, 3.5)
        assert back.settings == saved.plain(state.settings)
        saved.check(back, state.settings, tmp_path, SIZES, objective)
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temporary file, renamed


class _Payload:
    """Unpickling this creates the canary file (what a malicious state would do instead)."""

    def __init__(self, canary: Path):
        self.canary = canary

    def __reduce__(self):
        return (Path.write_text, (self.canary, "code ran"))


def _refused(folder: Path, *fragments: str) -> str:
    with pytest.raises(saved.StateError) as error:
        saved.load(folder)
    message = str(error.value)
    assert "\n" not in message and str(folder) in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_pickle_never_runs(tmp_path):
    canary = tmp_path / "canary"
    payload = pickle.dumps(_Payload(canary))
    pickle.loads(payload)  # the payload works when unpickled ...
    assert canary.exists()
    canary.unlink()
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / saved.LEGACY_STATE_FILE).write_bytes(payload)
    _refused(legacy, "search_state.pkl", "pickle", "not read")
    as_json = tmp_path / "as-json"  # the pickle under the new name
    as_json.mkdir()
    (as_json / saved.STATE_FILE).write_bytes(payload)
    _refused(as_json, "not a search state")
    # inside a well-formed, correctly checksummed state, where a value should be
    body = json.dumps({**saved.encode(a_state()), "random_state": payload.decode("latin-1")}).encode()
    header = json.dumps({"format": saved.FORMAT, "version": saved.VERSION, "body_bytes": len(body),
                         "sha256": hashlib.sha256(body).hexdigest()}).encode()
    (as_json / saved.STATE_FILE).write_bytes(header + b"\n" + body)
    _refused(as_json, "random_state", "expected a list")
    assert not canary.exists()  # ... and no state ever unpickled it


def test_the_cli_refuses_a_crafted_state_in_one_line_before_any_work(tmp_path, capsys):
    canary = tmp_path / "canary"
    (tmp_path / saved.LEGACY_STATE_FILE).write_bytes(pickle.dumps(_Payload(canary)))
    with pytest.raises(SystemExit) as exit_:
        monet_main(["explore", LENET, "--target", "tpu_like_quad_core", "--resume", str(tmp_path), "--population",
                    "8", "--generations", "2", "--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 1 and len(err) == 1 and "search_state.pkl" in err[0] and "building" not in err[0]
    assert not canary.exists()


def test_every_flipped_bit_is_refused(tmp_path):
    saved.save(a_state(), tmp_path)
    path = tmp_path / saved.STATE_FILE
    good = path.read_bytes()
    header = good.index(b"\n") + 1
    rng = random.Random(29)
    positions = [rng.randrange(header) for _ in range(16)] + [rng.randrange(header, len(good)) for _ in range(48)]
    for position in positions:
        flipped = bytearray(good)
        flipped[position] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(flipped))
        _refused(tmp_path, "it was not used")


def test_truncated_empty_and_oversized_states_are_refused(tmp_path, monkeypatch):
    saved.save(a_state(), tmp_path)
    path = tmp_path / saved.STATE_FILE
    good = path.read_bytes()
    for length in (0, 10, good.index(b"\n"), good.index(b"\n") + 1, len(good) // 2, len(good) - 1):
        path.write_bytes(good[:length])
        _refused(tmp_path, "it was not used")
    path.write_bytes(good + b" ")
    _refused(tmp_path, "truncated or edited")
    path.write_bytes(good)
    monkeypatch.setattr(saved, "MAX_STATE_BYTES", len(good) - 1)
    _refused(tmp_path, "more than a search state may")


def _rewrite(folder: Path, body: object) -> None:
    """A body with a correct header and checksum: what a forger (not a flipped bit) produces."""
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    header = json.dumps({"format": saved.FORMAT, "version": saved.VERSION, "body_bytes": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()}).encode()
    (folder / saved.STATE_FILE).write_bytes(header + b"\n" + data)


def test_a_value_edited_in_place_is_refused(tmp_path):
    saved.save(a_state(), tmp_path)
    path = tmp_path / saved.STATE_FILE
    text = path.read_text()
    assert '"evaluation",1001,' in text
    path.write_text(text.replace('"evaluation",1001,', '"evaluation",9001,'))  # same length, other latency
    _refused(tmp_path, "checksum does not match")


@pytest.mark.parametrize("edit,fragment", [
    (lambda b: b.update(generation=-1), "generation: expected an integer >= 0"),
    (lambda b: b.update(generation=True), "generation: expected an integer"),
    (lambda b: b["evaluated"][1][1].__setitem__(1, "fast"), "evaluated[1][1][1]: expected a number"),
    (lambda b: b["evaluated"][1][1].__setitem__(0, "os.system"), "evaluated[1][1][0]"),
    (lambda b: b["evaluated"][0][0].append(-1), "evaluated[0][0][4]: expected an integer >= 0"),
    (lambda b: b["evaluated"].append(b["evaluated"][0]), "evaluated once"),
    (lambda b: b["population"][0].__setitem__(0, [1, 1, 1, 1]), "an evaluated genome"),
    (lambda b: b["random_state"][1].pop(), "random_state[1]: expected a list of 625 items"),
    (lambda b: b["random_state"][1].__setitem__(3, 2**40), "random_state[1][3]"),
    (lambda b: b["random_state"][1].__setitem__(624, 9999), "random_state[1][624]"),
    (lambda b: b["history"].pop(), "history: expected 2 generations"),
    (lambda b: b.update(seconds="inf"), "seconds: expected a non-negative number"),
    (lambda b: b.pop("seeds"), "<body>: expected the fields"),
    (lambda b: b.update(settings=[1, 2]), "settings: expected an object"),
])
def test_a_forged_state_of_the_wrong_shape_is_refused(tmp_path, edit, fragment):
    body = saved.encode(a_state())
    edit(body)
    _rewrite(tmp_path, body)
    _refused(tmp_path, "is invalid", fragment)


def test_deeply_nested_or_huge_bodies_are_refused(tmp_path):
    _rewrite(tmp_path, b"[" * 200_000 + b"]" * 200_000)
    _refused(tmp_path, "not JSON")
    _rewrite(tmp_path, {**saved.encode(a_state()), "generation": "x" * 100_000})
    message = _refused(tmp_path, "generation: expected an integer")
    assert len(message) < 400  # what a message prints is bounded


def test_check_refuses_genomes_and_results_that_do_not_fit_the_search(tmp_path):
    state = a_state()
    saved.save(state, tmp_path)
    back = saved.load(tmp_path)
    with pytest.raises(saved.StateError, match="the saved search has seed 3, this one 4"):
        saved.check(back, {**state.settings, "seed": 4}, tmp_path, SIZES, "schedule")
    with pytest.raises(saved.StateError, match=r"population\[1\]\[0\]: expected a genome of 4 genes"):
        saved.check(back, state.settings, tmp_path, (2, 2, 2, 2), "schedule")  # gene 2 = 2 is out of range
    with pytest.raises(saved.StateError, match="expected a genome of 3 genes"):
        saved.check(back, state.settings, tmp_path, (2, 2, 3), "schedule")
    with pytest.raises(saved.StateError, match="a result of --objective checkpoint"):
        saved.check(back, state.settings, tmp_path, SIZES, "checkpoint")
    back.settings["population"] = 8  # (a forged state: settings and population disagree)
    with pytest.raises(saved.StateError, match="population: expected 8 individuals"):
        saved.check(back, {**state.settings, "population": 8}, tmp_path, None, None)


# ---------------------------------------------------------------------- a resumed sweep's rows

SWEEP = ["--target-template", "datacenter", "--set", "dram.bandwidth_GBps=400,800,1640", "--no-plots"]


def _sweep(capsys, *options: str) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        monet_main(["sweep", str(DATA / "mlp_b4.onnx"), *SWEEP, *options])
    return exit_.value.code, capsys.readouterr().err


def test_a_sweep_row_edited_in_place_is_evaluated_again(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert _sweep(capsys, "--out", str(whole))[0] == 0
    lines = (whole / "sweep.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert header[-1] == "row_sha256" and len(lines) == 4
    column = header.index("latency_cycles")
    part = tmp_path / "part"
    part.mkdir()
    cells = lines[2].split(",")
    cells[column] = str(int(cells[column]) // 3)  # design 1 three times faster, its checksum as it was
    (part / "sweep.csv").write_text("\n".join([lines[0], lines[1], ",".join(cells)]) + "\n")
    code, err = _sweep(capsys, "--resume", str(part))
    assert code == 0
    notices = [line for line in err.splitlines() if "checksum" in line]
    assert len(notices) == 1 and "design(s) 1 " in notices[0] and "evaluated again" in notices[0]
    assert "design 1/" in err and "design 0/" not in err  # 0 taken from the file, 1 evaluated again
    for name in ("sweep.csv", "sweep.json"):
        assert (part / name).read_bytes() == (whole / name).read_bytes(), name
