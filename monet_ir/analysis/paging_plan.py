"""Per saved activation: keep, recompute or page. The plan file, its checks and the page marks.

A *plan* decides, per forward node with saved results, what happens to those results between
the forward and the backward pass:

- `keep`: stored in memory (the default for nodes a plan does not name);
- `recompute`: dropped and recomputed before their first backward use (as
  `activation-checkpoint{policy="list=..."}`);
- `page`: written out to the target's storage level after their last forward use and read
  back before their first backward use (POET's paging); the values are unchanged.

Plan files are JSON (`activation-checkpoint{policy="plan=FILE.json"}`,
`monet report --checkpoint plan=FILE.json`, written by `monet explore` as `plan.json`):

    {"activations": {"/conv1/Conv": "page", "/relu/Relu": "recompute", "/fc/Gemm": "keep"}}

Other top-level fields (what wrote the plan, its predicted figures) are informative and
ignored. `read_plan(path)` checks the file and returns {node: decision}; a problem raises
`PlanError` naming the file and the field.

Page marks: the pass marks each paged storage's producing forward op with
`monet.page = array<i64: result indices>` (`mark_paged`); the scheduler's task graph reads
them (`paged_results`) and adds a page-out and a page-in task per paged storage
(`monet_ir.schedule.paging`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Operation, SSAValue

from monet_ir.analysis.checkpoint_policies import CheckpointProblem, PlanError
from monet_ir.analysis.saved import storage_of

PAGE_ATTR = "monet.page"
DECISIONS = ("keep", "recompute", "page")


def read_plan(path: str) -> dict[str, str]:
    """The decisions of a plan file, {forward node: keep|recompute|page}."""
    try:
        with open(path, encoding="utf-8") as handle:
            data: Any = json.load(handle)
    except FileNotFoundError:
        raise PlanError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise PlanError(f"{path}: is a directory, not a plan file") from None
    except UnicodeDecodeError as e:
        raise PlanError(f"{path}: not UTF-8 text ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise PlanError(f"{path}: line {e.lineno} column {e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a JSON object with an 'activations' object")
    activations = data.get("activations")
    if not isinstance(activations, dict):
        what = "missing" if activations is None else f"expected an object, got {type(activations).__name__}"
        raise PlanError(f"{path}: activations: {what} (node -> keep|recompute|page)")
    plan = {}
    for node, decision in activations.items():
        if decision not in DECISIONS:
            raise PlanError(f"{path}: activations.{node}: unknown decision {decision!r} (use keep, recompute or page)")
        plan[node] = decision
    return plan


def write_plan(path: str, plan: dict[str, str], **info: Any) -> None:
    """Write a plan file: the decisions (only the nodes not kept) and informative fields."""
    data = dict(info)
    data["activations"] = {node: d for node, d in plan.items() if d != "keep"}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=False)
        handle.write("\n")


def plan_paged(problem: CheckpointProblem, names: Iterable[str]) -> frozenset[SSAValue]:
    """The saved storages of the forward nodes named: any saved activation can be paged (random
    results and the loss's too); an unknown node or one without saved results is a `PlanError`."""
    paged: set[SSAValue] = set()
    saved, by_node = problem.saved_values, problem.forward_by_node
    for name in names:
        ops = by_node.get(name, [])
        if not ops:
            raise PlanError(f"no forward op has node '{name}'")
        storages = {storage_of(r) for op in ops for r in op.results if r in saved}
        storages = {s for s in storages if s in problem.saved_views}
        if not storages:
            raise PlanError(f"no result of node '{name}' is a saved activation: there is nothing to page")
        paged |= storages
    return frozenset(paged)


def mark_paged(storages: Iterable[SSAValue]) -> None:
    """Mark each storage's producing op with the indices of its paged results."""
    by_op: dict[Operation, set[int]] = {}
    for s in storages:
        by_op.setdefault(s.op, set()).add(s.index)  # type: ignore[attr-defined]
    for op, indices in by_op.items():
        op.attributes[PAGE_ATTR] = DenseArrayBase.from_list(i64, sorted(indices))


def paged_results(op: Operation) -> tuple[int, ...]:
    """The indices of the results of `op` the plan pages (none without a mark)."""
    mark = op.attributes.get(PAGE_ATTR)
    if not isinstance(mark, DenseArrayBase):
        return ()
    return tuple(int(v) for v in mark.get_values())
