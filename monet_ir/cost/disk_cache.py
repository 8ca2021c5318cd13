"""A persistent cost cache: repeated runs, sweeps and searches never re-search a loop nest.

`cost_of(sig, core)` (monet_ir.cost.model) looks here before pricing an op it has not priced in
this process, and stores what it priced. An entry is keyed by

- the cost model's version: `COST_MODEL_VERSION` plus a SHA-256 of the source files of
  monet_ir/cost/ and targets/model.py, so any change of the model or of the hardware classes
  starts a new key space (old entries are never read again);
- the core's hardware description: every field its equality compares (kind, clock, array,
  precisions, memories, op kinds, DRAM) written out with `repr`, never Python's `hash`, which is
  randomized per process for strings; its id and name are not part of it (as for the in-process
  memo), the returned Cost carries the id of the core asked for;
- the op signature, `repr` of the LoopNestSig/VectorSig (every field).

The value is the Cost's fields as JSON (floats round-trip exactly, the breakdown keeps its order),
so a report is byte-identical with and without the cache.

Location: `$MONET_COST_CACHE` if it names a file; else `$XDG_CACHE_HOME/monet/costs.sqlite`
(`~/.cache/monet/costs.sqlite` when XDG_CACHE_HOME is unset). `MONET_COST_CACHE=off` (or `0`,
`no`, `false`, `none`; `monet ... --no-cost-cache` sets it) disables the cache. A cache that
cannot be opened or written (read-only home, a corrupt file, a locked database) is silently not
used: it only ever saves time. One SQLite file (WAL mode) serves concurrent processes such as
`monet explore`'s workers. Delete the file to empty it.
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any

COST_MODEL_VERSION = "1"
ENV = "MONET_COST_CACHE"
OFF = ("off", "0", "no", "false", "none")
_SOURCES = ("monet_ir/cost", "targets/model.py")

_state: dict[str, Any] = {}  # "pid", "db" (sqlite3 connection or None), "rows" {core key: {sig: json}}


def cache_path() -> Path | None:
    """The cache file, or None when the cache is disabled."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "monet" / "costs.sqlite"


def model_version() -> str:
    """COST_MODEL_VERSION and a digest of the cost model's sources."""
    version = _state.get("version")
    if version is None:
        import hashlib

        root = Path(__file__).resolve().parents[2]
        digest = hashlib.sha256(COST_MODEL_VERSION.encode())
        for entry in _SOURCES:
            path = root / entry
            for f in sorted(path.glob("*.py")) if path.is_dir() else [path]:
                digest.update(f.name.encode() + b"\0" + f.read_bytes())
        version = _state["version"] = f"{COST_MODEL_VERSION}-{digest.hexdigest()[:16]}"
    return version


def core_key(core: Any) -> str:
    """A stable description of a core's hardware (what its equality compares) and the model version."""
    key = core.__dict__.get("_disk_cache_key")
    if key is None:
        import hashlib

        text = repr((model_version(), core.kind, core.clock_hz, core.array, core.precisions, core.memories,
                     core.op_kinds, core.dram))
        key = hashlib.sha256(text.encode()).hexdigest()
        object.__setattr__(core, "_disk_cache_key", key)
    return key


def _db() -> Any:
    """The open database of this process, or None (disabled or unusable)."""
    if _state.get("pid") == os.getpid():
        return _state["db"]
    _state.update(pid=os.getpid(), db=None, rows={})  # a forked worker opens its own connection
    path = cache_path()
    if path is None:
        return None
    import sqlite3

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=5.0, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS costs (core TEXT NOT NULL, sig TEXT NOT NULL, cost TEXT NOT NULL, "
                   "PRIMARY KEY (core, sig)) WITHOUT ROWID")
    except (OSError, sqlite3.Error):
        return None
    _state["db"] = db
    return db


def _disable() -> None:
    _state["db"] = None


def _rows(db: Any, core: str) -> dict[str, str]:
    """Every stored cost of one core description, read at once."""
    rows = _state["rows"].get(core)
    if rows is None:
        import sqlite3

        try:
            rows = dict(db.execute("SELECT sig, cost FROM costs WHERE core = ?", (core,)))
        except sqlite3.Error:
            _disable()
            rows = {}
        _state["rows"][core] = rows
    return rows


def encode(cost: Any) -> str:
    import json

    values = {f.name: getattr(cost, f.name) for f in fields(cost) if f.name != "core"}
    values["breakdown_pj"] = list(values["breakdown_pj"].items())
    return json.dumps(values)


def decode(text: str, core_id: int) -> Any:
    import json

    from .signature import Cost, frozen_mapping

    values = json.loads(text)
    values["breakdown_pj"] = frozen_mapping(dict(values["breakdown_pj"]))
    return Cost(core=core_id, **values)


def get(sig: Any, core: Any) -> Any:
    """The stored Cost of `sig` on `core` (with the core's id), or None."""
    db = _db()
    if db is None:
        return None
    text = _rows(db, core_key(core)).get(repr(sig))
    if text is None:
        return None
    try:
        return decode(text, core.id)
    except (ValueError, TypeError, KeyError):
        return None


def put(sig: Any, core: Any, cost: Any) -> None:
    """Store the Cost of `sig` on `core` (only if it reads back equal)."""
    db = _db()
    if db is None:
        return
    text = encode(cost)
    if decode(text, cost.core) != cost:
        return
    key = core_key(core)
    import sqlite3

    try:
        db.execute("INSERT OR REPLACE INTO costs VALUES (?, ?, ?)", (key, repr(sig), text))
    except sqlite3.Error:
        _disable()
        return
    _rows(db, key)[repr(sig)] = text


def reset() -> None:
    """Forget this process's connection and rows (the file stays); the next use reads the
    environment again."""
    db = _state.get("db")
    if db is not None and _state.get("pid") == os.getpid():
        db.close()
    _state.clear()
