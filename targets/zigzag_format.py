"""Readers for ZigZag core YAMLs and Stream system YAMLs, unchanged.

ZigZag core (``zigzag/inputs/hardware/*.yaml``, Stream's ``cores/*.yaml``):
* ``memories``: name -> {size (bits), r_cost, w_cost (pJ per access of a port's
  ``bandwidth_max`` bits), area, latency, operands [I1, I2, O], ports, served_dimensions}.
  Ports are either the ZigZag 3 list ``{name, type, bandwidth_min, bandwidth_max, allocation:
  ["I1, tl", ...]}`` or the older ZigZag 2 form (``r_bw``/``w_bw``, ``r_port``/``w_port``/
  ``rw_port`` counts, ``min_r_granularity``, and ``ports`` = one {direction: port name} mapping
  per operand in ``operands`` order); both are read.
* ``operational_array`` (older files: ``multipliers``): unit_energy (pJ/MAC), dimensions, sizes,
  optional systolic_dimensions.
* ``dataflows``: {D1: ["K, 32"], ...}; absent means "let the cost model choose".

Operand names map I1 -> I, I2 -> W, O -> O (ZigZag's default memory_operand_links).  A core's
precision is int8 (ZigZag convention: 8-bit weights/inputs, 16-bit partial sums, 8-bit outputs)
unless the caller chooses one; the file's unit_energy is then taken as the energy of one MAC at
that precision.

Stream system: name, cores {id: core file}, offchip_core (a core file whose ``dram`` memory is the
DRAM), core_connectivity (``"a, b"`` = a pair of links, ``"a, b, c"`` = one bus), bandwidth
(bits/cycle, every link), unit_energy_cost (energy per cycle of link activity), and
core_memory_sharing.  Core paths are resolved relative to the system file, then in its ``cores/``
folder, then by base name in those two folders (Stream looks files up under its own
``stream/inputs`` tree, which does not exist here).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from monet_ir.precision import MX_ELEMENTS

from .errors import Problems
from .fields import Fields, join
from .model import (
    DEFAULT_CLOCK_HZ,
    ArrayDim,
    Bus,
    Core,
    Dram,
    Interconnect,
    Link,
    MemoryLevel,
    OperationalArray,
    Port,
    PrecisionCost,
    SpatialUnroll,
    Target,
)
from .validate import check_core

ZIGZAG_OPERANDS = {"I1": "I", "I2": "W", "O": "O"}
PRECISION_BITS = {"int4": 4, "int8": 8, "fp8": 8, "int16": 16, "fp16": 16, "bf16": 16, "fp32": 32, "int32": 32}
_OLD_PORT_DIRECTIONS = ("fh", "tl", "fl", "th")


def _operand(name: Any, fields: Fields, path: str) -> str | None:
    if name not in ZIGZAG_OPERANDS:
        fields.problems.add(path, f"unknown operand {name!r} (use I1, I2 or O)")
        return None
    return ZIGZAG_OPERANDS[name]


def _new_style_ports(raw_ports: list, operands: tuple[str, ...], fields: Fields, path: str) -> list[Port]:
    ports = []
    for index, raw in enumerate(raw_ports):
        where = join(path, index)
        if not isinstance(raw, dict):
            fields.problems.add(where, "expected a mapping")
            continue
        kind = fields.text(raw, "type", where, default="read_write")
        if kind not in ("read", "write", "read_write"):
            fields.problems.add(join(where, "type"), f"unknown port type {kind!r} (use read, write or read_write)")
        before = len(fields.problems.lines)
        bw_max = fields.integer(raw, "bandwidth_max", where, positive=True, default=1)
        bw_min = fields.integer(raw, "bandwidth_min", where, required=False, default=bw_max, positive=True)
        if bw_min > bw_max and len(fields.problems.lines) == before:  # (not after a value already refused)
            fields.problems.add(join(where, "bandwidth_min"), f"{bw_min} exceeds bandwidth_max {bw_max}")
        allocation = []
        for a_index, entry in enumerate(fields.seq(raw, "allocation", where)):
            a_where = join(join(where, "allocation"), a_index)
            parts = [p.strip() for p in entry.split(",")] if isinstance(entry, str) else []
            if len(parts) != 2:
                fields.problems.add(a_where, f"expected 'OPERAND, DIRECTION', got {entry!r}")
                continue
            operand = _operand(parts[0], fields, a_where)
            if parts[1] not in _OLD_PORT_DIRECTIONS:
                fields.problems.add(a_where, f"unknown direction {parts[1]!r} (use fh, tl, fl or th)")
                continue
            if operand is not None:
                if operand not in operands:
                    fields.problems.add(a_where, f"operand {parts[0]} is not stored in this memory")
                allocation.append((operand, parts[1]))
        name = fields.text(raw, "name", where, default=f"port_{index}")
        ports.append(Port(name, kind, bw_max, min(bw_min, bw_max), tuple(allocation)))
    return ports


def _old_style_ports(raw: dict, operands: tuple[str, ...], fields: Fields, path: str) -> list[Port]:
    """ZigZag 2 ports: counts of r/w/rw ports with shared bandwidths, then per operand a mapping
    direction -> port name."""
    r_bw = fields.integer(raw, "r_bw", path, positive=True, default=1)
    w_bw = fields.integer(raw, "w_bw", path, required=False, default=r_bw, positive=True)
    r_gran = fields.integer(raw, "min_r_granularity", path, required=False, default=r_bw, positive=True)
    w_gran = fields.integer(raw, "min_w_granularity", path, required=False, default=w_bw, positive=True)
    specs: dict[str, tuple[str, int, int]] = {}
    before = len(fields.problems.lines)
    for prefix, kind, bw, gran in (("r", "read", r_bw, r_gran), ("w", "write", w_bw, w_gran), ("rw", "read_write", r_bw, r_gran)):
        count = fields.integer(raw, f"{prefix}_port", path, required=False, default=0)
        for number in range(1, count + 1):
            specs[f"{prefix}_port_{number}"] = (kind, bw, min(gran, bw))
    allocation: dict[str, list[tuple[str, str]]] = {name: [] for name in specs}
    raw_ports = fields.seq(raw, "ports", path)
    for index, entry in enumerate(raw_ports):
        where = join(join(path, "ports"), index)
        if not isinstance(entry, dict):
            fields.problems.add(where, "expected a mapping of direction -> port name")
            continue
        if index >= len(operands):
            fields.problems.add(where, "more port mappings than operands")
            break
        for direction, port_name in entry.items():
            if direction not in _OLD_PORT_DIRECTIONS:
                fields.problems.add(join(where, direction), "unknown direction (use fh, tl, fl or th)")
            elif port_name not in specs:
                if len(fields.problems.lines) == before:  # (not when a port count was refused)
                    fields.problems.add(join(where, direction), f"unknown port {port_name!r}")
            else:
                allocation[port_name].append((operands[index], direction))
    return [Port(name, kind, bw, gran, tuple(allocation[name])) for name, (kind, bw, gran) in specs.items()]


def read_memory(name: str, raw: Any, fields: Fields, path: str) -> MemoryLevel | None:
    if not isinstance(raw, dict):
        fields.problems.add(path, "expected a mapping")
        return None
    size = fields.integer(raw, "size", path, positive=True, default=1)
    auto = fields.boolean(raw, "auto_cost_extraction", path)
    r_cost = fields.number(raw, "r_cost", path, required=not auto)
    w_cost = fields.number(raw, "w_cost", path, required=not auto)
    latency = fields.integer(raw, "latency", path, required=False, default=1)
    operands = []
    for index, op in enumerate(fields.seq(raw, "operands", path)):
        mapped = _operand(op, fields, join(join(path, "operands"), index))
        if mapped is not None:
            operands.append(mapped)
    operands_t = tuple(operands)
    raw_ports = raw.get("ports")
    if isinstance(raw_ports, list) and raw_ports and isinstance(raw_ports[0], dict) and "name" not in raw_ports[0]:
        ports = _old_style_ports(raw, operands_t, fields, path)
    else:
        ports = _new_style_ports(fields.seq(raw, "ports", path), operands_t, fields, join(path, "ports"))
    served = fields.seq(raw, "served_dimensions", path)
    served_t = tuple(str(d) for d in served)
    double = fields.boolean(raw, "force_double_buffering", path)
    return MemoryLevel(name, size, r_cost, w_cost, operands_t, served_t, tuple(ports), latency, double)


# ZigZag's matmul layers name the row dimension D and attention heads H; our loop nests call
# them B and G (a matmul row behaves exactly like a batch row: relevant to inputs and outputs).
ZIGZAG_DIM_ALIASES = {"D": "B", "H": "G"}


def read_dataflow(raw: Any, fields: Fields, path: str, aliases: dict[str, str] | None = None) -> tuple[SpatialUnroll, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        fields.problems.add(path, "expected a mapping of array dimension -> ['DIM, factor']")
        return ()
    unrolls = []
    for array_dim, entries in raw.items():
        where = join(path, array_dim)
        if isinstance(entries, (str, list)) and not isinstance(entries, list):
            entries = [entries]
        if not isinstance(entries, list):
            fields.problems.add(where, "expected a list of 'DIM, factor'")
            continue
        for index, entry in enumerate(entries):
            loop_dim, factor = _read_unroll(entry, fields, join(where, index))
            loop_dim = (aliases or {}).get(loop_dim, loop_dim)
            if loop_dim:
                unrolls.append(SpatialUnroll(str(array_dim), loop_dim, factor))
    return tuple(unrolls)


def _read_unroll(entry: Any, fields: Fields, path: str) -> tuple[str, int]:
    if isinstance(entry, str):
        parts = [p.strip() for p in entry.split(",")]
    elif isinstance(entry, list):
        parts = list(entry)
    else:
        parts = []
    if len(parts) != 2:
        fields.problems.add(path, f"expected 'DIM, factor', got {entry!r}")
        return "", 0
    factor = parts[1]
    if isinstance(factor, str) and factor.strip().isdigit():
        factor = int(factor)
    factor = fields.check_integer(factor, path, 1, positive=True)
    return str(parts[0]).strip(), factor


def _guess_kind(file: str, name: str, sizes: list[int]) -> str:
    """Stream tells SIMD and pooling cores apart only by the mapping; use the file/core name."""
    label = (os.path.basename(file) + " " + name).lower()
    if "pool" in os.path.basename(file).lower():
        return "pooling"
    if "simd" in label or "vec" in os.path.basename(file).lower():
        return "simd"
    return "mac_array"


_LOOP_NEST_OPERATORS = {"Conv", "QLinearConv", "Gemm", "MatMul", "Einsum", "ConvTranspose"}
_POOL_OPERATORS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}


def _kind_from_operator_types(types: Any) -> str | None:
    """Stream's ``operator_types`` (the ONNX op types a core may run) says what a core is: a MAC
    array when it runs convolutions or matmuls, a pooling unit when it runs only pooling, a
    SIMD unit otherwise."""
    if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
        return None
    if _LOOP_NEST_OPERATORS & set(types):
        return "mac_array"
    return "pooling" if set(types) <= _POOL_OPERATORS else "simd"


def _default_op_kinds(kind: str) -> tuple[str, ...]:
    return {"mac_array": ("loop_nest",), "simd": ("vector",), "pooling": ("pool",)}[kind]


ZIGZAG_DEFAULT_REASON = "ZigZag/Stream cores are priced at int8, their files' convention, unless --precision is given"


def read_zigzag_core(
    data: Any,
    file: str,
    problems: Problems,
    core_id: int = 0,
    precision: str | None = None,
    kind: str | None = None,
) -> Core | None:
    """Build a Core from a parsed ZigZag core YAML; problems are recorded in `problems`."""
    fields = Fields(problems)
    if not isinstance(data, dict):
        problems.add("<top>", "a ZigZag core file must be a mapping")
        return None
    name = fields.text(data, "name", "", default=os.path.splitext(os.path.basename(file))[0])
    memories = []
    _check_cacti(fields.mapping(data, "memories", "", required=False), problems)
    before = len(problems.lines)
    for mem_name, raw in fields.mapping(data, "memories", "").items():
        memory = read_memory(str(mem_name), raw, fields, join("memories", mem_name))
        if memory is not None:
            memories.append(memory)
    memories_read = len(problems.lines) == before  # (else the cross-checks would repeat what is wrong)
    # ZigZag's array: `operational_array`, `multipliers` before 3.x, `imc` in its first IMC files
    array_key = next((k for k in ("operational_array", "multipliers", "imc") if k in data), "operational_array")
    array_raw = fields.mapping(data, array_key, "")
    dim_names = fields.seq(array_raw, "dimensions", array_key)
    sizes = fields.seq(array_raw, "sizes", array_key)
    if len(dim_names) != len(sizes):
        problems.add(join(array_key, "sizes"), f"{len(sizes)} sizes for {len(dim_names)} dimensions")
    dims = tuple(
        ArrayDim(str(d), fields.check_integer(s, join(join(array_key, "sizes"), i), 0))
        for i, (d, s) in enumerate(zip(dim_names, sizes))
    )
    # ZigZag before 3.x (Stream's files of 2024) names the array `multipliers` and its MAC energy
    # `multiplier_energy`
    energy_key = "multiplier_energy" if "unit_energy" not in array_raw and "multiplier_energy" in array_raw \
        else "unit_energy"
    computes = bool(sizes) and all(isinstance(size, int) and size > 0 for size in sizes)
    imc_keys = ("is_imc", "imc_type", "adc_resolution", "bit_serial_precision")
    imc = computes and isinstance(array_raw, dict) and energy_key not in array_raw and (
        array_key == "imc" or any(array_raw.get(k) for k in imc_keys) or array_raw.get("type") in ("analog", "digital"))
    if imc:
        flag = next((k for k in imc_keys if k in array_raw), "type" if "type" in array_raw else "")
        imc_kind = array_raw.get("imc_type") or array_raw.get("type") or "in-memory"
        problems.add(join(array_key, flag), f"an in-memory-computing array ({imc_kind}): "
                     "ZigZag derives its energy per MAC from its IMC macro model (ADCs, DACs, adder trees at "
                     f"28 nm), which MONET does not have; give {array_key}.unit_energy (pJ per MAC) to use this file")
    unit_energy = fields.number(array_raw, energy_key, array_key, required=computes and not imc, default=0.0)
    systolic = tuple(str(d) for d in fields.seq(array_raw, "systolic_dimensions", array_key, required=False))
    dataflow = read_dataflow(data.get("dataflows"), fields, "dataflows", ZIGZAG_DIM_ALIASES)
    chosen = precision or "int8"
    known = {**PRECISION_BITS, **{n: e.bits for n, e in MX_ELEMENTS.items()}}
    if chosen not in known:
        problems.add("precision", f"unknown precision {chosen!r} (use one of {', '.join(known)})")
        chosen = "int8"
    core_kind = kind or _kind_from_operator_types(data.get("operator_types")) or _guess_kind(file, name, [d.size for d in dims])
    core = Core(
        id=core_id,
        name=name,
        kind=core_kind,
        clock_hz=DEFAULT_CLOCK_HZ,
        array=OperationalArray(dims, dataflow, systolic),
        precisions=(PrecisionCost(chosen, known[chosen], unit_energy),),
        memories=tuple(memories),
        op_kinds=_default_op_kinds(core_kind),
    )
    if dims and all(d.size > 0 for d in dims) and memories_read:
        check_core(core, problems, "", style="zigzag")
    return core


def _check_cacti(memories: dict, problems: Problems) -> None:
    """Memories whose access energies ZigZag takes from CACTI (``auto_cost_extraction: True``
    without ``r_cost``/``w_cost``): one line for all of them, not a silent 0 pJ per access."""
    cacti = [str(name) for name, raw in memories.items()
             if isinstance(raw, dict) and raw.get("auto_cost_extraction") is True
             and not ("r_cost" in raw and "w_cost" in raw)]
    if cacti:
        where = f"memories.{cacti[0]}" if len(cacti) == 1 else f"memories.{{{', '.join(cacti)}}}"
        problems.add(f"{where}.auto_cost_extraction", "ZigZag takes the access energies from CACTI, which MONET "
                     "does not have; give r_cost and w_cost (pJ per access)")


def read_offchip(data: Any, file: str, problems: Problems) -> Dram | None:
    """The DRAM of a Stream ``offchip_core`` file: its (only or ``dram``) memory."""
    fields = Fields(problems)
    if not isinstance(data, dict):
        if data is not None:
            problems.add("<top>", f"expected a mapping at the top level, got {type(data).__name__}")
        elif _blank(file):  # (else it did not parse, and that was said)
            problems.add("<top>", "empty file: an off-chip core file describes the DRAM as its memory")
        return None
    memories = fields.mapping(data, "memories", "")
    if not memories:
        if "memories" in data:
            problems.add("memories", "an off-chip core needs a memory to serve as DRAM")
        return None
    name = "dram" if "dram" in memories else next(iter(memories))
    _check_cacti({name: memories[name]}, problems)
    memory = read_memory(name, memories[name], fields, join("memories", name))
    if memory is None:
        return None
    # Stream reaches the DRAM through its first read and its first write port
    kinds = {port.kind for port in memory.ports}
    where = join(join("memories", name), "ports")
    if not memory.ports:
        problems.add(where, "the DRAM has no ports: Stream reads and writes it through them")
        return None
    if not kinds & {"read", "read_write"} or not kinds & {"write", "read_write"}:
        missing = "read" if not kinds & {"read", "read_write"} else "write"
        problems.add(where, f"the DRAM has no {missing} port (nor a read_write one): Stream needs one of each "
                     "direction")
        return None
    bandwidth_bits = sum(p.bandwidth_bits for p in memory.ports)
    width = max(p.bandwidth_bits for p in memory.ports)
    access = min(p.min_bandwidth_bits for p in memory.ports)
    return Dram(
        name=name,
        capacity_bytes=memory.size_bits // 8,
        bandwidth_bytes_per_s=bandwidth_bits / 8.0 * DEFAULT_CLOCK_HZ,
        read_energy_pj_per_bit=memory.read_energy_pj / width,
        write_energy_pj_per_bit=memory.write_energy_pj / width,
        access_bits=access,
        ports=len(memory.ports),
    )


def _blank(path: str) -> bool:
    """Whether a YAML file holds nothing but blank lines and comments."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return all(not line.strip() or line.lstrip().startswith("#") for line in handle)
    except OSError:
        return False


