"""The training-step report of a schedule: JSON fields, a text summary, a Perfetto trace, plots.

`schedule_report(schedule)` gives the schedule part of `report.json`:

| field | meaning |
|---|---|
| `target` | target name; `frequency_hz` its reference clock |
| `latency_cycles`, `latency_s` | makespan of the step (last op or transfer), in reference cycles and seconds |
| `energy_pj` | total energy = the sum of `energy_breakdown_pj` |
| `energy_breakdown_pj` | `compute` (MACs/ops), `onchip_memory` (every on-chip memory access of the ops), `offchip_memory` (DRAM traffic of the ops and of the scheduler's loads, stores, evictions, write-backs), `interconnect` (core-to-core links and buses) |
| `dram_traffic_bytes` | bytes moved to and from DRAM: by the ops themselves (operands they stream) and by the scheduler's transfers |
| `phases` | per phase: `latency_cycles` (first start to last end of its ops), `energy_pj` (its ops' energy), `ops` |
| `memory.peak_bytes` | peak occupancy of each core's top memory, of DRAM and (when used) of the storage level; `memory.capacity_bytes` their sizes |
| `memory.budgeted` | the memory a memory budget bounds: main memory (the target's `dram`, SRAM on an MCU) |
| `memory.paged_bytes`, `paging` | bytes paged out to the storage level (and read back); `paging`: `storage`, `paged_bytes`, `page_outs`, `page_ins`, `energy_pj` (in `offchip_memory`) |
| `cores` | per core `core<id>`: `name`, `kind`, `busy_cycles`, `utilization` (busy / latency), `ops` |
| `transfers` | `count`, `bytes` and `energy_pj` per reason (`load`, `copy`, `store`, `evict`, `writeback`, `page_out`, `page_in`) |
| `critical_path_cycles` | the longest chain of dependent ops, each at its duration on the core it ran on (transfers and waiting for a busy core excluded): the latency no core choice could beat with these op costs |
| `average_parallelism` | busy cycles of all cores / latency: how many ops run at a time on average |
| `layers` | one row per scheduled op: `name` (ONNX node), `op`, `phase`, `core`, `start_cycle`, `latency_cycles`, `energy_pj` |
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monet_ir.schedule.scheduler import DRAM, Schedule

PHASES = ("forward", "backward", "optimizer", "recompute")


def schedule_report(s: Schedule, layers: bool = True) -> dict[str, Any]:
    """The report of a schedule; `layers=False` leaves the per-op rows out (an empty list), for
    callers that need only the totals (`monet explore` scores thousands of schedules)."""
    g, target = s.graph, s.target
    latency = s.latency_cycles
    phase_span: dict[str, list[float]] = {}
    phase_energy: dict[str, float] = defaultdict(float)
    phase_ops: dict[str, int] = defaultdict(int)
    busy: dict[int, float] = defaultdict(float)
    ops_per_core: dict[int, int] = defaultdict(int)
    rows = []
    sigs, phases, nodes, ops = g.tasks.sig, g.tasks.phase, g.tasks.node, g.tasks.op  # (the graph's columns)
    for st in s.tasks:
        if sigs[st.task] is None:
            continue
        phase = phases[st.task]
        span = phase_span.setdefault(phase, [st.start, st.end])
        span[0], span[1] = min(span[0], st.start), max(span[1], st.end)
        phase_energy[phase] += st.energy_pj
        phase_ops[phase] += 1
        busy[st.core] += st.end - st.start
        ops_per_core[st.core] += 1
        if layers:
            rows.append({
                "name": nodes[st.task], "op": ops[st.task], "phase": phase, "core": st.core,
                "start_cycle": round(st.start), "latency_cycles": round(st.end - st.start), "energy_pj": st.energy_pj,
            })
    transfers: dict[str, dict[str, float]] = {}
    for tr in s.transfers:
        entry = transfers.setdefault(tr.reason, {"count": 0, "bytes": 0, "energy_pj": 0.0})
        entry["count"] += 1
        entry["bytes"] += tr.bytes
        entry["energy_pj"] += tr.energy_pj
    critical = critical_path_cycles(s)
    breakdown = s.energy_breakdown_pj()
    dram_traffic = sum(st.dram_bytes for st in s.tasks) + sum(
        tr.bytes for tr in s.transfers if tr.resource.startswith("dram"))
    page_out = transfers.get("page_out", {"count": 0, "bytes": 0, "energy_pj": 0.0})
    page_in = transfers.get("page_in", {"count": 0, "bytes": 0, "energy_pj": 0.0})
    return {
        "target": target.name,
        "frequency_hz": target.frequency_hz,
        "latency_cycles": round(latency),
        "latency_s": latency / target.frequency_hz,
        "energy_pj": sum(breakdown.values()),
        "energy_breakdown_pj": breakdown,
        "dram_traffic_bytes": dram_traffic,
        "critical_path_cycles": round(critical),
        "average_parallelism": sum(busy.values()) / latency if latency else 0.0,
        "phases": {
            p: {"latency_cycles": round(phase_span[p][1] - phase_span[p][0]) if p in phase_span else 0,
                "energy_pj": phase_energy.get(p, 0.0), "ops": phase_ops.get(p, 0)}
            for p in PHASES
        },
        "memory": {
            "peak_bytes": {name: trace.peak() for name, trace in s.memories.items()},
            "capacity_bytes": {name: trace.capacity for name, trace in s.memories.items()},
            "budgeted": target.dram.name if target.dram is not None else "dram",
            "paged_bytes": page_out["bytes"],
        },
        "paging": {
            "storage": target.storage.name if target.storage is not None else None,
            "paged_bytes": page_out["bytes"],
            "page_outs": page_out["count"],
            "page_ins": page_in["count"],
            "energy_pj": page_out["energy_pj"] + page_in["energy_pj"],
        },
        "cores": {
            f"core{c.id}": {"name": c.name, "kind": c.kind, "busy_cycles": round(busy.get(c.id, 0.0)),
                            "utilization": busy.get(c.id, 0.0) / latency if latency else 0.0,
                            "ops": ops_per_core.get(c.id, 0)}
            for c in target.cores
        },
        "transfers": transfers,
        "layers": rows,
    }


def critical_path_cycles(s: Schedule) -> float:
    """Length of the longest dependency chain of ops at their scheduled durations."""
    tasks = s.graph.tasks
    sigs, all_preds = tasks.sig, tasks.preds
    # chain[t]: the longest chain ending with task t; 0 until t is reached, and for tasks not in
    # the schedule (chains are never negative, so a 0 changes no maximum)
    chain = [0.0] * len(tasks)
    at = chain.__getitem__
    # the optimizer barrier (`TaskGraph.barrier`): a waiter also follows every sink, whose
    # longest chain reached so far is kept as they are reached
    barrier = s.graph.barrier
    sinks = frozenset(barrier[0]) if barrier else frozenset()
    waiters = frozenset(barrier[1]) if barrier else frozenset()
    sinks_chain = 0.0
    # start times order every task after its predecessors (pacing edges run against task order)
    for st in sorted(s.tasks, key=lambda st: (st.start, st.end, st.task)):
        index = st.task
        duration = st.end - st.start if sigs[index] is not None else 0.0
        longest = max(map(at, all_preds[index]), default=0.0)
        if index in waiters and sinks_chain > longest:
            longest = sinks_chain
        chain[index] = duration + longest
        if index in sinks and chain[index] > sinks_chain:
            sinks_chain = chain[index]
    return max(chain, default=0.0)


# ---------------------------------------------------------------------- text


def table(rows: list[list[str]], widths: list[int], left: int = 1, indent: str = "  ") -> list[str]:
    """Lines of a table: the first `left` columns left-aligned, the others right-aligned, each at
    least its width in `widths` and wider where a cell needs it (with a space or two to spare), so
    that no two columns run together (a 1,250,000,000,000,000-byte DRAM on fusemax.yaml)."""
    sizes = []
    for i, width in enumerate(widths):
        longest = max((len(row[i]) for row in rows), default=0)
        sizes.append(max(width, longest + (1 if i < left else 2)))
    return [indent + "".join(cell.ljust(size) if i < left else cell.rjust(size)
                             for i, (cell, size) in enumerate(zip(row, sizes, strict=True))).rstrip()
            for row in rows]


def text_summary(report: dict[str, Any]) -> str:
    from monet_ir.emit.plots import significant as sig

    lines = []
    model = report.get("model", "")
    kind = "inference" if report.get("pipeline") == "inference" else "training-step"
    lines.append(f"MONET {kind} report: {model} on {report['target']}")
    for warning in report.get("warnings", ()):
        lines.append(f"  WARNING  {warning}")
    if "precision" in report:
        source = f" ({report['precision_source']})" if report.get("precision_source") else ""
        lines.append(f"  precision  {report['precision']}{source}")
    lines.append(f"  latency  {report['latency_cycles']:,} cycles = {sig(report['latency_s'] * 1e3)} ms"
                 f" at {report['frequency_hz'] / 1e9:.3g} GHz")
    lines.append(f"  energy   {sig(report['energy_pj'] / 1e9)} mJ")
    breakdown = []
    for key, value in report["energy_breakdown_pj"].items():
        share = value / report["energy_pj"] * 100 if report["energy_pj"] else 0.0
        breakdown.append([key, f"{sig(value / 1e9)} mJ", f"{share:.1f} %"])
    lines += table(breakdown, [15, 15, 9], indent="    ")
    lines.append("")
    phases = [["phase", "ops", "latency (cycles)", "energy (mJ)"]]
    for phase, row in report["phases"].items():
        if row["ops"]:
            phases.append([phase, str(row["ops"]), f"{row['latency_cycles']:,}", sig(row["energy_pj"] / 1e9)])
    rest = report["energy_pj"] - sum(row["energy_pj"] for row in report["phases"].values())
    moved = report["energy_pj"] and abs(rest) > 1e-9 * report["energy_pj"]
    if moved:
        count = sum(int(t["count"]) for t in report.get("transfers", {}).values())
        phases.append(["transfers", str(count), "", sig(rest / 1e9)])
    phase_lines = table(phases, [11, 7, 19, 14])
    if moved:
        phase_lines[-1] += "   (scheduler's loads, stores and copies; in no phase)"
    lines += phase_lines
    if report.get("optimizer_step"):
        lines.append(f"  optimizer  {report['optimizer_step']}")
    lines.append("")
    if report.get("latency_cycles") and "critical_path_cycles" in report:
        share = report["critical_path_cycles"] / report["latency_cycles"] * 100
        lines.append(f"  critical path {report['critical_path_cycles']:,} cycles ({share:.0f} % of the latency), "
                     f"{report['average_parallelism']:.2f} ops at a time on average: cores beyond that")
        lines.append("  are idle for want of independent work; the rest of the latency waits on transfers and busy cores")
        lines.append("")
    cores = [["core", "name", "kind", "ops", "busy (cycles)", "util"]]
    for core, row in report["cores"].items():
        cores.append([core, row["name"], row["kind"], str(row["ops"]), f"{row['busy_cycles']:,}",
                      f"{row['utilization'] * 100:.1f}%"])
    lines += table(cores, [8, 14, 11, 6, 16, 8], left=3)
    lines.append("")
    paging = report.get("paging") or {}
    if paging.get("paged_bytes"):
        lines.append(f"  paging   {paging['paged_bytes']:,} bytes out to {paging['storage']} and back "
                     f"({paging['page_outs']} page-outs, {paging['page_ins']} page-ins), "
                     f"{sig(paging['energy_pj'] / 1e9)} mJ")
        lines.append("")
    memories = [["memory", "peak", "capacity"]]
    for name, peak in report["memory"]["peak_bytes"].items():
        cap = report["memory"]["capacity_bytes"][name]
        memories.append([name, f"{peak:,}", "-" if cap == float("inf") else f"{int(cap):,}"])
    lines += table(memories, [28, 16, 18])
    if "flops" in report:
        lines.append("")
        flops = [["FLOPs", "matmul/conv", "other"]]
        for phase, row in report["flops"].items():
            if row["matmul_conv"] or row["other"]:
                flops.append([phase, f"{row['matmul_conv']:,}", f"{row['other']:,}"])
        lines += table(flops, [11, 18, 16])
    top = sorted(report["layers"], key=lambda r: -r["latency_cycles"])[:8]
    if top:
        lines.append("")
        lines.append("  longest ops:")
        for row in top:
            lines.append(f"    {row['latency_cycles']:>12,} cycles  core{row['core']}  {row['phase']:<9} {row['op']:<20} {row['name']}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- Perfetto / Chrome trace


def chrome_trace(s: Schedule) -> dict[str, Any]:
    """Chrome trace-event JSON (opens in ui.perfetto.dev): one track per core, one per link or
    DRAM channel, and a counter per memory. Times in microseconds of the target clock."""
    us = 1e6 / s.target.frequency_hz
    events: list[dict[str, Any]] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": s.target.name}}]
    for c in s.target.cores:
        events.append({"ph": "M", "pid": 1, "tid": c.id, "name": "thread_name", "args": {"name": f"core{c.id} {c.name}"}})
    tasks = s.graph.tasks
    for st in s.tasks:
        index = st.task
        if tasks.sig[index] is None:
            continue
        op, phase = tasks.op[index], tasks.phase[index]
        events.append({"ph": "X", "pid": 1, "tid": st.core, "name": tasks.node[index] or op, "cat": phase,
                       "ts": st.start * us, "dur": max((st.end - st.start) * us, 1e-3),
                       "args": {"op": op, "phase": phase, "energy_pj": st.energy_pj}})
    resources = sorted({tr.resource for tr in s.transfers})
    for i, name in enumerate(resources):
        events.append({"ph": "M", "pid": 2, "tid": i, "name": "thread_name", "args": {"name": name}})
    if resources:
        events.append({"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "transfers"}})
    index = {name: i for i, name in enumerate(resources)}
    names = s.graph.tensors.name
    for tr in s.transfers:
        events.append({"ph": "X", "pid": 2, "tid": index[tr.resource], "name": f"{tr.reason} {names[tr.tensor]}",
                       "cat": tr.reason, "ts": tr.start * us, "dur": max((tr.end - tr.start) * us, 1e-3),
                       "args": {"bytes": tr.bytes, "energy_pj": tr.energy_pj}})
    events.append({"ph": "M", "pid": 3, "name": "process_name", "args": {"name": "memory"}})
    for name, trace in s.memories.items():
        for time, level in trace.timeline():
            events.append({"ph": "C", "pid": 3, "name": name, "ts": time * us, "args": {"bytes": level}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


# ---------------------------------------------------------------------- plots


def plot_data(s: Schedule, report: dict[str, Any]) -> dict[str, Any]:
    """Everything the plots need, as plain data (so a separate process can draw them): the
    scales of the memory panels and the energy per phase are decided here, once, for the SVG
    and the PNG plots alike (`plots.memory_axis`, `plots.energy_by_phase`)."""
    from monet_ir.emit.plots import energy_by_phase, memory_axis

    sigs, phases = s.graph.tasks.sig, s.graph.tasks.phase
    ops = [(st.core, st.start, st.end, phases[st.task]) for st in s.tasks if sigs[st.task] is not None]
    spans: dict[str, list[float]] = {}
    for _, start, end, phase in ops:
        span = spans.setdefault(phase, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    reported = report.get("memory", {}).get("peak_bytes", {})
    memories = []
    for trace in s.memories.values():
        if not trace.events:
            continue
        points = trace.timeline()
        drawn = max((level for _, level in points), default=0)
        memories.append((trace.name, trace.capacity, points,
                         memory_axis(int(reported.get(trace.name, drawn)), drawn, trace.capacity)))
    tasks = [(phases[st.task], st.compute_pj, st.onchip_pj, st.offchip_pj) for st in s.tasks
             if sigs[st.task] is not None]
    transfers = [(tr.resource, tr.energy_pj) for tr in s.transfers]
    return {
        "title": f"{report.get('model', '')} on {s.target.name}",
        "rows": [f"core{c.id} {c.name}" for c in s.target.cores],
        "ops": ops,
        "transfers": [(tr.resource, tr.start, tr.end) for tr in s.transfers],
        "memories": memories,
        "phase_spans": spans,
        "energy": dict(report["energy_breakdown_pj"]),
        "energy_by_phase": energy_by_phase(tasks, transfers),
        "energy_pj": report["energy_pj"],
    }


_PLOT_WORKER = ("import json, sys; sys.path[:0] = json.loads(sys.argv.pop(2)); "
                "from monet_ir.emit.plots_png import main; main()")


def plot_worker_path() -> list[str]:
    """The import path of the PNG plot process: the folder holding `monet_ir`, then this
    process's other absolute import folders, never the current folder (`plots_png`)."""
    import os
    import sys

    root = str(Path(__file__).resolve().parents[2])
    here = os.getcwd()
    return [root] + [p for p in sys.path if p and os.path.isabs(p) and p not in (root, here)]


