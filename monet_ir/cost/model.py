"""Public entry points: `cost_of(sig, core)` and `can_run(sig, core)`, memoized.

The memo key is (signature, core) where cores compare by their hardware only (id and name are
not part of equality), so identical layers and identical cores are priced once.  The cache is
the single piece of global state here; `clear_cache()` empties it.  Behind it, costs persist
between runs in `disk_cache` (on by default; `MONET_COST_CACHE=off` disables it).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from monet_ir.errors import MonetError
from targets.model import Core

from . import disk_cache
from .loopnest import InvalidMapping, search_with_spilling
from .signature import Cost, LoopNestSig, VectorSig, frozen_mapping
from .spatial_mapping import UnmappableSpatial
from .vector import vector_cost


class CostError(MonetError, ValueError):
    """An op cannot be priced on a core; the message is one line."""


def can_run(sig: LoopNestSig | VectorSig, core: Core) -> bool:
    """Whether `core` accepts the op kind at the op's precision and has the needed memories."""
    if isinstance(sig, LoopNestSig):
        if not core.accepts(sig.kind, is_loop_nest=True) or core.array.units <= 0:
            return False
        if core.precision_for(sig.mac_bits, sig.mac_format) is None:
            return False
        return all(core.hierarchy(role) for role in ("W", "I", "O"))
    if isinstance(sig, VectorSig):
        if not core.accepts(sig.kind, is_loop_nest=False) or core.array.units <= 0:
            return False
        return core.precision_for(sig.bits) is not None and bool(core.memories)
    return False


def cost_of(sig: LoopNestSig | VectorSig, core: Core) -> Cost:
    """Latency (core cycles), energy (pJ) and breakdown of `sig` on `core`."""
    if not can_run(sig, core):
        raise CostError(f"core {core.id} ({core.name}, {core.kind}) cannot run {type(sig).__name__} kind {sig.kind!r}")
    cost = _cached_cost(sig, core)
    return cost if cost.core == core.id else replace(cost, core=core.id)


@lru_cache(maxsize=65536)
def _cached_cost(sig: LoopNestSig | VectorSig, core: Core) -> Cost:
    # then the persistent cache shared by runs and processes (monet_ir/cost/disk_cache.py)
    stored = disk_cache.get(sig, core)
    if stored is not None:
        return stored
    cost = vector_cost(sig, core) if isinstance(sig, VectorSig) else loop_nest_cost(sig, core)
    disk_cache.put(sig, core, cost)
    return cost


def clear_cache() -> None:
    _cached_cost.cache_clear()


def cache_info():
    return _cached_cost.cache_info()


def loop_nest_cost(sig: LoopNestSig, core: Core) -> Cost:
    try:
        model, best = search_with_spilling(sig, core)
    except (InvalidMapping, UnmappableSpatial) as error:
        raise CostError(f"core {core.id} ({core.name}): {error}") from None
    breakdown, temporal = model.details(best)
    peak = core.array.units
    utilization = sig.macs / (best.latency * peak) if best.latency and peak else 0.0
    spatial = " ".join(f"{u.array_dim}:{u.dim}{u.frac:g}" for u in model.unrolls)
    loops = "; ".join(
        f"{tensor}: " + " | ".join(" ".join(f"{d}{s}" for d, s in level) or "-" for level in levels)
        for tensor, levels in temporal.items()
    )
    dram_bytes = sum(
        int(value / core.dram.read_energy_pj_per_bit / 8)
        for key, value in breakdown.items()
        if key.startswith("dram.") and core.dram is not None and core.dram.read_energy_pj_per_bit > 0
    )
    return Cost(
        latency_cycles=best.latency,
        energy_pj=best.energy,
        breakdown_pj=frozen_mapping(breakdown),
        mem_bytes=sig.footprint_bytes(),
        core=core.id,
        utilization=min(1.0, utilization),
        mapping=f"spatial {spatial or '-'}; dram {','.join(model.spilled) or '-'}; {loops}",
        dram_bytes=dram_bytes,
    )
