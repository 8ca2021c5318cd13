"""A search's checkpoint: what `monet explore --resume DIR` needs to continue it.

After every generation (and after the initial population, generation 0) the search writes
`search_state.pkl` to its output folder, atomically (a temporary file renamed over the old one,
so an interruption leaves the previous generation's state whole). It holds:

- `settings`: what must be the same to continue (objective, population, seed, budget, the
  searched genes and the genome itself, the crossover and mutation rates, the step's options
  and the SHA-256 of the model file);
- `generation`: the last generation completed;
- `population`: the genomes of the population, in order, with their NSGA-II crowding distances
  (the tournament of the next generation reads them);
- `random_state`: the state of Python's `random` (DEAP's operators draw from it);
- `results`, `order`: the archive of evaluated candidates (genome -> evaluation, failed ones
  with their reason) and the order they were first evaluated in;
- `seeds`, `history`, `eval_seconds`, `seconds`.

A search continued from generation k draws the same numbers and evaluates the same genomes in
the same order as the uninterrupted one, so it ends with the same front and `evaluated.csv`
(tested). The file is a Python pickle: resume only searches you ran yourself.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError

STATE_FILE = "search_state.pkl"
FORMAT = 1


@dataclass
class SearchState:
    settings: dict[str, Any]
    generation: int
    population: list[tuple[tuple[int, ...], float]]
    random_state: Any
    results: dict[tuple[int, ...], Any]
    order: list[tuple[int, ...]]
    seeds: dict[str, tuple[int, ...]]
    history: list[dict[str, Any]] = field(default_factory=list)
    eval_seconds: float = 0.0
    seconds: float = 0.0
    format: int = FORMAT


def save(state: SearchState, folder: Path) -> Path:
    """Write the state to `folder/search_state.pkl` atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STATE_FILE
    temporary = folder / (STATE_FILE + ".tmp")
    with temporary.open("wb") as f:
        pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    return path


def load(folder: Path) -> SearchState:
    path = Path(folder) / STATE_FILE
    try:
        with path.open("rb") as f:
            state = pickle.load(f)
    except FileNotFoundError:
        raise UsageError(f"--resume {folder}: no {STATE_FILE} there (not the output folder of a search)") from None
    except OSError as e:
        raise UsageError(f"--resume {folder}: cannot read {STATE_FILE}: {e.strerror}") from None
    except Exception as e:  # noqa: BLE001  (truncated or foreign pickle)
        raise UsageError(f"--resume {folder}: {STATE_FILE} is damaged ({type(e).__name__}: {e})") from None
    if not isinstance(state, SearchState) or state.format != FORMAT:
        raise UsageError(f"--resume {folder}: {STATE_FILE} is not a search state of this MONET version")
    return state


def check(state: SearchState, settings: dict[str, Any], folder: Path | str) -> None:
    """A one-line UsageError naming the first setting that differs from the saved search's."""
    for key, value in settings.items():
        saved = state.settings.get(key)
        if saved != value:
            if key == "genes":
                raise UsageError(f"--resume {folder}: the genome differs from the saved search's (the model, the "
                                 f"target or MONET's genes changed)")
            raise UsageError(f"--resume {folder}: the saved search has {key} {_show(saved)}, this one {_show(value)}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
