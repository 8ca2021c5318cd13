"""The network of a multi-chip system as a set of links that carry messages.

`NetworkSim(network)` keeps, per directed link, the time it is free again. A message from chip
`a` to chip `b` follows `network.route(a, b)` and starts when it is ready and every link of its
route is free (cut-through: it occupies all of them at once); it holds each link for
`bytes / bandwidth` of that link and arrives `sum(latencies) + bytes / min(bandwidth)` after it
starts. Links carry one message at a time in the order messages are started, so collectives
that share links queue behind each other (contention), and a collective's round ends when its
last message arrives.

`run(requests)` runs a batch of collectives that may overlap: their rounds are started in order
of readiness (an event queue), so concurrent collectives interleave round by round on shared
links. Times are seconds.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from monet_ir.network.collectives import Round


@dataclass
class Request:
    """One collective instance: its rounds and the time its data is ready."""

    label: str
    rounds: list[Round]
    ready_s: float


@dataclass
class Result:
    label: str
    start_s: float
    end_s: float
    bytes: int  # bytes sent by all chips
    energy_pj: float


@dataclass
class LinkStats:
    busy_s: float = 0.0
    bytes: int = 0
    energy_pj: float = 0.0
    spans: list[tuple[float, float, str]] = field(default_factory=list)


class NetworkSim:
    def __init__(self, network, keep_spans: bool = True):
        self.net = network
        self.free_at = [0.0] * len(network.links)
        self.stats = [LinkStats() for _ in network.links]
        self.keep_spans = keep_spans
        self.routes: dict[tuple[int, int], tuple[int, ...]] = {}

    def route(self, a: int, b: int) -> tuple[int, ...]:
        key = (a, b)
        r = self.routes.get(key)
        if r is None:
            r = self.routes[key] = self.net.route(a, b)
        return r

    def message(self, src: int, dst: int, nbytes: int, ready: float, label: str) -> tuple[float, float]:
        """Send one message; returns (arrival time, energy in pJ)."""
        links = self.net.links
        route = self.route(src, dst)
        if not route:
            return ready, 0.0
        start = max([ready] + [self.free_at[i] for i in route])
        latency = 0.0
        slowest = 0.0
        energy = 0.0
        for i in route:
            link = links[i]
            hold = nbytes / link.bandwidth_bytes_per_s
            self.free_at[i] = start + hold
            latency += link.latency_s
            slowest = max(slowest, hold)
            e = nbytes * 8 * link.energy_pj_per_bit
            energy += e
            st = self.stats[i]
            st.busy_s += hold
            st.bytes += nbytes
            st.energy_pj += e
            if self.keep_spans:
                st.spans.append((start, start + hold, label))
        return start + latency + slowest, energy

    def run(self, requests: list[Request]) -> list[Result]:
        """Run collectives that may overlap; one result per request, in request order."""
        results = [Result(r.label, r.ready_s, r.ready_s, 0, 0.0) for r in requests]
        heap = [(r.ready_s, i, 0) for i, r in enumerate(requests) if r.rounds]
        heapq.heapify(heap)
        while heap:
            ready, i, k = heapq.heappop(heap)
            req = requests[i]
            end = ready
            res = results[i]
            for src, dst, nbytes in req.rounds[k]:
                arrival, energy = self.message(src, dst, nbytes, ready, req.label)
                end = max(end, arrival)
                res.bytes += nbytes
                res.energy_pj += energy
            res.end_s = end
            if k + 1 < len(req.rounds):
                heapq.heappush(heap, (end, i, k + 1))
        return results

    def total_energy_pj(self) -> float:
        return sum(s.energy_pj for s in self.stats)

    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.stats)
