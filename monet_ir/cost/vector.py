"""Cost of vector ops (element-wise, reductions, pooling, norms, optimizer updates...).

A vector op is throughput- or bandwidth-bound: it needs ops / (lanes x ops per lane per cycle)
cycles of compute and (bits read / read bandwidth, bits written / write bandwidth) cycles of
the core's top memory (summed when one port serves both, overlapped when reads and writes have
their own ports), and the slower of the two sets the latency.  Data that does not fit the top
memory streams from DRAM at the DRAM's bandwidth and energy per bit.

Lanes: all units of the array, one per PE (a MAC array that accepts vector kinds, as the one
core of a ZigZag file does, included); the memory ports, which must feed every lane its own
operands, bound the throughput as for any core. A pooling array whose dataflow unrolls
the window (FX x FY units, e.g. 3x3x8: eight 3x3 windows per cycle) covers a larger window in
ceil(height / FY) x ceil(width / FX) passes, with the other units (K) working on other outputs:
a 7x7 global average pool takes 9 passes on a 3x3 array, as ZigZag maps it, not 49/9.
"""

from __future__ import annotations

import math

from targets.model import Core, MemoryLevel

from .signature import Cost, VectorSig, frozen_mapping


def vector_lanes(core: Core) -> int:
    return max(1, core.array.units)


def _window_cycles(sig: VectorSig, core: Core, rate: float) -> int | None:
    """Compute cycles of a pooling op on a pooling array that unrolls its window (FX, FY in the
    dataflow), or None when the lane count decides (no window, or an array that does not unroll
    one)."""
    if core.kind != "pooling" or not sig.window_shape or not sig.ops:
        return None
    unroll = {u.loop_dim.upper(): u.factor for u in core.array.dataflow}
    fy, fx = unroll.get("FY", 1), unroll.get("FX", 1)
    if fy * fx <= 1:
        return None
    wy, wx = (1, *sig.window_shape)[-2:]  # a 1-D window is one row
    # the array unrolls the last two window axes; a 3-D window's depth slices are more passes
    passes = math.prod(sig.window_shape[:-2]) * math.ceil(wy / fy) * math.ceil(wx / fx)
    outputs_per_pass = max(1, core.array.units // (fy * fx))
    return math.ceil(sig.elements * sig.ops_per_element * passes / (outputs_per_pass * rate))


def _top_memory(core: Core) -> MemoryLevel:
    return max(core.memories, key=lambda m: m.size_bits)


def _port_cycles(memory: MemoryLevel, read_bits: float, write_bits: float) -> tuple[float, float, float]:
    """(cycles, read words, write words) of moving the bits through the memory's ports."""
    readers = [p for p in memory.ports if p.kind != "write"]
    writers = [p for p in memory.ports if p.kind != "read"]
    read_port = max(readers, key=lambda p: p.bandwidth_bits) if readers else None
    # with several read-write ports, writes take another port than reads (they overlap)
    other_writers = [p for p in writers if p is not read_port] or writers
    write_port = max(other_writers, key=lambda p: p.bandwidth_bits) if other_writers else None
    read_cycles = read_bits / read_port.bandwidth_bits if read_port else 0.0
    write_cycles = write_bits / write_port.bandwidth_bits if write_port else 0.0
    same_port = read_port is not None and read_port is write_port
    cycles = read_cycles + write_cycles if same_port else max(read_cycles, write_cycles)
    read_words = math.ceil(read_bits / read_port.bandwidth_bits) if read_port else 0
    write_words = math.ceil(write_bits / write_port.bandwidth_bits) if write_port else 0
    return cycles, read_words, write_words


def vector_cost(sig: VectorSig, core: Core) -> Cost:
    precision = core.precision_for(sig.bits)
    energy_per_op = precision.energy_pj if precision else 0.0
    rate = precision.ops_per_cycle if precision else 1.0
    lanes = vector_lanes(core)
    window_cycles = _window_cycles(sig, core, rate)
    if window_cycles is not None:
        compute_cycles = window_cycles
    else:
        compute_cycles = math.ceil(sig.ops / (lanes * rate)) if sig.ops else 0
    memory = _top_memory(core)
    read_bits = sig.bytes_read * 8
    write_bits = sig.bytes_written * 8
    breakdown = {"ops": sig.ops * energy_per_op}
    dram_bytes = 0
    memory_cycles, read_words, write_words = _port_cycles(memory, read_bits, write_bits)
    overflow = read_bits + write_bits - memory.size_bits
    if overflow > 0 and core.dram is not None:
        # The part that does not fit streams through DRAM on top of the on-chip buffer.
        share = overflow / (read_bits + write_bits)
        dram_bits = (read_bits + write_bits) * share
        dram_bytes = int(math.ceil(dram_bits / 8))
        dram_cycles = dram_bits / core.dram.bits_per_cycle(core.clock_hz)
        memory_cycles = max(memory_cycles, dram_cycles)
        breakdown["dram"] = (
            read_bits * share * core.dram.read_energy_pj_per_bit + write_bits * share * core.dram.write_energy_pj_per_bit
        )
    breakdown[f"{memory.name}.read"] = read_words * memory.read_energy_pj
    breakdown[f"{memory.name}.write"] = write_words * memory.write_energy_pj
    latency = max(float(compute_cycles), memory_cycles, 1.0 if (sig.ops or read_bits or write_bits) else 0.0)
    utilization = sig.ops / (latency * lanes * rate) if latency else 0.0
    return Cost(
        latency_cycles=latency,
        energy_pj=sum(breakdown.values()),
        breakdown_pj=frozen_mapping(breakdown),
        mem_bytes=sig.bytes_read + sig.bytes_written,
        core=core.id,
        utilization=min(1.0, utilization),
        mapping=f"{lanes} lanes, {'compute' if compute_cycles >= memory_cycles else 'bandwidth'}-bound",
        dram_bytes=dram_bytes,
    )
