"""`ga.pareto_front` against the definition (every point compared with every other)."""

from __future__ import annotations

import random

import pytest

from monet_ir.explore import ga


def front_by_definition(points):
    by_value = {}
    for g, v in points.items():
        if v not in by_value or g < by_value[v]:
            by_value[v] = g
    values = sorted(by_value)
    return [by_value[v] for v in values
            if v[0] < ga.PENALTY and not any(ga.dominates(w, v) for w in values if w != v)]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("objectives", [1, 2, 3, 4])
def test_front_is_the_definition(seed, objectives):
    rng = random.Random(seed)
    levels = rng.choice([3, 10, 1000])  # few levels: many ties and equal points
    points = {}
    for i in range(rng.randrange(1, 400)):
        genome = tuple(rng.randrange(3) for _ in range(6)) + (i % 7,)
        if rng.random() < 0.05:
            points[genome] = (ga.PENALTY,) * objectives
        else:
            points[genome] = tuple(float(rng.randrange(levels)) for _ in range(objectives))
    assert ga.pareto_front(points) == front_by_definition(points)


def test_penalized_points_are_never_on_the_front():
    points = {(0,): (ga.PENALTY, ga.PENALTY), (1,): (ga.PENALTY, 0.0), (2,): (5.0, 5.0)}
    assert ga.pareto_front(points) == [(2,)]
    assert ga.pareto_front({(0,): (ga.PENALTY, 1.0)}) == []
