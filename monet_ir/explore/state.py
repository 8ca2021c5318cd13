"""A search's checkpoint: what `monet explore --resume DIR` needs to continue it.

After every generation (and after the initial population, generation 0) the search writes
`search_state.json` to its output folder, atomically (`monet_ir.files.write_atomic`: a
temporary file flushed to disk and renamed over the old one, so an interruption leaves the
previous generation's state whole).

The file is data, never code: JSON (non-finite numbers written as the strings "inf", "-inf",
"nan"), two parts:

1. a header line, `{"format": "monet-search-state", "version": 2, "body_bytes": N,
   "sha256": "..."}`;
2. the body, N bytes of JSON whose SHA-256 the header holds:

- `settings`: what must be the same to continue (objective, population, seed, budget, the
  searched genes and the genome itself, the crossover and mutation rates, the step's options
  and the SHA-256 of the model file), as plain JSON values;
- `generation`: the last generation completed;
- `population`: `[genome, crowding distance]` per individual, in order (the tournament of the
  next generation reads the NSGA-II crowding distances);
- `random_state`: the state of Python's `random` (DEAP's operators draw from it), `[3, [625
  integers], gauss]`;
- `evaluated`: the archive of evaluated candidates in the order they were first evaluated,
  `[genome, result]` each; a result is `["evaluation", latency, energy, peak, fits, [[memory,
  peak], ...], error]` (`--objective schedule`), `["checkpoint", recompute cycles, saved bytes]`
  or `["failed", reason]` (`--objective checkpoint`);
- `seeds` (name -> genome), `history` (per generation: evaluations, best objectives),
  `eval_seconds`, `seconds`.

`load` reads nothing but JSON and checks, before any of it is used: the header (format,
version), the body's size and checksum (a bit flipped or a value edited in place is refused),
then the type and shape of every field (`decode`); `check` then compares the settings with the
search being started and checks every genome against its genome (length, each gene's range) and
the population's size. Each refusal is one line. A `search_state.pkl` of MONET before this
format (a Python pickle, which can run code when read) is refused without being read.

A search continued from generation k draws the same numbers and evaluates the same genomes in
the same order as the uninterrupted one, so it ends with the same front and `evaluated.csv`
(tested): every number is written as Python's shortest round-tripping text and read back equal,
integers stay integers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError

STATE_FILE = "search_state.json"
LEGACY_STATE_FILE = "search_state.pkl"
FORMAT = "monet-search-state"
VERSION = 2
MAX_STATE_BYTES = 2**30  # a state of 100,000 evaluations of 1,000-gene genomes is ~300 MB
MAX_HEADER_BYTES = 1024
_RANDOM_WORDS = 625  # Mersenne Twister: 624 words and the position


class StateError(UsageError):
    """A state file that cannot be resumed; str() is one line."""


Genome = tuple[int, ...]


@dataclass
class SearchState:
    settings: dict[str, Any]  # plain JSON values (`plain`)
    generation: int
    population: list[tuple[Genome, float]]
    random_state: Any
    results: dict[Genome, Any]
    order: list[Genome]
    seeds: dict[str, Genome]
    history: list[dict[str, Any]] = field(default_factory=list)
    eval_seconds: float = 0.0
    seconds: float = 0.0


# ---------------------------------------------------------------------- values


def _number_out(value: float | int) -> float | int | str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def plain(value: Any) -> Any:
    """`value` as JSON values: dataclasses as objects of their fields, tuples as lists,
    non-finite floats as strings (what `load` gives back for settings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return _number_out(float(value))
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"a search setting of type {type(value).__name__} has no JSON form")


def _encode_result(result: Any) -> list[Any]:
    from monet_ir.explore.evaluate import CheckpointCost, Evaluation, FailedCost

    if isinstance(result, Evaluation):
        return ["evaluation", _number_out(result.latency_cycles), _number_out(result.energy_pj),
                _number_out(result.peak_memory_bytes), bool(result.fits),
                [[name, _number_out(peak)] for name, peak in result.peaks], result.error]
    if isinstance(result, CheckpointCost):
        return ["checkpoint", _number_out(result.recompute_cycles), _number_out(result.saved_bytes)]
    if isinstance(result, FailedCost):
        return ["failed", result.error]
    raise TypeError(f"an evaluation of type {type(result).__name__} has no state form")