def resolve_core_path(system_file: str, name: str) -> str | None:
    base = os.path.dirname(os.path.abspath(system_file))
    candidates = [
        os.path.join(base, name),
        os.path.join(base, "cores", name),
        os.path.join(base, os.path.basename(name)),
        os.path.join(base, "cores", os.path.basename(name)),
    ]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    return _search_stream_inputs(base, os.path.basename(name))


def _search_stream_inputs(folder: str, name: str) -> str | None:
    """Stream looks a bare core name it does not find beside the system up in every ``hardware``
    folder of its input tree (``stream/inputs``); do the same from the nearest ancestor folder
    called ``inputs``, when exactly one file matches."""
    parts = folder.split(os.sep)
    if "inputs" not in parts:
        return None
    root = os.sep.join(parts[: len(parts) - parts[::-1].index("inputs")])
    found = []
    for visited, (here, dirs, files) in enumerate(os.walk(root)):
        if visited >= 2000:  # not Stream's input tree: do not walk a whole disk
            return None
        dirs.sort()
        if "hardware" in here.split(os.sep) and name in files:
            found.append(os.path.join(here, name))
    return found[0] if len(found) == 1 else None


STREAM_CORE_NAMESPACES = ("zigzag", "aie2")
STREAM_CORE_KINDS = ("compute", "memory", "shim", "offchip")


