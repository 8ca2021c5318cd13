"""MONET passes by command-line name (kebab-case), each behind a lazy factory.

One file per pass: `passes/<snake_name>.py` holds `<Camel>Pass` with a docstring listing its
options; `tests/lit/passes/<snake_name>.mlir` tests it.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {}
