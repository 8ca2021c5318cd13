"""Lazy registries: upstream xDSL dialects and passes that MONET uses, plus our own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.passes import ModulePass

UPSTREAM_DIALECTS = ("builtin", "func", "arith", "tensor", "test", "dlti")
UPSTREAM_PASSES = ("canonicalize", "cse", "dce")


def all_dialects() -> dict[str, Callable[[], Dialect]]:
    from xdsl.dialects import get_all_dialects as upstream

    from dialects import get_all_dialects as ours

    available = upstream()
    table = {name: available[name] for name in UPSTREAM_DIALECTS}
    table.update(ours())
    return table


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    from xdsl.transforms import get_all_passes as upstream

    from passes import get_all_passes as ours

    available = upstream()
    table = {name: available[name] for name in UPSTREAM_PASSES}
    table.update(ours())
    return table


def make_context() -> Context:
    ctx = Context()
    for name, factory in all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