class PlotWorker:
    """Draws the PNG plots (`monet_ir.emit.plots_png`) in a child process started early, so that importing
    matplotlib and drawing overlap the parent's work on a second core. The process is isolated
    (`python -I`, see `plots_png`). A process that dies (matplotlib missing or broken, killed)
    costs only the plots: `draw` does not raise, `finish` says what happened in one line."""

    def __init__(self, out: Path):
        import subprocess
        import sys

        self.problem = ""
        self.process = subprocess.Popen([sys.executable, "-I", "-c", _PLOT_WORKER, str(out),
                                         json.dumps(plot_worker_path())],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def draw(self, data: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(data).encode())
            self.process.stdin.close()
        except OSError:  # the process is gone (a broken pipe): `finish` says why
            self.problem = "the plot process ended before it was sent the data"

    def finish(self) -> str:
        """Wait for the plots: an empty string when they are written, else one line saying why not."""
        assert self.process.stderr is not None
        err = self.process.stderr.read().decode(errors="replace")
        self.process.wait()
        code = self.process.returncode
        if code == 0 and not self.problem:
            return ""
        lines = [line.strip() for line in err.splitlines() if line.strip()]
        if code < 0:
            import signal

            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return f"the PNG plots were not drawn: the plot process {how}" + (f" ({lines[-1]})" if lines else "")

    def drawn(self, out: Path, written: Sequence[str]) -> list[str]:
        """The names of the PNGs once drawn; else a one-line `OutputError` saying why not, and
        that the files `written` are there but the run is incomplete (no manifest)."""
        from monet_ir.files import MANIFEST, OutputError

        problem = self.finish()
        if problem:
            listed = ", ".join(written[:-1]) + f" and {written[-1]}" if len(written) > 1 else "".join(written)
            raise OutputError(f"{problem}; {out}/ has {listed} but no {MANIFEST} (the run is incomplete)")
        return ["gantt.png", "memory.png", "energy.png"]

    def cancel(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def write_json(report: dict[str, Any], path: Path) -> None:
    from monet_ir.files import write_atomic

    write_atomic(path, json.dumps(report, indent=1, sort_keys=False) + "\n")


def write_layers_csv(report: dict[str, Any], path: Path) -> None:
    """`layers.csv`: the report's per-op rows (`layers`), one line each, in schedule order."""
    import csv
    import io

    from monet_ir.files import write_atomic

    columns = ("name", "op", "phase", "core", "start_cycle", "latency_cycles", "energy_pj")
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(columns)
    for row in report["layers"]:
        writer.writerow([row[c] for c in columns])
    write_atomic(path, text.getvalue())
