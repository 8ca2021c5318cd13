"""Spatial mapping of a loop nest onto a MAC array (step 2 of `monet_ir.cost.loopnest`).

The core's dataflow, written for the forward nest, is translated by role to the nest at hand;
each unrolling is clipped to the array and the loop size, made a divisor ("greedy" fractional
unrolling) and limited by the bandwidth and capacity of the innermost memories, as ZigZag does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from targets.model import Core

from .nest_roles import ROLES, TensorInfo
from .signature import RELEVANT_DIMS, LoopNestSig


def _relevance_pattern(dim: str, infos: dict[str, TensorInfo]) -> tuple[bool, bool, bool]:
    return tuple(dim not in infos[role].irrelevant for role in ROLES)  # type: ignore[return-value]


def _forward_pattern(dim: str) -> tuple[bool, bool, bool]:
    partial = {"OY", "FY", "OX", "FX", "OZ", "FZ"}
    return (
        dim in RELEVANT_DIMS["W"],
        dim in RELEVANT_DIMS["I"] or dim in partial,
        dim in RELEVANT_DIMS["O"],
    )


def translate_dim(dim: str, sig: LoopNestSig, infos: dict[str, TensorInfo], taken: set[str], factor: int) -> str | None:
    """The loop dim of `sig` playing the role forward `dim` plays (same relevance to the three
    memory roles); the one that best fills `factor` units when several qualify, `dim` itself on
    a tie. A dataflow names a role, not a loop: the forward nest of a convolution gets, for a
    matmul's rows (B), the output rows or columns when they fill the array better, as its input
    gradient does (before, only the gradients had that choice: ResNet-18's 3x3 convs on Stream's
    fusemax ran 13x slower forward than backward)."""
    wanted = _forward_pattern(dim)
    sizes = sig.dims
    candidates = [d for d in sizes if d not in taken and _relevance_pattern(d, infos) == wanted and sizes[d] > 1]
    if dim in candidates:  # the named loop first: it wins ties
        candidates.remove(dim)
        candidates.insert(0, dim)
    if not candidates:
        return None

    def fill(d: str) -> tuple[float, int]:
        units = min(factor, sizes[d])
        return (sizes[d] / (math.ceil(sizes[d] / units) * factor), sizes[d])

    return max(candidates, key=fill)


@dataclass(frozen=True)
class Unroll:
    array_dim: str
    dim: str
    frac: float  # units used on average (energy)
    whole: int  # units used in every step (latency)
    temporal: int  # remaining temporal iterations of this dim due to the unrolling


def _auto_dataflow(sig: LoopNestSig, core: Core, array_dims=None, taken: set[str] | None = None) -> list[tuple[str, str, int]]:
    """A dataflow for cores that give none (or the array dims a mapping leaves out): per array
    dim, the unused loop that fills it best."""
    chosen: list[tuple[str, str, int]] = []
    taken = set(taken or ())
    sizes = sig.dims
    for array_dim in core.array.dims if array_dims is None else array_dims:
        options = [d for d in ("K", "C", "OX", "OY", "B", "G", "FX", "FY", "OZ", "FZ")
                   if d not in taken and sizes.get(d, 1) > 1]
        if not options:
            break
        best = max(options, key=lambda d: sizes[d] / (math.ceil(sizes[d] / min(sizes[d], array_dim.size)) * array_dim.size))
        taken.add(best)
        chosen.append((array_dim.name, best, array_dim.size))
    return chosen


class UnmappableSpatial(ValueError):
    """A mapping file's spatial mapping names an array dimension the core does not have."""


