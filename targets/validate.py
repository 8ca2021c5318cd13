"""Cross-field checks of a built core or target (the per-field checks live in the readers)."""

from __future__ import annotations

from .errors import Problems
from .fields import join
from .model import LOOP_DIMS, Core


_FIELD_NAMES = {
    "own": {"dataflow": "array.dataflow", "systolic": "array.systolic_dims", "served": "served_dims"},
    "zigzag": {"dataflow": "dataflows", "systolic": "operational_array.systolic_dimensions", "served": "served_dimensions"},
}


def check_core(core: Core, problems: Problems, path: str, file: str | None = None, style: str = "own") -> None:
    """Record every inconsistency of `core` under field path `path`; `style` names the fields as
    the file being read spells them (our format or ZigZag's)."""
    names = _FIELD_NAMES[style]
    array_dims = {dim.name for dim in core.array.dims}
    for index, unroll in enumerate(core.array.dataflow):
        where = join(join(path, names["dataflow"]), unroll.array_dim)
        if unroll.array_dim not in array_dims:
            problems.add(where, f"unknown array dimension {unroll.array_dim!r} (array has {sorted(array_dims)})", file)
        if unroll.loop_dim not in LOOP_DIMS:
            problems.add(
                where, f"unknown dataflow loop dimension {unroll.loop_dim!r} (use one of {', '.join(LOOP_DIMS)})", file
            )
    for dim in core.array.systolic_dims:
        if dim not in array_dims:
            problems.add(join(path, names["systolic"]), f"unknown array dimension {dim!r}", file)
    for memory in core.memories:
        where = join(join(path, "memories"), memory.name)
        for dim in memory.served_dims:
            if dim not in array_dims:
                problems.add(join(where, names["served"]), f"unknown array dimension {dim!r}", file)
        for operand in memory.operands:
            needed = ("fl",) if operand == "O" else ("tl",)
            for direction in needed:
                if memory.port_for(operand, direction) is None:
                    problems.add(join(where, "ports"), f"no port serves operand {operand} direction {direction}", file)
    if core.kind == "mac_array" and core.array.units > 0:
        for operand in ("W", "I", "O"):
            if not core.hierarchy(operand):
                problems.add(join(path, "memories"), f"no memory holds operand {operand}", file)
    if not core.memories:
        problems.add(join(path, "memories"), "a core needs at least one memory", file)
    if not core.precisions:
        problems.add(join(path, "precisions"), "a core needs at least one precision", file)