def encode(state: SearchState) -> dict[str, Any]:
    """The body of the state file (JSON values)."""
    return {
        "settings": plain(state.settings),
        "generation": state.generation,
        "population": [[list(genome), _number_out(float(crowding))] for genome, crowding in state.population],
        "random_state": [state.random_state[0], list(state.random_state[1]), plain(state.random_state[2])],
        "evaluated": [[list(genome), _encode_result(state.results[genome])] for genome in state.order],
        "seeds": {name: list(genome) for name, genome in state.seeds.items()},
        "history": [plain(entry) for entry in state.history],
        "eval_seconds": _number_out(float(state.eval_seconds)),
        "seconds": _number_out(float(state.seconds)),
    }


# ---------------------------------------------------------------------- writing


def save(state: SearchState, folder: Path) -> Path:
    """Write the state to `folder/search_state.json` atomically and durably."""
    import hashlib
    import json

    from monet_ir.files import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    body = json.dumps(encode(state), separators=(",", ":"), allow_nan=False).encode()
    header = json.dumps({"format": FORMAT, "version": VERSION, "body_bytes": len(body),
                         "sha256": hashlib.sha256(body).hexdigest()})
    path = folder / STATE_FILE
    write_atomic(path, header.encode() + b"\n" + body, durable=True)
    return path


# ---------------------------------------------------------------------- reading


def load(folder: Path | str) -> SearchState:
    """The state saved in `folder`, checked (see the module docstring); a one-line `StateError`
    when it cannot be resumed."""
    import hashlib
    import json

    folder = Path(folder)
    path = folder / STATE_FILE

    def refuse(reason: str) -> StateError:
        return StateError(f"--resume {folder}: {STATE_FILE} {reason}; it was not used")

    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if (folder / LEGACY_STATE_FILE).exists():
            raise StateError(f"--resume {folder}: {LEGACY_STATE_FILE} is the state of an older MONET, a Python pickle, "
                             f"which could run code when read: it is not read (start the search again with --out)") from None
        raise StateError(f"--resume {folder}: no {STATE_FILE} there (not the output folder of a search)") from None
    except OSError as e:
        raise StateError(f"--resume {folder}: cannot read {STATE_FILE}: {e.strerror}") from None
    if size > MAX_STATE_BYTES:
        raise refuse(f"has {size:,} bytes, more than a search state may ({MAX_STATE_BYTES:,})")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StateError(f"--resume {folder}: cannot read {STATE_FILE}: {e.strerror}") from None
    line, newline, body = data.partition(b"\n")
    if not newline or len(line) > MAX_HEADER_BYTES:
        raise refuse("is damaged or not a search state (no header line)")
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        raise refuse("is damaged or not a search state (its header line is not JSON)") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise refuse("is not a MONET search state")
    if header.get("version") != VERSION:
        raise refuse(f"has format version {_short(header.get('version'))}; this MONET reads version {VERSION}")
    if header.get("body_bytes") != len(body):
        raise refuse(f"is damaged: the header announces {_short(header.get('body_bytes'))} bytes of state, the file "
                     f"holds {len(body):,} (truncated or edited)")
    if header.get("sha256") != hashlib.sha256(body).hexdigest():
        raise refuse("is damaged: its checksum does not match its content (edited or corrupted)")
    try:
        values = json.loads(body)
    except (ValueError, RecursionError):
        raise refuse("is damaged (its body is not JSON)") from None
    try:
        return decode(values)
    except _Invalid as e:
        raise refuse(f"is invalid: {e}") from None


class _Invalid(Exception):
    """A field of the state of the wrong type or shape (str(): the field and the problem)."""


def _short(value: Any, limit: int = 60) -> str:
    import reprlib

    short = reprlib.Repr()
    short.maxstring = short.maxother = limit
    return short.repr(value)


def _expect(condition: bool, where: str, what: str, value: Any) -> None:
    if not condition:
        raise _Invalid(f"{where}: expected {what}, found {_short(value)}")


