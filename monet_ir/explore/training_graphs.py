"""Training graphs of known shapes as `StagedGraph`s (Checkmate's benchmark families): linear
chains (`gen_linear_graph`'s shape), U-nets and random DAGs, for validating the stage-expanded
MILP against other solvers on graphs nobody tuned it on.

A forward DAG becomes a training graph as Checkmate's extracted graphs are: the forward nodes in
order, the loss last among them, then one backward node per forward node in reverse order; the
gradient of v reads the gradients of v's readers, v's output and v's arguments.
"""

from __future__ import annotations

import random

from monet_ir.explore.staged import StagedGraph


def training_graph(forward_args: list[tuple[int, ...]], cost: list[float], memory: list[float],
                   name: str = "graph") -> StagedGraph:
    """Forward nodes 0..n-1 (the last one is the loss) and their backward nodes; the backward
    node of v costs and holds as much as v (Checkmate's unit graphs do the same)."""
    n = len(forward_args)
    readers: list[list[int]] = [[] for _ in range(n)]
    for v, preds in enumerate(forward_args):
        for u in preds:
            readers[u].append(v)
    grad = {v: 2 * n - 2 - v for v in range(n - 1)}  # the loss needs no gradient node of its own
    args: list[tuple[int, ...]] = [tuple(sorted(set(a))) for a in forward_args]
    names = [f"{name}.f{v}" for v in range(n)]
    for v in range(n - 2, -1, -1):
        reads = {v, *forward_args[v]}
        for w in readers[v]:
            reads.add(w if w == n - 1 else grad[w])
        args.append(tuple(sorted(reads)))
        names.append(f"{name}.b{v}")
    order_cost = list(cost) + [cost[v] for v in range(n - 2, -1, -1)]
    order_memory = list(memory) + [memory[v] for v in range(n - 2, -1, -1)]
    return StagedGraph(names, args, [False] * n + [True] * (n - 1), order_cost, order_memory, source=name)


def linear_chain(n: int, cost: float = 1.0, memory: float = 1.0) -> StagedGraph:
    """Checkmate's `gen_linear_graph(n)`: n forward nodes, n + 1 backward nodes (2n + 1 in all),
    backward node 2n - i reading forward node i; unit costs by default."""
    T = 2 * n + 1
    args = [tuple(sorted({i - 1} | ({2 * n - i} if i > n else set()))) if i else () for i in range(T)]
    return StagedGraph([f"node{i}" for i in range(T)], args, [i >= n for i in range(T)], [cost] * T, [memory] * T,
                       source=f"linear{n}")


def unet(depth: int, seed: int | None = None) -> StagedGraph:
    """A U-net: an encoder chain of `depth` levels (conv, then downsample), a bottleneck, a
    decoder of `depth` levels each reading the level below and the encoder's skip connection,
    and the loss; each level halves (encoder) or doubles (decoder) the bytes and costs as
    much as its bytes (times a random factor in [0.5, 2) with a seed)."""
    rng = random.Random(seed)
    args: list[tuple[int, ...]] = [()]
    size = [64.0]
    skips = []
    for level in range(depth):
        args.append((len(args) - 1,))  # conv
        size.append(size[-1])
        skips.append(len(args) - 1)
        args.append((len(args) - 1,))  # downsample
        size.append(size[-1] / 2)
    args.append((len(args) - 1,))  # bottleneck
    size.append(size[-1])
    for level in reversed(range(depth)):
        args.append((len(args) - 1, skips[level]))  # upsample + concatenate the skip
        size.append(size[skips[level]])
        args.append((len(args) - 1,))  # conv
        size.append(size[-1])
    args.append((len(args) - 1,))  # loss
    size.append(1.0)
    factor = [rng.uniform(0.5, 2.0) if seed is not None else 1.0 for _ in size]
    cost = [max(1.0, round(s * f)) for s, f in zip(size, factor)]
    memory = [max(1.0, round(s)) for s in size]
    return training_graph(args, cost, memory, name=f"unet{depth}" + (f"s{seed}" if seed is not None else ""))


def random_dag(forward: int, seed: int, density: float = 0.25) -> StagedGraph:
    """A random forward DAG (each node reads the previous one and each earlier one with
    probability `density`), random costs 1..10 and bytes 1..8, as a training graph."""
    rng = random.Random(seed)
    args: list[tuple[int, ...]] = []
    for v in range(forward):
        preds = {v - 1} if v else set()
        preds |= {u for u in range(v - 1) if rng.random() < density}
        args.append(tuple(sorted(preds)))
    cost = [float(rng.randint(1, 10)) for _ in range(forward)]
    memory = [float(rng.randint(1, 8)) for _ in range(forward)]
    return training_graph(args, cost, memory, name=f"dag{forward}s{seed}")
