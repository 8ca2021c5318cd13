"""What MONET read from a target or a multi-chip system: `monet targets NAME|FILE...` prints it, so
that a user can check a Stream or ZigZag file against what its authors document (PE counts,
memory sizes, bandwidths, which cores were kept, merged or left out), or a system file against
what they meant (chips, topology, links and their figures)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import Target

if TYPE_CHECKING:
    from .system import System


def _size(bits: float) -> str:
    value = bits / 8
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value} B"


def describe_target(target: Target) -> str:
    """A few lines per core: array, MAC energy, op kinds, memories; then DRAM, links and buses."""
    lines = [f"{target.name}  ({target.source or 'built-in'})",
             f"  default precision {target.default_precision or 'the model’s'}; clock {target.frequency_hz / 1e9:g} GHz"]
    for core in target.cores:
        dims = " x ".join(f"{d.name}={d.size}" for d in core.array.dims) or "-"
        energies = ", ".join(f"{p.name} {p.energy_pj:g} pJ" for p in core.precisions)
        lines.append(f"  core{core.id} {core.name}: {core.kind}, {core.array.units} units ({dims}), {energies}; "
                     f"runs {', '.join(core.op_kinds)}")
        for memory in core.memories:
            bandwidth = max((p.bandwidth_bits for p in memory.ports), default=0)
            served = ",".join(memory.served_dims) or "per unit"
            lines.append(f"    {memory.name}: {_size(memory.size_bits)}, holds {'/'.join(memory.operands)}, "
                         f"served {served}, {len(memory.ports)} ports up to {bandwidth} bit/cycle, "
                         f"r/w {memory.read_energy_pj:g}/{memory.write_energy_pj:g} pJ per access")
    dram = target.dram
    if dram is not None:
        lines.append(f"  dram {dram.name}: {_size(dram.capacity_bytes * 8)}, "
                     f"{dram.bits_per_cycle(target.frequency_hz):g} bit/cycle ({dram.bandwidth_bytes_per_s / 1e9:g} GB/s), "
                     f"r/w {dram.read_energy_pj_per_bit:g}/{dram.write_energy_pj_per_bit:g} pJ/bit, {dram.ports} port(s)")
    else:
        lines.append("  dram: none (cores keep everything in their own memories)")
    links = target.interconnect.links
    if links:
        widths = sorted({link.bandwidth_bits for link in links})
        lines.append(f"  links: {len(links) // 2} pairs, {', '.join(f'{w:g}' for w in widths)} bit/cycle")
    for bus in target.interconnect.buses:
        lines.append(f"  bus: cores {', '.join(map(str, bus.cores))}, {bus.bandwidth_bits:g} bit/cycle")
    for group in target.shared_memories:
        lines.append(f"  shared top memory: cores {', '.join(map(str, group))}")
    if target.storage is not None:
        lines.append(f"  storage {target.storage.name}: {target.storage.kind}, {_size(target.storage.capacity_bytes * 8)}")
    return "\n".join(lines)


def describe_system(system: System) -> str:
    """The system's chips and network (topology, nodes, links grouped by their figures), then its
    chip as `describe_target` gives it."""
    net = system.network
    lines = [f"{system.name}  ({system.source or 'built-in'})",
             f"  {system.chips} x {system.chip.name}, {net.topology} network"
             + (f", nodes of {net.node_chips} chips" if net.node_chips else "")
             + (f", {net.torus[0]} x {net.torus[1]} torus" if net.torus != (0, 0) else "")]
    groups: dict[tuple[float, float, float], list[str]] = {}
    for link in net.links:
        key = (link.bandwidth_bytes_per_s, link.latency_s, link.energy_pj_per_bit)
        groups.setdefault(key, []).append(link.name)
    for (bandwidth, latency, energy), names in groups.items():
        shown = ", ".join(names[:4]) + (f", ... ({len(names)} links)" if len(names) > 4 else "")
        lines.append(f"  links {shown}: {bandwidth / 1e9:g} GB/s each way, {latency * 1e6:g} us and "
                     f"{energy:g} pJ/bit per link crossed")
    lines.append("  chip:")
    lines.extend("    " + line for line in describe_target(system.chip).splitlines())
    return "\n".join(lines)
