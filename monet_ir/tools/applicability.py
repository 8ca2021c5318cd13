"""Options given where they cannot apply are errors, never silently ignored.

`check(args)` runs on every `monet` command's parsed arguments before any work: each rule names
an option, the commands it concerns and when it cannot apply; an option the user gave (not a
default: `ArgumentParser.given`) that a rule refuses is a one-line usage error saying what it
applies to. Options whose use depends on the model (`--dim`, `--freeze`, `--loss` on a graph that
holds its loss, `--optimizer` on an ONNX Runtime training graph, a `--mapping` entry) are checked
once the model is read, where they act; those that depend on files (`--checkpoint plan=`,
`--target`, `--system`) when the options are resolved (`monet_ir.pipeline.resolve`).
`tests/unit/test_option_applicability.py` walks every option of every sub-command.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from monet_ir.errors import UsageError


def _has_mx(text: str | None) -> bool:
    return bool(text) and "mx" in text.lower()


def _mx_wanted(args: argparse.Namespace) -> bool:
    return _has_mx(getattr(args, "precision", None)) or any(_has_mx(p) for p in getattr(args, "precisions", None) or [])


def _plan_search(args: argparse.Namespace) -> bool:
    return args.command == "plan" or (args.command == "explore" and args.search.strip() == "parallel")


@dataclass(frozen=True)
class Rule:
    """`dests` cannot apply on `commands` when `refuses(args)`; `why` says what they apply to."""

    dests: tuple[str, ...]
    commands: tuple[str, ...]
    refuses: Callable[[argparse.Namespace], bool]
    why: str


RULES = (
    Rule(("mx_block", "mx_group"), ("report", "explore", "sweep", "plan"), lambda a: not _mx_wanted(a),
         "applies to MX formats (--precision mxint8, mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4_e2m1)"),
    Rule(("tiles",), ("report",), lambda a: a.fusion in (None, "none"),
         "applies to fused stacks (--fusion auto or FIRST:LAST,...)"),
    Rule(("plot_format",), ("report", "explore", "sweep"), lambda a: a.no_plots, "has no plots to draw with --no-plots"),
    Rule(("loss", "labels", "optimizer", "lr"), ("report",), lambda a: a.inference,
         "applies to a training step, not --inference (the forward pass only)"),
    Rule(("labels",), ("report", "explore", "sweep", "plan"), lambda a: a.loss in ("sum", "none"),
         "names the input of a loss that has one (cross-entropy, mse); --loss sum and none add no labels"),
    Rule(("microbatches", "zero", "tp", "bucket"), ("explore",), lambda a: not _plan_search(a),
         "applies to the parallel plan search (--search parallel with --system, or monet plan)"),
    Rule(("population", "generations", "seed", "jobs", "budget", "exact", "objective", "precisions", "mx_groups",
          "memory_budget", "time_budget"), ("explore",), _plan_search,
         "does not apply to --search parallel (the plan search tries every plan; no genetic search)"),
    Rule(("time_limit",), ("explore",), lambda a: a.exact != "full",
         "applies to --exact full (the time limit of each stage-expanded MILP solve)"),
    Rule(("budget",), ("explore",), lambda a: a.objective == "energy",
         "is the budget of --objective schedule and checkpoint; --objective energy takes --memory-budget"),
    Rule(("precisions", "mx_groups"), ("explore",), lambda a: "precision" not in a.search.split(","),
         "applies to --search ...,precision"),
)


def check(args: argparse.Namespace) -> None:
    """A one-line `UsageError` for the first option given that cannot apply (module docstring)."""
    given = getattr(args, "given_options", frozenset())
    for rule in RULES:
        if args.command not in rule.commands:
            continue
        shown = [d for d in rule.dests if d in given]
        if shown and rule.refuses(args):
            flag = "--" + shown[0].replace("_", "-")
            raise UsageError(f"{flag} {rule.why}")
