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
so a report is byte-identical with and without the cache. Each entry carries a checksum, the
SHA-256 of its key and value (`entry_checksum`): an entry edited in place or corrupted (SQLite's
own integrity check does not see a changed value), one whose fields are not a Cost's, or one
moved under another key is ignored, the op priced afresh and the entry written again, with one
notice on stderr per process. (The checksum catches corruption and edits, not a forger who
recomputes it: the cache is a speed-up of one user's runs, not a file to take from others.)

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

from targets.model import DEFAULT_MAPPER

COST_MODEL_VERSION = "2"  # 2: entries carry a checksum (table costs_v2)
ENV = "MONET_COST_CACHE"
OFF = ("off", "0", "no", "false", "none")
_SOURCES = ("monet_ir/cost", "targets/model.py")

TABLE = "costs_v2"

_state: dict[str, Any] = {}  # "pid", "db" (sqlite3 connection or None), "rows" {core key: {sig: (json, checksum)}}


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

        parts = (model_version(), core.kind, core.clock_hz, core.array, core.precisions, core.memories,
                 core.op_kinds, core.dram)
        if core.mapper != DEFAULT_MAPPER:
            parts += (core.mapper,)
        text = repr(parts)
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
        db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (core TEXT NOT NULL, sig TEXT NOT NULL, cost TEXT NOT NULL, "
                   "checksum TEXT NOT NULL, PRIMARY KEY (core, sig)) WITHOUT ROWID")
    except (OSError, sqlite3.Error):
        return None
    _state["db"] = db
    return db


def _disable() -> None:
    _state["db"] = None


def _rows(db: Any, core: str) -> dict[str, tuple[str, str]]:
    """Every stored cost of one core description (value, checksum), read at once."""
    rows = _state["rows"].get(core)
    if rows is None:
        import sqlite3

        try:
            rows = {sig: (cost, checksum) for sig, cost, checksum
                    in db.execute(f"SELECT sig, cost, checksum FROM {TABLE} WHERE core = ?", (core,))}
        except sqlite3.Error:
            _disable()
            rows = {}
        _state["rows"][core] = rows
    return rows


def entry_checksum(core: str, sig: str, cost: str) -> str:
    """The checksum of an entry: SHA-256 of its key (core description, signature) and value."""
    import hashlib

    return hashlib.sha256(f"{core}\0{sig}\0{cost}".encode()).hexdigest()


def encode(cost: Any) -> str:
    import json

    values = {f.name: getattr(cost, f.name) for f in fields(cost) if f.name != "core"}
    values["breakdown_pj"] = list(values["breakdown_pj"].items())
    return json.dumps(values)


_NUMBERS = ("latency_cycles", "energy_pj", "utilization")
_INTEGERS = ("mem_bytes", "dram_bytes")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def decode(text: str, core_id: int) -> Any:
    """The Cost of a stored value; ValueError when the value is not a Cost's fields and types."""
    import json

    from .signature import Cost, frozen_mapping

    values = json.loads(text)
    expected = {f.name for f in fields(Cost)} - {"core"}
    if not isinstance(values, dict) or set(values) != expected:
        raise ValueError("not the fields of a cost")
    breakdown = values["breakdown_pj"]
    if (not all(_is_number(values[name]) for name in _NUMBERS)
            or not all(isinstance(values[name], int) and not isinstance(values[name], bool) for name in _INTEGERS)
            or not isinstance(values["mapping"], str) or not isinstance(breakdown, list)
            or not all(isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and _is_number(item[1])
                       for item in breakdown)):
        raise ValueError("a field of the wrong type")
    values["breakdown_pj"] = frozen_mapping(dict(breakdown))
    return Cost(core=core_id, **values)


def _notice_bad_entry() -> None:
    if _state.get("noticed"):
        return
    _state["noticed"] = True
    import sys

    print(f"monet: notice: the cost cache {cache_path()} holds entries that fail their checksum (edited or "
          f"corrupted): they are not used, their ops are priced afresh", file=sys.stderr)


def get(sig: Any, core: Any) -> Any:
    """The stored Cost of `sig` on `core` (with the core's id), or None (not stored, or an entry
    that fails its checksum or does not decode: see the module docstring)."""
    db = _db()
    if db is None:
        return None
    key, sig_text = core_key(core), repr(sig)
    entry = _rows(db, key).get(sig_text)
    if entry is None:
        return None
    text, checksum = entry
    try:
        if checksum != entry_checksum(key, sig_text, text):
            raise ValueError("checksum")
        return decode(text, core.id)
    except (ValueError, TypeError, KeyError, RecursionError):
        _notice_bad_entry()
        return None


def put(sig: Any, core: Any, cost: Any) -> None:
    """Store the Cost of `sig` on `core` (only if it reads back equal)."""
    db = _db()
    if db is None:
        return
    text = encode(cost)
    try:
        if decode(text, cost.core) != cost:
            return
    except ValueError:  # (a field of a type the cache does not keep)
        return
    key, sig_text = core_key(core), repr(sig)
    checksum = entry_checksum(key, sig_text, text)
    import sqlite3

    try:
        db.execute(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?, ?)", (key, sig_text, text, checksum))
    except sqlite3.Error:
        _disable()
        return
    _rows(db, key)[sig_text] = (text, checksum)


def reset() -> None:
    """Forget this process's connection and rows (the file stays); the next use reads the
    environment again."""
    db = _state.get("db")
    if db is not None and _state.get("pid") == os.getpid():
        db.close()
    _state.clear()
