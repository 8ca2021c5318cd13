"""Parsing of command-line option values shared by the tools and the explorer.

Both `monet_ir.tools` (the command-line drivers) and `monet_ir.explore` (which rebuilds the
training step a tool would build) read these values, so they live on the ground floor, below
both. A bad value raises `UsageError` (one line naming the option and what is wrong).
"""

from __future__ import annotations

from collections.abc import Sequence

from monet_ir.errors import UsageError


def parse_dims(entries: Sequence[str]) -> dict[str, int]:
    """`--dim NAME=VALUE` entries as `{NAME: VALUE}`; VALUE a positive integer."""
    dims = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep or not name or not value.lstrip("-").isdigit() or int(value) <= 0:
            raise UsageError(f"--dim {entry}: expected NAME=VALUE with a positive integer VALUE")
        dims[name] = int(value)
    return dims
