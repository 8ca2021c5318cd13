"""Output emitters for `monet-opt -t NAME` (xDSL `Target`s), registered lazily."""

from collections.abc import Callable


def get_all_emitters() -> dict[str, Callable[[], type]]:
    return {}
