"""Reading the files users hand MONET, with bounded cost.

Every YAML file MONET reads (targets, Stream systems and cores, multi-chip systems, `--mapping`
files, sweep templates and `--set` values) goes through `load_yaml`, PyYAML's safe loader (no
Python objects, no code) with three limits checked on the parsed node graph **before** any
Python object is built and before any validation runs:

- aliases (`*name`) and merge keys (`<<: *name`) may not blow the document up: its size with
  every alias expanded (nodes, plus the characters of each scalar) may be at most twice its own
  size or its own size plus `ALIAS_EXPANSION` (1,000,000), whichever is larger. A 478-byte
  "billion laughs" expands to ~10^9 and is refused in microseconds; MONET's own templates (a core
  merged into four cores) add a few thousand.
- a recursive alias (a node that contains itself) is refused;
- nesting deeper than `MAX_DEPTH` (200) levels is refused.

PyYAML builds an alias as a shared reference, so a bomb costs nothing to load; the cost came
later, from code walking or printing the expanded value (an error message quoting it: minutes
and gigabytes). With expansion bounded by the file's size, printing any value of a file costs at
most about the file's size, and the error net cuts every message line to
`monet_ir.errors.MAX_MESSAGE_CHARS`.

Files are read whole, so their size is bounded too: `MAX_YAML_BYTES` for YAML, and for JSON
files users hand in (checkpoint/storage plans) `load_json_file` with `MAX_JSON_BYTES`; JSON
nested too deeply for the parser is refused as well (`UntrustedFileError`, a `ValueError`).
"""

from __future__ import annotations

import os
from typing import IO, Any

ALIAS_EXPANSION = 1_000_000
MAX_DEPTH = 200
MAX_YAML_BYTES = 32 * 2**20
MAX_JSON_BYTES = 64 * 2**20

_LOADERS: dict[str, Any] = {}


class UntrustedFileError(ValueError):
    """A file over one of this module's limits; str() is one line."""


def short_repr(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to about `limit` characters, computed without building the whole repr
    of a large value (nested lists and mappings show their first items)."""
    import reprlib

    short = reprlib.Repr()
    short.maxstring = short.maxother = max(12, limit)
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = 6
    short.maxlevel = 3
    text = short.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _node_checker(yaml: Any) -> Any:
    def check(root: Any) -> None:
        """Raise a ConstructorError when the node graph under `root` breaks a limit."""
        from yaml.constructor import ConstructorError
        from yaml.nodes import MappingNode, ScalarNode, SequenceNode

        def children(node: Any) -> list[Any]:
            if isinstance(node, SequenceNode):
                return node.value
            if isinstance(node, MappingNode):
                return [part for pair in node.value for part in pair]
            return []

        def refuse(problem: str, node: Any) -> ConstructorError:
            return ConstructorError(None, None, problem, node.start_mark)

        expanded: dict[int, int] = {}  # id(node) -> its size with aliases expanded
        own = 0  # the document's size, each node once
        open_nodes: set[int] = set()  # the nodes on the current path (a cycle comes back to one)
        stack: list[tuple[Any, int, bool]] = [(root, 0, False)]
        while stack:
            node, depth, finished = stack.pop()
            key = id(node)
            if finished:
                open_nodes.discard(key)
                weight = 1 + (len(node.value) if isinstance(node, ScalarNode) else 0)
                own += weight
                expanded[key] = weight + sum(expanded[id(child)] for child in children(node))
                continue
            if key in expanded:
                continue
            if key in open_nodes:
                raise refuse("a recursive alias (a node that contains itself)", node)
            if depth > MAX_DEPTH:
                raise refuse(f"nested more than {MAX_DEPTH} levels deep", node)
            open_nodes.add(key)
            stack.append((node, depth, True))
            stack.extend((child, depth + 1, False) for child in children(node) if id(child) not in expanded)
        limit = own + max(own, ALIAS_EXPANSION)
        if expanded[id(root)] > limit:
            raise refuse(f"its aliases expand it beyond {limit:,} nodes and characters (the document holds {own:,}): "
                         f"refused as an alias bomb before any value is read", root)

    return check


def yaml_loader() -> Any:
    """PyYAML's safe loader (libyaml's when there) checking the limits above before it builds
    the document."""
    loader = _LOADERS.get("yaml")
    if loader is None:
        import yaml

        check = _node_checker(yaml)
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class BoundedSafeLoader(base):  # type: ignore[misc, valid-type]
            def construct_document(self, node: Any) -> Any:
                check(node)
                return super().construct_document(node)

        loader = _LOADERS["yaml"] = BoundedSafeLoader
    return loader


def load_yaml(source: str | bytes | IO[Any]) -> Any:
    """One YAML document (text or an open file) through `yaml_loader`; PyYAML's errors
    (`yaml.YAMLError`, with `problem` and `problem_mark`) for bad syntax and broken limits."""
    import yaml

    return yaml.load(source, Loader=yaml_loader())


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """A YAML file of at most `MAX_YAML_BYTES` through `load_yaml`. Raises OSError (missing,
    unreadable), UnicodeDecodeError, yaml.YAMLError, or UntrustedFileError (too large)."""
    with open(path, encoding="utf-8") as handle:
        _check_size(handle, path, MAX_YAML_BYTES)
        return load_yaml(handle)


def _check_size(handle: IO[Any], path: str | os.PathLike[str], limit: int) -> None:
    try:
        size = os.fstat(handle.fileno()).st_size
    except (OSError, ValueError):
        return
    if size > limit:
        raise UntrustedFileError(f"{os.fspath(path)}: {size:,} bytes, more than such a file may have "
                                 f"({limit >> 20} MiB)")


def load_json_file(path: str | os.PathLike[str], limit: int | None = None) -> Any:
    """A JSON file of at most `limit` bytes (default `MAX_JSON_BYTES`). Raises OSError,
    UnicodeDecodeError, json.JSONDecodeError (bad syntax), UntrustedFileError (too large, nested
    too deeply)."""
    import json

    limit = MAX_JSON_BYTES if limit is None else limit
    with open(path, encoding="utf-8") as handle:
        _check_size(handle, path, limit)
        text = handle.read(limit + 1)
    if len(text) > limit:
        raise UntrustedFileError(f"{os.fspath(path)}: more than {limit >> 20} MiB, more than such a file may have")
    try:
        return json.loads(text)
    except RecursionError:
        raise UntrustedFileError(f"{os.fspath(path)}: nested too deeply to be a MONET file") from None
