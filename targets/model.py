"""Frozen data classes that describe an accelerator: cores, their memories, DRAM and links.

The description follows the hardware model of ZigZag (one core = an operational array plus a
memory hierarchy per operand) and of Stream (a set of cores, an off-chip memory and a graph of
links between cores), so that a Stream system YAML can be read into it without losing meaning.
Everything is immutable and hashable, so a `Core` can be a memoization key for the cost model.

Units used throughout:
* sizes in bits (`size_bits`) with a `size_bytes` convenience property,
* bandwidths of on-chip ports and links in bits per clock cycle of the core that owns them,
* DRAM bandwidth in bytes per second (converted to bits/cycle with a core clock when needed),
* energies in picojoules (pJ).

Operands: our memories hold `W` (weights, ZigZag's `I2`), `I` (input activations, ZigZag's `I1`)
and `O` (outputs and partial sums, ZigZag's `O`).  For backward loop nests the cost model binds the
tensors to these memory roles (see `monet_ir.cost.loopnest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPERANDS = ("W", "I", "O")
"""Memory operand roles: weights, input activations, outputs/partial sums."""

LOOP_DIMS = ("B", "G", "K", "C", "OY", "OX", "FY", "FX")
"""ZigZag loop dimension names a dataflow may unroll (batch, group, output channel, input channel,
output rows/columns, filter rows/columns)."""

CORE_KINDS = ("mac_array", "simd", "pooling")

DIRECTIONS = ("fh", "tl", "fl", "th")
"""ZigZag port directions: from-high (write from the level above), to-low (read towards the array),
from-low (write of results coming up from the array), to-high (read of results going up)."""

PORT_KINDS = ("read", "write", "read_write")

VECTOR_KINDS = (
    "elementwise",
    "reduction",
    "pool",
    "norm",
    "softmax",
    "optimizer",
    "data_movement",
    "loss",
)
"""Op kinds of `VectorSig`; a core may also list "vector" to accept all of them."""

DEFAULT_CLOCK_HZ = 1.0e9
"""Clock assumed when a description gives none (Stream and ZigZag count cycles only)."""


@dataclass(frozen=True)
class Port:
    """One physical port of a memory instance (ZigZag `ports` entry).

    name: port name (e.g. ``r_port_1``).
    kind: ``read``, ``write`` or ``read_write``.
    bandwidth_bits: maximal bits moved per cycle (ZigZag ``bandwidth_max``); also the width of
        one access that ``read_energy_pj``/``write_energy_pj`` of the memory are charged for.
    min_bandwidth_bits: access granularity in bits (ZigZag ``bandwidth_min``); a transfer is
        rounded up to a multiple of it.
    allocation: (operand, direction) pairs this port serves, e.g. ``(("W", "tl"),)``.
    """

    name: str
    kind: str
    bandwidth_bits: int
    min_bandwidth_bits: int
    allocation: tuple[tuple[str, str], ...]

    def serves(self, operand: str, direction: str) -> bool:
        return (operand, direction) in self.allocation


@dataclass(frozen=True)
class MemoryLevel:
    """One memory of a core's hierarchy (ZigZag `memories` entry).

    name: unique name within the core (e.g. ``sram_2MB``).
    size_bits: capacity of ONE instance in bits.
    read_energy_pj / write_energy_pj: energy of one access of a port's full width
        (ZigZag ``r_cost``/``w_cost``).
    operands: subset of ("W", "I", "O") stored here.
    served_dims: operational-array dimensions over which one instance is shared, e.g.
        ``("D1", "D2")`` for a global buffer and ``()`` for a per-PE register file.  The number of
        instances is the product of the array dimensions that no lower level of the same operand
        and this level serve (ZigZag semantics).
    ports: the physical ports; per-direction bandwidth comes from the port serving it.
    latency_cycles: access latency (kept for completeness; ZigZag ignores it as well).
    double_buffered: the memory always double-buffers (ZigZag ``force_double_buffering``).
    """

    name: str
    size_bits: int
    read_energy_pj: float
    write_energy_pj: float
    operands: tuple[str, ...]
    served_dims: tuple[str, ...]
    ports: tuple[Port, ...]
    latency_cycles: int = 1
    double_buffered: bool = False

    @property
    def size_bytes(self) -> float:
        return self.size_bits / 8

    @property
    def read_bw_bits(self) -> int:
        """Widest read-capable port, bits/cycle."""
        return max((p.bandwidth_bits for p in self.ports if p.kind != "write"), default=0)

    @property
    def write_bw_bits(self) -> int:
        """Widest write-capable port, bits/cycle."""
        return max((p.bandwidth_bits for p in self.ports if p.kind != "read"), default=0)

    def port_for(self, operand: str, direction: str) -> Port | None:
        for port in self.ports:
            if port.serves(operand, direction):
                return port
        return None


@dataclass(frozen=True)
class ArrayDim:
    """One dimension of an operational array: name (``D1``...) and number of units along it."""

    name: str
    size: int


@dataclass(frozen=True)
class SpatialUnroll:
    """Loop dimension `loop_dim` unrolled `factor` times along array dimension `array_dim`
    (one entry of ZigZag `dataflows` / `spatial_mapping`)."""

    array_dim: str
    loop_dim: str
    factor: int


@dataclass(frozen=True)
class PrecisionCost:
    """Energy and throughput of one arithmetic operation at a precision.

    name: ``int8``, ``fp16``, ``bf16``, ``fp32``... (free text, matched by name or bit width).
    bits: operand width.
    energy_pj: energy of one MAC (mac_array cores) or one operation (simd/pooling cores).
    ops_per_cycle: operations per unit per cycle relative to the array (sub-word parallelism
        > 1, multi-cycle units < 1).
    """

    name: str
    bits: int
    energy_pj: float
    ops_per_cycle: float = 1.0


@dataclass(frozen=True)
class OperationalArray:
    """The compute units of a core.

    dims: array dimensions with sizes (e.g. D1=32, D2=32).
    dataflow: fixed spatial unrolling (ZigZag `dataflows`); several entries on one array dim
        unroll several loop dims on it.
    systolic_dims: dimensions along which results drain one unit per cycle (ZigZag
        ``systolic_dimensions``; adds a drain latency).
    """

    dims: tuple[ArrayDim, ...]
    dataflow: tuple[SpatialUnroll, ...] = ()
    systolic_dims: tuple[str, ...] = ()

    @property
    def units(self) -> int:
        total = 1
        for dim in self.dims:
            total *= dim.size
        return total

    def dim_size(self, name: str) -> int:
        for dim in self.dims:
            if dim.name == name:
                return dim.size
        raise KeyError(name)


@dataclass(frozen=True)
class Dram:
    """Off-chip memory shared by all cores.

    name: e.g. ``lpddr4x``.
    capacity_bytes: total capacity.
    bandwidth_bytes_per_s: sustained bandwidth of the DRAM interface.
    read_energy_pj_per_bit / write_energy_pj_per_bit: access energy per bit (interface + array).
    access_bits: width of one access (burst granularity); transfers round up to it.
    ports: 1 when reads and writes share the interface, 2 for separate read/write channels
        (Stream makes one shared link per core or separate read and write links accordingly).
    technology: ``dram``, or ``sram`` for the main memory of an MCU without DRAM (one of
        MAIN_MEMORY_TECHNOLOGIES); informative, and what the physical sanity checks expect.
    """

    name: str
    capacity_bytes: int
    bandwidth_bytes_per_s: float
    read_energy_pj_per_bit: float
    write_energy_pj_per_bit: float
    access_bits: int = 64
    ports: int = 1
    technology: str = "dram"

    def bits_per_cycle(self, clock_hz: float) -> float:
        return self.bandwidth_bytes_per_s * 8.0 / clock_hz


STORAGE_KINDS = ("flash", "sd", "nvme", "host", "other")
"""Technologies of a `Storage` level (informative: the figures decide the costs)."""

MAIN_MEMORY_TECHNOLOGIES = ("dram", "sram")
"""What the main memory (`Dram`) is built of: DRAM, or on an MCU without DRAM its SRAM."""


@dataclass(frozen=True)
class Storage:
    """A store below main memory that activations can be paged out to and back (POET's
    flash/SD card; NVMe; host memory over PCIe). One channel, one transfer at a time.

    name: e.g. ``sd_card``.
    kind: one of STORAGE_KINDS.
    capacity_bytes: room for paged activations.
    read_bandwidth_bytes_per_s / write_bandwidth_bytes_per_s: sustained page-in / page-out rates.
    read_energy_pj_per_bit / write_energy_pj_per_bit: energy of moving one bit in / out.
    page_bytes: transfer granularity; a transfer and what it occupies round up to whole pages
        (0: byte granularity).
    latency_s: fixed cost of one transfer (command, seek), added to its time.
    """

    name: str
    kind: str
    capacity_bytes: int
    read_bandwidth_bytes_per_s: float
    write_bandwidth_bytes_per_s: float
    read_energy_pj_per_bit: float
    write_energy_pj_per_bit: float
    page_bytes: int = 0
    latency_s: float = 0.0

    def rounded(self, nbytes: int) -> int:
        """Bytes a transfer of `nbytes` moves and occupies (whole pages)."""
        if self.page_bytes <= 0:
            return nbytes
        return -(-nbytes // self.page_bytes) * self.page_bytes


@dataclass(frozen=True)
class Link:
    """A one-directional core-to-core link (a bus is a `Bus`).

    bandwidth_bits: bits per cycle (of the target frequency).
    energy_pj_per_bit: transfer energy.
    """

    src: int
    dst: int
    bandwidth_bits: float
    energy_pj_per_bit: float


@dataclass(frozen=True)
class Bus:
    """One shared medium connecting `cores`; one transfer at a time uses its full bandwidth
    (Stream's ``"a, b, c"`` connectivity entry)."""

    cores: tuple[int, ...]
    bandwidth_bits: float
    energy_pj_per_bit: float


@dataclass(frozen=True)
class Interconnect:
    """The on-chip network: explicit directed links plus shared buses.

    topology: how it was built (``ring``, ``mesh``, ``bus``, ``all_to_all``, ``explicit``,
        ``stream``); informative only, `links` and `buses` are authoritative.
    """

    links: tuple[Link, ...] = ()
    buses: tuple[Bus, ...] = ()
    topology: str = "explicit"

    def neighbours(self, core_id: int) -> tuple[int, ...]:
        found = {link.dst for link in self.links if link.src == core_id}
        for bus in self.buses:
            if core_id in bus.cores:
                found.update(c for c in bus.cores if c != core_id)
        return tuple(sorted(found))


MAPPER_SEARCHES = ("fast", "exhaustive")
MAPPER_OBJECTIVES = ("latency", "energy", "edp")
GRAD_DATAFLOWS = ("auto", "literal", "translate")


@dataclass(frozen=True)
class MapperOptions:
    """How the cost model maps loop nests onto a core: a run's choice, not hardware.

    search: ``fast`` (a sample of loop orders, then local improvement; the default) or
        ``exhaustive`` (every order of the loop prime factors, as ZigZag's LOMA tries them).
    objective: ``latency``, ``energy`` or ``edp`` (energy x delay), compared as ZigZag's
        MinimalLatency/MinimalEnergy/MinimalEDP stages do.
    grad_dataflow: how a spatial mapping written for the forward nest applies to gradient nests:
        ``literal`` (the same loop dims, as ZigZag applies a mapping), ``translate`` (the loop
        dims playing the same memory roles), ``auto`` (literal for a mapping file's entries,
        translate for a core's own ``dataflows``).
    """

    search: str = "fast"
    objective: str = "latency"
    grad_dataflow: str = "auto"

    def __post_init__(self) -> None:
        for name, allowed in (("search", MAPPER_SEARCHES), ("objective", MAPPER_OBJECTIVES),
                              ("grad_dataflow", GRAD_DATAFLOWS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"mapper {name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")


DEFAULT_MAPPER = MapperOptions()


@dataclass(frozen=True)
class Core:
    """One core: an operational array and its memory hierarchy.

    id: index in the target (0..N-1, Stream convention).  Not part of equality: two cores built
        from the same description compare equal, so costs are shared between them.
    name: human name (also excluded from equality).
    kind: ``mac_array`` (runs loop nests), ``simd`` (element-wise lanes) or ``pooling``.
    clock_hz: core clock.
    array: operational array with the spatial dataflow.
    precisions: MAC (or op) energy per supported precision.
    memories: the memory levels, innermost first (declaration order, as in ZigZag); per operand
        the hierarchy is the memories holding it in that order.
    op_kinds: op kinds the core accepts: ``loop_nest`` (conv/matmul-like), VECTOR_KINDS members
        or ``vector`` (all vector kinds).
    dram: the off-chip memory the core spills to; filled in by the loader from the target.
    mapper: how the cost model maps loop nests on it (`MapperOptions`; part of equality, so
        costs under different options are memoized apart).
    """

    id: int = field(compare=False)
    name: str = field(compare=False)
    kind: str
    clock_hz: float
    array: OperationalArray
    precisions: tuple[PrecisionCost, ...]
    memories: tuple[MemoryLevel, ...]
    op_kinds: tuple[str, ...]
    dram: Dram | None = None
    mapper: MapperOptions = DEFAULT_MAPPER

    def __hash__(self) -> int:
        # a Core keys the cost model's memo on every lookup: hash its nested description once
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.kind, self.clock_hz, self.array, self.precisions, self.memories, self.op_kinds,
                           self.dram, self.mapper))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # string hashes differ between processes (PYTHONHASHSEED): a pickled Core must not carry
        # this process's hash into a worker, where equal Cores would then miss each other in dicts
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def hierarchy(self, operand: str) -> tuple[MemoryLevel, ...]:
        """Memories holding `operand`, innermost first."""
        return tuple(m for m in self.memories if operand in m.operands)

    def precision_for(self, bits: int, name: str = "") -> PrecisionCost | None:
        """The precision an op `bits` wide runs at: for an MX format `name`, an entry of that
        name or its family (`mxfp8` serves `mxfp8_e4m3` and `mxfp8_e5m2`) if the core lists
        one; else the cheapest supported precision at least `bits` wide (exact width
        preferred), MX entries only when the core lists nothing else."""
        if name:
            named = [p for p in self.precisions if p.name == name or name.startswith(p.name + "_")]
            if named:
                return min(named, key=lambda p: p.energy_pj)
        plain = [p for p in self.precisions if not p.name.startswith("mx")] or list(self.precisions)
        exact = [p for p in plain if p.bits == bits]
        if exact:
            return min(exact, key=lambda p: p.energy_pj)
        wider = [p for p in plain if p.bits > bits]
        return min(wider, key=lambda p: (p.bits, p.energy_pj)) if wider else None

    def accepts(self, kind: str, is_loop_nest: bool) -> bool:
        if is_loop_nest:
            return "loop_nest" in self.op_kinds or kind in self.op_kinds
        return kind in self.op_kinds or "vector" in self.op_kinds

    @property
    def peak_ops_per_cycle(self) -> int:
        return self.array.units


@dataclass(frozen=True)
class Target:
    """A whole accelerator.

    name: target name.
    cores: the cores, ids 0..N-1 in order.
    dram: the off-chip memory (None only for descriptions that have none).
    interconnect: links and buses between cores.
    shared_memories: groups of core ids whose top-level memory is one physical instance
        (Stream ``core_memory_sharing``).
    frequency_hz: reference clock of links (bits/cycle of links are per cycle of it).
    source: file the target was read from (for messages).
    default_precision: the number format a step runs in when the user chooses none (a target's
        native format, e.g. bf16; the one precision of Stream/ZigZag cores); None keeps each
        tensor's own element type.
    default_precision_reason: why that default (for messages).
    storage: the store below main memory that saved activations may be paged to (None: none).
    """

    name: str
    cores: tuple[Core, ...]
    dram: Dram | None
    interconnect: Interconnect
    shared_memories: tuple[tuple[int, ...], ...] = ()
    frequency_hz: float = DEFAULT_CLOCK_HZ
    source: str = field(default="", compare=False)
    default_precision: str | None = None
    default_precision_reason: str = field(default="", compare=False)
    storage: Storage | None = None

    def core(self, core_id: int) -> Core:
        return self.cores[core_id]