def _requested_unrolls(sig: LoopNestSig, core: Core) -> tuple[list[tuple[str, str, int]], bool]:
    """The unrollings asked for, written for the forward nest, and whether they apply to a
    gradient nest literally: a mapping file's entry (array dims the file leaves out get the loop
    that fills them best; ZigZag searches them), else the core's dataflow, else our choice."""
    mapping = sig.mapping
    if mapping is not None and mapping.spatial:
        names = {d.name for d in core.array.dims}
        unknown = sorted({a for a, _, _ in mapping.spatial if a not in names})
        if unknown:
            raise UnmappableSpatial(f"{mapping.entry}: spatial_mapping names array dimension(s) {', '.join(unknown)}; "
                                    f"core {core.name} has {', '.join(sorted(names))}")
        raw = list(mapping.spatial)
        given = {a for a, _, _ in raw}
        missing = [d for d in core.array.dims if d.name not in given]
        if missing:
            used = {dim for _, dim, _ in raw}
            raw += [u for u in _auto_dataflow(sig, core, missing, used)]
        literal = core.mapper.grad_dataflow != "translate"
    else:
        if core.array.dataflow:
            raw = [(u.array_dim, u.loop_dim, u.factor) for u in core.array.dataflow]
        else:
            raw = _auto_dataflow(sig, core)
        literal = core.mapper.grad_dataflow == "literal"
    return raw, literal


def _within_array_dims(limited: list[tuple[str, str, int]], core: Core) -> list[tuple[str, str, int]]:
    """ZigZag's check of a mixed unrolling: while the unrollings of one array dim need more units
    than it has, the first one listed there is dropped."""
    kept = list(limited)
    for array in core.array.dims:
        while math.prod(f for a, _, f in kept if a == array.name) > array.size:
            first = next(i for i, entry in enumerate(kept) if entry[0] == array.name)
            del kept[first]
    return kept


def spatial_mapping(sig: LoopNestSig, core: Core, infos: dict[str, TensorInfo], hierarchies) -> tuple[Unroll, ...]:
    sizes = sig.dims
    raw, literal = _requested_unrolls(sig, core)
    taken: set[str] = set()
    limited: list[tuple[str, str, int]] = []
    for array_dim, dim, factor in raw:
        mapped = dim if literal else translate_dim(dim, sig, infos, taken, factor)
        if mapped is None or sizes.get(mapped, 1) <= 1:
            continue
        taken.add(mapped)
        factor = min(factor, core.array.dim_size(array_dim), sizes[mapped])
        limited.append((array_dim, mapped, factor))
    limited = _within_array_dims(limited, core)
    limited = _limit_to_inner_memories(limited, infos, hierarchies, sig)
    # A dim unrolled on several array dims: only the largest unrolling absorbs the remainder.
    unrolls: list[Unroll] = []
    done: dict[str, float] = {}
    for array_dim, dim, factor in limited:
        others = [f for a, d, f in limited if d == dim]
        is_main = factor == max(others) and dim not in done
        before = done.get(dim, 1.0)
        if is_main:
            rest = [f for a, d, f in limited if d == dim and a != array_dim]
            prod_rest = math.prod(rest) if rest else 1
            temporal = math.ceil(sizes[dim] / (factor * prod_rest))
            frac = sizes[dim] / temporal / prod_rest
            unrolls.append(Unroll(array_dim, dim, frac, int(frac), temporal))
        else:
            unrolls.append(Unroll(array_dim, dim, float(factor), factor, 1))
        done[dim] = before * factor
    return tuple(unrolls)


def _limit_to_inner_memories(limited, infos, hierarchies, sig) -> list[tuple[str, str, int]]:
    """ZigZag caps unrolling by the innermost memories: a memory serving array dims can
    multicast at most bandwidth/precision distinct elements per cycle, and hold at most
    capacity/precision of them."""
    result = [list(entry) for entry in limited]
    for role, info in infos.items():
        levels = hierarchies[role]
        if not levels:
            continue
        inner = levels[0]
        if not inner.served_dims:
            continue
        port = inner.port_for(role, "fl" if info.is_output else "tl")
        bits = info.psum_bits if info.is_output else info.bits
        for entry in result:
            if entry[0] in inner.served_dims and entry[1] not in info.irrelevant and port is not None:
                entry[2] = max(1, min(entry[2], port.bandwidth_bits // bits))
        relevant = [e for e in result if e[0] in inner.served_dims and e[1] not in info.irrelevant]
        capacity = inner.size_bits / bits
        while relevant and math.prod(e[2] for e in relevant) > capacity and any(e[2] > 1 for e in relevant):
            max(relevant, key=lambda e: e[2])[2] -= 1
    return [tuple(entry) for entry in result]  # type: ignore[misc]
