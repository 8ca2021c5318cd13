"""Fewer garbage collections while a one-shot tool builds and schedules a step.

A report allocates millions of small objects that live until the end (IR ops, tasks, prices),
so CPython's default thresholds (a young collection every 700 allocations, a full one when the
survivors grow by a quarter) traverse the same live objects over and over: on a 48-layer
GPT-2-XL-shaped step that was 0.35-0.4 s of a 2.7 s report, and it grows faster than the step
(more collections, each over more objects). `fewer_collections()` raises the thresholds for the
duration of a report and restores them afterwards (tests run reports in-process); garbage
cycles are still collected, only less often.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (10_000, 50, 100)


@contextmanager
def fewer_collections(thresholds: tuple[int, int, int] = THRESHOLDS) -> Iterator[None]:
    previous = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
