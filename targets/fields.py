"""Typed field readers used by the loaders: each reads one YAML field, records a problem with its
field path when the value is missing or malformed, and returns a usable fallback so validation
can go on and report every problem of the file at once."""

from __future__ import annotations

import math
import re
from typing import Any

from monet_ir.options import BYTE_UNITS

from .errors import Problems

_MISSING = object()

# Bounds on every number of a target file: a value outside them is a typo or a unit mix-up (and
# would overflow or vanish in the cost arithmetic), not hardware: 1e18 bits is 125 PB, 1e18 pJ a
# megajoule per access, 1e18 Hz a million GHz.
MAX_MAGNITUDE = 1e18
MIN_POSITIVE = 1e-9

# bits per unit: the byte multiples with their real meanings (kB = 1000 B, KiB = 1024 B)
_SIZE_UNITS = {"bit": 1, "bits": 1, **{unit: 8 * n for unit, n in BYTE_UNITS.items() if unit}}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)\s*$")


def join(path: str, key: Any) -> str:
    """Field path of `key` under `path`: ``a.b`` for names, ``a[3]`` for list indices."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


class Fields:
    """Reads fields of YAML mappings, reporting problems to `problems`."""

    def __init__(self, problems: Problems):
        self.problems = problems

    def known_keys(self, data: Any, allowed: tuple[str, ...], path: str) -> None:
        """Report keys that are not fields (usually typos, which would otherwise be ignored)."""
        if not isinstance(data, dict):
            return
        for key in data:
            if key not in allowed:
                from monet_ir.errors import did_you_mean

                hint = did_you_mean(str(key), allowed).removeprefix("; ")
                self.problems.add(join(path, key), f"unknown field{' (' + hint + ')' if hint else ''} "
                                                   f"(expected one of: {', '.join(allowed)})")

    def raw(self, data: Any, key: str, path: str, required: bool = True) -> Any:
        if not isinstance(data, dict):
            return _MISSING
        if key not in data or data[key] is None and required:
            if required:
                self.problems.add(join(path, key), "missing required field")
            return _MISSING
        return data[key]

    def mapping(self, data: Any, key: str, path: str, required: bool = True) -> dict:
        value = self.raw(data, key, path, required)
        if value is _MISSING or value is None:
            return {}
        if not isinstance(value, dict):
            self.problems.add(join(path, key), f"expected a mapping, got {type_name(value)}")
            return {}
        return value

    def seq(self, data: Any, key: str, path: str, required: bool = True) -> list:
        value = self.raw(data, key, path, required)
        if value is _MISSING or value is None:
            return []
        if not isinstance(value, list):
            self.problems.add(join(path, key), f"expected a list, got {type_name(value)}")
            return []
        return value

    def text(self, data: Any, key: str, path: str, required: bool = True, default: str = "") -> str:
        value = self.raw(data, key, path, required)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, str):
            self.problems.add(join(path, key), f"expected a string, got {type_name(value)}")
            return default
        return value

    def boolean(self, data: Any, key: str, path: str, default: bool = False) -> bool:
        value = self.raw(data, key, path, required=False)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, bool):
            self.problems.add(join(path, key), f"expected true or false, got {type_name(value)}")
            return default
        return value

    def number(
        self,
        data: Any,
        key: str,
        path: str,
        required: bool = True,
        default: float = 0.0,
        minimum: float | None = 0.0,
        positive: bool = False,
    ) -> float:
        value = self.raw(data, key, path, required)
        if value is _MISSING or value is None:
            return default
        return self.check_number(value, join(path, key), default, minimum, positive)

    def check_number(
        self, value: Any, path: str, default: float, minimum: float | None = 0.0, positive: bool = False
    ) -> float:
        if isinstance(value, str):
            # YAML 1.1 reads "1e9" as a string; accept plain numeric strings.
            try:
                value = float(value)
            except ValueError:
                self.problems.add(path, f"expected a number, got string {value!r}")
                return default
        if isinstance(value, float) and not math.isfinite(value):
            self.problems.add(path, f"expected a finite number, got {value}")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problems.add(path, f"expected a number, got {type_name(value)}")
            return default
        if abs(value) > MAX_MAGNITUDE:
            self.problems.add(path, f"{value:g} is beyond any hardware this describes (more than {MAX_MAGNITUDE:g})")
            return default
        if positive and value <= 0:
            self.problems.add(path, f"must be positive, got {value}")
            return default
        if positive and value < MIN_POSITIVE:
            self.problems.add(path, f"{value:g} is too small to be meant (less than {MIN_POSITIVE:g})")
            return default
        if minimum is not None and value < minimum:
            self.problems.add(path, f"must be >= {minimum:g}, got {value}")
            return default
        return value

    def integer(
        self,
        data: Any,
        key: str,
        path: str,
        required: bool = True,
        default: int = 0,
        minimum: int | None = 0,
        positive: bool = False,
    ) -> int:
        value = self.raw(data, key, path, required)
        if value is _MISSING or value is None:
            return default
        return self.check_integer(value, join(path, key), default, minimum, positive)

    def check_integer(
        self, value: Any, path: str, default: int, minimum: int | None = 0, positive: bool = False
    ) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, float) and not math.isfinite(value):
            self.problems.add(path, f"expected an integer, got {value}")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.add(path, f"expected an integer, got {type_name(value)}")
            return default
        if abs(value) > MAX_MAGNITUDE:
            self.problems.add(path, f"{value:g} is beyond any hardware this describes (more than {MAX_MAGNITUDE:g})")
            return default
        if positive and value <= 0:
            self.problems.add(path, f"must be positive, got {value}")
            return default
        if minimum is not None and value < minimum:
            self.problems.add(path, f"must be >= {minimum}, got {value}")
            return default
        return value

    def size_bits(self, data: Any, key: str, path: str, unit_bits: int, required: bool = True) -> int:
        """A size: a plain number in `unit_bits` units, or a string with a unit (``"2 MiB"``,
        ``"64 B"``, ``"16 bits"``; kB/MB/GB are powers of 1000, KiB/MiB/GiB of 1024)."""
        value = self.raw(data, key, path, required)
        if value is _MISSING or value is None:
            return 0
        where = join(path, key)
        if isinstance(value, str):
            match = _SIZE_RE.match(value)
            unit = match.group(2).lower() if match else ""
            if not match or unit not in _SIZE_UNITS:
                self.problems.add(where, f"cannot read size {value!r} (use a number or e.g. '512 KiB')")
                return 0
            bits = float(match.group(1)) * _SIZE_UNITS[unit]
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problems.add(where, f"expected a size, got {type_name(value)}")
            return 0
        else:
            bits = float(value) * unit_bits
        if not math.isfinite(bits):
            self.problems.add(where, f"size must be a finite number, got {value}")
            return 0
        if bits <= 0:
            self.problems.add(where, f"size must be positive, got {value}")
            return 0
        if bits > MAX_MAGNITUDE:
            self.problems.add(where, f"{value} is beyond any hardware this describes (more than {MAX_MAGNITUDE:g} bits)")
            return 0
        return int(math.ceil(bits))
