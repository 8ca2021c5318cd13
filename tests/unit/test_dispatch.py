"""How `monet_ir.explore.dispatch` cuts a batch of items into chunks for its workers."""

from __future__ import annotations

import pytest

from monet_ir.explore.dispatch import LocalBackend, chunks


@pytest.mark.parametrize("n", [1, 2, 5, 16, 60, 64, 200])
@pytest.mark.parametrize("workers", [1, 2, 8])
def test_chunks_keep_every_item_in_order(n, workers):
    parts = chunks(list(range(n)), workers)
    assert [i for part in parts for i in part] == list(range(n))
    assert all(parts)


@pytest.mark.parametrize("n", [16, 64, 200])
@pytest.mark.parametrize("workers", [2, 8])
def test_chunks_shrink_to_single_items_at_the_end(n, workers):
    """Guided self-scheduling: large chunks first (few round trips), one item each at the end,
    so no worker waits at the end of a batch for more than about one item of another's."""
    sizes = [len(part) for part in chunks(list(range(n)), workers)]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[-workers:] == [1] * workers
    assert len(sizes) <= 2 * workers * 4 + 8  # round trips stay few (about 4 per worker and a tail)


def test_chunks_start_large():
    # 64 items on 2 workers: a quarter, then less and less (not eight chunks of 8)
    assert [len(part) for part in chunks(list(range(64)), 2)] == [16, 12, 9, 7, 5, 4, 3, 2, 2, 1, 1, 1, 1]


class _Square:
    key = "square"

    def build(self):
        return 10

    def run(self, state, item):
        return state + item * item

    def failed(self, item, reason):
        return None


def test_local_workers_return_results_in_item_order():
    backend = LocalBackend(_Square(), jobs=2)
    try:
        assert backend.map(list(range(40))) == [10 + i * i for i in range(40)]
    finally:
        backend.close()
