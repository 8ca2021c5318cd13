"""Stream's system files of 2024: ``cores`` as a list of core files, the network generated from
``graph: {type: 2d_mesh | bus, nb_rows, nb_cols, bandwidth, unit_energy_cost, pooling_core_id,
simd_core_id, offchip_core_id}`` (the May 2024 files write the same fields under ``2d_mesh:`` or
``bus:``).

They are translated into the newer system format (``cores`` by id, ``offchip_core_id``,
explicit ``core_connectivity``) and read by `read_stream_system`. The network is the one
Stream's generators of the time built (``noc/mesh_2d.py``, ``noc/bus.py``):

* 2d_mesh: the cores other than the pooling, SIMD and off-chip ones, in file order, fill an
  ``nb_rows`` x ``nb_cols`` grid column by column; each core has a link pair to its right and
  lower neighbour. The pooling core has a link pair to every grid core; the SIMD core to every
  grid core and to the pooling core.
* bus: one bus joins the grid cores and the SIMD core; the pooling core has a link pair to every
  grid core and one to the SIMD core.
* every core reaches the off-chip core at its DRAM port's bandwidth (MONET's DRAM model).

One difference: Stream made the SIMD core's mesh links free (infinite bandwidth, no energy);
here they have the mesh's ``bandwidth`` and ``unit_energy_cost`` like every other link.
"""

from __future__ import annotations

from typing import Any

from .errors import Problems
from .fields import Fields, join

GRAPH_KEYS = ("graph", "2d_mesh", "bus")


def is_list_system(data: dict) -> bool:
    """A 2024 Stream system: ``cores`` is a list of core file names."""
    cores = data.get("cores")
    return isinstance(cores, list) and bool(cores) and all(isinstance(c, str) for c in cores)


def translate_list_system(data: dict, problems: Problems) -> dict | None:
    """The newer-format equivalent of a 2024 system description (None after a problem)."""
    fields = Fields(problems)
    files: list[str] = data["cores"]
    key = next((k for k in GRAPH_KEYS if k in data), None)
    if key is None:
        problems.add("graph", "missing required field (a list of cores needs graph: {type: 2d_mesh | bus, ...})")
        return None
    graph = fields.mapping(data, key, "")
    kind = fields.text(graph, "type", key, default="bus" if key == "bus" else "2d_mesh",
                       required=key == "graph")
    if kind not in ("2d_mesh", "bus"):
        problems.add(join(key, "type"), f"unknown graph type {kind!r} (Stream's list format knows 2d_mesh and bus)")
        return None
    bandwidth = fields.number(graph, "bandwidth", key, positive=True, default=1.0)
    energy = fields.number(graph, "unit_energy_cost", key, required=False, default=0.0)
    special: dict[str, int | None] = {}
    for role in ("pooling", "simd", "offchip"):
        field = f"{role}_core_id"
        value = graph.get(field)
        if value is not None:
            value = fields.check_integer(value, join(key, field), -1)
            if not 0 <= value < len(files):
                problems.add(join(key, field), f"{value} is not an index of `cores` (0..{len(files) - 1})")
                value = None
        special[role] = value
    if problems:
        return None
    pooling, simd, offchip = special["pooling"], special["simd"], special["offchip"]
    grid = [i for i in range(len(files)) if i not in special.values()]

    def link(a: int, b: int) -> dict[str, Any]:
        return {"type": "link", "cores": [a, b], "bandwidth": bandwidth, "unit_energy_cost": energy}

    connections: list[dict[str, Any]] = []
    if kind == "2d_mesh":
        rows = fields.integer(graph, "nb_rows", key, positive=True, default=1)
        cols = fields.integer(graph, "nb_cols", key, positive=True, default=1)
        if rows * cols != len(grid):
            problems.add(join(key, "nb_rows"), f"a {rows} x {cols} mesh needs {rows * cols} cores besides the "
                         f"pooling, SIMD and off-chip ones; the file lists {len(grid)}")
            return None
        at = {(r, c): grid[c * rows + r] for r in range(rows) for c in range(cols)}  # column-major, as Stream
        for (r, c), core in at.items():
            if c + 1 < cols:
                connections.append(link(core, at[(r, c + 1)]))
            if r + 1 < rows:
                connections.append(link(core, at[(r + 1, c)]))
        if pooling is not None:
            connections += [link(core, pooling) for core in grid]
        if simd is not None:
            connections += [link(core, simd) for core in grid]
            if pooling is not None:
                connections.append(link(pooling, simd))
    else:
        members = grid + ([simd] if simd is not None else [])
        if len(members) >= 2:
            connections.append({"type": "bus", "cores": members, "bandwidth": bandwidth, "unit_energy_cost": energy})
        if pooling is not None:
            connections += [link(core, pooling) for core in grid]
            if simd is not None:
                connections.append(link(pooling, simd))
    translated: dict[str, Any] = {
        **({"name": data["name"]} if "name" in data else {}),
        "cores": dict(enumerate(files)),
        "core_connectivity": connections,
        "unit_energy_cost": energy,
    }
    if offchip is not None:
        translated["offchip_core_id"] = offchip
    return translated
