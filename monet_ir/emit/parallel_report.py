"""The report of a multi-chip training step (`monet report --system ... --parallel ...`).

`parallel_report(result)` gives the fields of `report.json` that are about the system:

| field | meaning |
|---|---|
| `system`, `chips`, `chip`, `network` | the system, its chip count, the chip target, the topology |
| `plan` | `dp`, `tp`, `pp`, `zero`, `microbatches`, `schedule` (`gpipe`, `1f1b`; `none` without stages), `bucket_bytes`, `algorithm` |
| `latency_cycles`, `latency_s` | the step on the system: every chip's step with its collectives on the network |
| `chip_latency_cycles` | the step with communication taking no time (the pipeline's bubbles stay) |
| `communication` | `time_s` (union of the intervals a collective is in flight on chip 0), `exposed_s` (what the step got longer than `chip_latency`), `overlapped_s` (`time_s - exposed_s`), `collectives` (count), `bytes_per_chip` (the tensors each chip reduces or gathers), `network_bytes` (bytes all chips sent, each message once), `network_link_bytes` (collectives' bytes summed over the links crossed), `pipeline_bytes` (activations and their gradients between stages, every micro-batch and replica), `by_group` (per process group, `dp` data-parallel, `tp` tensor-parallel: `collectives`, `bytes_per_chip`, `time_s` in flight, on the busiest stage; `exposed_s`: how much shorter one micro-batch's step of a stage would be if that group's collectives took no network time — the groups' figures need not add up to the total) |
| `bubble_fraction` | idle share of the stages over the pipeline's makespan (0 without pipeline parallelism) |
| `energy_pj`, `energy_breakdown_pj` | the **sum over all chips** of their energy (forward and backward once per micro-batch, the rest once per step), plus `network` (every link crossed) |
| `energy_per_chip_pj` | the chips' energy without the network, divided by the chip count (the mean over chips) |
| `memory_per_device` | `parameter_bytes`, `gradient_bytes`, `optimizer_state_bytes` (incl. `master_weight_bytes`), `optimizer_step_bytes`, `model_state_bytes`, `buffer_bytes`, `activation_bytes` (saved for backward), `input_bytes`, `total_bytes`, `parameter_count`, `dram_peak_bytes` (the chip's schedule, plus the activations of the other micro-batches in flight), `capacity_bytes` (the chip's DRAM), `fits` (every stage fits); with stages, the stage that needs the most, and `memory_per_stage` every stage's, with `microbatches_in_flight` |
| `collective_ops` | per collective: `stage`, `op`, `node`, `phase`, `group`, `bytes`, `start_cycle`, `end_cycle` |
| `links` | per link: `bytes`, `busy_s`, `utilization` (busy / step latency) |
"""

from __future__ import annotations

from typing import Any


