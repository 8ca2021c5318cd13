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

A plan may also give tensors a *home in storage* (POET keeps what does not fit in the larger,
slower store): `"storage": [NAME, ...]` names step arguments (parameters, optimizer state, the
batch: `fc1.weight`, `fc1.weight.exp_avg`) and values (gradients `d_fc1.weight`, activations by
their name) that live in the storage level and are paged into main memory around each use
(`monet_ir.schedule.paging.add_storage_tasks`); `"tile_bytes": N` bounds the main memory such a
tensor occupies while it is used (larger ones are moved through it in tiles; default: a sixteenth
of main memory, whole storage pages). Either field may stand without `activations`.

Other top-level fields (what wrote the plan, its predicted figures) are informative and
ignored. `read_plan(path)` checks the file and returns {node: decision}, `read_plan_file(path)`
the whole `Plan`; a problem raises `PlanError` naming the file and the field.

Page marks: the pass marks each paged storage's producing forward op with
`monet.page = array<i64: result indices>` (`mark_paged`); the scheduler's task graph reads
them (`paged_results`) and adds a page-out and a page-in task per paged storage
(`monet_ir.schedule.paging`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr, i64
from xdsl.ir import Operation, SSAValue

from monet_ir.analysis.checkpoint_policies import CheckpointProblem, PlanError
from monet_ir.analysis.saved import storage_of

PAGE_ATTR = "monet.page"
STORAGE_ATTR = "monet.storage"  # on the step function: names of the tensors whose home is storage
TILE_ATTR = "monet.storage_tile"  # on the step function: tile_bytes of the plan (absent: default)
DECISIONS = ("keep", "recompute", "page")


@dataclass
class Plan:
    """A plan file: per forward node keep|recompute|page, the tensors kept in storage, the tile."""

    activations: dict[str, str] = field(default_factory=dict)
    storage: list[str] = field(default_factory=list)
    tile_bytes: int | None = None


def read_plan(path: str) -> dict[str, str]:
    """The decisions of a plan file, {forward node: keep|recompute|page}."""
    return read_plan_file(path).activations


def read_plan_file(path: str) -> Plan:
    """The whole plan file (see the module docstring)."""
    from monet_ir.untrusted import UntrustedFileError, load_json_file, short_repr

    try:
        data: Any = load_json_file(path)
    except UntrustedFileError as e:
        raise PlanError(str(e)) from None
    except FileNotFoundError:
        raise PlanError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise PlanError(f"{path}: is a directory, not a plan file") from None
    except UnicodeDecodeError as e:
        raise PlanError(f"{path}: not UTF-8 text ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise PlanError(f"{path}: line {e.lineno} column {e.colno}: invalid JSON: {e.msg}") from None
    except OSError as e:
        raise PlanError(f"{path}: cannot read: {e.strerror}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a JSON object with an 'activations' object")
    activations = data.get("activations")
    storage = data.get("storage", [])
    if not isinstance(storage, list) or not all(isinstance(n, str) and n for n in storage):
        raise PlanError(f"{path}: storage: expected a list of tensor names")
    tile = data.get("tile_bytes")
    if tile is not None and (isinstance(tile, bool) or not isinstance(tile, int) or tile <= 0):
        raise PlanError(f"{path}: tile_bytes: expected a positive integer, got {short_repr(tile)}")
    if activations is None and ("storage" in data or "tile_bytes" in data):
        activations = {}
    if not isinstance(activations, dict):
        what = "missing" if activations is None else f"expected an object, got {type(activations).__name__}"
        raise PlanError(f"{path}: activations: {what} (node -> keep|recompute|page)")
    plan = {}
    for node, decision in activations.items():
        if decision not in DECISIONS:
            raise PlanError(f"{path}: activations.{short_repr(node)[1:-1]}: unknown decision {short_repr(decision)} "
                            f"(use keep, recompute or page)")
        plan[node] = decision
    return Plan(plan, list(dict.fromkeys(storage)), tile)


def write_plan(path: str, plan: dict[str, str], storage: Iterable[str] = (), tile_bytes: int | None = None,
               **info: Any) -> None:
    """Write a plan file: the decisions (only the nodes not kept), the tensors kept in storage,
    the tile, and informative fields."""
    data = dict(info)
    data["activations"] = {node: d for node, d in plan.items() if d != "keep"}
    storage = list(storage)
    if storage:
        data["storage"] = storage
    if tile_bytes is not None:
        data["tile_bytes"] = int(tile_bytes)
    from monet_ir.files import write_atomic

    write_atomic(path, json.dumps(data, indent=1, sort_keys=False) + "\n")


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


def value_name(value: Any) -> str:
    """The name the scheduler's task graph gives a value: its name hint, else its op's node (else
    the op's name); several values may share one."""
    from monet_ir import graph as ir_graph

    return value.name_hint or ir_graph.op_node(value.op) or value.op.name


def step_tensor_names(fn: Any) -> set[str]:
    """Names a plan's `storage` may use: the step's arguments and its values' names
    (`value_name`)."""
    from monet_ir import graph as ir_graph

    names = {info.name for info in ir_graph.arg_infos(fn) if info.name}
    for op in fn.body.block.ops:
        names.update(value_name(r) for r in op.results)
    return names


def mark_storage(fn: Any, names: Iterable[str], tile_bytes: int | None, where: str = "") -> None:
    """Record the tensors kept in storage (and the tile) on the step function; a name that is
    neither an argument nor a value of the step is a `PlanError`."""
    names = list(dict.fromkeys(names))
    known = step_tensor_names(fn) if names else set()
    for i, name in enumerate(names):
        if name not in known:
            raise PlanError(f"{where}storage[{i}]: no argument or value of the step is named '{name}'")
    if names:
        fn.attributes[STORAGE_ATTR] = ArrayAttr([StringAttr(n) for n in names])
    else:
        fn.attributes.pop(STORAGE_ATTR, None)
    if tile_bytes is not None:
        fn.attributes[TILE_ATTR] = IntegerAttr(tile_bytes, i64)
    else:
        fn.attributes.pop(TILE_ATTR, None)


def stored_names(fn: Any) -> tuple[list[str], int | None]:
    """The names `mark_storage` recorded and the tile (None: the default)."""
    names = fn.attributes.get(STORAGE_ATTR)
    tile = fn.attributes.get(TILE_ATTR)
    listed = [a.data for a in names.data] if isinstance(names, ArrayAttr) else []
    return listed, (tile.value.data if isinstance(tile, IntegerAttr) else None)
