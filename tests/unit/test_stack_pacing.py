"""The reach of a fused stack's last-layer tiles (`_first_tiles_reached`, which paces the
stack): the one pass in index order gives what walking the dependencies back gives, on random
graphs, and on graphs where a task depends on a later one (it then walks)."""

from __future__ import annotations

import random

from monet_ir.schedule import taskgraph
from monet_ir.schedule.taskgraph import Task, _first_tiles_reached, _first_tiles_reached_walk


def random_stack(rng: random.Random, later: bool) -> tuple[list[Task], list[int], list[int]]:
    """Tasks before the stack, a first layer, other tasks (layers, stepped-over ops), a last
    layer, tasks after; random predecessors, lower-indexed unless `later`."""
    before, tiles, middle = rng.randint(0, 5), rng.randint(3, 12), rng.randint(0, 30)
    count = before + 2 * tiles + middle + rng.randint(0, 5)
    first = list(range(before, before + tiles))
    last = list(range(before + tiles + middle, before + 2 * tiles + middle))
    tasks = []
    for index in range(count):
        preds = {rng.randrange(index) for _ in range(rng.randint(0, 3))} if index else set()
        tasks.append(Task(index, "nn.add", "", "forward", None, (), (), preds))
    if later:  # e.g. a page task appended after the ops, that a stack task waits for
        tasks.append(Task(count, "page", "", "forward", None, (), (), {rng.choice(first)}))
        tasks[rng.choice(last)].preds.add(count)
    return tasks, first, last


def test_one_pass_gives_the_reach_of_the_walk():
    rng = random.Random(5)
    for _ in range(300):
        tasks, first, last = random_stack(rng, later=False)
        preds = [t.preds for t in tasks]
        reach = _first_tiles_reached(preds, first, last)
        walked = _first_tiles_reached_walk(preds, first, last)
        assert {i: reach[i] for i in last} == {i: walked[i] for i in last}


def test_a_later_predecessor_falls_back_to_the_walk(monkeypatch):
    rng = random.Random(6)
    walks = []

    def walk(*args):
        walks.append(args)
        return _first_tiles_reached_walk(*args)

    monkeypatch.setattr(taskgraph, "_first_tiles_reached_walk", walk)
    for n in range(50):
        tasks, first, last = random_stack(rng, later=True)
        preds = [t.preds for t in tasks]
        reach = _first_tiles_reached(preds, first, last)
        assert len(walks) == n + 1
        walked = _first_tiles_reached_walk(preds, first, last)
        assert {i: reach[i] for i in last} == {i: walked[i] for i in last}