def _stream_core_type(data: Any) -> tuple[str, str]:
    """(namespace, kind) of a core description: Stream's ``type: <namespace>.<kind>``
    (``zigzag.compute``, ``aie2.shim``...); files without it are ZigZag compute cores."""
    raw = data.get("type") if isinstance(data, dict) else None
    if not isinstance(raw, str) or not raw:
        return "zigzag", "compute"
    if "." not in raw:
        return "zigzag", raw
    namespace, _, kind = raw.partition(".")
    return namespace, kind


def unsupported_core(data: Any) -> str:
    """Why a Stream core entry cannot be one of our cores ('' when it can)."""
    if not isinstance(data, dict):
        return ""
    namespace, kind = _stream_core_type(data)
    if namespace != "zigzag":
        return (f"an {namespace} tile ({data.get('type')!r}) gives only a memory and a FIFO depth, no "
                "operational array and no energies (Stream costs it with its own kernels): MONET cannot cost it")
    return ""


def _connection(entry: Any, where: str, default_bandwidth: float | None, default_energy: float,
                problems: Problems) -> tuple[str, list[int], float, float] | None:
    """One ``core_connectivity`` entry as (kind, core ids, bits/cycle, energy per cycle of activity).
    Older Stream writes ``"a, b"`` (a link pair) or ``"a, b, c"`` (a bus) with the system's one
    ``bandwidth``; newer Stream writes ``{type: link|bus, cores: [...], bandwidth, unit_energy_cost}``."""
    fields = Fields(problems)
    if isinstance(entry, dict):
        kind = fields.text(entry, "type", where, required=False, default="link")
        if kind not in ("link", "bus"):
            problems.add(join(where, "type"), f"unknown connection type {kind!r} (use link or bus)")
            return None
        raw_ids = fields.seq(entry, "cores", where)
        ids = []
        for index, raw in enumerate(raw_ids):
            value = fields.check_integer(raw, join(join(where, "cores"), index), -1)
            if value < 0:
                return None
            ids.append(value)
        bandwidth = fields.number(entry, "bandwidth", where, positive=True, default=1.0)
        energy = fields.number(entry, "unit_energy_cost", where, required=False, default=default_energy)
        if kind == "link" and len(ids) != 2:
            problems.add(join(where, "cores"), f"a link joins exactly two cores, got {len(ids)} (use type: bus)")
            return None
        if len(ids) < 2:
            problems.add(join(where, "cores"), "a connection needs at least two cores")
            return None
        return kind, ids, bandwidth, energy
    if isinstance(entry, int) and not isinstance(entry, bool):
        entry = str(entry)
    if not isinstance(entry, str):
        problems.add(where, f"expected 'a, b', 'a, b, c' or a mapping {{type, cores, bandwidth}}, got {entry!r}")
        return None
    try:
        ids = [int(part) for part in entry.split(",")]
    except ValueError:
        problems.add(where, f"expected core ids separated by commas, got {entry!r}")
        return None
    if len(ids) < 2:
        problems.add(where, "a link needs at least two cores")
        return None
    if default_bandwidth is None:
        problems.add(where, "a 'a, b' entry takes the system's `bandwidth`, which is missing")
        return None
    return ("link" if len(ids) == 2 else "bus"), ids, default_bandwidth, default_energy


