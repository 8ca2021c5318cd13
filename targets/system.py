"""Multi-chip systems: N copies of one chip target joined by a network.

A system file is YAML with a top-level `chip` (a built-in target name, or a target file of any
format `get_target` reads — ours, a Stream system, a ZigZag core — relative to the system file):

```yaml
name: 4x8_datacenter
chip: datacenter
chips: 32
network:
  topology: hierarchical        # ring | switch | torus2d | hierarchical
  bandwidth_GBps: 300           # per link and direction (1e9 bytes/s)
  latency_us: 1.0               # chip-to-chip latency of one message (alpha)
  energy_pj_per_bit: 1.3
  torus: [4, 8]                 # torus2d: rows, cols (default: the squarest grid)
  node_chips: 8                 # hierarchical: chips per node, joined by a switch inside the node
  inter_node:                   # hierarchical: each node's link to the spine switch
    bandwidth_GBps: 50
    latency_us: 5.0
    energy_pj_per_bit: 10.0
```

The network is a graph of directed links between endpoints `chip<i>`, switches `switch`,
`node<k>` and `spine`. A message follows one route (`System.route(a, b)`): on a ring the
shorter way round; on a switch up to the switch and down; on a 2-D torus along the row then the
column, the shorter way round each; in a hierarchical system inside its node through the node's
switch, else up to the spine and down into the other node. A message's latency is the sum of its
links' latencies; on switches each hop carries half of the chip-to-chip `latency_us`, so one
message between two chips costs `latency_us` (`intra + inter` between nodes).

`targets/builtin/systems/*.yaml` are the built-in systems (`list_builtin_systems`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .errors import Problems, TargetError
from .fields import Fields
from .model import Target
from .topology import square_shape

SYSTEM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin", "systems")
NETWORK_TOPOLOGIES = ("ring", "switch", "torus2d", "hierarchical")


@dataclass(frozen=True)
class NetLink:
    """One directed network link: `bandwidth_bytes_per_s`, `latency_s` of a message crossing it,
    `energy_pj_per_bit` moved."""

    src: str
    dst: str
    bandwidth_bytes_per_s: float
    latency_s: float
    energy_pj_per_bit: float

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


@dataclass(frozen=True)
class Network:
    topology: str
    chips: int
    links: tuple[NetLink, ...]
    node_chips: int = 0  # hierarchical: chips per node
    torus: tuple[int, int] = (0, 0)
    _index: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def link(self, src: str, dst: str) -> int:
        if not self._index:
            self._index.update({(l.src, l.dst): i for i, l in enumerate(self.links)})
        return self._index[(src, dst)]

    def route(self, a: int, b: int) -> tuple[int, ...]:
        """Indices of the links a message from chip `a` to chip `b` crosses, in order."""
        if a == b:
            return ()
        n = self.chips
        chip = lambda i: f"chip{i}"  # noqa: E731
        if self.topology == "ring":
            forward = (b - a) % n
            step = 1 if forward <= n - forward else -1
            hops, i = [], a
            while i != b:
                j = (i + step) % n
                hops.append(self.link(chip(i), chip(j)))
                i = j
            return tuple(hops)
        if self.topology == "switch":
            return (self.link(chip(a), "switch"), self.link("switch", chip(b)))
        if self.topology == "torus2d":
            rows, cols = self.torus
            hops = []
            r, c = divmod(a, cols)
            rb, cb = divmod(b, cols)
            for axis, size in ((1, cols), (0, rows)):
                here, there = (c, cb) if axis == 1 else (r, rb)
                forward = (there - here) % size
                step = 1 if forward <= size - forward else -1
                while here != there:
                    nxt = (here + step) % size
                    src = r * cols + here if axis == 1 else here * cols + c
                    dst = r * cols + nxt if axis == 1 else nxt * cols + c
                    hops.append(self.link(chip(src), chip(dst)))
                    here = nxt
                if axis == 1:
                    c = cb
                else:
                    r = rb
            return tuple(hops)
        # hierarchical
        k = self.node_chips
        na, nb = a // k, b // k
        if na == nb:
            return (self.link(chip(a), f"node{na}"), self.link(f"node{na}", chip(b)))
        return (self.link(chip(a), f"node{na}"), self.link(f"node{na}", "spine"),
                self.link("spine", f"node{nb}"), self.link(f"node{nb}", chip(b)))

    def ring_order(self, group) -> list[int]:
        """The chips of `group` in the order a ring collective visits them: by id, except on a
        2-D torus, where rows alternate direction (a snake), so that neighbours are linked."""
        group = list(group)
        if self.topology != "torus2d":
            return sorted(group)
        cols = self.torus[1]

        def snake(chip: int) -> tuple[int, int]:
            r, c = divmod(chip, cols)
            return r, c if r % 2 == 0 else cols - 1 - c

        return sorted(group, key=snake)

    def latency_s(self, a: int, b: int) -> float:
        return sum(self.links[i].latency_s for i in self.route(a, b))

    def bandwidth_bytes_per_s(self, a: int, b: int) -> float:
        return min((self.links[i].bandwidth_bytes_per_s for i in self.route(a, b)), default=float("inf"))


@dataclass(frozen=True)
class System:
    """`chips` copies of the target `chip`, joined by `network`."""

    name: str
    chip: Target
    chips: int
    network: Network
    source: str = ""

    def route(self, a: int, b: int) -> tuple[int, ...]:
        return self.network.route(a, b)


def _pair(a: str, b: str, bw: float, lat: float, energy: float) -> list[NetLink]:
    return [NetLink(a, b, bw, lat, energy), NetLink(b, a, bw, lat, energy)]


def build_network(topology: str, chips: int, bw: float, lat: float, energy: float,
                  torus: tuple[int, int] = (0, 0), node_chips: int = 0,
                  inter: tuple[float, float, float] | None = None) -> Network:
    """The links of a topology over `chips` chips (bandwidth in bytes/s, latency in s)."""
    links: list[NetLink] = []
    chip = lambda i: f"chip{i}"  # noqa: E731
    if topology == "ring":
        if chips == 2:
            links += _pair(chip(0), chip(1), bw, lat, energy)
        elif chips > 2:
            for i in range(chips):
                links += _pair(chip(i), chip((i + 1) % chips), bw, lat, energy)
    elif topology == "switch":
        for i in range(chips):
            links += _pair(chip(i), "switch", bw, lat / 2, energy / 2)
    elif topology == "torus2d":
        rows, cols = torus if torus != (0, 0) else square_shape(chips)
        torus = (rows, cols)
        seen = set()
        for r in range(rows):
            for c in range(cols):
                here = r * cols + c
                for there in (r * cols + (c + 1) % cols, ((r + 1) % rows) * cols + c):
                    key = (min(here, there), max(here, there))
                    if here != there and key not in seen:
                        seen.add(key)
                        links += _pair(chip(here), chip(there), bw, lat, energy)
    elif topology == "hierarchical":
        inter_bw, inter_lat, inter_energy = inter if inter is not None else (bw, lat, energy)
        for node in range(chips // node_chips):
            for i in range(node * node_chips, (node + 1) * node_chips):
                links += _pair(chip(i), f"node{node}", bw, lat / 2, energy / 2)
            links += _pair(f"node{node}", "spine", inter_bw, inter_lat / 2, inter_energy / 2)
    return Network(topology, chips, tuple(links), node_chips, torus)


def list_builtin_systems() -> list[str]:
    if not os.path.isdir(SYSTEM_DIR):
        return []
    return sorted(name[: -len(".yaml")] for name in os.listdir(SYSTEM_DIR) if name.endswith(".yaml"))


def is_system_file(path: str) -> bool:
    """Whether a YAML file describes a system (a top-level `chip` field), read cheaply."""
    try:
        with open(path, encoding="utf-8") as handle:
            return any(line.startswith("chip:") for line in handle)
    except (OSError, UnicodeDecodeError):
        return False


def get_system(name_or_path: str, precision: str | None = None) -> System:
    """A built-in system by name or a system file by path."""
    builtin = os.path.join(SYSTEM_DIR, f"{name_or_path}.yaml")
    if isinstance(name_or_path, str) and os.sep not in name_or_path and os.path.isfile(builtin):
        return load_system_file(builtin, precision)
    if isinstance(name_or_path, str) and os.path.isfile(name_or_path):
        return load_system_file(name_or_path, precision)
    from monet_ir.errors import did_you_mean

    from .loader import builtin_target_path, list_builtin_targets

    if isinstance(name_or_path, str) and builtin_target_path(name_or_path) is not None:
        raise TargetError(f"{name_or_path}: <name>: a built-in chip target, not a multi-chip system: give it as "
                          f"--target {name_or_path}, or a system of such chips (built-in systems: "
                          f"{', '.join(list_builtin_systems())})")
    known = ", ".join(list_builtin_systems())
    hint = did_you_mean(name_or_path, list_builtin_systems() + list_builtin_targets())
    raise TargetError(f"{name_or_path}: <name>: no such file and no built-in system of that name{hint} "
                      f"(built-in: {known})")


NETWORK_KEYS = ("topology", "bandwidth_GBps", "latency_us", "energy_pj_per_bit", "torus", "node_chips", "inter_node")


def load_system_file(path: str, precision: str | None = None) -> System:
    from .loader import get_target, parse_yaml

    problems = Problems(path)
    data = parse_yaml(path, problems)
    problems.raise_if_any()
    if not isinstance(data, dict):
        problems.add("<top>", f"expected a mapping at the top level, got {type(data).__name__}")
        problems.raise_if_any()
    f = Fields(problems)
    f.known_keys(data, ("name", "chip", "chips", "network", "templates"), "")
    name = f.text(data, "name", "", required=False, default=os.path.splitext(os.path.basename(path))[0])
    chip_ref = f.text(data, "chip", "")
    chips = f.integer(data, "chips", "", default=1, positive=True)
    net = f.mapping(data, "network", "")
    f.known_keys(net, NETWORK_KEYS, "network")
    topology = f.text(net, "topology", "network", default="switch")
    if topology and topology not in NETWORK_TOPOLOGIES:
        problems.add("network.topology", f"unknown topology '{topology}' (use one of {', '.join(NETWORK_TOPOLOGIES)})")
    bw = f.number(net, "bandwidth_GBps", "network", positive=True, default=1.0) * 1e9
    lat = f.number(net, "latency_us", "network", required=False, default=1.0) * 1e-6
    energy = f.number(net, "energy_pj_per_bit", "network", required=False, default=0.0)
    torus = (0, 0)
    if "torus" in net:
        shape = f.seq(net, "torus", "network")
        if len(shape) != 2 or not all(isinstance(v, int) and v > 0 for v in shape):
            problems.add("network.torus", f"expected [rows, cols] of positive integers, got {shape!r}")
        elif shape[0] * shape[1] != chips:
            problems.add("network.torus", f"{shape[0]} x {shape[1]} is not {chips} chips")
        else:
            torus = (shape[0], shape[1])
    node_chips = 0
    inter = None
    if topology == "hierarchical":
        node_chips = f.integer(net, "node_chips", "network", positive=True, default=1)
        if node_chips and chips % node_chips:
            problems.add("network.node_chips", f"{chips} chips do not divide into nodes of {node_chips}")
        inner = f.mapping(net, "inter_node", "network")
        f.known_keys(inner, ("bandwidth_GBps", "latency_us", "energy_pj_per_bit"), "network.inter_node")
        inter = (f.number(inner, "bandwidth_GBps", "network.inter_node", positive=True, default=1.0) * 1e9,
                 f.number(inner, "latency_us", "network.inter_node", required=False, default=1.0) * 1e-6,
                 f.number(inner, "energy_pj_per_bit", "network.inter_node", required=False, default=0.0))
    problems.raise_if_any()
    ref = chip_ref
    if not os.path.isabs(ref) and (os.sep in ref or ref.endswith((".yaml", ".yml"))):
        ref = os.path.join(os.path.dirname(os.path.abspath(path)), ref)
    try:
        chip = get_target(ref, precision)
    except TargetError as error:
        problems.add("chip", str(error).splitlines()[0])
        problems.raise_if_any()
        raise
    network = build_network(topology, chips, bw, lat, energy, torus, node_chips, inter)
    return System(name, chip, chips, network, path)
