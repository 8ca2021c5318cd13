"""Core allocation files, in the spirit of Stream's mapping YAML.

```yaml
- name: default            # every op not matched below
  core_allocation: [0, 1, 2, 3]
- name: Conv               # an ONNX op type: the forward op and its gradients (ConvGrad...)
  core_allocation: [0, 1]
- name: Relu
  core_allocation: [5]
- name: /layer1/layer1.0/conv1/Conv   # an ONNX node name: that layer's ops in every phase
  core_allocation: [2]
- name: nn.softmax         # one of our op names
  core_allocation: [5]
- name: optimizer          # a phase: forward | backward | optimizer | recompute
  core_allocation: [5]
```

An op takes the first entry matching, in this order: its node name, its op name, its ONNX op
types (its class's `OnnxNames` trait), its phase, `default`. Without a match every core able to run it is allowed. Other Stream
keys (`intra_core_tiling`, ...) are accepted and ignored: layer fusion sets tiling. A core-allocation
entry that matches no op of the step (a misspelled node name) is an error naming the entry and
the closest name (`Allocation.check_names`), never silently ignored.

The same lookup reads **ZigZag's mapping files** (told apart by their keys: entries with
`spatial_mapping`, `memory_operand_links` or `temporal_ordering` and no `core_allocation`), and
the ZigZag keys of a Stream entry:

```yaml
- name: default
  spatial_mapping: {D1: [K, 32], D2: [C, 32]}     # "K, 32" strings too; D and H are B and G
  memory_operand_links: {O: O, W: I2, I: I1}       # W: I1, I: I2 swaps the two inputs' memories
- name: /conv1/Conv
  temporal_ordering: [[OX, 112], [OY, '*'], [K, 2]]   # innermost first; '*' is what is left
```

ZigZag looks a layer up by its name, then its operator type, then `default`; the first match
of the order above is the same thing here. A loop nest matched by an entry with ZigZag keys is
priced with that entry (`NestMapping`, carried by its signature): the spatial mapping replaces
the core's dataflow and is cut to the array and the layer as ZigZag cuts it; gradient nests get
it literally unless `--grad-dataflow translate`. A field MONET cannot honour is a one-line error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from monet_ir.cost.signature import LoopNestSig, NestMapping
from monet_ir.errors import MonetError
from monet_ir.schedule.taskgraph import Task


@functools.lru_cache(maxsize=1024)
def onnx_names(op_name: str) -> tuple[str, ...]:
    """The ONNX (and ONNX Runtime gradient) op types an op answers to in a mapping: its class's
    `OnnxNames` trait (`dialects.interfaces`), by the op's name."""
    from dialects import op_class
    from dialects.interfaces import onnx_names as names_of

    cls = op_class(op_name)
    return names_of(cls) if cls is not None else ()


PHASES = ("forward", "backward", "optimizer", "recompute")


@functools.lru_cache(maxsize=1)
def _vocabulary() -> frozenset[str]:
    """Every op name of MONET's dialects and every ONNX op type they answer to."""
    from dialects import get_all_dialects
    from dialects.interfaces import onnx_names as names_of

    words: set[str] = set()
    for factory in get_all_dialects().values():
        for op in factory().operations:
            words.add(op.name)
            words.update(names_of(op))
    return frozenset(words)


class MappingError(MonetError):
    """A malformed allocation file; str() is one line naming the file and entry."""


ZIGZAG_KEYS = ("spatial_mapping", "memory_operand_links", "temporal_ordering")
# Stream's keys MONET reads elsewhere (core_allocation) or leaves to layer fusion (tiling)
STREAM_KEYS = ("name", "core_allocation", "intra_core_tiling", "inter_core_tiling", "layer_dimension_names")
NEST_DIMS = ("B", "G", "K", "C", "OY", "OX", "FY", "FX", "OZ", "FZ")
ZIGZAG_DIM_ALIASES = {"D": "B", "H": "G"}  # ZigZag's matmul rows and heads


