"""Output emitters for `monet-opt -t NAME` (xDSL `Target`s), registered lazily."""

from collections.abc import Callable


def _monet_report() -> type:
    from monet_ir.emit.report import MonetReportTarget

    return MonetReportTarget


def get_all_emitters() -> dict[str, Callable[[], type]]:
    return {
        "monet-report": _monet_report,
    }
