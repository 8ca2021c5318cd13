"""Error type of the target loader and the collector that gathers every problem of a file."""

from __future__ import annotations

import re

from monet_ir.errors import MonetError


class TargetError(MonetError):
    """A target description could not be loaded.

    `problems` holds one line per problem, each ``"<file>: <field.path>: <problem>"``.
    ``str(error)`` is those lines joined by newlines, so a single problem prints as one line.
    """

    def __init__(self, problems: list[str] | tuple[str, ...] | str):
        if isinstance(problems, str):
            problems = (problems,)
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


MAX_PROBLEM_CHARS = 400


class Problems:
    """Collects validation problems of one file; `raise_if_any` turns them into a TargetError."""

    def __init__(self, file: str):
        self.file = file
        self.lines: list[str] = []

    def add(self, path: str, problem: str, file: str | None = None) -> None:
        # Newlines inside a problem would break the one-line-per-problem contract; a value
        # quoted from the file is cut to a readable length
        text = " ".join(str(problem).split())
        if len(text) > MAX_PROBLEM_CHARS:
            text = text[:MAX_PROBLEM_CHARS - 3] + "..."
        self.lines.append(f"{file or self.file}: {path or '<top>'}: {text}")

    def extend(self, other: "Problems") -> None:
        self.lines.extend(other.lines)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def raise_if_any(self) -> None:
        if self.lines:
            raise TargetError(merge_repeated(self.lines))


_INDEXED_FIELD = re.compile(r"(: [A-Za-z_][\w.]*)\[(\d+)\]")


def merge_repeated(lines: list[str]) -> list[str]:
    """One line for a problem that repeats over the entries of a list: a template or a YAML
    alias shared by several cores gives the same problem at ``cores[0]``, ``cores[1]``...; they
    become ``cores[0, 1]``."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for line in lines:
        found = _INDEXED_FIELD.search(line)
        key = line if found is None else line[:found.start(2)] + "#" + line[found.end(2):]
        groups.setdefault(key, []).append((line, found.group(2) if found else ""))
    merged = []
    for key, members in groups.items():
        if len(members) == 1:
            merged.append(members[0][0])
        else:
            indices = ", ".join(dict.fromkeys(index for _, index in members))
            merged.append(key.replace("[#]", f"[{indices}]", 1))
    return merged