def _integer(value: Any, where: str, low: int = 0, high: int | None = None) -> int:
    _expect(isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value < high), where,
            f"an integer >= {low}" + (f" and < {high}" if high is not None else ""), value)
    return value


def _number(value: Any, where: str) -> float | int:
    """An int or float as written, or a non-finite float written as a string."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    _expect(isinstance(value, (int, float)) and not isinstance(value, bool), where, "a number", value)
    return value


def _seconds(value: Any, where: str) -> float:
    number = _number(value, where)
    _expect(math.isfinite(number) and number >= 0, where, "a non-negative number of seconds", value)
    return float(number)


def _list(value: Any, where: str, length: int | None = None) -> list[Any]:
    _expect(isinstance(value, list) and (length is None or len(value) == length), where,
            "a list" + (f" of {length} items" if length is not None else ""), value)
    return value


def _text(value: Any, where: str) -> str:
    _expect(isinstance(value, str), where, "a string", value)
    return value


def _genome(value: Any, where: str) -> Genome:
    genes = _list(value, where)
    return tuple(_integer(v, f"{where}[{i}]") for i, v in enumerate(genes))


def _result(value: Any, where: str) -> Any:
    from monet_ir.explore.evaluate import CheckpointCost, Evaluation, FailedCost

    items = _list(value, where)
    _expect(bool(items) and items[0] in ("evaluation", "checkpoint", "failed"), f"{where}[0]",
            "evaluation, checkpoint or failed", items[:1])
    kind = items[0]
    if kind == "evaluation":
        _list(items, where, 7)
        _expect(isinstance(items[4], bool), f"{where}[4]", "true or false", items[4])
        peaks = tuple((_text(_list(p, f"{where}[5][{i}]", 2)[0], f"{where}[5][{i}][0]"),
                       _number(p[1], f"{where}[5][{i}][1]")) for i, p in enumerate(_list(items[5], f"{where}[5]")))
        return Evaluation(_number(items[1], f"{where}[1]"), _number(items[2], f"{where}[2]"),
                          _number(items[3], f"{where}[3]"), items[4], peaks, _text(items[6], f"{where}[6]"))
    if kind == "checkpoint":
        _list(items, where, 3)
        return CheckpointCost(_number(items[1], f"{where}[1]"), _number(items[2], f"{where}[2]"))
    _list(items, where, 2)
    return FailedCost(_text(items[1], f"{where}[1]"))


def _random_state(value: Any) -> tuple[int, tuple[int, ...], float | None]:
    version, words, gauss = _list(value, "random_state", 3)
    _expect(version == 3 and not isinstance(version, bool), "random_state[0]", "3", version)
    _list(words, "random_state[1]", _RANDOM_WORDS)
    state = tuple(_integer(w, f"random_state[1][{i}]", 0, 2**32) for i, w in enumerate(words[:-1]))
    position = _integer(words[-1], f"random_state[1][{_RANDOM_WORDS - 1}]", 0, _RANDOM_WORDS)
    _expect(gauss is None or (isinstance(gauss, float) and math.isfinite(gauss)), "random_state[2]",
            "null or a number", gauss)
    return (3, state + (position,), gauss)


KEYS = ("settings", "generation", "population", "random_state", "evaluated", "seeds", "history", "eval_seconds",
        "seconds")


def decode(values: Any) -> SearchState:
    """A `SearchState` from the body's JSON values, every field's type and shape checked (its
    consistency with the search being resumed is `check`'s)."""
    _expect(isinstance(values, dict), "<body>", "an object", values)
    missing = [key for key in KEYS if key not in values]
    _expect(not missing, "<body>", f"the fields {', '.join(KEYS)}", sorted(values))
    settings = values["settings"]
    _expect(isinstance(settings, dict), "settings", "an object", settings)
    generation = _integer(values["generation"], "generation")
    population = []
    for i, item in enumerate(_list(values["population"], "population")):
        genome, crowding = _list(item, f"population[{i}]", 2)
        population.append((_genome(genome, f"population[{i}][0]"), float(_number(crowding, f"population[{i}][1]"))))
    results: dict[Genome, Any] = {}
    order: list[Genome] = []
    for i, item in enumerate(_list(values["evaluated"], "evaluated")):
        genome_value, result = _list(item, f"evaluated[{i}]", 2)
        genome = _genome(genome_value, f"evaluated[{i}][0]")
        _expect(genome not in results, f"evaluated[{i}][0]", "a genome evaluated once", genome_value)
        results[genome] = _result(result, f"evaluated[{i}][1]")
        order.append(genome)
    for i, (genome, _) in enumerate(population):
        _expect(genome in results, f"population[{i}][0]", "an evaluated genome", list(genome))
    seeds = values["seeds"]
    _expect(isinstance(seeds, dict), "seeds", "an object", seeds)
    history = []
    for i, entry in enumerate(_list(values["history"], "history")):
        _expect(isinstance(entry, dict) and set(entry) == {"generation", "evaluations", "best"}, f"history[{i}]",
                "an object of generation, evaluations, best", entry)
        _expect(entry["generation"] == i + 1, f"history[{i}].generation", str(i + 1), entry["generation"])
        history.append({"generation": i + 1, "evaluations": _integer(entry["evaluations"], f"history[{i}].evaluations"),
                        "best": [float(_number(v, f"history[{i}].best[{j}]"))
                                 for j, v in enumerate(_list(entry["best"], f"history[{i}].best"))]})
    _expect(len(history) == generation, "history", f"{generation} generations", f"{len(history)} generations")
    return SearchState(
        settings=settings, generation=generation, population=population,
        random_state=_random_state(values["random_state"]), results=results, order=order,
        seeds={_text(name, "seeds"): _genome(g, f"seeds.{name}") for name, g in seeds.items()},
        history=history, eval_seconds=_seconds(values["eval_seconds"], "eval_seconds"),
        seconds=_seconds(values["seconds"], "seconds"))


# ---------------------------------------------------------------------- against the search


def check(state: SearchState, settings: dict[str, Any], folder: Path | str, sizes: Sequence[int] | None = None,
          objective: str | None = None) -> None:
    """A one-line StateError naming the first setting that differs from the saved search's, or
    the first genome that does not fit the search's genome (`sizes`: each gene's number of
    values) or result that is not of the `objective`'s kind."""
    for key, value in settings.items():
        saved, current = state.settings.get(key), plain(value)
        if saved != current:
            if key == "genes":
                raise StateError(f"--resume {folder}: the genome differs from the saved search's (the model, the "
                                 f"target or MONET's genes changed)")
            raise StateError(f"--resume {folder}: the saved search has {key} {_show(saved)}, this one {_show(current)}")
    try:
        _check_genomes(state, sizes, settings.get("population"), objective)
    except _Invalid as e:
        raise StateError(f"--resume {folder}: {STATE_FILE} is invalid: {e}; it was not used") from None


def _check_genomes(state: SearchState, sizes: Sequence[int] | None, population: int | None,
                   objective: str | None) -> None:
    if population is not None:
        _expect(len(state.population) == population, "population", f"{population} individuals",
                f"{len(state.population)}")
    if sizes is not None:
        genomes = [(f"population[{i}][0]", g) for i, (g, _) in enumerate(state.population)]
        genomes += [(f"evaluated[{i}][0]", g) for i, g in enumerate(state.order)]
        genomes += [(f"seeds.{name}", g) for name, g in state.seeds.items()]
        for where, genome in genomes:
            _expect(len(genome) == len(sizes) and all(v < n for v, n in zip(genome, sizes, strict=True)), where,
                    f"a genome of {len(sizes)} genes, each in its range", list(genome))
    if objective is not None:
        from monet_ir.explore.evaluate import CheckpointCost, Evaluation, FailedCost

        kinds = (Evaluation,) if objective == "schedule" else (CheckpointCost, FailedCost)
        for i, genome in enumerate(state.order):
            _expect(isinstance(state.results[genome], kinds), f"evaluated[{i}][1]", f"a result of --objective {objective}",
                    _encode_result(state.results[genome])[0])


def _show(value: Any) -> str:
    text = _short(value, 80)
    return text if len(text) <= 80 else text[:77] + "..."
