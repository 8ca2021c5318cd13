"""`monet sweep`: one training step on every design of a hardware parameter grid.

The template is a target YAML in our format (docs/targets.md). Parameters, each a list of
values, come from `--set PATH=v1,v2,...` options and/or a top-level `sweep:` mapping in the
template (`PATH: [v1, v2]`; removed before the target is loaded; a `--set` of the same PATH
replaces it). The designs are the Cartesian product, the first parameter varying slowest.

PATH is a dotted path into the YAML data: mapping keys and list indices
(`dram.bandwidth_GBps`, `cores.0.array.dims.D1`); `*` matches every key or element
(`cores.*.memories.sram_2MB.size` sets it in every core that has it; at least one match is
required); `A+B` sets several paths to the same value (`cores.*.array.dims.D1+cores.*.array.dims.D2=16,32`
for square arrays). `count(PREFIX)` sets how many cores whose name starts with PREFIX there are:
the first such core is repeated N times in its place, named PREFIX0..PREFIX{N-1} (core ids
shift, so the template's interconnect must not list core ids, e.g. `topology: bus` or
`all_to_all` over all cores). Values are YAML scalars: `32`, `8.0`, `2 MiB`.

Each design is written to `designs/design_<k>.yaml` and loaded with `get_target`; the training
step (built once, as `monet report` builds it, with `--checkpoint` if given) is scheduled on it.
Per design: `latency_cycles`, `latency_s`, `energy_pj`, `peak_memory_bytes` (the sum over all
memories, as in `monet explore`), `dram_peak_bytes`, `fits`, and the area proxy: the target
descriptions carry no area figures, so `area_proxy = macs + sram_bytes`, with `macs` the
processing units of every core's array and `sram_bytes` the on-chip memory of every core, each
level counted once per instance (an instance per array unit, divided by the sizes of the
`served_dims` it is shared along). A design that does not load or cannot run the step gets an
`error` instead.

Designs are evaluated in batches through a backend (`monet_ir.explore.dispatch`: in the process
with `--jobs 1`, local worker processes, or Ray tasks with the task graph shipped once), rows
kept in design order; `sweep.csv` is rewritten after every batch, and `--resume DIR` skips the
designs already in it (checked to be the same grid points). Each row of `sweep.csv` ends with
`row_sha256`, a checksum of its other cells (`row_checksum`): a resumed sweep evaluates again,
with one notice, every design whose row was edited or corrupted (or has no checksum) instead of
taking its numbers.
"""

from __future__ import annotations

import argparse
import copy
import csv
import itertools
import json
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monet_ir.errors import UsageError

COUNT = re.compile(r"count\((?P<prefix>[^)]*)\)")


def parse_values(text: str) -> list[Any]:
    import yaml

    from monet_ir.untrusted import load_yaml

    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            values.append(load_yaml(part))
        except yaml.YAMLError:
            values.append(part)
    return values


def parameters(template: dict[str, Any], sets: list[str]) -> list[tuple[str, list[Any]]]:
    """(path, values) in order: the template's `sweep:` entries, then `--set` options."""
    params: dict[str, list[Any]] = {}
    raw = template.get("sweep") or {}
    if not isinstance(raw, dict):
        raise UsageError("sweep: in the template must map PATH to a list of values")
    for path, values in raw.items():
        params[str(path)] = list(values) if isinstance(values, list) else [values]
    for entry in sets:
        path, sep, values = entry.partition("=")
        if not sep or not path.strip() or not values.strip():
            raise UsageError(f"--set {entry}: expected PATH=VALUE[,VALUE...]")
        params[path.strip()] = parse_values(values)
    if not params:
        raise UsageError("nothing to sweep: give --set PATH=v1,v2,... or a sweep: section in the template")
    return list(params.items())


def apply(data: dict[str, Any], path: str, value: Any) -> None:
    for single in path.split("+"):
        match = COUNT.fullmatch(single.strip())
        if match:
            set_count(data, match.group("prefix"), value)
        else:
            if _set(data, single.strip().split("."), value, single) == 0:
                raise UsageError(f"--set {path}: '{single}' matches nothing in the template")


