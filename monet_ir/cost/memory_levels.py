"""The memory hierarchy each tensor role sees (step 3 of `monet_ir.cost.loopnest`).

`build_levels` stacks a role's memories from the array up, with the spatial loops each level
fans out; `spilled_roles` says which tensors do not fit on chip and get the core's DRAM as an
extra top level (Stream's "too large operands"), `dram_level` is that level.
"""

from __future__ import annotations

from dataclasses import dataclass

from targets.model import Core, MemoryLevel, Port

from .nest_roles import ROLES, TensorInfo, tensor_elements
from .signature import LoopNestSig
from .spatial_mapping import Unroll


@dataclass(frozen=True)
class Level:
    """One memory level of one role, with the spatial loops it fans out to the level below."""

    memory: MemoryLevel
    index: int  # level index within the role's hierarchy
    fanout_frac: tuple  # ((dim, factor), ...) spatial loops between this level and the one below
    fanout_whole: tuple


def dram_level(core: Core, roles: tuple[str, ...]) -> MemoryLevel:
    """The core's DRAM as a memory level holding `roles`."""
    dram = core.dram
    assert dram is not None
    width = max(1, int(round(dram.bits_per_cycle(core.clock_hz))))
    access = min(dram.access_bits, width)
    reads = tuple((r, d) for r in roles for d in (("tl", "th") if r == "O" else ("tl",)))
    writes = tuple((r, d) for r in roles for d in (("fh", "fl") if r == "O" else ("fh",)))
    if dram.ports >= 2:
        ports = (Port("dram_r", "read", width, access, reads), Port("dram_w", "write", width, access, writes))
    else:
        ports = (Port("dram_rw", "read_write", width, access, reads + writes),)
    dims = tuple(d.name for d in core.array.dims)
    return MemoryLevel(
        name="dram",
        size_bits=dram.capacity_bytes * 8,
        read_energy_pj=dram.read_energy_pj_per_bit * width,
        write_energy_pj=dram.write_energy_pj_per_bit * width,
        operands=roles,
        served_dims=dims,
        ports=ports,
    )


def spilled_roles(sig: LoopNestSig, core: Core, infos: dict[str, TensorInfo]) -> tuple[str, ...]:
    """Roles whose tensor goes to DRAM: larger than its top memory, then the largest ones while
    the tensors sharing a top memory do not fit in it together (output counted at psum width)."""
    if core.dram is None:
        return ()
    bits = {}
    for role, info in infos.items():
        elements = tensor_elements(info, sig.dims)
        bits[role] = elements * (info.psum_bits if info.is_output else info.bits)
    tops = {role: core.hierarchy(role)[-1] for role in ROLES if core.hierarchy(role)}
    spilled = [role for role in ROLES if role in tops and bits[role] > tops[role].size_bits]
    for memory in {id(m): m for m in tops.values()}.values():
        sharing = sorted((r for r in tops if tops[r] is memory and r not in spilled), key=lambda r: -bits[r])
        while sharing and sum(bits[r] for r in sharing) > memory.size_bits:
            spilled.append(sharing.pop(0))
    return tuple(r for r in ROLES if r in spilled)


def build_levels(core: Core, roles_to_dram: tuple[str, ...], unrolls: tuple[Unroll, ...], element_bits: dict[str, int] | None = None):
    """Per role, its memory levels (DRAM on top when spilled) with their spatial fan-outs, the
    leftover fan-out above the top level, and the memories in allocation order."""
    element_bits = element_bits or {}
    memories = list(core.memories)
    if roles_to_dram:
        memories.append(dram_level(core, roles_to_dram))
    levels: dict[str, list[Level]] = {}
    leftovers: dict[str, tuple[tuple, tuple]] = {}
    for role in ROLES:
        # A memory that cannot hold one element of the tensor (e.g. a 16-bit accumulator and
        # 32-bit partial sums) is bypassed for it: the level above serves the array directly.
        holders = [m for m in memories if role in m.operands and m.size_bits >= element_bits.get(role, 0)]
        if not holders:
            holders = [m for m in memories if role in m.operands][-1:]
        remaining = list(unrolls)
        role_levels = []
        for index, memory in enumerate(holders):
            served = [u for u in remaining if u.array_dim in memory.served_dims]
            remaining = [u for u in remaining if u.array_dim not in memory.served_dims]
            role_levels.append(
                Level(memory, index, tuple((u.dim, u.frac) for u in served), tuple((u.dim, u.whole) for u in served))
            )
        levels[role] = role_levels
        leftovers[role] = (tuple((u.dim, u.frac) for u in remaining), tuple((u.dim, u.whole) for u in remaining))
    return levels, leftovers, memories