def parallel_report(result: Any) -> dict[str, Any]:
    """The report of a `monet_ir.parallel.pipeline.ParallelResult`."""
    system, plan = result.system, result.plan
    freq = result.frequency_hz
    m = plan.microbatches
    breakdown: dict[str, float] = {}
    for stage in result.stages:
        sched = stage.chip_schedule
        g = sched.graph
        per_mb = sum(st.energy_pj for st in sched.tasks if g.tasks[st.task].phase in ("forward", "backward", "recompute"))
        parts = sched.energy_breakdown_pj()
        total = sum(parts.values())
        # the forward and backward passes run once per micro-batch, the rest once per step
        scale = (total + (m - 1) * per_mb) / total if total else 1.0
        for key, value in parts.items():
            breakdown[key] = breakdown.get(key, 0.0) + value * scale * plan.dp * plan.tp
    sim = result.stages[0].sim
    breakdown["network"] = sim.total_energy_pj() + result.p2p_energy_pj
    latency_s = result.latency_cycles / freq
    comm_s = result.comm_cycles / freq
    exposed_s = min(result.exposed_cycles / freq, comm_s)
    memory = dict(result.memory)
    memory["fits"] = all(mm["total_bytes"] <= mm["capacity_bytes"] and mm["dram_peak_bytes"] <= mm["capacity_bytes"]
                         for mm in result.stage_memory)
    links = {}
    for link, stats in zip(system.network.links, sim.stats, strict=True):
        if stats.bytes:
            links[link.name] = {"bytes": stats.bytes, "busy_s": stats.busy_s,
                                "utilization": stats.busy_s / latency_s if latency_s else 0.0}
    runs = [(s, r) for s, stage in enumerate(result.stages) for r in stage.collectives]
    by_group: dict[str, dict[str, Any]] = {}
    for kind in sorted({r.group for _, r in runs}):
        mine = [(s, r) for s, r in runs if r.group == kind]
        by_group[kind] = {
            "collectives": len(mine),
            "bytes_per_chip": max(sum(r.bytes for s, r in mine if s == k) for k in range(len(result.stages))),
            "time_s": max(_union([(r.start, r.net_end) for s, r in mine if s == k]) for k in range(len(result.stages))) / freq,
            "exposed_s": max(getattr(stage, "exposed_by_group", {}).get(kind, 0.0) for stage in result.stages) / freq,
        }
    chips_energy = sum(v for k, v in breakdown.items() if k != "network")
    return {
        "system": system.name,
        "chips": system.chips,
        "chip": system.chip.name,
        "network": system.network.topology,
        "plan": {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "zero": plan.zero,
                 "microbatches": plan.microbatches, "schedule": result.schedule if plan.pp > 1 else "none",
                 "bucket_bytes": plan.bucket, "algorithm": plan.algorithm},
        "frequency_hz": freq,
        "latency_cycles": round(result.latency_cycles),
        "latency_s": latency_s,
        "chip_latency_cycles": round(result.no_comm_latency_cycles),
        "communication": {
            "time_s": comm_s,
            "exposed_s": exposed_s,
            "overlapped_s": max(0.0, comm_s - exposed_s),
            "collectives": len(runs),
            "bytes_per_chip": max(sum(r.bytes for r in stage.collectives) for stage in result.stages),
            "network_bytes": sum(r.sent_bytes for _, r in runs) + result.p2p_bytes,
            "pipeline_bytes": result.p2p_bytes,
            "network_link_bytes": sim.total_bytes(),
            "by_group": by_group,
        },
        "bubble_fraction": result.bubble_fraction,
        "energy_pj": sum(breakdown.values()),
        "energy_breakdown_pj": breakdown,
        "energy_per_chip_pj": chips_energy / system.chips,
        "memory_per_device": memory,
        "memory_per_stage": result.stage_memory if plan.pp > 1 else [],
        "collective_ops": [{"stage": s, "op": r.op, "node": r.node, "phase": r.phase, "group": r.group, "bytes": r.bytes,
                            "start_cycle": round(r.start), "end_cycle": round(r.end)} for s, r in runs],
        "links": links,
    }