def _set(node: Any, keys: list[str], value: Any, path: str) -> int:
    key, rest = keys[0], keys[1:]
    if isinstance(node, dict):
        targets = list(node) if key == "*" else [key] if key in node or not rest else []
    elif isinstance(node, list):
        if key == "*":
            targets = list(range(len(node)))
        elif key.lstrip("-").isdigit() and -len(node) <= int(key) < len(node):
            targets = [int(key)]
        else:
            targets = []
    else:
        return 0
    count = 0
    for k in targets:
        if not rest:
            if key == "*" and isinstance(node, dict) and isinstance(node[k], dict | list):
                continue
            node[k] = value
            count += 1
        elif isinstance(node[k], dict | list):
            count += _set(node[k], rest, value, path)
    return count


def set_count(data: dict[str, Any], prefix: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"count({prefix}): the number of cores must be a positive integer, got {value!r}")
    cores = data.get("cores")
    if not isinstance(cores, list):
        raise UsageError("count(...): the template has no list of cores")
    matching = [i for i, c in enumerate(cores) if isinstance(c, dict) and str(c.get("name", "")).startswith(prefix)]
    if not matching:
        raise UsageError(f"count({prefix}): no core name starts with '{prefix}'")
    first = matching[0]
    model = cores[first]
    copies = []
    for i in range(value):
        core = copy.deepcopy(model)
        core["name"] = f"{prefix}{i}"
        copies.append(core)
    rest = [c for i, c in enumerate(cores) if i not in matching]
    data["cores"] = rest[:first] + copies + rest[first:]


def designs(template: dict[str, Any], params: list[tuple[str, list[Any]]]):
    """(settings, data) for every point of the grid."""
    base = json.loads(json.dumps({k: v for k, v in template.items() if k not in ("sweep", "templates")}))
    for combo in itertools.product(*(values for _, values in params)):
        data = copy.deepcopy(base)
        settings = {}
        for (path, _), value in zip(params, combo, strict=True):
            apply(data, path, value)
            settings[path] = value
        yield settings, data