def _connectivity(
    entries: list, bandwidth: float | None, unit_energy: float, core_ids: dict[int, int], offchip: int | None,
    declared: list[int], problems: Problems,
) -> tuple[Interconnect, list[float], list[list[int]]]:
    """The links and buses between our cores (`core_ids` maps Stream's ids to ours; `declared`
    are all the ids of the file), and the bandwidths (bits/cycle) of the connections that reach
    the off-chip core `offchip`, and the Stream ids each connection joins."""
    links: list[Link] = []
    buses: list[Bus] = []
    to_offchip: list[float] = []
    joined: list[list[int]] = []  # the Stream ids of every connection
    for index, entry in enumerate(entries):
        where = join("core_connectivity", index)
        read = _connection(entry, where, bandwidth, unit_energy, problems)
        if read is None:
            continue
        kind, ids, bits, energy = read
        unknown = [i for i in ids if i not in declared]
        if unknown:
            problems.add(where, f"unknown core {unknown[0]} in link (cores are {sorted(declared)})")
            continue
        energy_per_bit = energy / bits
        joined.append(ids)
        if offchip is not None and offchip in ids:
            to_offchip.append(bits)
        ours = [core_ids[i] for i in ids if i in core_ids]
        if len(ours) < 2:
            continue
        if kind == "link":
            links.append(Link(ours[0], ours[1], bits, energy_per_bit))
            links.append(Link(ours[1], ours[0], bits, energy_per_bit))
        else:
            buses.append(Bus(tuple(ours), bits, energy_per_bit))
    return Interconnect(tuple(links), tuple(buses), "stream"), to_offchip, joined