def _union(spans: list[tuple[float, float]]) -> float:
    """Length of the union of the intervals."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def _mb(n: float) -> str:
    """Bytes in MB, or in kB or B where MB would print 0.0."""
    if n >= 1e5:
        return f"{n / 1e6:,.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:,.1f} kB"
    return f"{n:,.0f} B"


def parallel_text(report: dict[str, Any]) -> str:
    from monet_ir.emit.plots import significant as sig

    plan = report["plan"]
    lines = [f"MONET multi-chip training-step report: {report.get('model', '')} on {report['system']} "
             f"({report['chips']} x {report['chip']}, {report['network']})"]
    lines.append(f"  plan       dp={plan['dp']} tp={plan['tp']} pp={plan['pp']} zero={plan['zero']} "
                 f"microbatches={plan['microbatches']}" + (f" schedule={plan['schedule']}" if plan["pp"] > 1 else "")
                 + f" ({plan['algorithm']} collectives, buckets of {_mb(plan['bucket_bytes'])})")
    if "precision" in report:
        lines.append(f"  precision  {report['precision']} ({report.get('precision_source', '')})")
    lat = report["latency_s"]
    chips = report["chips"]
    lines.append(f"  latency    {sig(lat * 1e3)} ms per step of the whole system "
                 f"({sig(report['chip_latency_cycles'] / report['frequency_hz'] * 1e3)} ms if communication took no time)")
    c = report["communication"]
    if c["collectives"]:
        lines.append(f"  network    {c['collectives']} collective{'s' if c['collectives'] != 1 else ''} per chip's step, {_mb(c['bytes_per_chip'])} reduced or "
                     f"gathered by each chip, {_mb(c['network_bytes'] - c.get('pipeline_bytes', 0))} sent by all "
                     f"{chips} chips together")
    else:
        lines.append("  network    no collectives (no data- or tensor-parallel group)")
    if c.get("pipeline_bytes"):
        lines.append(f"  pipeline   {_mb(c['pipeline_bytes'])} of activations and gradients sent between stages "
                     f"per step, all micro-batches and replicas together")
    share = c["time_s"] / lat * 100 if lat else 0.0
    lines.append(f"  comm time  {sig(c['time_s'] * 1e3)} ms ({share:.0f} % of the step): exposed {sig(c['exposed_s'] * 1e3)} ms, "
                 f"overlapped {sig(c['overlapped_s'] * 1e3)} ms")
    for kind, g in c.get("by_group", {}).items():
        lines.append(f"    {kind:<9}{g['collectives']:>5} collective{'s' if g['collectives'] != 1 else ' '}, {_mb(g['bytes_per_chip'])} per chip, "
                     f"{sig(g['time_s'] * 1e3)} ms in flight, {sig(g.get('exposed_s', 0.0) * 1e3)} ms exposed")
    lines.append(f"  bubble     {report['bubble_fraction'] * 100:.1f} %")
    per_chip = report.get("energy_per_chip_pj")
    lines.append(f"  energy     {sig(report['energy_pj'] / 1e9)} mJ per step, summed over all {chips} chips and the network"
                 + (f" ({sig(per_chip / 1e9)} mJ per chip on average)" if per_chip is not None else ""))
    for key, value in report["energy_breakdown_pj"].items():
        pct = value / report["energy_pj"] * 100 if report["energy_pj"] else 0.0
        lines.append(f"    {key:<15}{sig(value / 1e9):>12} mJ {pct:6.1f} %")
    m = report["memory_per_device"]
    lines.append("")
    stages = report.get("memory_per_stage", [])
    if stages:
        fullest = max(range(len(stages)), key=lambda s: stages[s]["total_bytes"])
        lines.append(f"  memory per chip (bytes; the fullest: a chip of stage {fullest})")
    else:
        lines.append(f"  memory per chip (bytes; every one of the {chips} chips holds this much)")
    for key in ("parameter_bytes", "gradient_bytes", "optimizer_state_bytes", "optimizer_step_bytes", "buffer_bytes",
                "activation_bytes", "input_bytes", "total_bytes"):
        lines.append(f"    {key[:-6]:<22}{m[key]:>18,}")
    cap = m["capacity_bytes"]
    cap_text = "-" if cap == float("inf") else f"{int(cap):,}"
    lines.append(f"    {'DRAM capacity':<22}{cap_text:>18}   {'fits' if m['fits'] else 'DOES NOT FIT'}"
                 f" (the chip's schedule peaks at {m['dram_peak_bytes']:,})")
    for s, mm in enumerate(report.get("memory_per_stage", [])):
        held = mm["microbatches_in_flight"]
        lines.append(f"    stage {s}: total {mm['total_bytes']:,} ({held} micro-batch{'es' if held != 1 else ''} in flight), "
                     f"schedule peak {mm['dram_peak_bytes']:,}")
    return "\n".join(lines) + "\n"


MAX_TRACE_CHIPS = 16


def parallel_trace(result: Any) -> dict[str, Any]:
    """Chrome trace: one process per chip (a track per core, one micro-batch's step of its
    stage; the first 16 chips: the replicas of a stage run the same step), with pipeline
    parallelism a process with one track per stage (its forward and backward micro-batches),
    and one track per network link that carried data and the collectives of each stage."""
    system, plan = result.system, result.plan
    us = 1e6 / result.frequency_hz
    per_stage = plan.dp * plan.tp
    events: list[dict[str, Any]] = []
    for chip in range(min(system.chips, MAX_TRACE_CHIPS)):
        stage = result.stages[min(chip // per_stage, len(result.stages) - 1)]
        sched = stage.chip_schedule
        g = sched.graph
        pid = chip + 1
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"chip{chip}"}})
        for c in system.chip.cores:
            events.append({"ph": "M", "pid": pid, "tid": c.id, "name": "thread_name", "args": {"name": f"core{c.id} {c.name}"}})
        for st in sched.tasks:
            task = g.tasks[st.task]
            if task.sig is None:
                continue
            start, end = stage.task_times[st.task]
            events.append({"ph": "X", "pid": pid, "tid": st.core, "name": task.node or task.op, "cat": task.phase,
                           "ts": start * us, "dur": max((end - start) * us, 1e-3), "args": {"op": task.op}})
    if plan.pp > 1:
        pipe_pid = MAX_TRACE_CHIPS + 1
        events.append({"ph": "M", "pid": pipe_pid, "name": "process_name", "args": {"name": "pipeline"}})
        for s, ops in enumerate(result.pipeline.ops):
            events.append({"ph": "M", "pid": pipe_pid, "tid": s, "name": "thread_name", "args": {"name": f"stage{s}"}})
            for kind, mb, a, b in ops:
                events.append({"ph": "X", "pid": pipe_pid, "tid": s, "name": f"{kind}{mb}",
                               "cat": "forward" if kind == "F" else "backward", "ts": a * us, "dur": max((b - a) * us, 1e-3)})
    net_pid = MAX_TRACE_CHIPS + 2
    events.append({"ph": "M", "pid": net_pid, "name": "process_name", "args": {"name": "network"}})
    for s, stage in enumerate(result.stages):
        tid = -1 - s
        events.append({"ph": "M", "pid": net_pid, "tid": tid, "name": "thread_name", "args": {"name": f"collectives of stage {s}"}})
        for r in stage.collectives:
            events.append({"ph": "X", "pid": net_pid, "tid": tid, "name": f"{r.op.split('.')[-1]} {r.node}", "cat": r.phase,
                           "ts": r.start * us, "dur": max((r.end - r.start) * us, 1e-3), "args": {"bytes": r.bytes}})
    sim = result.stages[0].sim
    for i, (link, stats) in enumerate(zip(system.network.links, sim.stats, strict=True)):
        if not stats.spans:
            continue
        events.append({"ph": "M", "pid": net_pid, "tid": i + 1, "name": "thread_name", "args": {"name": f"link {link.name}"}})
        for a, b, label in stats.spans:
            events.append({"ph": "X", "pid": net_pid, "tid": i + 1, "name": label, "cat": "network",
                           "ts": a * 1e6, "dur": max((b - a) * 1e6, 1e-3)})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


MAX_PLOT_LINKS = 32
FORWARD_BACKWARD = ("forward", "backward", "recompute")


def parallel_plot_data(result: Any, report: dict[str, Any]) -> dict[str, Any]:
    """The plots of a multi-chip step (`plots.write_plots`, `plots_png.write_plots`): in the Gantt
    chart one lane per chip (its stage's ops as the system ran them: with pipeline parallelism the
    forward and backward micro-batches, then the optimizer) and one per network link that carried
    data (the busiest MAX_PLOT_LINKS); in the memory plot one panel per stage, the DRAM of one of
    its chips over one micro-batch's step as the chip scheduled it (communication taking no time);
    the energy per phase summed over all chips, the network a bar of its own."""
    from monet_ir.emit.plots import energy_by_phase, memory_axis

    system, plan = result.system, result.plan
    freq = result.frequency_hz
    per_stage = plan.dp * plan.tp
    ops: list[tuple[int, float, float, str]] = []
    for chip in range(system.chips):
        s = min(chip // per_stage, len(result.stages) - 1)
        stage = result.stages[s]
        g = stage.chip_schedule.graph
        if plan.pp > 1:
            ends = [stage.task_times[st.task][1] for st in stage.chip_schedule.tasks
                    if g.tasks[st.task].sig is not None and g.tasks[st.task].phase in FORWARD_BACKWARD]
            for kind, _, a, b in result.pipeline.ops[s]:
                ops.append((chip, a, b, "forward" if kind == "F" else "backward"))
            tail = stage.latency_cycles - max(ends, default=0.0)
            end = result.pipeline.stage_end[s]
            if tail > 0:
                ops.append((chip, end, end + tail, "optimizer"))
            continue
        for st in stage.chip_schedule.tasks:
            task = g.tasks[st.task]
            if task.sig is not None:
                start, end = stage.task_times[st.task]
                ops.append((chip, start, end, task.phase))
    sim = result.stages[0].sim
    carried = sorted(((stats.busy_s, link.name, stats.spans) for link, stats in zip(system.network.links, sim.stats,
                                                                                     strict=True) if stats.spans),
                     key=lambda row: -row[0])
    shown = carried[:MAX_PLOT_LINKS]
    transfers = [(f"link {name}", a * freq, b * freq) for _, name, spans in shown for a, b, _ in spans]
    title = f"{report.get('model', '')} on {system.name}, {plan.spec()}"
    if len(carried) > len(shown):
        title += f" (the {len(shown)} busiest of {len(carried)} links)"
    memories, panel_spans, tasks = [], [], []
    for s, stage in enumerate(result.stages):
        sched = stage.chip_schedule
        g = sched.graph
        main = system.chip.dram.name if system.chip.dram is not None else None
        dram = sched.memories.get(main) or max(sched.memories.values(), key=lambda trace: trace.capacity)
        points = dram.timeline()
        drawn = max((level for _, level in points), default=0)
        first, last = s * per_stage, (s + 1) * per_stage - 1
        chips = f"chip {first}" if first == last else f"chips {first}-{last}"
        memories.append((f"stage {s} ({chips}) {dram.name}", dram.capacity, points,
                         memory_axis(dram.peak(), drawn, dram.capacity)))
        spans: dict[str, list[float]] = {}
        for st in sched.tasks:
            task = g.tasks[st.task]
            if task.sig is None:
                continue
            span = spans.setdefault(task.phase, [st.start, st.end])
            span[0], span[1] = min(span[0], st.start), max(span[1], st.end)
            runs = plan.microbatches if task.phase in FORWARD_BACKWARD else 1
            tasks.append((task.phase, st.compute_pj * runs * per_stage, st.onchip_pj * runs * per_stage,
                          st.offchip_pj * runs * per_stage))
        panel_spans.append(spans)
    moved = [(tr.resource, tr.energy_pj * per_stage) for stage in result.stages
             for tr in stage.chip_schedule.transfers]
    by_phase = energy_by_phase(tasks, moved)
    network = report["energy_breakdown_pj"].get("network", 0.0)
    if network:
        by_phase["network"] = {"network": network}
    return {
        "title": title,
        "gantt_what": "ops per chip, collectives per network link",
        "rows": [f"chip{c} stage {min(c // per_stage, len(result.stages) - 1)}" for c in range(system.chips)],
        "ops": ops,
        "transfers": transfers,
        "memories": memories,
        "memory_xlabel": "cycles of one micro-batch's step on one chip of the stage (communication taking no time)",
        "phase_spans": panel_spans[0] if panel_spans else {},
        "panel_spans": panel_spans,
        "energy": dict(report["energy_breakdown_pj"]),
        "energy_by_phase": by_phase,
        "energy_pj": report["energy_pj"],
        "energy_note": f"summed over {system.chips} chips",
    }
