"""Generate the links of a named topology (ring, mesh, bus, all-to-all) over a set of cores."""

from __future__ import annotations

from .model import Bus, Link

TOPOLOGIES = ("ring", "mesh", "bus", "all_to_all", "none")


def _pair(a: int, b: int, bandwidth: float, energy: float) -> list[Link]:
    return [Link(a, b, bandwidth, energy), Link(b, a, bandwidth, energy)]


def ring(cores: list[int], bandwidth: float, energy: float) -> list[Link]:
    if len(cores) < 2:
        return []
    if len(cores) == 2:
        return _pair(cores[0], cores[1], bandwidth, energy)
    links: list[Link] = []
    for index, core in enumerate(cores):
        links += _pair(core, cores[(index + 1) % len(cores)], bandwidth, energy)
    return links


def mesh(cores: list[int], rows: int, cols: int, bandwidth: float, energy: float) -> list[Link]:
    """Row-major 2-D mesh: core r*cols+c links to its right and lower neighbours."""
    links: list[Link] = []
    for r in range(rows):
        for c in range(cols):
            here = r * cols + c
            if c + 1 < cols:
                links += _pair(cores[here], cores[here + 1], bandwidth, energy)
            if r + 1 < rows:
                links += _pair(cores[here], cores[here + cols], bandwidth, energy)
    return links


def all_to_all(cores: list[int], bandwidth: float, energy: float) -> list[Link]:
    links: list[Link] = []
    for i, a in enumerate(cores):
        for b in cores[i + 1 :]:
            links += _pair(a, b, bandwidth, energy)
    return links


def bus(cores: list[int], bandwidth: float, energy: float) -> list[Bus]:
    return [Bus(tuple(cores), bandwidth, energy)] if len(cores) >= 2 else []


def square_shape(count: int) -> tuple[int, int]:
    """The most square rows x cols grid holding exactly `count` cores."""
    rows = int(count**0.5)
    while rows > 1 and count % rows:
        rows -= 1
    return rows, count // rows