def _attach_memory_cores(cores: list[Core], core_ids: dict[int, int], memory_cores: dict[int, tuple[Core, str]],
                         joined: list[list[int]], problems: Problems) -> list[Core]:
    """A memory-only core of a Stream system (``type: zigzag.memory``, or an empty array that is
    not the off-chip core: a scratchpad that several compute cores reach over a link or bus)
    becomes the outermost memory of every compute core a connection joins it to. MONET has no
    memory shared between cores, so each of the k cores gets 1/k of its capacity and of its
    ports' bandwidth (the energy per bit stays the file's). One joined only to other memories or
    to the off-chip core (a DMA tile on the way to DRAM), or to nothing, is left out: cores reach
    DRAM directly."""
    for memory_id, (memory_core, path) in memory_cores.items():
        sharers = sorted({core_ids[i] for ids in joined if memory_id in ids for i in ids if i in core_ids})
        where = f"cores[{memory_id}] ({os.path.basename(path)})"
        if not sharers:
            # a DMA tile between memories (AIE's shim DMAs), or a tile nothing is connected to:
            # no compute core keeps data in it
            continue
        if not memory_core.memories:
            problems.add(where, "a memory-only core without memories")
            continue
        k = len(sharers)
        for index in sharers:
            core = cores[index]
            dims = tuple(d.name for d in core.array.dims)
            levels = []
            for memory in memory_core.memories:
                ports = tuple(replace(port, bandwidth_bits=max(1, port.bandwidth_bits // k),
                                      min_bandwidth_bits=max(1, min(port.min_bandwidth_bits, port.bandwidth_bits // k)))
                              for port in memory.ports)
                width = {port.name: port.bandwidth_bits for port in memory.ports}
                scale = min(p.bandwidth_bits / width[p.name] for p in ports) if ports else 1.0
                levels.append(replace(memory, name=f"{memory.name}@{memory_id}", size_bits=memory.size_bits // k,
                                      served_dims=dims, ports=ports, read_energy_pj=memory.read_energy_pj * scale,
                                      write_energy_pj=memory.write_energy_pj * scale))
            cores[index] = replace(core, memories=(*core.memories, *levels))
    return cores


def read_stream_system(
    data: dict, file: str, problems: Problems, load_yaml, precision: str | None = None, listed: bool = False
) -> Target | None:
    """Build a Target from a parsed Stream system YAML; `load_yaml(path, problems)` parses files.

    The off-chip memory is either a separate ``offchip_core`` file (older Stream) or the entry of
    ``cores`` that ``offchip_core_id`` names (newer Stream); it becomes the target's DRAM, not a
    core, and the other cores are numbered 0..N-1 in the file's order. A ``cores`` entry may name
    a file or hold the core description inline. `listed` marks the translation of a 2024 list
    system (`stream_legacy`), whose off-chip core is optional."""
    fields = Fields(problems)
    name = fields.text(data, "name", "", default=os.path.splitext(os.path.basename(file))[0])
    raw_cores = fields.mapping(data, "cores", "")
    if not listed:
        _check_repeated_keys(file, problems)
    offchip_id = None
    if "offchip_core_id" in data:
        offchip_id = fields.check_integer(data["offchip_core_id"], "offchip_core_id", -1)
        if offchip_id >= 0 and offchip_id not in raw_cores and "offchip_core" not in data:
            problems.add("offchip_core_id", f"{offchip_id} is not a key of `cores`")
    cores: list[Core] = []
    core_files: list[str] = []
    core_ids: dict[int, int] = {}  # Stream's id -> ours, for the cores that compute
    declared: list[int] = []
    parsed_files: dict[str, Any] = {}
    unsupported: dict[tuple[str, str], list] = {}  # (core file, why) -> the cores entries that use it
    memory_cores: dict[int, tuple[Core, str]] = {}  # Stream's id -> (its memories, its file)
    dram = None
    for position, (key, entry) in enumerate(raw_cores.items()):
        where = join("cores", key)
        core_id = fields.check_integer(key, where, position)
        if core_id in declared:
            problems.add(where, f"core id {core_id} appears twice")
        declared.append(core_id)
        if isinstance(entry, dict):
            path, core_data = file, entry
        elif isinstance(entry, str):
            path = resolve_core_path(file, entry)
            if path is None:
                problems.add(where, f"core file {entry!r} not found next to the system file or in cores/")
                continue
            if path not in parsed_files:
                before = len(problems.lines)
                parsed_files[path] = load_yaml(path, problems)
                if parsed_files[path] is None and len(problems.lines) == before:
                    # an empty file parses to nothing: the core would silently be missing
                    problems.add(where, f"core file {entry!r} is empty: it describes no core")
            core_data = parsed_files[path]
        else:
            problems.add(where, f"expected a core file name or a core description, got {entry!r}")
            continue
        if core_id == offchip_id and _stream_core_type(core_data)[0] != "zigzag":
            unsupported.setdefault((path, unsupported_core(core_data)), []).append(key)
            continue
        if core_id == offchip_id:
            offchip_problems = Problems(path)
            dram = read_offchip(core_data, path, offchip_problems)
            problems.extend(offchip_problems)
            if dram is None and not offchip_problems:
                problems.add(where, "the offchip_core_id core has no memory to serve as DRAM")
            continue
        if core_data is None:
            continue  # a parse error, already reported
        reason = unsupported_core(core_data)
        if reason:
            unsupported.setdefault((path, reason), []).append(key)
            continue
        core_problems = Problems(path)
        core = read_zigzag_core(core_data, path, core_problems, len(cores), precision)
        if core_problems:
            # Report a shared core file once, not once per core that uses it.
            for line in core_problems.lines:
                if line not in problems.lines:
                    problems.lines.append(line)
        if core is not None:
            if core.array.units <= 0 or _stream_core_type(core_data)[1] != "compute":
                memory_cores[core_id] = (core, path)  # a memory the compute cores joined to it share
                continue
            core_ids[core_id] = len(cores)
            cores.append(core)
            core_files.append(path)
    foreign = {path for (path, reason) in unsupported if reason.startswith("an ") and " tile (" in reason}
    if foreign:
        # an AI Engine array: one line for the whole system, not one per tile kind
        keys = sorted(k for (p, _), ks in unsupported.items() if p in foreign for k in ks)
        namespaces = sorted({_stream_core_type(parsed_files.get(p, {}))[0] for p in foreign})
        names = ", ".join(sorted(os.path.basename(p) for p in foreign))
        problems.add(f"cores[{', '.join(str(k) for k in keys)}] ({names})",
                     f"{' and '.join(namespaces)} tiles give only a memory and a FIFO depth, no operational array "
                     "and no energies (Stream costs them with its own kernels): MONET cannot cost them")
    for (path, reason), keys in unsupported.items():
        if path in foreign:
            continue
        where = f"cores[{', '.join(str(k) for k in keys)}]"
        problems.add(where if path == file else f"{where} ({os.path.basename(path)})", reason)
    offchip = data.get("offchip_core")
    if offchip is not None:
        path = resolve_core_path(file, str(offchip))
        if path is None:
            problems.add("offchip_core", f"core file {offchip!r} not found next to the system file or in cores/")
        else:
            offchip_problems = Problems(path)
            dram = read_offchip(load_yaml(path, problems), path, offchip_problems)
            problems.extend(offchip_problems)
    if offchip_id is not None and offchip_id >= 0 and offchip_id not in declared:
        declared.append(offchip_id)  # the id an `offchip_core` file takes (Stream's files of 2025-01..07)
    # Stream's systems with an `offchip_core` file (2024-10 to 2025-07) give one `bandwidth` for
    # every link and require it; newer ones (`offchip_core_id`) give each connection its own
    connections = data.get("core_connectivity")
    new_style = offchip_id is not None or (isinstance(connections, list) and bool(connections)
                                           and all(isinstance(e, dict) for e in connections))
    bandwidth = fields.number(data, "bandwidth", "", required=False, default=None, positive=True)
    if new_style and not listed and offchip_id is None and "offchip_core" not in data:
        problems.add("offchip_core_id", "missing required field: the id of the core that is the DRAM (Stream "
                     "requires it in systems whose connections give {type, cores, bandwidth})")
    if "bandwidth" in data and bandwidth is None:
        bandwidth = 1.0  # refused above; the links need not say it again
    if "bandwidth" not in data and not new_style:
        problems.add("bandwidth", "missing required field: the bandwidth of every link, in bits per cycle "
                     "(Stream requires it in systems that name an offchip_core file)")
        bandwidth = 1.0  # (the file is refused; its links need not say so again)
    unit_energy = fields.number(data, "unit_energy_cost", "", required=False, default=0.0)
    interconnect, to_offchip, joined = _connectivity(
        _required_connectivity(data, fields), bandwidth, unit_energy, core_ids,
        offchip_id, declared, problems
    )
    cores = _attach_memory_cores(cores, core_ids, memory_cores, joined, problems)
    if dram is not None and to_offchip:
        # the off-chip core is reached only over its listed connections: one transfer at a time
        # through DRAM gets no more than their combined bandwidth
        reach = sum(to_offchip) / 8.0 * DEFAULT_CLOCK_HZ
        dram = replace(dram, bandwidth_bytes_per_s=min(dram.bandwidth_bytes_per_s, reach))
    groups = []
    for index, entry in enumerate(fields.seq(data, "core_memory_sharing", "", required=False)):
        where = join("core_memory_sharing", index)
        try:
            group = tuple(int(part) for part in str(entry).split(","))
        except ValueError:
            problems.add(where, f"expected core ids separated by commas, got {entry!r}")
            continue
        unknown = [i for i in group if i not in declared]
        if unknown:
            problems.add(where, f"unknown core {unknown[0]} in memory sharing group")
            continue
        not_computing = [i for i in group if i not in core_ids]
        if not_computing:
            if not problems:  # (else a core that failed to load)
                problems.add(where, f"core {not_computing[0]} in a memory sharing group has no compute units")
            continue
        groups.append((group, where))
    if not problems:  # (a core refused above would differ from its sharers for that reason alone)
        _check_sharing(groups, joined, cores, core_ids, problems)
    # (other keys are reported as they are read; Stream's reader of 2025-01 that took both an
    # offchip_core file and its id did not require 0..N-1, its files number cores from 2)
    if all(isinstance(key, int) and not isinstance(key, bool) for key in raw_cores) and not (
            "offchip_core" in data and "offchip_core_id" in data):
        _check_core_ids(list(raw_cores), problems)
    sharing = [tuple(core_ids[i] for i in group) for group, _ in groups]
    if not cores and not problems:
        problems.add("cores", "no core with compute units")
    cores = [_with_dram(core, dram) for core in cover_every_op(_distinct_names(cores, core_files))]
    return Target(name, tuple(cores), dram, interconnect, tuple(sharing), DEFAULT_CLOCK_HZ, file,
                  precision or "int8", "" if precision else ZIGZAG_DEFAULT_REASON)


def _check_repeated_keys(file: str, problems: Problems) -> None:
    """A key given twice in a system's top level or in its `cores` (YAML keeps the last, so a
    core or a setting would be lost without a word). Read from the YAML's node graph: the parsed
    mapping no longer shows it. (ZigZag's own core files repeat keys, `ports` in its tpu_like.yaml,
    and load in ZigZag: core files are not checked.)"""
    import yaml

    try:
        with open(file, encoding="utf-8") as handle:
            root = yaml.compose(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # reported where the file was parsed
    if not isinstance(root, yaml.MappingNode):
        return
    mappings = [("", root)]
    mappings += [("cores", value) for key, value in root.value
                 if isinstance(key, yaml.ScalarNode) and key.value == "cores" and isinstance(value, yaml.MappingNode)]
    for where, node in mappings:
        seen: set[str] = set()
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
                continue
            if key.value in seen:
                what = f"core id {key.value}" if where else f"`{key.value}`"
                problems.add(f"{where}[{key.value}]" if where else key.value,
                             f"{what} is given twice (line {key.start_mark.line + 1}); YAML keeps the last, so the "
                             "first would be lost")
            seen.add(key.value)


def _required_connectivity(data: dict, fields: Fields) -> list:
    """`core_connectivity`, which Stream requires (an empty list when the cores reach only DRAM)."""
    if "core_connectivity" not in data:
        fields.problems.add("core_connectivity", "missing required field: the links and buses between cores "
                            "(Stream requires it; write [] when cores exchange data only through DRAM)")
        return []
    return fields.seq(data, "core_connectivity", "", required=False)


def _check_core_ids(declared: list[int], problems: Problems) -> None:
    """Stream numbers the cores of a system 0..N-1 (the off-chip core included when it is an
    entry of `cores`): a gap is a typo or a core left out."""
    expected = set(range(len(declared)))
    missing = sorted(expected - set(declared))
    if missing:
        extra = sorted(set(declared) - expected)
        problems.add("cores", f"core ids must be 0..{len(declared) - 1} (Stream's rule): {missing[0]} is missing "
                     f"while {extra[0] if extra else '?'} is given")


def _check_sharing(sharing: list[tuple[tuple[int, ...], str]], joined: list[list[int]], cores: list[Core],
                   core_ids: dict[int, int], problems: Problems) -> None:
    """Stream's rules for `core_memory_sharing`: at least two cores per group, no two of them
    also joined by a link or bus (they exchange data through the shared memory), and one
    physical memory, so the same top-level memories in every core of the group."""
    for group, where in sharing:
        if len(group) < 2:
            problems.add(where, "a memory sharing group needs at least two cores")
            continue
        for a_index, a in enumerate(group):
            for b in group[a_index + 1:]:
                both = next((ids for ids in joined if a in ids and b in ids), None)
                if both is not None:
                    problems.add(where, f"cores {a} and {b} share their top memory and are also connected in "
                                 f"core_connectivity ({', '.join(str(i) for i in both)}); Stream forbids both")
                    return
        tops = [_top_memories(cores[core_ids[i]]) for i in group]
        for i, top in zip(group[1:], tops[1:], strict=True):
            if top != tops[0]:
                problems.add(where, f"cores {group[0]} and {i} share a top memory but describe different ones "
                             f"({_describe_tops(tops[0])} vs {_describe_tops(top)}): Stream requires identical "
                             "top-level memories")
                break


def _describe_tops(tops: list[tuple]) -> str:
    return "; ".join(f"{name} {size} bits, {read:g}/{write:g} pJ, {len(ports)} ports"
                     for name, size, read, write, ports, _ in tops)


def _top_memories(core: Core) -> list[tuple]:
    """What Stream compares of the top-level memories of cores that share them: name, size,
    energies, ports and latency of the outermost memory of every operand."""
    tops = []
    for operand in ("W", "I", "O"):
        levels = core.hierarchy(operand)
        if levels:
            m = levels[-1]
            key = (m.name, m.size_bits, m.read_energy_pj, m.write_energy_pj, m.ports, m.latency_cycles)
            if key not in tops:
                tops.append(key)
    return sorted(tops)


def _distinct_names(cores: list[Core], files: list[str]) -> list[Core]:
    """Distinct names for the cores of a system, so that reports, traces and plots tell them
    apart: two different core files that carry the same `name` (Stream's `simd.yaml` says
    `pooling`) are told apart by their file names; the cores loaded from one file are numbered
    (`tpu_like#0`, `tpu_like#1`, ...)."""
    from collections import Counter

    files_of: dict[str, set[str]] = {}
    for core, path in zip(cores, files, strict=True):
        files_of.setdefault(core.name, set()).add(path)
    names = [core.name if len(files_of[core.name]) == 1 else os.path.splitext(os.path.basename(path))[0]
             for core, path in zip(cores, files, strict=True)]
    counts = Counter(names)
    seen: Counter[str] = Counter()
    named = []
    for core, name in zip(cores, names, strict=True):
        if counts[name] > 1:
            seen[name] += 1
            name = f"{name}#{seen[name] - 1}"
        named.append(core if name == core.name else replace(core, name=name))
    return named


def cover_every_op(cores: list[Core]) -> list[Core]:
    """Give every op a core: ZigZag and Stream files say what a core is (a MAC array, a SIMD or
    a pooling unit), not which ops it may run, and a ZigZag user's target is often one MAC
    array. When no core takes vector ops, the MAC arrays run them (one lane per PE, through
    their own memories); when no core takes loop nests (a lone SIMD core), every core runs them
    on its array."""
    def takes(core: Core, kind: str) -> bool:
        return kind in core.op_kinds

    if not any(takes(c, "vector") for c in cores):
        cores = [replace(c, op_kinds=(*c.op_kinds, "vector")) if c.kind == "mac_array" or len(cores) == 1 else c
                 for c in cores]
    if not any(takes(c, "loop_nest") for c in cores):
        cores = [replace(c, op_kinds=("loop_nest", *c.op_kinds)) for c in cores]
    return cores


def _with_dram(core: Core, dram: Dram | None) -> Core:
    return replace(core, dram=dram)