def area_figures(target) -> dict[str, float]:
    macs = 0
    sram = 0.0
    for core in target.cores:
        units = core.array.units
        macs += units
        for memory in core.memories:
            shared = 1
            for dim in memory.served_dims:
                try:
                    shared *= core.array.dim_size(dim)
                except (KeyError, ValueError):
                    pass
            sram += memory.size_bytes * max(1, units // max(1, shared))
    return {"macs": macs, "sram_bytes": int(sram), "area_proxy": macs + int(sram)}


METRICS = ("macs", "sram_bytes", "area_proxy", "latency_cycles", "latency_s", "energy_pj", "peak_memory_bytes",
           "dram_peak_bytes", "fits", "error")


@dataclass
class SweepWork:
    """What a worker needs to evaluate designs (see `dispatch.Work`): the step's task graph
    (built once, shipped once) and the precision options. An item is (k, path, data): the
    design's YAML file (used where it exists) and its content (written to a temporary file
    where it does not, on a Ray worker of another machine)."""

    graph: Any
    precision: str | None
    requested: str | None
    key: str = "sweep"
    offchip: str | None = None  # `--offchip`: the DRAM a design without one takes
    mapper: Any = None  # `targets.model.MapperOptions` of --mapper and its companions

    def build(self) -> None:
        return None

    def run(self, state: None, item: tuple[int, str, dict[str, Any]]) -> dict[str, Any]:
        from monet_ir.emit.step_report import schedule_report
        from monet_ir.schedule.scheduler import ScheduleError, schedule
        from targets import TargetError, get_target
        from targets.precision_choice import choose_precision

        k, path, data = item
        row: dict[str, Any] = {}
        try:
            with design_file(path, data) as file:
                target = get_target(file, precision=self.precision, offchip=self.offchip, mapper=self.mapper)
            choose_precision(target, self.requested)  # every core of this design must run it
            row.update(area_figures(target))
            report = schedule_report(schedule(self.graph, target))
        except (TargetError, ScheduleError) as e:
            row["error"] = str(e).strip().splitlines()[0]
            return row
        except Exception as e:  # noqa: BLE001  (a cost-model problem of one design must not end the sweep)
            row["error"] = f"{type(e).__name__}: {e}"
            return row
        peaks = report["memory"]["peak_bytes"]
        capacity = report["memory"]["capacity_bytes"]
        dram = target.dram.name if target.dram is not None else "dram"
        row.update({
            "latency_cycles": report["latency_cycles"], "latency_s": report["latency_s"],
            "energy_pj": report["energy_pj"], "peak_memory_bytes": sum(peaks.values()),
            "dram_peak_bytes": peaks.get(dram, 0),
            "fits": all(peaks[m] <= capacity.get(m, math.inf) for m in peaks),
        })
        return row

    def failed(self, item: Any, reason: str) -> dict[str, Any]:
        return {"error": reason}


@contextmanager
def design_file(path: str, data: dict[str, Any]) -> Iterator[str]:
    """`path` if this machine has it, else a temporary copy of `data` with the same name
    (removed afterwards)."""
    if Path(path).is_file():
        yield path
        return
    import tempfile

    import yaml

    with tempfile.TemporaryDirectory(prefix="monet-sweep-") as folder:
        copy_path = Path(folder) / Path(path).name
        copy_path.write_text(yaml.safe_dump(data, sort_keys=False))
        yield str(copy_path)


def run(args: argparse.Namespace, out: Path, progress: Callable[[str], None],
        files: list[str] | None = None) -> list[dict[str, Any]]:
    """The sweep (see the module docstring); the names of the files written are appended to `files`."""
    import yaml

    from monet_ir.files import write_atomic

    from monet_ir import graph as ir_graph
    from monet_ir.explore import dispatch
    from monet_ir.options import StepOptions
    from monet_ir.pipeline import build_step
    from monet_ir.precision import parse_precision
    from monet_ir.schedule.taskgraph import extract
    from targets import builtin_target_path
    from targets.precision_choice import PrecisionChoice
    from targets.stream_legacy import is_list_system

    # a built-in target's name stands for its YAML, a ready template
    template_path = builtin_target_path(args.target_template) or args.target_template
    from monet_ir.untrusted import UntrustedFileError, read_yaml_file

    try:
        template = read_yaml_file(template_path)
    except UntrustedFileError as e:
        raise UsageError(f"--target-template {e}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"--target-template {args.target_template}: not UTF-8 text ({e.reason})") from None
    except OSError as e:
        raise UsageError(f"--target-template {args.target_template}: cannot read file: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"--target-template {args.target_template}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(template, dict) or not isinstance(template.get("cores"), list):
        raise UsageError(f"--target-template {args.target_template}: expected a target in MONET's format (cores: a list)")
    if is_list_system(template):  # Stream's 2024 systems list core files
        raise UsageError(f"--target-template {args.target_template}: expected a target in MONET's format (cores: a "
                         "list of core descriptions), got a Stream system (cores: a list of core files)")
    params = parameters(template, args.set)
    names = [p for p, _ in params]
    grid = list(designs(template, params))
    done = read_done(out, grid, names, progress) if getattr(args, "resume", None) else {}
    progress(f"{len(grid)} designs over {', '.join(names)}"
             + (f"; {len(done)} already in {out / 'sweep.csv'}, skipped" if done else ""))
    # the step of every design: the pipeline's passes before the costing (each design is a target)
    from monet_ir.pipeline import mapper_of

    config = StepOptions.from_args(args, "sweep")
    module = build_step(config, stages=("train", "checkpoint")).module
    requested = config.precision or template.get("default_precision")
    requested = requested if isinstance(requested, str) else None
    policy = parse_precision(requested) if requested else None
    bits = PrecisionChoice(policy.spec(), "", policy).bits if policy else None
    graph = extract(ir_graph.step_function(module), bits=bits)
    folder = out / "designs"
    folder.mkdir(parents=True, exist_ok=True)
    name = str(template.get("name", "design"))
    items = []
    written = files if files is not None else []
    for k, (settings, data) in enumerate(grid):
        data["name"] = f"{name}_d{k}"
        path = folder / f"design_{k}.yaml"
        write_atomic(path, yaml.safe_dump(data, sort_keys=False))
        written.append(f"designs/design_{k}.yaml")
        check_design(str(path), k, settings, args.set)
        if k not in done:
            items.append((k, str(path), data))
    import uuid

    work = SweepWork(graph, config.precision, requested, key=f"sweep-{uuid.uuid4().hex}",
                     offchip=config.offchip or None, mapper=mapper_of(config))  # Ray workers cache by key
    backend_name = getattr(args, "backend", "local")
    jobs = getattr(args, "jobs", 1)
    backend = dispatch.RayBackend(work) if backend_name == "ray" else dispatch.LocalBackend(work, jobs)
    rows_by_design: dict[int, dict[str, Any]] = dict(done)
    batch = 1 if backend_name == "local" and jobs == 1 else max(8, 4 * jobs)
    try:
        for first in range(0, len(items), batch):
            part = items[first:first + batch]
            for (k, _, _), metrics in zip(part, backend.map(part), strict=True):
                settings = grid[k][0]
                row = {"design": k, **settings, **metrics}
                rows_by_design[k] = row
                if "error" in row:
                    progress(f"design {k}: {row['error']}")
                else:
                    progress(f"design {k}/{len(grid)}: {settings} -> {row['latency_cycles']:,} cycles, "
                             f"{row['energy_pj'] / 1e9:.4g} mJ")
            # the CSV holds every design evaluated so far: an interrupted sweep resumes from it
            write_csv([rows_by_design[k] for k in sorted(rows_by_design)], out / "sweep.csv", names)
    except BaseException:
        backend.close(abort=True)  # interrupted or failed: the workers are stopped at once
        raise
    backend.close()
    rows = [rows_by_design[k] for k in range(len(grid))]
    written += write(rows, out, plots=None if args.no_plots else args.plot_format, params=names)
    return rows


def check_design(path: str, k: int, settings: dict[str, Any], sets: list[str]) -> None:
    """A design's target file must be a valid target before anything runs: a `--set` path that
    adds a field the format does not have (a misspelled key) or a value it refuses fails the
    whole sweep at once, naming the setting, instead of every design failing the same way."""
    from targets import TargetError, get_target

    try:
        get_target(path)
    except TargetError as e:
        first = str(e).strip().splitlines()[0]
        given = " ".join(f"--set {s}" for s in sets) or "the template's sweep: section"
        raise UsageError(f"{given}: design {k} ({', '.join(f'{p}={v}' for p, v in settings.items())}) is not a valid "
                         f"target: {first}") from None


def all_failed(rows: list[dict[str, Any]]) -> str:
    """The first error when every design failed (the sweep then exits non-zero), else ''."""
    if rows and all("error" in row for row in rows):
        return f"every design of the sweep failed; design 0: {rows[0]['error']}"
    return ""


CHECKSUM = "row_sha256"


def row_checksum(cells: list[str]) -> str:
    """The checksum of a row of `sweep.csv`: SHA-256 of its cells (before `row_sha256`) as written."""
    import hashlib

    return hashlib.sha256("\x1f".join(cells).encode()).hexdigest()[:32]


def read_done(out: Path, grid: list[tuple[dict[str, Any], dict[str, Any]]], params: list[str],
              progress: Callable[[str], None] | None = None) -> dict[int, dict[str, Any]]:
    """The designs already in `out/sweep.csv` (a resumed sweep skips them), as rows with their
    values typed again; each must be the same point of the grid. A row whose checksum does not
    match its cells is left out (the design is evaluated again), with one notice."""
    path = out / "sweep.csv"
    if not path.is_file():
        return {}
    done: dict[int, dict[str, Any]] = {}
    damaged: list[int] = []
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        rows = [dict(zip(header, cells, strict=False)) | {"\0cells": cells} for cells in reader]
    for line, raw in enumerate(rows, start=2):
        try:
            k = int(raw.get("design") or "")
        except ValueError:
            raise UsageError(f"--resume {out}: {path.name} line {line}: no design number") from None
        if not 0 <= k < len(grid):
            raise UsageError(f"--resume {out}: {path.name} line {line}: design {k} is not in this grid "
                             f"of {len(grid)} designs")
        settings = grid[k][0]
        for param in params:
            if raw.get(param) != str(settings[param]):
                raise UsageError(f"--resume {out}: {path.name} line {line}: design {k} has {param}="
                                 f"{raw.get(param)}, this grid {settings[param]}")
        cells = raw.pop("\0cells")
        if CHECKSUM not in header or len(cells) != len(header) \
                or raw[CHECKSUM] != row_checksum(cells[:header.index(CHECKSUM)]):
            damaged.append(k)
            continue
        row: dict[str, Any] = {"design": k, **settings}
        for key, text in raw.items():
            if key not in row and key != CHECKSUM and text not in ("", None):
                row[key] = text if key == "error" else _typed(text)
        done[k] = row
    if damaged and progress is not None:
        progress(f"notice: {path}: the rows of design(s) {', '.join(map(str, damaged[:10]))}"
                 f"{' ...' if len(damaged) > 10 else ''} fail their checksum (edited, corrupted or from an older "
                 f"MONET): evaluated again")
    return done


def _typed(text: str) -> Any:
    """A CSV cell back to the value written (str() of an int, float or bool; else the text)."""
    if text in ("True", "False"):
        return text == "True"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def columns_of(rows: list[dict[str, Any]], params: list[str]) -> list[str]:
    """design, the parameters, the figures in a fixed order, then anything else."""
    present = {key for row in rows for key in row}
    columns = ["design", *params, *(m for m in METRICS if m in present)]
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns


def write_csv(rows: list[dict[str, Any]], path: Path, params: list[str]) -> None:
    """sweep.csv, replaced atomically."""
    import io

    from monet_ir.files import write_atomic

    columns = columns_of(rows, params)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow([*columns, CHECKSUM])
    for row in rows:
        cells = ["" if row.get(c) is None else str(row[c]) for c in columns]  # (as csv writes them)
        writer.writerow([*cells, row_checksum(cells)])
    write_atomic(path, text.getvalue())


def write(rows: list[dict[str, Any]], out: Path, plots: str | None, params: list[str]) -> list[str]:
    """sweep.csv, sweep.json and, unless `plots` is None, the plot as `sweep.svg` or `sweep.png`;
    returns the names written."""
    from monet_ir.files import write_atomic

    write_csv(rows, out / "sweep.csv", params)
    write_atomic(out / "sweep.json", json.dumps({"parameters": params, "designs": rows}, indent=1) + "\n")
    if plots == "png":
        plot(rows, out / "sweep.png")
    elif plots is not None:
        plot_svg(rows, out / "sweep.svg")
    return ["sweep.csv", "sweep.json", *([f"sweep.{plots}"] if plots is not None else [])]


def _plot_title(rows: list[dict[str, Any]], ok: list[dict[str, Any]]) -> str:
    return f"hardware sweep: {len(ok)} designs" + (f", {len(rows) - len(ok)} failed" if len(ok) < len(rows) else "")


def plot_svg(rows: list[dict[str, Any]], path: Path) -> None:
    """`plot`'s figure as SVG, written directly (no plotting library)."""
    from monet_ir.emit.plots import scatter

    ok = [r for r in rows if "error" not in r]
    points = [(r["latency_cycles"], r["energy_pj"] / 1e9) for r in ok]
    scatter(path, _plot_title(rows, ok), "latency (cycles)", "energy per training step (mJ)", points,
            values=[r["area_proxy"] for r in ok], value_label="area proxy (MACs + SRAM bytes)", color_map="plasma",
            labels=[(str(r["design"]), x, y) for r, (x, y) in zip(ok, points, strict=True)])


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Energy against latency, one point per design, coloured by the area proxy (matplotlib PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if "error" not in r]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    if ok:
        sc = ax.scatter([r["latency_cycles"] for r in ok], [r["energy_pj"] / 1e9 for r in ok],
                        c=[r["area_proxy"] for r in ok], cmap="plasma", s=40, edgecolors="black", linewidths=0.4)
        fig.colorbar(sc, ax=ax, label="area proxy (MACs + SRAM bytes)")
        for r in ok:
            ax.annotate(str(r["design"]), (r["latency_cycles"], r["energy_pj"] / 1e9), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("latency (cycles)")
    ax.set_ylabel("energy per training step (mJ)")
    ax.set_title(_plot_title(rows, ok))
    fig.tight_layout()
    from monet_ir.explore.outputs import save_figure

    save_figure(fig, path, dpi=90)
    plt.close(fig)


def table(rows: list[dict[str, Any]]) -> str:
    fixed = {"design", "latency_cycles", "latency_s", "energy_pj", "peak_memory_bytes", "dram_peak_bytes", "fits",
             "macs", "sram_bytes", "area_proxy", "error"}
    params = [k for row in rows for k in row if k not in fixed]
    params = list(dict.fromkeys(params))
    head = ["#", *params, "latency (cycles)", "energy (mJ)", "peak (MiB)", "area proxy"]
    body = []
    for r in rows:
        cells = [str(r["design"]), *(str(r.get(p, "")) for p in params)]
        if "error" in r:
            cells += [f"error: {r['error']}", "", "", ""]
        else:
            cells += [f"{r['latency_cycles']:,}", f"{r['energy_pj'] / 1e9:.4f}", f"{r['peak_memory_bytes'] / 2**20:.2f}",
                      f"{r['area_proxy']:,}"]
        body.append(cells)
    widths = [max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    for cells in body:
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
    return "\n".join(lines)