@dataclass(frozen=True)
class Allocation:
    """Per entry name: the cores an op may run on (`entries`; absent: any) and the mapping of a
    loop nest (`nests`, from ZigZag keys)."""

    entries: dict[str, tuple[int, ...]]
    source: str = ""
    nests: dict[str, NestMapping] = field(default_factory=dict)

    def __call__(self, task: Task) -> tuple[int, ...] | None:
        for key in (task.node, task.op, *onnx_names(task.op), task.phase, "default"):
            if key in self.entries:
                return self.entries[key]
        return None

    def nest_entry(self, node: str, op: str, phase: str) -> str | None:
        """The name of the entry that maps a loop nest of this node, op and phase (None: none)."""
        for key in (node, op, *onnx_names(op), phase, "default"):
            if key in self.nests:
                return key
        return None

    def apply_nest_mappings(self, graph) -> None:
        """Give every loop-nest task of `graph` the mapping of its entry (in its signature, so
        the cost model sees it)."""
        if not self.nests:
            return
        tasks = graph.tasks
        sigs = tasks.sig
        mapped: dict[tuple[LoopNestSig, str], LoopNestSig] = {}
        for index, (node, op, phase, sig) in enumerate(zip(tasks.node, tasks.op, tasks.phase, sigs)):
            if not isinstance(sig, LoopNestSig):
                continue
            key = self.nest_entry(node, op, phase)
            if key is None:
                continue
            new = mapped.get((sig, key))
            if new is None:
                new = mapped[(sig, key)] = replace(sig, mapping=self.nests[key])
            sigs[index] = new

    def nest_notes(self, graph) -> list[str]:
        """What a report says of entries with ZigZag keys that map no loop nest of `graph`."""
        if not self.nests:
            return []
        used: set[str] = set()
        matched_other: set[str] = set()
        tasks = graph.tasks
        for node, op, phase, sig in zip(tasks.node, tasks.op, tasks.phase, tasks.sig):
            key = self.nest_entry(node, op, phase)
            if key is not None:
                (used if isinstance(sig, LoopNestSig) else matched_other).add(key)
        notes = []
        vector_only = sorted(matched_other - used)
        if vector_only:
            notes.append(f"{self.source}: entries {', '.join(vector_only)} match only ops MONET prices with its "
                         "vector model (not as loop nests): their spatial mappings are not used")
        unused = sorted(set(self.nests) - used - matched_other)
        if unused:
            notes.append(f"{self.source}: entries {', '.join(unused)} match no op of this model")
        return notes

    def check_names(self, tasks) -> None:
        """Every entry names a node, an op, an ONNX op type or a phase of the step whose task
        table (`TaskTable`: columns `node`, `op`, `phase`) is `tasks`, or is `default`, or is an
        op type or phase this step lacks (a mapping file shared by several models)."""
        import difflib

        nodes = {n for n in tasks.node if n}
        known = nodes | set(tasks.op) | set(tasks.phase) | {"default"}
        known |= {name for op in set(tasks.op) for name in onnx_names(op)}
        # a file written for several models may name op types and phases this step lacks
        generic = set(PHASES) | _vocabulary()
        for name in self.entries:
            if name not in known and name not in generic:
                close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise MappingError(f"{self.source}: entry '{name}': names no node, op, ONNX op type or phase of the "
                                   f"step{hint}")

    def check_cores(self, core_count: int) -> None:
        for name, cores in self.entries.items():
            bad = [c for c in cores if not 0 <= c < core_count]
            if bad:
                raise MappingError(f"{self.source}: entry '{name}': core_allocation {list(cores)} names core(s) "
                                   f"{bad}; the target has cores 0..{core_count - 1}")


