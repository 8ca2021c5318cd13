"""Parsing of command-line option values shared by the tools and the explorer.

Both `monet_ir.tools` (the command-line drivers) and `monet_ir.explore` (which rebuilds the
training step a tool would build) read these values, so they live on the ground floor, below
both. A bad value raises `UsageError` (one line naming the option and what is wrong).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from monet_ir.errors import UsageError

# Byte multiples with their real meanings: SI prefixes are powers of 1000, IEC ones of 1024
BYTE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*")


def size_in_bytes(text: str) -> float | None:
    """Bytes of a size such as `4000000`, `512 KiB`, `2.5MiB` or `10MB` (10 000 000); None when
    the text is not a size."""
    match = _SIZE.fullmatch(text)
    if match is None or match.group(2).lower() not in BYTE_UNITS:
        return None
    return float(match.group(1)) * BYTE_UNITS[match.group(2).lower()]


def parse_size(text: str, option: str) -> int:
    """A byte count for `option`: a number with an optional unit (B, kB/KB, MB, GB, TB = powers of
    1000; KiB, MiB, GiB, TiB = powers of 1024), rounded up to whole bytes."""
    import math

    value = size_in_bytes(text)
    if value is None or value < 0:
        raise UsageError(f"{option} {text}: expected a byte count such as 4000000, 512KiB, 2.5MiB or 10MB "
                         "(kB/MB/GB are powers of 1000, KiB/MiB/GiB of 1024)")
    return int(math.ceil(value))


def parse_dims(entries: Sequence[str]) -> dict[str, int]:
    """`--dim NAME=VALUE` entries as `{NAME: VALUE}`; VALUE a positive integer."""
    dims = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep or not name or not value.lstrip("-").isdigit() or int(value) <= 0:
            raise UsageError(f"--dim {entry}: expected NAME=VALUE with a positive integer VALUE")
        dims[name] = int(value)
    return dims
