"""Analytical cost of a loop nest on a MAC-array core, after ZigZag's cost model (notes §2(f)).

Pipeline for one (LoopNestSig, Core):

1. Roles.  The output tensor lives in the core's ``O`` memories (partial sums accumulate there);
   of the two inputs, the forward weight W (or, for the weight gradient, dY) takes the ``W``
   memories and the other the ``I`` memories.  The core's dataflow, written for the forward
   nest, is translated by role: an unrolled loop keeps its relevance pattern across the three
   memory roles (e.g. forward K, relevant to the W- and O-role tensors, becomes C for the input
   gradient, where C is relevant to W and to the output dX).
2. Spatial mapping.  Each unrolling is clipped to the array and the loop size and made a
   divisor ("greedy" fractional unrolling: a loop of N on u units runs ceil(N/u) times, energy
   counts N/ceil(N/u) units, latency the integer part), and limited by the bandwidth and
   capacity of the innermost memories, as ZigZag does.  Per tensor, an unrolled loop belongs to
   the lowest memory level serving its array dimension (ZigZag `served_dimensions`).
3. Off-chip.  Tensors larger than their top on-chip memory (or that do not fit together in a
   shared one) get the DRAM as an extra top level (Stream's "too large operands").
4. Temporal mapping.  The remaining loop sizes are split into prime factors (merged down to
   `LPF_LIMIT` factors); candidate loop orders are allocated bottom-up to the memories as LOMA
   does (each level takes the innermost loops that fit and minimize accesses to the level above).
5. Evaluation per candidate: data held per level, accesses per level and direction in words of
   the port width, energy = MACs x MAC energy + sum(accesses x access energy), and latency =
   ideal temporal cycles + stall (per port: transfer cycles vs. the allowed window, double
   buffering when the data uses <= half of a memory) + on-loading + off-loading.
6. The candidate with the lowest latency (then energy) wins, like ZigZag's latency optimizer.

Everything is plain Python on tuples; no IR and no numpy.

Steps 1 to 3 live in their own modules: `nest_roles` (the tensors and their roles),
`spatial_mapping` and `memory_levels` (the hierarchy per role, DRAM spilling); this module holds
the temporal mapping, the evaluation of a mapping (`NestModel`) and the search.

A report prices each distinct layer once per core, and a sweep gives every design point new
cores, so the ~40 orders of a search are the cost model's hot loop.  `NestModel` therefore
computes once per (signature, core) everything that does not depend on the order (the
allocation plan, per level and direction the port a transfer uses, the spatial views), keeps a
role's state per canonical key (most of an evaluation: levels, energy, transfers as the steps
across tensors read them), and leaves to each evaluation only what involves the three tensors
together (double buffering of shared memories, the stall of shared ports, on/off-loading).
Every float is computed by the same operations in the same order as the plain formulation
(multiplications by an exact 1 skipped); only integer arithmetic is regrouped.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import NamedTuple

from targets.model import Core, MemoryLevel

from .memory_levels import build_levels, spilled_roles
from .nest_roles import ROLES, TensorInfo, _merge, grow, pr_extent, tensor_elements, tensor_infos
from .signature import LoopNestSig
from .spatial_mapping import spatial_mapping

LPF_LIMIT = 6
MAX_ORDERINGS = 720


# --------------------------------------------------------------------------- temporal loops


def prime_factors(n: int) -> list[int]:
    factors = []
    d = 2
    while d * d <= n:
        while n % d == 0:
            factors.append(d)
            n //= d
        d += 1
    if n > 1:
        factors.append(n)
    return factors


def loop_prime_factors(temporal: dict[str, int], limit: int = LPF_LIMIT) -> list[tuple[str, int]]:
    """LOMA's loop prime factors: every temporal loop split into primes; while there are more
    than `limit`, the two smallest factors of the dim with the most factors are merged."""
    per_dim = {dim: sorted(prime_factors(size)) for dim, size in temporal.items() if size > 1}
    limit = max(limit, len(per_dim))
    while sum(len(f) for f in per_dim.values()) > limit:
        dim = max(per_dim, key=lambda d: len(per_dim[d]))
        factors = per_dim[dim]
        merged = factors[0] * factors[1]
        per_dim[dim] = sorted(factors[2:] + [merged])
    return [(dim, f) for dim, factors in per_dim.items() for f in factors]


def unique_orderings(lpfs: list[tuple[str, int]], cap: int | None = MAX_ORDERINGS):
    """Distinct permutations of the multiset of loop factors (at most `cap`; None: all of them,
    LOMA's permutation space)."""
    if len(set(lpfs)) == len(lpfs):  # all distinct: no permutation repeats
        yield from itertools.permutations(lpfs) if cap is None else itertools.islice(itertools.permutations(lpfs), cap)
        return
    seen = set()
    for perm in itertools.permutations(lpfs):
        if perm in seen:
            continue
        seen.add(perm)
        yield perm
        if cap is not None and len(seen) >= cap:
            return



# --------------------------------------------------------------------------- the model


class InvalidMapping(Exception):
    """A loop order does not fit the memories (LOMA skips such orders)."""


def _stationary_merge_down(order: tuple, starts: tuple[int, ...], irrelevant) -> list[int]:
    """ZigZag moves the innermost loops of a level that do not index the tensor into the level
    below (the data stays put while they run).  The levels hold consecutive loops of `order`,
    level i from position starts[i]; returns the positions where the levels start afterwards,
    followed by len(order).

    Loops only move down across a boundary, so only the boundaries move: each level above the
    first ends up starting at the first relevant loop at or after its old start (irrelevant
    loops fall through any level they empty), which is where moving prefixes down until nothing
    moves leaves them."""
    end = len(order)
    bounds = [0] if starts else []
    for start in starts[1:]:
        # the level below already starts at or after its first relevant loop
        if start < bounds[-1]:
            start = bounds[-1]
        while start < end and order[start][0] in irrelevant:
            start += 1
        bounds.append(start)
    bounds.append(end)
    return bounds


def _union_window(activities: list[tuple[int, int, int]]) -> float:
    """Cycles within the longest period during which at least one of several periodic update
    windows is open, times that period's count.  activities: (period, allowed, count).
    Windows open at the start of each period; nested periods give the exact union."""
    for period, allowed, count in activities:
        if period == allowed:
            return period * count
    ordered = sorted(activities)
    longest = ordered[-1]
    if any(ordered[i + 1][0] % ordered[i][0] for i in range(len(ordered) - 1)):
        # Periods that do not nest: assume the windows overlap at random.
        free = 1.0
        for period, allowed, _ in ordered:
            free *= 1 - allowed / period
        return (1 - free) * longest[0] * longest[2]

    def covered(k: int, x: int) -> int:
        # Open cycles in [0, x) of the union of windows 0..k, x <= period k.
        period, allowed, _ = ordered[k]
        if k == 0:
            return min(x, allowed)
        return min(x, allowed) + max(0, repeated(k - 1, x) - repeated(k - 1, min(x, allowed)))

    def repeated(k: int, y: int) -> int:
        period = ordered[k][0]
        return (y // period) * covered(k, period) + covered(k, y % period)

    return covered(len(ordered) - 1, longest[0]) * longest[2]


def _next_prime(n: int) -> int:
    """The smallest prime above n."""
    candidate = n + 1
    while candidate < 2 or any(candidate % d == 0 for d in range(2, math.isqrt(candidate) + 1)):
        candidate += 1
    return candidate


def _shared_port_stall(activities: list[tuple[int, int, int, int]]) -> float:
    """Stall (+) or slack (-) cycles of a port several transfers use, as ZigZag combines them.
    activities: (cycles needed, cycles allowed, period, count) per transfer."""
    # integers (cycles and counts): the order of the sums does not matter
    positive = negative = windows = 0
    for real, allowed, _, count in activities:
        if real > allowed:
            positive += (real - allowed) * (count - 1)
        else:
            negative += (real - allowed) * (count - 1)
        windows += allowed * (count - 1)
    union = _union_window([(period, allowed, count) for _, allowed, period, count in activities])
    return positive + max(0.0, negative + windows - union)


@dataclass
class Evaluation:
    """Cost of one temporal mapping (all figures for the whole op)."""

    latency: float
    energy: float
    per_role: tuple  # per role (ROLES' order): its state (`NestModel._role_state`)
    ideal_cycles: float
    stall: float
    onload: float
    offload: float


class _Mapping(NamedTuple):
    """A loop order allocated to the memories: each role's levels hold consecutive loops of
    `order`, level i from position starts[role][i]."""

    order: tuple
    starts: dict[str, list[int]]


class _RoleState:
    """One tensor's temporal mapping, as far as it does not involve the other tensors (shared
    by every loop order with the same canonical levels: `NestModel._role_state`).  The
    transfers are kept as what the steps across tensors (double buffering, stall, on- and
    off-loading) read of them."""

    __slots__ = ("levels", "breakdown", "energy", "fractions", "stall_items", "busy_items", "once_items", "records", "loading")

    def __init__(self, levels, breakdown, energy, fractions, stall_items, busy_items, once_items, records, loading):
        self.levels = levels  # the loops of each memory level after the stationary merge-down
        self.breakdown = breakdown  # energy per "memory.tensor"
        self.energy = energy
        self.fractions = fractions  # per memory level: the share of the memory the data uses
        # per transfer with a port, that happens: (port slot, cycles it needs per period, its
        # window if the level it fills is double-buffered and if not, which level that is, count)
        self.stall_items = stall_items
        # per on/off-loading transfer repeated during compute: (port slot, bits per cycle it
        # keeps the port busy)
        self.busy_items = busy_items
        # per on/off-loading transfer that happens once: (port slot, cycles, cycles of the
        # innermost first tile that cannot be hidden, (role, level, direction))
        self.once_items = once_items
        self.records = records  # cycles per period of the repeated ones, by (role, level, direction)
        self.loading = loading  # `NestModel._loading` of the repeated ones


_READS = ("tl", "th")
_HIGH = ("th", "fh")
# ZigZag decides double buffering for the output first, then W, then I (positions in ROLES)
_DOUBLE_BUFFER_ORDER = (ROLES.index("O"), ROLES.index("W"), ROLES.index("I"))


@dataclass(frozen=True, slots=True)
class _SliceStep:
    """What one role allocates at one memory (the same for every loop order)."""

    role: str
    info: TensorInfo
    memory: MemoryLevel
    is_top: bool  # the role's top level: it takes every loop left
    capacity: float  # bits; unbounded for a top memory without DRAM behind it
    psum_above: bool  # the output: a spatial loop above accumulates into it
    next_fanout: tuple | None  # the spatial loops the level above fans out to this one
    sliding: bool  # the tensor has a sliding window that moves (`NestModel._sliding`)


class NestModel:
    """Everything about one (LoopNestSig, Core) pair that does not depend on the loop order."""

    def __init__(self, sig: LoopNestSig, core: Core, extra_spilled: tuple[str, ...] = ()):
        self.sig = sig
        self.core = core
        self.infos = tensor_infos(sig)
        hierarchies = {role: core.hierarchy(role) for role in ROLES}
        self.unrolls = spatial_mapping(sig, core, self.infos, hierarchies)
        spilled = set(spilled_roles(sig, core, self.infos)) | set(extra_spilled)
        self.spilled = tuple(r for r in ROLES if r in spilled)
        element_bits = {r: (i.psum_bits if i.is_output else i.bits) for r, i in self.infos.items()}
        self.levels, self.leftovers, self.memories = build_levels(core, self.spilled, self.unrolls, element_bits)
        self.level_index = {
            role: {id(level.memory): level.index for level in self.levels[role]} for role in ROLES
        }
        temporal = dict(sig.dims)
        for dim in {u.dim for u in self.unrolls}:
            # Only the main unrolling of a dim carries its temporal remainder (the others have 1).
            temporal[dim] = max(u.temporal for u in self.unrolls if u.dim == dim)
        self.temporal = {d: s for d, s in temporal.items() if s > 1}
        self.total_cycles = math.prod(self.temporal.values()) if self.temporal else 1
        precision = core.precision_for(sig.mac_bits, sig.mac_format)
        self.mac_energy_each = precision.energy_pj if precision else 0.0
        self.cycles_per_op = 1.0 / precision.ops_per_cycle if precision else 1.0
        self.spatial_units = math.prod(u.whole for u in self.unrolls) if self.unrolls else 1
        # Spilled tensors are bounded by DRAM; without DRAM the top memory is taken as big enough.
        self.bounded_top = {role: role in self.spilled or core.dram is not None for role in ROLES}
        self.fractional = any(u.frac != u.whole for u in self.unrolls)
        self._role_cache: dict[str, dict] = {role: {} for role in ROLES}
        self._shared_port_stall: dict[tuple, float] = {}  # activities of a shared port -> its stall
        self._loop_primes: dict[tuple[str, int], int] = {}  # `_order_codes`
        self._spatial_cache: dict = {}
        # per role and level: the port serving each direction, and the energy breakdown's name
        self._ports = {
            role: [{d: level.memory.port_for(role, d) for d in ("fh", "tl", "fl", "th")} for level in self.levels[role]]
            for role in ROLES
        }
        self._energy_names = {
            role: [f"{level.memory.name}.{self.infos[role].name}" for level in self.levels[role]] for role in ROLES
        }
        # memories and physical ports numbered, for the steps that add up what tensors share
        memory_slot = {id(memory): slot for slot, memory in enumerate(self.memories)}
        self._memory_slots = tuple([memory_slot[id(level.memory)] for level in self.levels[role]] for role in ROLES)
        self._port_slot: dict[tuple[int, str], int] = {}
        self._slot_bandwidth: list[int] = []
        self._links = {role: [self._level_links(role, m) for m in range(len(self.levels[role]))] for role in ROLES}
        self._onload_plan = self._plan_onload()
        self._offload_keys = [(("O", m, "th"), ("O", m + 1, "fl")) for m in range(len(self.levels["O"]) - 1)]
        self._drain = self._systolic_drain()
        self._macs_energy = self.macs_energy()
        # A tensor whose sliding window never moves (its window dims are all 1, as in a matrix
        # product) has window factors of 1: its elements count like the other tensors'.
        self._sliding = {role: self._window_moves(sig, info) for role, info in self.infos.items()}
        # per role: the spatial view with the fractional and with the integer spatial mapping
        # (the same without fractional unrollings)
        self._spatial = {role: self._spatial_view(role, whole=False) for role in ROLES}
        self._spatial_whole = {
            role: self._spatial_view(role, whole=True) if self.fractional else self._spatial[role] for role in ROLES
        }
        self._initial_allocation = {}
        for role in ROLES:
            sizes = _merge({}, self.levels[role][0].fanout_frac) if self.levels[role] else {}
            self._initial_allocation[role] = (sizes, tensor_elements(self.infos[role], sizes))
        self._allocation_plan = self._plan_allocation()

    @staticmethod
    def _window_moves(sig: LoopNestSig, info: TensorInfo) -> bool:
        if not info.partial:
            return False
        dims = sig.dims
        if any(dims[out_dim] > 1 or dims[filter_dim] > 1 for out_dim, filter_dim, *_ in info.partial):
            return True
        return any(pr_extent(1, 1, stride, dilation, full) != 1 for _, _, stride, dilation, full in info.partial)

    def _level_links(self, role: str, m: int) -> dict[str, tuple | None]:
        """Per direction of level m of `role`: what a transfer over its port needs to know (the
        same for every loop order), or None when no port serves it."""
        level = self.levels[role][m]
        memory = level.memory
        links: dict[str, tuple | None] = {}
        for direction, port in self._ports[role][m].items():
            if port is None:
                links[direction] = None
                continue
            key = (id(memory), port.name)
            if key not in self._port_slot:
                self._port_slot[key] = len(self._slot_bandwidth)
                self._slot_bandwidth.append(port.bandwidth_bits)
            links[direction] = (
                self._port_slot[key],
                port.bandwidth_bits,
                port.min_bandwidth_bits,
                port.min_bandwidth_bits / port.bandwidth_bits,  # of an access, in full-width words
                memory.read_energy_pj if direction in _READS else memory.write_energy_pj,
                self._energy_names[role][m],
                # the level that must be double-buffered to refill during a period: the one
                # above for transfers to and from the higher level
                m + 1 if direction in _HIGH else m,
                # on/off-loading: the output's transfers towards the array are not on the way in or out
                not (self.infos[role].is_output and direction in ("tl", "fh")),
                (role, m, direction),  # its key in the cycles on/off-loading records
            )
        return links

    # ------------------------------------------------------------------ allocation (LOMA)

    def _plan_allocation(self) -> list[tuple[MemoryLevel, list[_SliceStep]]]:
        """Per memory that holds some role, in allocation order (bottom-up), what each role
        allocates there: computed once per model, since ~40 loop orders are allocated."""
        plan = []
        for memory in self.memories:
            steps = []
            for role in memory.operands:
                if role not in ROLES or id(memory) not in self.level_index[role]:
                    continue
                info = self.infos[role]
                levels = self.levels[role]
                index = self.level_index[role][id(memory)]
                is_top = index == len(levels) - 1
                capacity = math.inf if is_top and not self.bounded_top[role] else memory.size_bits
                # The output is held at partial-sum width while an irrelevant loop (one that
                # accumulates into it) is still to run above the slice; spatial ones are static.
                above = [d for level in levels[index + 1 :] for d, _ in level.fanout_frac]
                above += [d for d, _ in self.leftovers[role][0]]
                psum_above = info.is_output and bool(set(above) & info.irrelevant)
                next_fanout = levels[index + 1].fanout_frac if not is_top else None
                steps.append(_SliceStep(role, info, memory, is_top, capacity, psum_above, next_fanout, self._sliding[role]))
            if steps:
                plan.append((memory, steps))
        return plan

    def allocate(self, ordering) -> _Mapping:
        """Assign the loops of `ordering` (innermost first) to memory levels, bottom-up.  Each
        level of a role takes the next consecutive loops of the order."""
        order = tuple(ordering)
        start = {role: 0 for role in ROLES}  # loops of `order` already allocated, per role
        starts: dict[str, list[int]] = {role: [] for role in ROLES}
        # per role: loop sizes below the next level, and the tensor's elements they touch
        allocated = dict(self._initial_allocation)
        # the output is held as partial sums below the last loop that accumulates into it
        accumulating = self.infos["O"].irrelevant
        last_accumulating = -1
        for position, (dim, _) in enumerate(order):
            if dim in accumulating:
                last_accumulating = position
        for memory, steps in self._allocation_plan:
            if len(steps) == 1:
                step = steps[0]
                begin = start[step.role]
                choice: tuple[int, ...] = (self._best_slice(step, allocated[step.role], order[begin:], begin <= last_accumulating),)
            else:
                options = [
                    self._slice_options(step, allocated[step.role], order[start[step.role] :], start[step.role] <= last_accumulating)
                    for step in steps
                ]
                choice = self._best_combination(options, memory.size_bits)
            for step, count in zip(steps, choice):
                role = step.role
                begin = start[role]
                starts[role].append(begin)
                start[role] = begin + count
                if step.is_top:  # it took every loop left (`_slice_sizes`)
                    continue
                sizes = dict(allocated[role][0])
                for dim, size in order[begin : begin + count]:
                    sizes[dim] = sizes.get(dim, 1) * size
                for dim, size in step.next_fanout:
                    sizes[dim] = sizes.get(dim, 1) * size
                if step.sliding:
                    elements = tensor_elements(step.info, sizes)
                else:
                    # `tensor_elements` without the window factors, which are 1 (`_sliding`)
                    elements = 1.0
                    for dim in step.info.relevant:
                        elements *= sizes.get(dim, 1)
                allocated[role] = (sizes, elements)
        return _Mapping(order, starts)

    def _slice_sizes(self, step: _SliceStep, allocated: tuple[dict, float], loops: tuple, accumulating: bool) -> tuple[list[float], int]:
        """Bits held at the step's memory by the slices of `loops` it can take: the base loops
        (`allocated`: their sizes per dim and the elements they touch) plus the first i loops,
        i <= the returned last.  `accumulating`: a loop of `loops` runs over a dim irrelevant
        to the output."""
        info = step.info
        bits = info.psum_bits if info.is_output and (step.psum_above or accumulating) else info.bits
        memory = step.memory
        capacity = step.capacity
        # A double-buffered slice smaller than the whole tensor is held twice: that needs the
        # whole tensor's size.  Otherwise the sizes stop at the first that does not fit.
        limit = math.inf if memory.double_buffered else capacity
        base, elements = allocated
        held = elements * bits
        sizes = [held]
        if held <= limit:
            # incremental: only the partially relevant input window needs recounting
            relevant = info.relevant
            if not step.sliding:
                for dim, size in loops:
                    if dim in relevant:
                        elements *= size
                    held = elements * bits
                    sizes.append(held)
                    if held > limit:
                        break
            else:
                window = dict(base)
                partial = info.partial_of
                for dim, size in loops:
                    window[dim] = window.get(dim, 1) * size
                    if dim in relevant:
                        elements *= size
                    elif dim in partial:
                        elements = tensor_elements(info, window)
                    held = elements * bits
                    sizes.append(held)
                    if held > limit:
                        break
        if memory.double_buffered:
            full = sizes[-1]
            sizes = [s * 2 if i < len(loops) and s < full else s for i, s in enumerate(sizes)]
            last = 0
            while last + 1 < len(sizes) and sizes[last + 1] <= capacity:
                last += 1
        else:
            last = len(sizes) - 1 if sizes[-1] <= capacity else len(sizes) - 2
        if sizes[0] > capacity:
            raise InvalidMapping(f"{memory.name} cannot hold the data of {step.role} below it")
        if step.is_top and last < len(loops):
            raise InvalidMapping(f"{memory.name} cannot hold all loops of {step.role}")
        return sizes, last

    def _whole_slice(self, step: _SliceStep, allocated: tuple[dict, float], loops: tuple, accumulating: bool) -> float:
        """Bits a role's top level holds with every loop left, once `_slice_sizes`' checks
        pass.  Without a moving window or double buffering the sizes of the slices only grow
        (elements times loop sizes >= 1), so only the smallest and the whole one are checked."""
        if step.sliding or step.memory.double_buffered:
            sizes, last = self._slice_sizes(step, allocated, loops, accumulating)
            return sizes[last]
        info = step.info
        bits = info.psum_bits if info.is_output and (step.psum_above or accumulating) else info.bits
        elements = allocated[1]
        if elements * bits > step.capacity:
            raise InvalidMapping(f"{step.memory.name} cannot hold the data of {step.role} below it")
        relevant = info.relevant
        for dim, size in loops:
            if dim in relevant:
                elements *= size
        held = elements * bits
        if held > step.capacity:
            raise InvalidMapping(f"{step.memory.name} cannot hold all loops of {step.role}")
        return held

    def _slice_options(self, step: _SliceStep, allocated: tuple[dict, float], loops: tuple, accumulating: bool) -> list[tuple[int, float, float]]:
        """(loops taken, bits held, accesses to the level above) per admissible slice."""
        if step.is_top:
            return [(len(loops), self._whole_slice(step, allocated, loops, accumulating), 0.0)]
        # A slice of i loops is loaded once per iteration of the loops above it (integers:
        # exact in any order).
        reloads = 1
        for _, size in loops:
            reloads *= size
        if step.sliding or step.memory.double_buffered:
            sizes, last = self._slice_sizes(step, allocated, loops, accumulating)
            options = []
            for taken in range(last + 1):
                options.append((taken, sizes[taken], reloads * sizes[taken]))
                if taken < last:
                    reloads //= loops[taken][1]
            return options
        # `_slice_sizes` and the options in one pass, up to the first slice that does not fit
        info = step.info
        bits = info.psum_bits if info.is_output and (step.psum_above or accumulating) else info.bits
        capacity = step.capacity
        elements = allocated[1]
        held = elements * bits
        if held > capacity:
            raise InvalidMapping(f"{step.memory.name} cannot hold the data of {step.role} below it")
        relevant = info.relevant
        options = [(0, held, reloads * held)]
        for taken, (dim, size) in enumerate(loops, 1):
            if dim in relevant:
                elements *= size
            held = elements * bits
            if held > capacity:
                break
            reloads //= size
            options.append((taken, held, reloads * held))
        return options

    def _best_slice(self, step: _SliceStep, allocated: tuple[dict, float], loops: tuple, accumulating: bool) -> int:
        """`_best_combination` of the options of a memory that holds one role only."""
        if step.is_top:
            if self._whole_slice(step, allocated, loops, accumulating) > step.memory.size_bits:
                raise InvalidMapping("shared memory cannot hold the data below it")
            return len(loops)
        # below the top, the step's capacity is the memory's: every slice listed fits
        best, best_accesses = 0, math.inf
        for taken, _, accesses in self._slice_options(step, allocated, loops, accumulating):
            if accesses <= best_accesses:
                best, best_accesses = taken, accesses
        return best

    @staticmethod
    def _best_combination(lists: list[list[tuple[int, float, float]]], capacity) -> tuple[int, ...]:
        """The slice per role (`lists`: each role's `_slice_options`) minimizing the accesses to
        the level above with all slices fitting together (sizes grow with the slice, so loops
        stop at the first overflow; the last of equal choices wins, as in LOMA)."""
        if sum([option[0][1] for option in lists]) > capacity:
            raise InvalidMapping("shared memory cannot hold the data below it")
        best: tuple[int, ...] = tuple([option[0][0] for option in lists])
        best_accesses = math.inf
        if len(lists) == 1:
            for taken, size, accesses in lists[0]:
                if size > capacity:
                    break
                if accesses <= best_accesses:
                    best_accesses, best = accesses, (taken,)
            return best
        if len(lists) == 2:
            first, second = lists
            for t1, s1, a1 in first:
                if s1 + second[0][1] > capacity:
                    break
                for t2, s2, a2 in second:
                    if s1 + s2 > capacity:
                        break
                    if a1 + a2 <= best_accesses:
                        best_accesses, best = a1 + a2, (t1, t2)
            return best
        first, second, third = lists[0], lists[1], lists[2:]
        rest = third[0] if len(third) == 1 else None
        for t1, s1, a1 in first:
            if s1 + second[0][1] + (rest[0][1] if rest else 0) > capacity:
                break
            for t2, s2, a2 in second:
                used = s1 + s2
                if rest is None:
                    tail = NestModel._best_combination(third, capacity - used) if used + sum(o[0][1] for o in third) <= capacity else None
                    if tail is None:
                        break
                    tail_accesses = sum(dict((o[0], o[2]) for o in options)[t] for options, t in zip(third, tail))
                    if a1 + a2 + tail_accesses <= best_accesses:
                        best_accesses, best = a1 + a2 + tail_accesses, (t1, t2) + tail
                    continue
                if used + rest[0][1] > capacity:
                    break
                for t3, s3, a3 in rest:
                    if used + s3 > capacity:
                        break
                    total = a1 + a2 + a3
                    if total <= best_accesses:
                        best_accesses, best = total, (t1, t2, t3)
        return best

    # ------------------------------------------------------------------ evaluation

    def _spatial_view(self, role: str, whole: bool) -> dict:
        """Per architecture level of one tensor: spatial loops, unit counts and the bandwidth
        boost from a level to the one below (depend on the spatial mapping only)."""
        key = (role, whole)
        cached = self._spatial_cache.get(key)
        if cached is not None:
            return cached
        info = self.infos[role]
        pick = (lambda lvl: lvl.fanout_whole) if whole else (lambda lvl: lvl.fanout_frac)
        spatial = [pick(lvl) for lvl in self.levels[role]] + [self.leftovers[role][1 if whole else 0]]
        count = len(self.levels[role])
        cumulative: dict = {}
        elements = [1.0]
        for part in spatial:
            cumulative = _merge(cumulative, part)
            elements.append(tensor_elements(info, cumulative))
        units = []
        for a in range(count + 1):
            total = 1.0
            for part in spatial[a:]:
                for _, size in part:
                    total *= size
            units.append(round(total))
        unique = [elements[-1] / elements[a] for a in range(count + 1)]
        boost = [round(unique[m] / unique[m + 1]) for m in range(count)] + [1]
        products = [math.prod(size for _, size in part) for part in spatial]
        relevant_sizes = [[size for dim, size in part if dim in info.relevant] for part in spatial]
        view = {"spatial": spatial, "units": units, "boost": boost, "products": products, "relevant_sizes": relevant_sizes}
        self._spatial_cache[key] = view
        return view

    def _role_view(self, role: str, levels) -> tuple[list[float], list[float], list[float] | None]:
        """Data held per architecture level (0 = MAC) of one tensor with the fractional and
        with the integer spatial mapping (the same list when the mapping has no fractional
        unrolling), and for the output its reuse factors (the inputs do not need them).

        S2[a]: loops below memory a-1's outputs (its own temporal loops and fan-out) -> data held
        by one instance of memory a-1.  S1[a]: the same plus memory a's fan-out -> reuse."""
        info = self.infos[role]
        spatial_view = self._spatial[role]
        if self._sliding[role]:
            data, ir_s1 = self._window_view(info, levels, spatial_view)
            data_whole = self._window_view(info, levels, self._spatial_whole[role])[0] if self.fractional else data
            return data, data_whole, ir_s1
        # `grow` without the per-dim sizes, which only a sliding window's recount needs; the
        # integer mapping's counts in the same pass
        relevant = info.relevant
        reuse = info.is_output
        spatial = spatial_view["relevant_sizes"]
        spatial_whole = self._spatial_whole[role]["relevant_sizes"] if self.fractional else None
        products = spatial_view["products"]
        count = len(levels)
        data = [1.0]
        data_whole = [1.0] if self.fractional else data
        ir_s1 = []
        elements = elements_whole = 1.0
        loops_product = 1.0
        for a in range(count + 1):
            for size in spatial[a]:
                elements *= size
            if spatial_whole is not None:
                for size in spatial_whole[a]:
                    elements_whole *= size
            if reuse:
                loops_product *= products[a]
                ir_s1.append(loops_product / elements)
            if a < count:
                for dim, size in levels[a]:
                    if dim in relevant:
                        elements *= size
                        elements_whole *= size
                if reuse:
                    for _, size in levels[a]:
                        loops_product *= size
                data.append(float(round(elements)))
                if spatial_whole is not None:
                    data_whole.append(float(round(elements_whole)))
        return data, data_whole, ir_s1 if reuse else None

    @staticmethod
    def _window_view(info: TensorInfo, levels, spatial_view: dict) -> tuple[list[float], list[float]]:
        """Data held and reuse per architecture level (`_role_view`) of a tensor with a sliding
        window (its count needs the sizes per dim)."""
        spatial = spatial_view["spatial"]
        products = spatial_view["products"]
        count = len(levels)
        data = [1.0]
        ir_s1 = []
        cumulative: dict = {}
        elements = 1.0
        loops_product = 1.0
        for a in range(count + 1):
            s1, s1_elements = grow(info, cumulative, elements, spatial[a])
            s1_product = loops_product * products[a]
            ir_s1.append(s1_product / s1_elements)
            if a < count:
                cumulative, elements = grow(info, s1, s1_elements, levels[a])
                loops_product = s1_product
                for _, size in levels[a]:
                    loops_product *= size
                data.append(float(round(elements)))
        return data, ir_s1

    def _transfers(self, info: TensorInfo, data: list[float], data_w: list[float], cycles: list[int], psum: list[bool]) -> list[tuple]:
        """The transfers of one tensor: (level, direction, elements per period with the
        fractional and the integer spatial mapping, bits per element, period, count)."""
        count = len(self.levels[info.role])
        total = self.total_cycles
        out: list[tuple] = []
        boost = self._spatial[info.role]["boost"]
        boost_w = self._spatial_whole[info.role]["boost"]
        for m in range(count):
            top = m == count - 1
            low = data[m] * boost[m]
            low_w = data_w[m] * boost_w[m]
            if not info.is_output:
                out.append((m, "tl", low, low_w, info.bits, cycles[m], total // cycles[m]))
                if not top:
                    out.append((m, "fh", data[m + 1], data_w[m + 1], info.bits, cycles[m + 1], total // cycles[m + 1]))
                continue
            below_bits = info.psum_bits if psum[m] else info.bits
            out.append((m, "fl", int(low), int(low_w), below_bits, cycles[m], total // cycles[m]))
            if psum[m]:
                out.append((m, "tl", int(low), int(low_w), info.psum_bits, cycles[m], total // cycles[m]))
            if not top:
                above_bits = info.psum_bits if psum[m + 1] else info.bits
                period = cycles[m + 1]
                out.append((m, "th", data[m + 1], data_w[m + 1], above_bits, period, total // period))
                if psum[m + 1]:
                    out.append((m, "fh", data[m + 1], data_w[m + 1], info.psum_bits, period, total // period))
        return out

    def _order_codes(self, order: tuple) -> list[int]:
        """Products of the first i loops' codes, i = 0..len(order): each distinct loop (dim,
        size) has its own prime, so the product over a level identifies the level's multiset
        of loops (unique factorization) without sorting them."""
        primes = self._loop_primes
        codes = [1]
        code = 1
        for loop in order:
            prime = primes.get(loop)
            if prime is None:  # the first order of a search
                prime = primes[loop] = _next_prime(max(primes.values(), default=1))
            code *= prime
            codes.append(code)
        return codes

    def _role_state(self, role: str, order: tuple, starts: list[int], codes: list[int]) -> _RoleState:
        """Everything about one tensor's temporal mapping that does not involve the others
        (its levels start at `starts` in `order`; `codes`: `_order_codes(order)`).

        Cached under a canonical key: after the stationary merge-down, only the loops of each
        level (not their order), the level's outermost relevant/irrelevant runs and the
        stationary product at the array matter, so many loop orders share an entry."""
        info = self.infos[role]
        relevant = info.relevant
        irrelevant = info.irrelevant
        bounds = _stationary_merge_down(order, starts, irrelevant)
        loops = []  # per level, the code of its multiset of loops (`_order_codes`)
        top_r = [1]
        top_ir = [1]
        for begin, end in zip(bounds, bounds[1:]):
            loops.append(codes[end] // codes[begin])
            # the outermost run of relevant or of irrelevant loops (the other run is empty)
            run = 1
            if begin == end:
                top_r.append(1)
                top_ir.append(1)
                continue
            outermost_relevant = order[end - 1][0] in relevant
            members = relevant if outermost_relevant else irrelevant
            position = end - 1
            while position >= begin and order[position][0] in members:
                run *= order[position][1]
                position -= 1
            top_r.append(run if outermost_relevant else 1)
            top_ir.append(1 if outermost_relevant else run)
        stationary = 1
        if bounds:
            position = 0
            while position < bounds[1] and order[position][0] in irrelevant:
                stationary *= order[position][1]
                position += 1
        key = (stationary, tuple(loops), tuple(top_r), tuple(top_ir))
        cache = self._role_cache[role]
        state = cache.get(key)
        if state is None:
            levels = [order[begin:end] for begin, end in zip(bounds, bounds[1:])]
            state = cache[key] = self._new_role_state(info, levels, stationary, top_r, top_ir)
        return state

    def _new_role_state(self, info: TensorInfo, levels, stationary: int, top_r: list[int], top_ir: list[int]) -> _RoleState:
        role = info.role
        cycles = [1 if info.is_output else stationary]
        running = 1
        for level in levels:
            for _, size in level:
                running *= size
            cycles.append(running)
        data, data_w, ir = self._role_view(role, levels)
        if ir is not None:
            psum = [ir[-1] > ir[a] * (1 + 1e-9) for a in range(len(ir))]
        else:
            psum = [False] * len(data)
        transfers = self._transfers(info, data, data_w, cycles, psum)
        role_levels = self.levels[role]
        links = self._links[role]
        units = self._spatial[role]["units"]
        cpo = self.cycles_per_op
        first_tile = 0.0
        if role_levels:
            # the first tile of the innermost level, which on-loading cannot hide
            first_tile = data_w[1] * (info.psum_bits if info.is_output and psum[1] else info.bits)
        breakdown: dict[str, float] = {}
        stall_items = []
        busy_items = []
        once_items = []
        records: dict[tuple[str, int, str], int] = {}
        for level, direction, amount, amount_whole, bits, period, count in transfers:
            link = links[level][direction]
            if link is None or count == 0:
                continue
            slot, bandwidth, min_bandwidth, word_fraction, access_energy, name, flag_index, loads, record = link
            real = math.ceil(amount_whole * bits / bandwidth)
            # the window a transfer may take: its whole period when the memory it fills is
            # double-buffered, else the period over that memory's outermost irrelevant loops
            allowed_buffered = math.ceil(period * cpo)
            allowed_single = math.ceil(int(period / top_ir[flag_index]) * cpo)
            stall_items.append((slot, real, allowed_buffered, allowed_single, flag_index, count))
            if loads:
                if count == 1:
                    once_items.append((slot, real, math.ceil(first_tile / bandwidth), record))
                else:
                    busy_items.append((slot, math.ceil(amount_whole * bits / period)))
                    records[record] = real
            if amount == 0:
                continue
            words = int(math.ceil(amount * bits / min_bandwidth) * word_fraction * count * units[level + 1])
            breakdown[name] = breakdown.get(name, 0.0) + words * access_energy
        fractions = []
        for m, level in enumerate(role_levels):
            bits = (info.psum_bits if psum[m + 1] else info.bits) if info.is_output else info.bits
            effective = (round(data[m + 1]) * bits) // top_r[m + 1]
            fractions.append(effective / level.memory.size_bits)
        # on/off-loading: the transfers that happen once take a share of what the other
        # tensors leave of their ports (`_load_phases`); without them it is the tensor's own
        loading = self._loading(role, records)
        return _RoleState(levels, breakdown, sum(breakdown.values()), fractions, stall_items, busy_items, once_items, records, loading)

    def evaluate(self, mapping: _Mapping) -> Evaluation:
        cpo = self.cycles_per_op
        order, starts = mapping.order, mapping.starts
        role_state = self._role_state
        codes = self._order_codes(order)
        states = tuple([role_state(role, order, starts[role], codes) for role in ROLES])
        energy = self._macs_energy + sum([state.energy for state in states])
        double = self._double_buffering(states)
        stall = self._stall(states, double)
        compute = self.total_cycles * cpo + stall
        onload, offload = self._load_phases(states, compute)
        ideal = self.total_cycles * cpo
        latency = ideal + stall + onload + offload + self._drain
        return Evaluation(latency, energy, states, ideal, stall, onload, offload)

    def details(self, evaluation: Evaluation) -> tuple[dict[str, float], dict[str, list]]:
        """Energy breakdown and per-tensor temporal levels of an evaluation from `evaluate`."""
        breakdown = {"mac": self.macs_energy()}
        temporal = {}
        for role, state in zip(ROLES, evaluation.per_role):
            for key, value in state.breakdown.items():
                breakdown[key] = breakdown.get(key, 0.0) + value
            temporal[self.infos[role].name] = state.levels
        return breakdown, temporal

    def macs_energy(self) -> float:
        return self.sig.macs * self.mac_energy_each

    def _double_buffering(self, states: tuple[_RoleState, ...]) -> tuple[list[bool], ...]:
        """ZigZag's double-buffer test: a level may refill while it is read if the data it holds
        (without its outermost relevant loops) uses at most half the memory, or fits in what the
        other tensors sharing the memory leave free.  Per role (W, I, O), per architecture
        level (0 = MAC, never)."""
        shared = [0.0] * len(self.memories)
        for state, memory_slots in zip(states, self._memory_slots):
            fractions = state.fractions
            for m, slot in enumerate(memory_slots):
                shared[slot] += fractions[m]
        flags: list[list[bool]] = [[], [], []]
        for position in _DOUBLE_BUFFER_ORDER:
            role_flags = [False]
            fractions = states[position].fractions
            for m, slot in enumerate(self._memory_slots[position]):
                alone = fractions[m]
                if shared[slot] <= 0.5:
                    role_flags.append(True)
                elif alone <= 1 - shared[slot]:
                    role_flags.append(True)
                    # The refill buffer now takes room the other tensors cannot use.
                    shared[slot] += alone
                else:
                    role_flags.append(False)
            flags[position] = role_flags
        return tuple(flags)

    def _stall(self, states: tuple[_RoleState, ...], double: tuple[list[bool], ...]) -> float:
        """Stall (+) or slack (-) cycles per physical port, combined as ZigZag does; returns the
        worst port."""
        by_port: dict[int, list[tuple[int, int, int, int]]] = {}
        for state, flags in zip(states, double):
            for slot, real, allowed_buffered, allowed_single, flag_index, count in state.stall_items:
                # (cycles needed, cycles allowed, period, count) per period of the transfer
                activity = (real, allowed_buffered if flags[flag_index] else allowed_single, allowed_buffered, count)
                activities = by_port.get(slot)
                if activities is None:
                    by_port[slot] = [activity]
                else:
                    activities.append(activity)
        worst = 0.0
        for activities in by_port.values():
            if len(activities) == 1:
                real, allowed, _, count = activities[0]
                combined = (real - allowed) * (count - 1)
            else:
                # ports shared by several transfers recur from one loop order to the next
                key = tuple(activities)
                combined = self._shared_port_stall.get(key)
                if combined is None:
                    combined = self._shared_port_stall[key] = _shared_port_stall(activities)
            if combined > worst:  # max(), as a comparison: it runs per port and order
                worst = combined
        return worst

    def _load_phases(self, states: tuple[_RoleState, ...], compute: float) -> tuple[float, float]:
        """Cycles to fill the lower levels before the first MAC and to drain the last outputs.
        Transfers that happen once are hidden behind compute as far as the port has spare
        bandwidth, down to the innermost level's first tile (ZigZag's on/off-loading)."""
        w_state, i_state, o_state = states  # ROLES' order
        loading = [w_state.loading, i_state.loading, o_state.loading]
        if w_state.once_items or i_state.once_items or o_state.once_items:
            busy: dict[int, float] = {}
            for state in states:
                for slot, bits_per_cycle in state.busy_items:
                    busy[slot] = busy.get(slot, 0.0) + bits_per_cycle
            recorded = [dict(state.records) for state in states]
            once: dict[int, list] = {}
            for position, state in enumerate(states):
                for item in state.once_items:
                    members = once.get(item[0])
                    if members is None:
                        once[item[0]] = [(position, *item)]
                    else:
                        members.append((position, *item))
            for slot, members in once.items():
                bandwidth = self._slot_bandwidth[slot]
                surplus = max(0.0, (bandwidth - busy.get(slot, 0.0)) / bandwidth * compute)
                # the longest first (a stable sort: ties keep the order of the tensors)
                for position, _, real, minimum, key in sorted(members, key=lambda m: -m[2]):
                    cut = min(max(0.0, real - minimum), surplus)
                    surplus -= cut
                    recorded[position][key] = real - cut
            loading = [self._loading(role, records) for role, records in zip(ROLES, recorded)]
        (shared_w, half_w, individual_w), (shared_i, half_i, individual_i), offload = loading
        one = shared_w + max(shared_i + half_i + individual_i, half_w + individual_w)
        two = shared_i + max(shared_w + half_w + individual_w, half_i + individual_i)
        return min(one, two), offload

    def _loading(self, role: str, recorded: dict) -> tuple[float, float, float] | float:
        """One tensor's part of on- or off-loading from the cycles of its transfers: for an
        input, the cycles of its level boundaries whose two ports are both shared by the
        inputs, of the last boundary with one shared port, and of those with none; for the
        output, the cycles to drain it."""
        if role == "O":
            offload = 0.0
            for above, below in self._offload_keys:
                offload += max(recorded.get(above, 0.0), recorded.get(below, 0.0))
            return offload
        shared = half = individual = 0.0
        for fill, drain, first, second in self._onload_plan[role]:
            cycles = max(recorded.get(fill, 0.0), recorded.get(drain, 0.0))
            if first and second:
                shared += cycles
            elif not first and not second:
                individual += cycles
            else:
                half = cycles
        return shared, half, individual

    def _shared_by_inputs(self, role: str, level: int, direction: str) -> bool:
        memory = self.levels[role][level].memory
        port = memory.port_for(role, direction)
        if port is None:
            return False
        return len({r for r, _ in port.allocation if r in ("W", "I")}) > 1

    def _plan_onload(self) -> dict[str, list[tuple[tuple, tuple, bool, bool]]]:
        """Per input role and level boundary: the keys of its two transfers in `recorded` and
        whether each one's port is shared by both inputs."""
        return {
            role: [
                ((role, m, "fh"), (role, m + 1, "tl"), self._shared_by_inputs(role, m, "fh"), self._shared_by_inputs(role, m + 1, "tl"))
                for m in range(len(self.levels[role]) - 1)
            ]
            for role in ("W", "I")
        }

    def _systolic_drain(self) -> int:
        drain = 0
        for dim in self.core.array.systolic_dims:
            used = math.prod(u.frac for u in self.unrolls if u.array_dim == dim)
            drain += max(math.ceil(used) - 1, 0)
        return drain


DEFAULT_BUDGET = 40


def candidate_orderings(lpfs: list[tuple[str, int]], count: int, seed: int) -> list[tuple]:
    """All distinct loop orders when there are at most `count`, else `count` distinct ones drawn
    with a fixed seed (deterministic results)."""
    total = math.factorial(len(lpfs))
    if total <= count * 2:
        return list(unique_orderings(lpfs, cap=count))
    rng = random.Random(seed)
    chosen: set[tuple] = set()
    attempts = 0
    while len(chosen) < count and attempts < count * 20:
        order = lpfs[:]
        rng.shuffle(order)
        chosen.add(tuple(order))
        attempts += 1
    return sorted(chosen)


def search_with_spilling(sig: LoopNestSig, core: Core, budget: int = 0) -> tuple[NestModel, Evaluation]:
    """Search; when no order fits because a tensor that fits its top memory alone leaves no
    room for the others' tiles there, move the largest such tensor to DRAM and search again."""
    extra: tuple[str, ...] = ()
    while True:
        model = NestModel(sig, core, extra)
        try:
            return model, search(model, budget=budget or DEFAULT_BUDGET)
        except InvalidMapping:
            candidates = [r for r in ROLES if r not in model.spilled]
            if core.dram is None or not candidates:
                raise
            sizes = {r: tensor_elements(model.infos[r], sig.dims) * model.infos[r].bits for r in candidates}
            extra = extra + (max(candidates, key=lambda r: sizes[r]),)


def search(model: NestModel, limit: int = LPF_LIMIT, budget: int = DEFAULT_BUDGET) -> Evaluation:
    """The best temporal mapping under the core's `MapperOptions`: the user's loop order when the
    nest's mapping gives one, every order LOMA would try (`exhaustive`), or a sample (`fast`)."""
    mapper = model.core.mapper
    lpfs = loop_prime_factors(model.temporal, limit)
    if not lpfs:
        lpfs = [("B", 1)]
    mapping = model.sig.mapping
    if mapping is not None and mapping.temporal:
        return _given_order(model, mapping)
    if mapper.search == "exhaustive":
        return exhaustive_search(model, lpfs, OBJECTIVE_KEYS[mapper.objective])
    if mapper.objective != "latency":
        # energy is flat across loop orders (ResNet-18's layer3 convs on tpu_like: the cheapest
        # order is 1.2 % cheaper and 1.5x slower than the sample's best), so the fast mapper
        # grows where that is cheap: all orders up to LOMA's usual 720, a larger sample beyond
        if ordering_count(lpfs) <= MAX_ORDERINGS:
            return exhaustive_search(model, lpfs, OBJECTIVE_KEYS[mapper.objective])
        budget *= 5
    return sampled_search(model, lpfs, budget, mapper.objective)


def ordering_count(lpfs: list[tuple[str, int]]) -> int:
    """Distinct orders of the loop prime factors (LOMA's permutation count)."""
    count = math.factorial(len(lpfs))
    seen: dict[tuple[str, int], int] = {}
    for loop in lpfs:
        seen[loop] = seen.get(loop, 0) + 1
    for repeats in seen.values():
        count //= math.factorial(repeats)
    return count


def _objective_latency(result: Evaluation) -> tuple:
    return (result.latency, result.energy)


def _objective_energy(result: Evaluation) -> tuple:
    return (result.energy, result.latency)


def _objective_edp(result: Evaluation) -> tuple:
    return (result.latency * result.energy,)


# ZigZag's MinimalLatency/MinimalEnergy/MinimalEDP stages: the other figure breaks a tie (none for EDP)
OBJECTIVE_KEYS = {"latency": _objective_latency, "energy": _objective_energy, "edp": _objective_edp}


def exhaustive_search(model: NestModel, lpfs: list[tuple[str, int]], key) -> Evaluation:
    """Every distinct order of the loop prime factors (LOMA's permutation space); the strictly
    best one under `key` (the first of equals, as ZigZag keeps it)."""
    best: Evaluation | None = None
    best_key = None
    allocate, evaluate = model.allocate, model.evaluate
    for order in unique_orderings(lpfs, cap=None):
        try:
            mapping = allocate(order)
        except InvalidMapping:
            continue
        result = evaluate(mapping)
        result_key = key(result)
        if best is None or result_key < best_key:
            best, best_key = result, result_key
    if best is None:
        raise InvalidMapping(f"no loop order of {model.sig.kind} fits the memories of core {model.core.name}")
    return best


def _given_order(model: NestModel, mapping) -> Evaluation:
    """The loop order a mapping file's temporal_ordering gives (innermost first; size 0 is
    ZigZag's `*`, what is left of the dim), checked against the nest's temporal loops."""
    left = dict(model.temporal)
    order = []
    for dim, size in mapping.temporal:
        remaining = left.get(dim, 1)
        size = size or remaining
        if size == 1:
            continue
        if remaining % size:
            raise InvalidMapping(f"{mapping.entry}: temporal_ordering [{dim}, {size}] does not divide what is left "
                                 f"of {dim} ({remaining}) after the spatial mapping")
        left[dim] = remaining // size
        order.append((dim, size))
    rest = {d: s for d, s in left.items() if s > 1}
    if rest:
        missing = ", ".join(f"{d} {s}" for d, s in rest.items())
        raise InvalidMapping(f"{mapping.entry}: temporal_ordering leaves loops unordered ({missing}); list every "
                             "temporal loop or use '*'")
    return model.evaluate(model.allocate(tuple(order) or (("B", 1),)))


def sampled_search(model: NestModel, lpfs: list[tuple[str, int]], budget: int, objective: str) -> Evaluation:
    """Find a good temporal mapping within `budget` evaluations.

    LOMA evaluates every order of the loop prime factors (720 for a typical conv, 5040 with a
    batch loop); most of them are redundant.  We evaluate two thirds of the budget on orders
    drawn at random (fixed seed), then spend the rest improving the best one by swapping
    neighbouring loops while that helps."""
    key = OBJECTIVE_KEYS[objective]
    seen: set[tuple] = set()
    best: tuple[tuple, Evaluation, tuple] | None = None
    results: list[Evaluation] = []

    def consider(order: tuple) -> bool:
        nonlocal best
        if order in seen:
            return False
        seen.add(order)
        try:
            mapping = model.allocate(order)
        except InvalidMapping:
            return False
        result = model.evaluate(mapping)
        results.append(result)
        result_key = key(result)
        if best is None or result_key < best[2]:
            best = (order, result, result_key)
            return True
        return False

    sampled = max(1, (2 * budget) // 3)
    for order in candidate_orderings(lpfs, sampled, seed=len(lpfs) * 7919 + model.total_cycles % 7919):
        consider(order)
    improved = True
    while improved and best is not None and len(seen) < budget:
        improved = False
        order = list(best[0])
        for i in range(len(order) - 1):
            if len(seen) >= budget:
                break
            if order[i][0] == order[i + 1][0]:
                continue
            swapped = order[:]
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
            if consider(tuple(swapped)):
                improved = True
                break
    if best is None:
        # Random orders all overflowed a memory: try the first orders of the exhaustive list.
        for order in unique_orderings(lpfs, cap=2 * budget):
            consider(order)
            if best is not None:
                break
    if best is None:
        raise InvalidMapping(f"no loop order of {model.sig.kind} fits the memories of core {model.core.name}")
    if objective == "latency":
        return choose(results)
    if objective == "energy":
        return choose_by_energy(results)
    return min(results, key=key)


LATENCY_TOLERANCE = 0.001
ENERGY_TOLERANCE = 0.001


def choose(results: list[Evaluation]) -> Evaluation:
    """The lowest-energy mapping among those within LATENCY_TOLERANCE of the lowest latency.

    ZigZag keeps the strictly fastest mapping; with a sampled search a mapping a few cycles
    faster can cost several times the energy, so near-ties are settled by energy."""
    fastest = min(r.latency for r in results)
    close = [r for r in results if r.latency <= fastest * (1 + LATENCY_TOLERANCE)]
    return min(close, key=lambda r: (r.energy, r.latency))


def choose_by_energy(results: list[Evaluation]) -> Evaluation:
    """The fastest mapping among those within ENERGY_TOLERANCE of the lowest energy: the sampled
    search's counterpart of `choose` (a mapping a fraction of a percent cheaper can take 1.5x the
    cycles on ResNet-18's layer3 convs on tpu_like)."""
    cheapest = min(r.energy for r in results)
    close = [r for r in results if r.energy <= cheapest * (1 + ENERGY_TOLERANCE)]
    return min(close, key=lambda r: (r.latency, r.energy))