def load_allocation(path: str) -> Allocation:
    """A Stream core allocation file or a ZigZag mapping file (told apart by its keys)."""
    import yaml

    from monet_ir.untrusted import UntrustedFileError, read_yaml_file

    try:
        data = read_yaml_file(path)
    except UntrustedFileError as e:
        raise MappingError(str(e)) from None
    except UnicodeDecodeError as e:
        raise MappingError(f"{path}: not UTF-8 text ({e.reason})") from None
    except OSError as e:
        raise MappingError(f"{path}: cannot read file: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise MappingError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if isinstance(data, dict) and "mapping" in data:
        data = data["mapping"]
    if not isinstance(data, list):
        raise MappingError(f"{path}: expected a list of entries with 'name' and 'core_allocation' (Stream) or "
                           "'spatial_mapping' (ZigZag)")
    zigzag_file = all(isinstance(e, dict) and "core_allocation" not in e for e in data) and any(
        isinstance(e, dict) and any(k in e for k in ZIGZAG_KEYS) for e in data)
    entries: dict[str, tuple[int, ...]] = {}
    nests: dict[str, NestMapping] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "name" not in entry:
            raise MappingError(f"{path}: entry [{i}]: needs 'name'")
        name = str(entry["name"])
        where = f"{path}: entry [{i}] '{name}'"
        if zigzag_file:
            unknown = [k for k in entry if k not in ZIGZAG_KEYS and k not in STREAM_KEYS]
            if unknown:
                raise MappingError(f"{where}: {unknown[0]}: not a mapping key MONET can honour (it reads "
                                   f"{', '.join(ZIGZAG_KEYS)})")
        elif "core_allocation" not in entry:
            raise MappingError(f"{path}: entry [{i}]: needs 'name' and 'core_allocation'")
        if "core_allocation" in entry:
            cores = entry["core_allocation"]
            if isinstance(cores, int):
                cores = [cores]
            if not isinstance(cores, list) or not cores or not all(isinstance(c, int) and not isinstance(c, bool) for c in cores):
                raise MappingError(f"{where}: core_allocation must be a non-empty list of core ids")
            entries[name] = tuple(cores)
        if any(entry.get(k) is not None for k in ZIGZAG_KEYS):
            nests[name] = _nest_mapping(entry, where)
    return Allocation(entries, path, nests)


def _nest_mapping(entry: dict, where: str) -> NestMapping:
    """The ZigZag keys of one entry as a NestMapping; what MONET cannot honour is a MappingError."""
    spatial = []
    raw = entry.get("spatial_mapping") or {}
    if not isinstance(raw, dict):
        raise MappingError(f"{where}: spatial_mapping must map array dimensions to lists of 'DIM, factor'")
    for array_dim, unrolls in raw.items():
        if isinstance(unrolls, str):
            unrolls = [unrolls]
        if not isinstance(unrolls, list):
            raise MappingError(f"{where}: spatial_mapping.{array_dim}: expected a list of 'DIM, factor'")
        if len(unrolls) == 2 and isinstance(unrolls[0], str) and "," not in unrolls[0] and not isinstance(unrolls[1], list):
            unrolls = [unrolls]  # one [DIM, factor] pair
        for unroll in unrolls:
            dim, factor = _dim_and_size(unroll, f"{where}: spatial_mapping.{array_dim}", star=False)
            spatial.append((str(array_dim), dim, factor))
    links = entry.get("memory_operand_links")
    swap = False
    if links is not None:
        if not isinstance(links, dict) or set(links) != {"O", "W", "I"}:
            raise MappingError(f"{where}: memory_operand_links must give O, W and I")
        if links["O"] != "O" or {links["W"], links["I"]} != {"I1", "I2"}:
            raise MappingError(f"{where}: memory_operand_links {dict(links)}: MONET can honour O: O with W and I in "
                               "I1 and I2 (either way round)")
        swap = links["W"] == "I1"
    temporal = []
    ordering = entry.get("temporal_ordering") or []
    if not isinstance(ordering, list):
        raise MappingError(f"{where}: temporal_ordering must be a list of [DIM, size] (innermost first)")
    for loop in ordering:
        temporal.append(_dim_and_size(loop, f"{where}: temporal_ordering", star=True))
    return NestMapping(tuple(spatial), swap, tuple(temporal), entry=where.replace(": entry ", " entry "))


def _dim_and_size(item, where: str, star: bool) -> tuple[str, int]:
    parts = [p.strip() for p in item.split(",")] if isinstance(item, str) else item
    if not isinstance(parts, list) or len(parts) != 2:
        raise MappingError(f"{where}: expected 'DIM, size', got {item!r}")
    dim = ZIGZAG_DIM_ALIASES.get(str(parts[0]).strip(), str(parts[0]).strip())
    if dim not in NEST_DIMS:
        raise MappingError(f"{where}: loop dimension {parts[0]!r} is not one MONET's loop nests have "
                           f"({', '.join(NEST_DIMS)}, D, H)")
    size = parts[1]
    if star and size == "*":
        return dim, 0
    if isinstance(size, str) and size.strip().isdigit():
        size = int(size)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise MappingError(f"{where}: size of {parts[0]} must be a positive integer{' or *' if star else ''}, got {size!r}")
    return dim, size
