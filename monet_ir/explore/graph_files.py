"""Reading and writing the graph files of Checkmate and POET, for the stage-expanded MILP
(`monet_ir.explore.staged`): the same problem can go to their solvers and to ours.

Three JSON forms are read (`load_graph`), each a training graph in a topological order:

- **Checkmate `DFGraph`**, its attributes as JSON: `{"v": [0, 1, ...], "args": {"2": [0, 1], ...},
  "backward_nodes": [...], "cost_cpu": {"0": 3, ...}, "cost_ram": {"0": 4096, ...},
  "node_names": {...}, "cost_ram_parameters": N}` (JSON turns the integer keys into strings;
  `json.dump({k: getattr(g, k) for k in ("v", "args", "backward_nodes", "cost_cpu", "cost_ram",
  "node_names", "cost_ram_parameters")}, f)` on a `DFGraph` writes it, sets as lists). The node
  numbers are the stages. POET's per-node energies may be added as `compute_cost_joules`,
  `pagein_cost_joules`, `pageout_cost_joules` (same keys as `cost_cpu`).
- **networkx node-link** (`networkx.node_link_data(G)`, `links` or `edges`): nodes carry
  `cost_cpu` (or `cpu_cost`), `cost_ram` (or `ram_cost`), optionally `backward` and the three
  energies; edges go from an argument to its reader. Integer node ids are the stage order;
  otherwise the order of `nodes`.
- **POET layer list**: `{"layers": [{"name": ..., "depends_on": [names], "backward": bool,
  "runtime_ms": ..., "memory_bytes": ..., "param_memory_bytes": ..., "compute_cost_joules": ...,
  "pagein_cost_joules": ..., "pageout_cost_joules": ...}, ...]}`: each layer with the per-layer
  costs POET's `get_net_costs` gives it on a platform, in the order of POET's `DFGraph` (stage order).

Anything malformed is a `StagedError` naming the file, the entry and what is wrong.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from monet_ir.explore.staged import StagedError, StagedGraph

ENERGY_KEYS = ("compute_cost_joules", "pagein_cost_joules", "pageout_cost_joules")


def load_graph(path: str | Path) -> StagedGraph:
    """Read a Checkmate, networkx node-link or POET layer-list JSON file (see the module docstring)."""
    from monet_ir.untrusted import UntrustedFileError, load_json_file

    path = Path(path)
    try:
        data = load_json_file(path)
    except OSError as e:
        raise StagedError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StagedError(f"{path}: not JSON: {e}") from None
    except UntrustedFileError as e:
        raise StagedError(str(e)) from None
    return graph_from_json(data, str(path))


def graph_from_json(data: Any, source: str) -> StagedGraph:
    if not isinstance(data, dict):
        raise StagedError(f"{source}: expected a JSON object (Checkmate DFGraph, networkx node-link or POET layers)")
    if "layers" in data:
        return _poet_layers(data, source)
    if "v" in data and "args" in data:
        return _checkmate(data, source)
    if "nodes" in data and ("links" in data or "edges" in data):
        return _node_link(data, source)
    raise StagedError(f"{source}: not a graph file: a Checkmate DFGraph has 'v' and 'args', networkx node-link data "
                      f"'nodes' and 'links' (or 'edges'), a POET layer list 'layers'")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise StagedError(f"{where}: {value!r} is not a finite number >= 0")
    return float(value)


def _checkmate(data: dict, source: str) -> StagedGraph:
    v = data["v"]
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise StagedError(f"{source}: 'v' must be a list of integer node numbers")
    nodes = sorted(v)
    if nodes != list(range(len(nodes))):
        raise StagedError(f"{source}: 'v' must number the nodes 0..{len(nodes) - 1} (the stage order), got {nodes[:8]}...")

    def table(key: str, required: bool) -> dict[int, Any] | None:
        raw = data.get(key)
        if raw is None:
            if required:
                raise StagedError(f"{source}: missing '{key}'")
            return None
        if not isinstance(raw, dict):
            raise StagedError(f"{source}: '{key}' must map node numbers to values")
        out = {}
        for k, value in raw.items():
            try:
                node = int(k)
            except (TypeError, ValueError):
                raise StagedError(f"{source}: '{key}': key {k!r} is not a node number") from None
            if node not in range(len(nodes)):
                raise StagedError(f"{source}: '{key}': node {node} is not in 'v'")
            out[node] = value
        return out

    args_raw = table("args", True)
    args: list[tuple[int, ...]] = []
    for node in nodes:
        preds = args_raw.get(node, [])
        if not isinstance(preds, list) or not all(isinstance(u, int) and not isinstance(u, bool) for u in preds):
            raise StagedError(f"{source}: 'args' of node {node} must be a list of node numbers")
        for u in preds:
            if u not in range(len(nodes)):
                raise StagedError(f"{source}: 'args' of node {node}: {u} is not in 'v'")
        args.append(tuple(preds))
    names_raw = table("node_names", False) or {}
    names = [str(names_raw.get(node, node)) for node in nodes]
    backward_raw = data.get("backward_nodes", [])
    if not isinstance(backward_raw, list) or any(b not in range(len(nodes)) for b in backward_raw):
        raise StagedError(f"{source}: 'backward_nodes' must be a list of node numbers in 'v'")
    backward = [node in set(backward_raw) for node in nodes]

    def column(key: str, required: bool, default: float | None = None) -> list[float] | None:
        raw = table(key, required)
        if raw is None:
            return None
        out = []
        for node in nodes:
            if node not in raw:
                if default is None:
                    raise StagedError(f"{source}: '{key}' has no entry for node {node} ({names[node]!r})")
                out.append(default)
            else:
                out.append(_number(raw[node], f"{source}: '{key}' of node {node} ({names[node]!r})"))
        return out

    # Checkmate's DFGraph defaults missing cost tables to 1 per node
    cost = column("cost_cpu", False) or [1.0] * len(nodes)
    memory = column("cost_ram", False) or [1.0] * len(nodes)
    energies = [column(k, False) for k in ENERGY_KEYS]
    parameters = _number(data.get("cost_ram_parameters", 0), f"{source}: 'cost_ram_parameters'")
    return _graph(names, args, backward, cost, memory, energies, parameters, source)


def _node_link(data: dict, source: str) -> StagedGraph:
    nodes = data["nodes"]
    links = data.get("links", data.get("edges"))
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise StagedError(f"{source}: 'nodes' and 'links' must be lists")
    ids = []
    for k, node in enumerate(nodes):
        if not isinstance(node, dict) or "id" not in node:
            raise StagedError(f"{source}: nodes[{k}] has no 'id'")
        ids.append(node["id"])
    if len(set(map(repr, ids))) != len(ids):
        raise StagedError(f"{source}: node ids repeat")
    order = list(range(len(nodes)))
    if all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        order.sort(key=lambda k: ids[k])
    position = {repr(ids[k]): p for p, k in enumerate(order)}
    names = [str(nodes[k].get("name", ids[k])) for k in order]
    args: list[list[int]] = [[] for _ in order]
    for e, link in enumerate(links):
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise StagedError(f"{source}: links[{e}] needs 'source' and 'target'")
        for end in ("source", "target"):
            if repr(link[end]) not in position:
                raise StagedError(f"{source}: links[{e}]: node {link[end]!r} is not in 'nodes'")
        u, v = position[repr(link["source"])], position[repr(link["target"])]
        args[v].append(u)

    def attr(k: int, keys: tuple[str, ...], default: float | None) -> float | None:
        node = nodes[k]
        for key in keys:
            if key in node:
                return _number(node[key], f"{source}: node {ids[k]!r}: '{key}'")
        if default is None:
            raise StagedError(f"{source}: node {ids[k]!r} has no '{keys[0]}'")
        return default

    cost = [attr(k, ("cost_cpu", "cpu_cost"), None) for k in order]
    memory = [attr(k, ("cost_ram", "ram_cost"), None) for k in order]
    backward = [bool(nodes[k].get("backward", False)) for k in order]
    energies = []
    for key in ENERGY_KEYS:
        present = [key in nodes[k] for k in order]
        if any(present) and not all(present):
            missing = next(ids[k] for k, p in zip(order, present) if not p)
            raise StagedError(f"{source}: node {missing!r} has no '{key}' (other nodes have it)")
        energies.append([attr(k, (key,), None) for k in order] if all(present) and present else None)
    graph_attrs = data.get("graph", {}) if isinstance(data.get("graph"), dict) else {}
    parameters = _number(graph_attrs.get("cost_ram_parameters", 0), f"{source}: graph 'cost_ram_parameters'")
    return _graph(names, [tuple(a) for a in args], backward, cost, memory, energies, parameters, source)


def _poet_layers(data: dict, source: str) -> StagedGraph:
    layers = data["layers"]
    if not isinstance(layers, list) or not layers:
        raise StagedError(f"{source}: 'layers' must be a non-empty list")
    index: dict[str, int] = {}
    names, args, backward = [], [], []
    columns: dict[str, list[float]] = {k: [] for k in ("runtime_ms", "memory_bytes", *ENERGY_KEYS)}
    parameters = 0.0
    for k, layer in enumerate(layers):
        if not isinstance(layer, dict) or not isinstance(layer.get("name"), str):
            raise StagedError(f"{source}: layers[{k}] needs a 'name'")
        name = layer["name"]
        if name in index:
            raise StagedError(f"{source}: layers[{k}]: name {name!r} repeats")
        deps = layer.get("depends_on", [])
        if not isinstance(deps, list):
            raise StagedError(f"{source}: layers[{k}] ({name!r}): 'depends_on' must be a list of layer names")
        preds = []
        for dep in deps:
            if dep not in index:
                raise StagedError(f"{source}: layers[{k}] ({name!r}) depends on {dep!r}, which is not an earlier layer")
            preds.append(index[dep])
        for key in columns:
            if key not in layer:
                raise StagedError(f"{source}: layers[{k}] ({name!r}) has no '{key}'")
            columns[key].append(_number(layer[key], f"{source}: layers[{k}] ({name!r}): '{key}'"))
        parameters += _number(layer.get("param_memory_bytes", 0), f"{source}: layers[{k}] ({name!r}): 'param_memory_bytes'")
        index[name] = k
        names.append(name)
        args.append(tuple(preds))
        backward.append(bool(layer.get("backward", False)))
    return _graph(names, args, backward, columns["runtime_ms"], columns["memory_bytes"],
                  [columns[k] for k in ENERGY_KEYS], parameters, source)


def _graph(names, args, backward, cost, memory, energies, parameters, source) -> StagedGraph:
    return StagedGraph(names=names, args=args, backward=backward, cost=cost, memory=memory, energy=energies[0],
                       page_in_energy=energies[1], page_out_energy=energies[2], parameter_bytes=parameters,
                       source=source)


def checkmate_json(graph: StagedGraph) -> dict:
    """The graph as Checkmate DFGraph JSON (with POET's energies when it has them)."""
    out: dict[str, Any] = {
        "v": list(range(graph.size)),
        "args": {str(v): list(a) for v, a in enumerate(graph.args) if a},
        "backward_nodes": [v for v, b in enumerate(graph.backward) if b],
        "cost_cpu": {str(v): c for v, c in enumerate(graph.cost)},
        "cost_ram": {str(v): m for v, m in enumerate(graph.memory)},
        "node_names": {str(v): n for v, n in enumerate(graph.names)},
        "cost_ram_parameters": graph.parameter_bytes,
    }
    for key, values in zip(ENERGY_KEYS, (graph.energy, graph.page_in_energy, graph.page_out_energy)):
        if values is not None:
            out[key] = {str(v): e for v, e in enumerate(values)}
    return out


def write_json(data: Any, path: str | Path) -> None:
    """Write JSON atomically (`monet_ir.files.write_atomic`)."""
    from monet_ir.files import write_atomic

    write_atomic(path, json.dumps(data, indent=1) + "\n")
