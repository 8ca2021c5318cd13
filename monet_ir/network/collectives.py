"""Collective algorithms as rounds of messages between chips.

A collective on a group of chips (in ring order) is a list of *rounds*; a round is a list of
messages `(src, dst, bytes)` sent at the same time, and the next round starts when the whole
round has arrived (every chip waits for what it reduces or forwards). `bytes` of a collective is
the size of the whole tensor on one chip (for `all_gather`: the gathered tensor).

| kind, algorithm | rounds | idle-network time (alpha = message latency, beta = 1/bandwidth) |
|---|---|---|
| all_reduce, ring | 2(N-1) of B/N from each chip to the next | 2(N-1)/N B beta + 2(N-1) alpha |
| all_reduce, tree | ceil(log2 N) reduce rounds up a binomial tree, as many broadcast rounds down, B each | 2 ceil(log2 N)(B beta + alpha) |
| all_reduce, hierarchical | ring reduce-scatter inside each node, ring all-reduce of the shard across nodes, ring all-gather inside each node | |
| reduce_scatter / all_gather, ring | N-1 of B/N | (N-1)/N B beta + (N-1) alpha |
| send | 1 message of B | B beta + alpha |

Each message carries whole bytes: B/N is rounded up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Message = tuple[int, int, int]
Round = list[Message]


def _ring(group: Sequence[int], nbytes: int, rounds: int) -> list[Round]:
    n = len(group)
    if n < 2:
        return []
    chunk = math.ceil(nbytes / n)
    one = [(group[i], group[(i + 1) % n], chunk) for i in range(n)]
    return [list(one) for _ in range(rounds)]


def _tree_all_reduce(group: Sequence[int], nbytes: int) -> list[Round]:
    n = len(group)
    if n < 2:
        return []
    up: list[Round] = []
    span = 1
    while span < n:
        up.append([(group[i + span], group[i], nbytes) for i in range(0, n, 2 * span) if i + span < n])
        span *= 2
    down = [[(dst, src, b) for src, dst, b in r] for r in reversed(up)]
    return up + down


def _merge(parts: list[list[Round]]) -> list[Round]:
    """Rounds of independent sub-collectives run side by side."""
    out: list[Round] = []
    for i in range(max((len(p) for p in parts), default=0)):
        out.append([m for p in parts if i < len(p) for m in p[i]])
    return out


def rounds(kind: str, algorithm: str, group: Sequence[int], nbytes: int, node_chips: int = 0,
           peer: int | None = None) -> list[Round]:
    """The rounds of one collective on `group` (chip ids in ring order)."""
    n = len(group)
    if kind == "send":
        assert peer is not None
        return [[(group[0], peer, nbytes)]]
    if n < 2 or nbytes <= 0:
        return []
    if kind in ("reduce_scatter", "all_gather"):
        return _ring(group, nbytes, n - 1)
    if kind != "all_reduce":
        raise ValueError(f"unknown collective kind {kind!r}")
    if algorithm == "tree":
        return _tree_all_reduce(group, nbytes)
    if algorithm == "hierarchical" and node_chips > 1:
        nodes: dict[int, list[int]] = {}
        for chip in group:
            nodes.setdefault(chip // node_chips, []).append(chip)
        local = list(nodes.values())
        k = min(len(members) for members in local)
        if len(local) > 1 and k > 1 and all(len(m) == k for m in local):
            shard = math.ceil(nbytes / k)
            inside = _merge([_ring(m, nbytes, k - 1) for m in local])
            across = _merge([_ring([m[j] for m in local], shard, 2 * (len(local) - 1)) for j in range(k)])
            return inside + across + inside
    return _ring(group, nbytes, 2 * (n - 1))


def idle_time_s(kind: str, algorithm: str, n: int, nbytes: int, bandwidth: float, alpha: float) -> float:
    """The textbook alpha-beta time of a collective on an idle network whose every message
    crosses links of `bandwidth` bytes/s with latency `alpha` (see the table above)."""
    if n < 2:
        return 0.0
    if kind == "all_reduce" and algorithm == "tree":
        return 2 * math.ceil(math.log2(n)) * (nbytes / bandwidth + alpha)
    if kind == "all_reduce":
        return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * alpha
    if kind in ("reduce_scatter", "all_gather"):
        return (n - 1) / n * nbytes / bandwidth + (n - 1) * alpha
    return nbytes / bandwidth + alpha
