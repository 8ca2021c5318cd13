"""Files MONET writes for the user, written so that nothing half-written looks whole.

- `write_atomic(path, data)`: the content goes to a hidden temporary file in the same folder
  (`.NAME.XXXXXXXX.tmp`), and that file is renamed over `path`. Readers see the old file or the
  new one, never a part of one: a full disk, a read-only folder or an interrupted write leaves
  the old file as it was and removes the temporary one (only a process killed outright, SIGKILL,
  can leave a hidden temporary file behind; never a truncated `path`). A failure is an
  `OutputError`, one line naming the file.
- Runs: a tool that writes several files to an output folder (`monet report`, `explore`,
  `sweep`, `plan`) calls `begin_run(folder)` before any work: the folder is created, a probe file
  is written and removed (so that an unwritable `--out` is a one-line error at once, not after
  minutes of work), and the folder's `manifest.json` is removed. The files are written; then
  `complete_run(folder, tool, names)` writes `manifest.json` last, listing every file of the run
  with its size and SHA-256. A folder is a complete run when `manifest.json` is there and the
  files match it (`check_run`): a run killed or out of disk before the end leaves no manifest,
  so a new `report.json` beside an old `trace.json` is never taken for a whole report. Files in
  the folder that the manifest does not list are not part of the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from monet_ir.errors import MonetError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "monet-run-manifest"
MANIFEST_VERSION = 1


class OutputError(MonetError):
    """An output could not be written (a full disk, a read-only or missing folder, no
    permission); str() is one line naming the file and the reason."""


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


def _temporary(folder: Path, name: str) -> tuple[int, Path]:
    """A new hidden file beside `folder/name`, open for writing (mode 0666 less the umask, as a
    plain `open` would make it)."""
    import secrets

    while True:
        path = folder / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), path
        except FileExistsError:
            continue


def write_atomic(path: str | os.PathLike[str], data: bytes | str, durable: bool = False) -> None:
    """Replace `path` by `data` (text is written as UTF-8) all at once (see the module docstring);
    `durable` also flushes the file to the disk before the rename (it then survives a power
    cut, not only a killed process)."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path) as f:
        _fill(f, content)
        if durable:
            f.flush()
            os.fsync(f.fileno())


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write `path`'s new content to (for writers that stream, e.g. numpy's
    `savez`); renamed over `path` when the block ends without an exception, removed otherwise."""
    target = Path(path)
    try:
        handle, temporary = _temporary(target.parent, target.name)
    except OSError as e:
        raise OutputError(f"{target}: cannot write: {_reason(e)}") from None
    try:
        with os.fdopen(handle, "wb") as f:
            yield f
        os.replace(temporary, target)
    except BaseException as e:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise OutputError(f"{target}: cannot write: {_reason(e)}") from None
        raise


def _fill(f: IO[bytes], content: bytes) -> None:
    """Write a temporary file's content (the tests make it fail part-way: a full disk, a kill)."""
    f.write(content)


def check_writable(folder: str | os.PathLike[str], option: str = "--out") -> Path:
    """Create `folder` if needed and prove it writable (a probe file written and removed); a
    one-line `OutputError` naming `option` otherwise."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path}: not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{option} {path}: cannot create the folder: {_reason(e)}") from None
    try:
        handle, probe = _temporary(path, "monet-write-probe")
    except OSError as e:
        raise OutputError(f"{option} {path}: cannot write there: {_reason(e)}") from None
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(b"\0")
            f.flush()
    except OSError as e:
        raise OutputError(f"{option} {path}: cannot write there: {_reason(e)}") from None
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass
    return path


def begin_run(folder: str | os.PathLike[str], option: str = "--out") -> Path:
    """Before a run writes its files: the folder created and proved writable, its manifest
    removed (the folder is an incomplete run until `complete_run`)."""
    path = check_writable(folder, option)
    try:
        (path / MANIFEST).unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise OutputError(f"{option} {path}: cannot remove the old {MANIFEST}: {_reason(e)}") from None
    return path


def _digest(path: Path) -> tuple[int, str]:
    import hashlib

    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def complete_run(folder: str | os.PathLike[str], tool: str, names: Iterable[str], **info: Any) -> Path:
    """Write `manifest.json` (last): the tool, every file of the run (relative to `folder`) with
    its size and SHA-256, and `info`."""
    import json

    path = Path(folder)
    files: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(names):
        size, sha256 = _digest(path / name)
        files[name] = {"bytes": size, "sha256": sha256}
    manifest = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "tool": tool, "complete": True, **info,
                "files": files}
    write_atomic(path / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return path / MANIFEST


def check_run(folder: str | os.PathLike[str]) -> list[str]:
    """Why the folder is not a complete run (one line each; empty when it is one)."""
    import json

    path = Path(folder)
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{path}: no {MANIFEST}: the run did not complete"]
    except (OSError, ValueError) as e:
        return [f"{path / MANIFEST}: unreadable ({e})"]
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT \
            or not isinstance(manifest.get("files"), dict):
        return [f"{path / MANIFEST}: not a MONET run manifest"]
    problems = []
    for name, entry in manifest["files"].items():
        try:
            size, sha256 = _digest(path / name)
        except OSError as e:
            problems.append(f"{path / name}: {_reason(e)}")
            continue
        if not isinstance(entry, dict) or entry.get("bytes") != size or entry.get("sha256") != sha256:
            problems.append(f"{path / name}: differs from {MANIFEST}")
    return problems
