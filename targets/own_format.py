"""Reader for MONET's own target YAML (see docs/targets.md for the field-by-field reference)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from monet_ir.precision import FORMAT_NAMES, MX_ELEMENTS

from .errors import Problems
from .fields import Fields, join
from .model import (
    CORE_KINDS,
    DEFAULT_CLOCK_HZ,
    DIRECTIONS,
    OPERANDS,
    PORT_KINDS,
    VECTOR_KINDS,
    ArrayDim,
    Bus,
    Core,
    Dram,
    Interconnect,
    Link,
    MemoryLevel,
    OperationalArray,
    MAIN_MEMORY_TECHNOLOGIES,
    STORAGE_KINDS,
    Port,
    PrecisionCost,
    Storage,
    Target,
)
from .topology import TOPOLOGIES, all_to_all, bus, mesh, ring, square_shape
from .precision_choice import unsupported_precision
from .validate import check_core
from .zigzag_format import read_dataflow

_DEFAULT_OP_KINDS = {"mac_array": ("loop_nest",), "simd": ("vector",), "pooling": ("pool",)}
_KNOWN_OP_KINDS = ("loop_nest", "vector") + VECTOR_KINDS


def _operands(raw: list, fields: Fields, path: str) -> tuple[str, ...]:
    found = []
    for index, op in enumerate(raw):
        if op not in OPERANDS:
            fields.problems.add(join(path, index), f"unknown operand {op!r} (use W, I or O)")
        else:
            found.append(op)
    return tuple(found)


def _generated_ports(count: int, operands: tuple[str, ...], read_bw: int, write_bw: int, access: int) -> tuple[Port, ...]:
    """Ports from a count: 2 = one read + one write port, 1 = one shared read/write port."""
    reads = tuple((op, d) for op in operands for d in (("tl", "th") if op == "O" else ("tl",)))
    writes = tuple((op, d) for op in operands for d in (("fh", "fl") if op == "O" else ("fh",)))
    if count == 1:
        width = max(read_bw, write_bw)
        return (Port("rw_port_1", "read_write", width, min(access, width), reads + writes),)
    return (
        Port("r_port_1", "read", read_bw, min(access, read_bw), reads),
        Port("w_port_1", "write", write_bw, min(access, write_bw), writes),
    )


def _explicit_ports(raw: list, operands: tuple[str, ...], fields: Fields, path: str) -> tuple[Port, ...]:
    ports = []
    for index, entry in enumerate(raw):
        where = join(path, index)
        if not isinstance(entry, dict):
            fields.problems.add(where, "expected a mapping")
            continue
        fields.known_keys(entry, _PORT_KEYS, where)
        kind = fields.text(entry, "type", where, default="read_write")
        if kind not in PORT_KINDS:
            fields.problems.add(join(where, "type"), f"unknown port type {kind!r} (use {', '.join(PORT_KINDS)})")
        width = fields.integer(entry, "bandwidth", where, positive=True, default=1)
        access = fields.integer(entry, "access_bits", where, required=False, default=width, positive=True)
        allocation = []
        for a_index, item in enumerate(fields.seq(entry, "allocation", where)):
            a_where = join(join(where, "allocation"), a_index)
            parts = [p.strip() for p in item.split(",")] if isinstance(item, str) else []
            if len(parts) != 2 or parts[1] not in DIRECTIONS:
                fields.problems.add(a_where, f"expected 'OPERAND, DIRECTION' with direction fh/tl/fl/th, got {item!r}")
            elif parts[0] not in OPERANDS:
                fields.problems.add(a_where, f"unknown operand {parts[0]!r} (use W, I or O)")
            elif parts[0] not in operands:
                fields.problems.add(a_where, f"operand {parts[0]} is not stored in this memory")
            else:
                allocation.append((parts[0], parts[1]))
        name = fields.text(entry, "name", where, required=False, default=f"port_{index + 1}")
        ports.append(Port(name, kind, width, min(access, width), tuple(allocation)))
    return tuple(ports)


def _energy(raw: dict, kind: str, width: int, fields: Fields, path: str) -> float:
    """Energy per access of `width` bits, given per access or per bit."""
    per_access = f"{kind}_energy_pj"
    per_bit = f"{kind}_pj_per_bit"
    if per_access in raw:
        return fields.number(raw, per_access, path)
    if per_bit in raw:
        return fields.number(raw, per_bit, path) * width
    fields.problems.add(join(path, per_access), f"missing required field (or give {per_bit})")
    return 0.0


_MEMORY_KEYS = (
    "size", "operands", "served_dims", "read_bw", "write_bw", "access_bits", "ports", "read_energy_pj",
    "write_energy_pj", "read_pj_per_bit", "write_pj_per_bit", "latency", "double_buffered",
)
_PORT_KEYS = ("name", "type", "bandwidth", "access_bits", "allocation")
_CORE_KEYS = ("name", "kind", "clock_hz", "array", "precisions", "op_kinds", "memories")
_ARRAY_KEYS = ("dims", "dataflow", "systolic_dims")
_PRECISION_KEYS = ("bits", "energy_pj", "ops_per_cycle")
_DRAM_KEYS = ("name", "capacity", "bandwidth_GBps", "read_energy_pj_per_bit", "write_energy_pj_per_bit", "access_bits", "ports",
              "technology")
_STORAGE_KEYS = ("name", "kind", "capacity", "read_bandwidth_MBps", "write_bandwidth_MBps", "read_energy_pj_per_bit",
                 "write_energy_pj_per_bit", "page", "latency_us")
_INTERCONNECT_KEYS = ("topology", "cores", "mesh", "bandwidth_bits", "energy_pj_per_bit", "links", "buses")
_LINK_KEYS = ("between", "bandwidth_bits", "energy_pj_per_bit", "one_way")
_BUS_KEYS = ("cores", "bandwidth_bits", "energy_pj_per_bit")
_TOP_KEYS = ("name", "frequency_hz", "dram", "storage", "cores", "interconnect", "shared_memories", "templates", "description",
             "default_precision")


def read_memory(name: str, raw: Any, fields: Fields, path: str) -> MemoryLevel | None:
    if not isinstance(raw, dict):
        fields.problems.add(path, f"expected a mapping, got {type(raw).__name__}")
        return None
    fields.known_keys(raw, _MEMORY_KEYS, path)
    size = fields.size_bits(raw, "size", path, unit_bits=8)
    operands = _operands(fields.seq(raw, "operands", path), fields, join(path, "operands"))
    served = tuple(str(d) for d in fields.seq(raw, "served_dims", path, required=False))
    read_bw = fields.integer(raw, "read_bw", path, positive=True, default=1)
    write_bw = fields.integer(raw, "write_bw", path, required=False, default=read_bw, positive=True)
    access = fields.integer(raw, "access_bits", path, required=False, default=min(read_bw, write_bw), positive=True)
    raw_ports = raw.get("ports", 2)
    if isinstance(raw_ports, list):
        ports = _explicit_ports(raw_ports, operands, fields, join(path, "ports"))
    else:
        count = fields.integer(raw, "ports", path, required=False, default=2, positive=True)
        if count not in (1, 2):
            fields.problems.add(join(path, "ports"), f"expected 1, 2 or a list of ports, got {count}")
        ports = _generated_ports(count, operands, read_bw, write_bw, access)
    read_energy = _energy(raw, "read", read_bw, fields, path)
    write_energy = _energy(raw, "write", write_bw, fields, path)
    latency = fields.integer(raw, "latency", path, required=False, default=1)
    double = fields.boolean(raw, "double_buffered", path)
    return MemoryLevel(name, size, read_energy, write_energy, operands, served, ports, latency, double)


def _mx_element_bits(name: str) -> int | None:
    """Element bits of an MX format or family name (`mxfp8` for E4M3 and E5M2), else None."""
    widths = {MX_ELEMENTS[n].bits for n in MX_ELEMENTS if n == name or n.startswith(name + "_")}
    return widths.pop() if len(widths) == 1 else None


def read_precisions(raw: dict, fields: Fields, path: str) -> tuple[PrecisionCost, ...]:
    precisions = []
    for name, entry in raw.items():
        where = join(path, name)
        if not isinstance(entry, dict):
            fields.problems.add(where, "expected a mapping with bits and energy_pj")
            continue
        fields.known_keys(entry, _PRECISION_KEYS, where)
        mx_bits = _mx_element_bits(str(name))
        if str(name).startswith("mx") and mx_bits is None:
            fields.problems.add(where, f"unknown MX format (use one of {', '.join(MX_ELEMENTS)}, or a family: "
                                       "mxint8, mxfp8, mxfp6, mxfp4)")
            continue
        bits = fields.integer(entry, "bits", where, positive=True, default=mx_bits or 8, required=mx_bits is None)
        if mx_bits is not None and bits != mx_bits:
            fields.problems.add(join(where, "bits"), f"{bits} differs from the {name} element width {mx_bits}")
            continue
        energy = fields.number(entry, "energy_pj", where)
        rate = fields.number(entry, "ops_per_cycle", where, required=False, default=1.0, positive=True)
        precisions.append(PrecisionCost(str(name), bits, energy, rate))
    return tuple(precisions)


def read_core(raw: Any, index: int, default_clock: float, fields: Fields) -> Core | None:
    path = join("cores", index)
    if not isinstance(raw, dict):
        fields.problems.add(path, "expected a mapping")
        return None
    fields.known_keys(raw, _CORE_KEYS, path)
    name = fields.text(raw, "name", path, default=f"core{index}")
    kind = fields.text(raw, "kind", path, default="mac_array")
    if kind not in CORE_KINDS:
        fields.problems.add(join(path, "kind"), f"unknown core kind {kind!r} (use {', '.join(CORE_KINDS)})")
        kind = "mac_array"
    clock = fields.number(raw, "clock_hz", path, required=False, default=default_clock, positive=True)
    array_raw = fields.mapping(raw, "array", path)
    array_path = join(path, "array")
    fields.known_keys(array_raw, _ARRAY_KEYS, array_path)
    dims = []
    for dim_name, size in fields.mapping(array_raw, "dims", array_path).items():
        dims.append(ArrayDim(str(dim_name), fields.check_integer(size, join(join(array_path, "dims"), dim_name), 1, positive=True)))
    dataflow = read_dataflow(array_raw.get("dataflow"), fields, join(array_path, "dataflow"))
    systolic = tuple(str(d) for d in fields.seq(array_raw, "systolic_dims", array_path, required=False))
    precisions = read_precisions(fields.mapping(raw, "precisions", path), fields, join(path, "precisions"))
    op_kinds = fields.seq(raw, "op_kinds", path, required=False) or list(_DEFAULT_OP_KINDS[kind])
    for k_index, op_kind in enumerate(op_kinds):
        if op_kind not in _KNOWN_OP_KINDS:
            fields.problems.add(join(join(path, "op_kinds"), k_index), f"unknown op kind {op_kind!r} (use {', '.join(_KNOWN_OP_KINDS)})")
    memories = []
    for mem_name, mem_raw in fields.mapping(raw, "memories", path).items():
        memory = read_memory(str(mem_name), mem_raw, fields, join(join(path, "memories"), mem_name))
        if memory is not None:
            memories.append(memory)
    core = Core(
        id=index,
        name=name,
        kind=kind,
        clock_hz=clock,
        array=OperationalArray(tuple(dims), dataflow, systolic),
        precisions=precisions,
        memories=tuple(memories),
        op_kinds=tuple(str(k) for k in op_kinds),
    )
    return core


def read_dram(raw: dict, fields: Fields) -> Dram | None:
    if not raw:
        return None
    path = "dram"
    fields.known_keys(raw, _DRAM_KEYS, path)
    capacity = fields.size_bits(raw, "capacity", path, unit_bits=8) // 8
    bandwidth = fields.number(raw, "bandwidth_GBps", path, positive=True, default=1.0)
    read_energy = fields.number(raw, "read_energy_pj_per_bit", path)
    write_energy = fields.number(raw, "write_energy_pj_per_bit", path, required=False, default=read_energy)
    access = fields.integer(raw, "access_bits", path, required=False, default=64, positive=True)
    ports = fields.integer(raw, "ports", path, required=False, default=1, positive=True)
    name = fields.text(raw, "name", path, required=False, default="dram")
    technology = fields.text(raw, "technology", path, required=False, default="dram")
    if technology not in MAIN_MEMORY_TECHNOLOGIES:
        fields.problems.add(join(path, "technology"),
                            f"unknown technology {technology!r} (use {', '.join(MAIN_MEMORY_TECHNOLOGIES)})")
        technology = "dram"
    return Dram(name, capacity, bandwidth * 1e9, read_energy, write_energy, access, ports, technology)


def read_storage(raw: dict, fields: Fields, has_dram: bool) -> Storage | None:
    """The optional `storage:` level below main memory (see `targets.model.Storage`)."""
    if not raw:
        return None
    path = "storage"
    fields.known_keys(raw, _STORAGE_KEYS, path)
    if not has_dram:
        fields.problems.add(path, "a storage level needs a main memory above it (add a dram: section)")
    name = fields.text(raw, "name", path, required=False, default="storage")
    kind = fields.text(raw, "kind", path, required=False, default="other")
    if kind not in STORAGE_KINDS:
        fields.problems.add(join(path, "kind"), f"unknown storage kind {kind!r} (use {', '.join(STORAGE_KINDS)})")
        kind = "other"
    capacity = fields.size_bits(raw, "capacity", path, unit_bits=8) // 8
    read_bw = fields.number(raw, "read_bandwidth_MBps", path, positive=True, default=1.0)
    write_bw = fields.number(raw, "write_bandwidth_MBps", path, positive=True, default=1.0)
    read_energy = fields.number(raw, "read_energy_pj_per_bit", path)
    write_energy = fields.number(raw, "write_energy_pj_per_bit", path, required=False, default=read_energy)
    page = -(-fields.size_bits(raw, "page", path, unit_bits=8, required=False) // 8)  # 0 when absent
    latency = fields.number(raw, "latency_us", path, required=False, default=0.0)
    return Storage(name, kind, capacity, read_bw * 1e6, write_bw * 1e6, read_energy, write_energy, page,
                   latency * 1e-6)


def _core_ref(value: Any, core_ids: set[int], fields: Fields, path: str) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        fields.problems.add(path, f"expected a core id, got {value!r}")
        return None
    if value not in core_ids:
        fields.problems.add(path, f"unknown core {value} in link (cores are {sorted(core_ids)})")
        return None
    return value


def read_interconnect(raw: dict, core_ids: set[int], fields: Fields) -> Interconnect:
    path = "interconnect"
    fields.known_keys(raw, _INTERCONNECT_KEYS, path)
    topology = fields.text(raw, "topology", path, required=False, default="none")
    if topology not in TOPOLOGIES:
        fields.problems.add(join(path, "topology"), f"unknown topology {topology!r} (use {', '.join(TOPOLOGIES)})")
        topology = "none"
    bandwidth = fields.number(raw, "bandwidth_bits", path, required=topology != "none", default=1.0, positive=True)
    energy = fields.number(raw, "energy_pj_per_bit", path, required=False, default=0.0)
    members = []
    raw_members = fields.seq(raw, "cores", path, required=False)
    for index, value in enumerate(raw_members):
        ref = _core_ref(value, core_ids, fields, join(join(path, "cores"), index))
        if ref is not None:
            members.append(ref)
    if not raw_members:
        members = sorted(core_ids)
    links: list[Link] = []
    buses: list[Bus] = []
    if topology == "ring":
        links += ring(members, bandwidth, energy)
    elif topology == "all_to_all":
        links += all_to_all(members, bandwidth, energy)
    elif topology == "bus":
        buses += bus(members, bandwidth, energy)
    elif topology == "mesh":
        shape = fields.seq(raw, "mesh", path, required=False)
        before = len(fields.problems.lines)
        if shape:
            rows = fields.check_integer(shape[0], join(join(path, "mesh"), 0), 1, positive=True)
            cols = fields.check_integer(shape[-1], join(join(path, "mesh"), 1), 1, positive=True)
        else:
            rows, cols = square_shape(len(members))
        if rows * cols != len(members) and len(fields.problems.lines) == before:
            fields.problems.add(join(path, "mesh"), f"{rows}x{cols} mesh does not hold {len(members)} cores")
        else:
            links += mesh(members, rows, cols, bandwidth, energy)
    for index, entry in enumerate(fields.seq(raw, "links", path, required=False)):
        where = join(join(path, "links"), index)
        fields.known_keys(entry, _LINK_KEYS, where)
        ends = fields.seq(entry, "between", where)
        if len(ends) != 2:
            fields.problems.add(join(where, "between"), "expected two core ids")
            continue
        a = _core_ref(ends[0], core_ids, fields, join(join(where, "between"), 0))
        b = _core_ref(ends[1], core_ids, fields, join(join(where, "between"), 1))
        link_bw = fields.number(entry, "bandwidth_bits", where, required=False, default=bandwidth, positive=True)
        link_energy = fields.number(entry, "energy_pj_per_bit", where, required=False, default=energy)
        if a is None or b is None:
            continue
        links.append(Link(a, b, link_bw, link_energy))
        if not fields.boolean(entry, "one_way", where):
            links.append(Link(b, a, link_bw, link_energy))
    for index, entry in enumerate(fields.seq(raw, "buses", path, required=False)):
        where = join(join(path, "buses"), index)
        fields.known_keys(entry, _BUS_KEYS, where)
        refs = [_core_ref(v, core_ids, fields, join(join(where, "cores"), i)) for i, v in enumerate(fields.seq(entry, "cores", where))]
        bus_bw = fields.number(entry, "bandwidth_bits", where, required=False, default=bandwidth, positive=True)
        bus_energy = fields.number(entry, "energy_pj_per_bit", where, required=False, default=energy)
        if all(r is not None for r in refs) and len(refs) >= 2:
            buses.append(Bus(tuple(refs), bus_bw, bus_energy))
    return Interconnect(tuple(links), tuple(buses), topology if not raw.get("links") else f"{topology}+explicit")


def read_own_target(data: dict, file: str, problems: Problems) -> Target:
    fields = Fields(problems)
    fields.known_keys(data, _TOP_KEYS, "")
    name = fields.text(data, "name", "")
    frequency = fields.number(data, "frequency_hz", "", required=False, default=DEFAULT_CLOCK_HZ, positive=True)
    dram = read_dram(fields.mapping(data, "dram", "", required=False), fields)
    storage = read_storage(fields.mapping(data, "storage", "", required=False), fields, dram is not None)
    raw_cores = fields.seq(data, "cores", "")
    if isinstance(data.get("cores"), list) and not raw_cores:
        problems.add("cores", "a target needs at least one core")
    cores = []
    # what a core's cost model sees below it: main memory, which with a storage level below it
    # holds (streams from storage, in tiles) operands larger than itself: the storage traffic is
    # priced by the scheduler's page tasks (monet_ir.schedule.paging)
    seen = dram if dram is None or storage is None else \
        replace(dram, capacity_bytes=dram.capacity_bytes + storage.capacity_bytes)
    for index, raw in enumerate(raw_cores):
        core = read_core(raw, index, frequency, fields)
        if core is not None:
            check_core(core, problems, join("cores", index))
            cores.append(replace(core, dram=seen))
    core_ids = set(range(len(raw_cores)))
    interconnect = read_interconnect(fields.mapping(data, "interconnect", "", required=False), core_ids, fields)
    sharing = []
    for index, group in enumerate(fields.seq(data, "shared_memories", "", required=False)):
        where = join("shared_memories", index)
        if not isinstance(group, list):
            problems.add(where, "expected a list of core ids")
            continue
        refs = [_core_ref(v, core_ids, fields, join(where, i)) for i, v in enumerate(group)]
        sharing.append(tuple(r for r in refs if r is not None))
    default_precision = fields.text(data, "default_precision", "", required=False, default=None)
    if default_precision is not None and default_precision not in FORMAT_NAMES:
        problems.add("default_precision", f"unknown precision {default_precision!r} "
                     f"(use one of {', '.join(FORMAT_NAMES)})")
        default_precision = None
    target = Target(name, tuple(cores), dram, interconnect, tuple(sharing), frequency, file, default_precision,
                    storage=storage)
    if default_precision is not None and not problems:  # (a precision refused above would show here again)
        for problem in unsupported_precision(target, default_precision):
            problems.add("default_precision", problem)
    return target
