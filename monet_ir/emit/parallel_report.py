"""The report of a multi-chip training step (`monet report --system ... --parallel ...`).

`parallel_report(result)` gives the fields of `report.json` that are about the system:

| field | meaning |
|---|---|
| `system`, `chips`, `chip`, `network` | the system, its chip count, the chip target, the topology |
| `plan` | `dp`, `tp`, `pp`, `zero`, `microbatches`, `bucket_bytes`, `algorithm` |
| `latency_cycles`, `latency_s` | the step on the system: every chip's step with its collectives on the network |
| `chip_latency_cycles` | the chip's step with communication taking no time |
| `communication` | `time_s` (union of the intervals a collective is in flight on chip 0), `exposed_s` (what the step got longer than `chip_latency`), `overlapped_s` (`time_s - exposed_s`), `collectives` (count), `bytes_per_chip` (the tensors each chip reduces or gathers), `network_bytes` (bytes all chips sent, each message once), `network_link_bytes` (summed over the links crossed) |
| `bubble_fraction` | idle share of the pipeline (0 without pipeline parallelism) |
| `energy_pj`, `energy_breakdown_pj` | the chip's energy times the chips, plus `network` (every link crossed) |
| `memory_per_device` | `parameter_bytes`, `gradient_bytes`, `optimizer_state_bytes` (incl. `master_weight_bytes`), `optimizer_step_bytes`, `model_state_bytes`, `buffer_bytes`, `activation_bytes` (saved for backward), `input_bytes`, `total_bytes`, `parameter_count`, `dram_peak_bytes` (the chip's schedule), `capacity_bytes` (the chip's DRAM), `fits` |
| `collective_ops` | per collective: `op`, `node`, `phase`, `group`, `bytes`, `start_cycle`, `end_cycle` |
| `links` | per link: `bytes`, `busy_s`, `utilization` (busy / step latency) |
"""

from __future__ import annotations

from typing import Any


def parallel_report(result: Any) -> dict[str, Any]:
    system, plan = result.system, result.plan
    freq = result.frequency_hz
    sched = result.chip_schedule
    chip_energy = sched.energy_breakdown_pj()
    network_pj = result.sim.total_energy_pj()
    breakdown = {k: v * system.chips for k, v in chip_energy.items()}
    breakdown["network"] = network_pj
    latency_s = result.latency_cycles / freq
    comm_s = result.comm_cycles / freq
    exposed_s = min(result.exposed_cycles / freq, comm_s)
    memory = dict(result.memory)
    memory["fits"] = memory["total_bytes"] <= memory["capacity_bytes"] and memory["dram_peak_bytes"] <= memory["capacity_bytes"]
    links = {}
    for link, stats in zip(system.network.links, result.sim.stats, strict=True):
        if stats.bytes:
            links[link.name] = {"bytes": stats.bytes, "busy_s": stats.busy_s,
                                "utilization": stats.busy_s / latency_s if latency_s else 0.0}
    return {
        "system": system.name,
        "chips": system.chips,
        "chip": system.chip.name,
        "network": system.network.topology,
        "plan": {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "zero": plan.zero,
                 "microbatches": plan.microbatches, "bucket_bytes": plan.bucket, "algorithm": plan.algorithm},
        "frequency_hz": freq,
        "latency_cycles": round(result.latency_cycles),
        "latency_s": latency_s,
        "chip_latency_cycles": round(result.chip_latency_cycles),
        "communication": {
            "time_s": comm_s,
            "exposed_s": exposed_s,
            "overlapped_s": max(0.0, comm_s - exposed_s),
            "collectives": len(result.collectives),
            "bytes_per_chip": sum(r.bytes for r in result.collectives),
            "network_bytes": sum(r.sent_bytes for r in result.collectives),
            "network_link_bytes": result.sim.total_bytes(),
        },
        "bubble_fraction": getattr(result, "bubble_fraction", 0.0),
        "energy_pj": sum(breakdown.values()),
        "energy_breakdown_pj": breakdown,
        "memory_per_device": memory,
        "collective_ops": [{"op": r.op, "node": r.node, "phase": r.phase, "group": r.group, "bytes": r.bytes,
                            "start_cycle": round(r.start), "end_cycle": round(r.end)} for r in result.collectives],
        "links": links,
    }


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def parallel_text(report: dict[str, Any]) -> str:
    plan = report["plan"]
    lines = [f"MONET multi-chip training-step report: {report.get('model', '')} on {report['system']} "
             f"({report['chips']} x {report['chip']}, {report['network']})"]
    lines.append(f"  plan       dp={plan['dp']} tp={plan['tp']} pp={plan['pp']} zero={plan['zero']} "
                 f"microbatches={plan['microbatches']} ({plan['algorithm']} collectives, buckets of {_mb(plan['bucket_bytes'])})")
    if "precision" in report:
        lines.append(f"  precision  {report['precision']} ({report.get('precision_source', '')})")
    lat = report["latency_s"]
    lines.append(f"  latency    {lat * 1e3:.4g} ms per step ({report['chip_latency_cycles'] / report['frequency_hz'] * 1e3:.4g} ms "
                 "of it on one chip without communication)")
    c = report["communication"]
    lines.append(f"  network    {c['collectives']} collectives, {_mb(c['bytes_per_chip'])} per chip, "
                 f"{_mb(c['network_bytes'])} sent by all chips")
    share = c["time_s"] / lat * 100 if lat else 0.0
    lines.append(f"  comm time  {c['time_s'] * 1e3:.4g} ms ({share:.0f} % of the step): exposed {c['exposed_s'] * 1e3:.4g} ms, "
                 f"overlapped {c['overlapped_s'] * 1e3:.4g} ms")
    lines.append(f"  bubble     {report['bubble_fraction'] * 100:.1f} %")
    lines.append(f"  energy     {report['energy_pj'] / 1e9:.4g} mJ per step")
    for key, value in report["energy_breakdown_pj"].items():
        pct = value / report["energy_pj"] * 100 if report["energy_pj"] else 0.0
        lines.append(f"    {key:<15}{value / 1e9:>12.4g} mJ {pct:6.1f} %")
    m = report["memory_per_device"]
    lines.append("")
    lines.append("  memory per device")
    for key in ("parameter_bytes", "gradient_bytes", "optimizer_state_bytes", "optimizer_step_bytes", "buffer_bytes",
                "activation_bytes", "input_bytes", "total_bytes"):
        lines.append(f"    {key[:-6]:<22}{m[key]:>18,}")
    cap = m["capacity_bytes"]
    cap_text = "-" if cap == float("inf") else f"{int(cap):,}"
    lines.append(f"    {'DRAM capacity':<22}{cap_text:>18}   {'fits' if m['fits'] else 'DOES NOT FIT'}"
                 f" (the chip's schedule peaks at {m['dram_peak_bytes']:,})")
    return "\n".join(lines) + "\n"


MAX_TRACE_CHIPS = 16


def parallel_trace(result: Any) -> dict[str, Any]:
    """Chrome trace: one process per chip (a track per core; the first 16 chips: every chip
    of a data-parallel group runs the same step), one track per network link that carried
    data, and the collectives of chip 0 on a track of their own."""
    system = result.system
    us = 1e6 / result.frequency_hz
    sched = result.chip_schedule
    g = sched.graph
    events: list[dict[str, Any]] = []
    for chip in range(min(system.chips, MAX_TRACE_CHIPS)):
        pid = chip + 1
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"chip{chip}"}})
        for c in system.chip.cores:
            events.append({"ph": "M", "pid": pid, "tid": c.id, "name": "thread_name", "args": {"name": f"core{c.id} {c.name}"}})
        for st in sched.tasks:
            task = g.tasks[st.task]
            if task.sig is None:
                continue
            start, end = result.task_times[st.task]
            events.append({"ph": "X", "pid": pid, "tid": st.core, "name": task.node or task.op, "cat": task.phase,
                           "ts": start * us, "dur": max((end - start) * us, 1e-3), "args": {"op": task.op}})
    net_pid = MAX_TRACE_CHIPS + 2
    events.append({"ph": "M", "pid": net_pid, "name": "process_name", "args": {"name": "network"}})
    events.append({"ph": "M", "pid": net_pid, "tid": 0, "name": "thread_name", "args": {"name": "collectives (chip 0)"}})
    for r in result.collectives:
        events.append({"ph": "X", "pid": net_pid, "tid": 0, "name": f"{r.op.split('.')[-1]} {r.node}", "cat": r.phase,
                       "ts": r.start * us, "dur": max((r.end - r.start) * us, 1e-3), "args": {"bytes": r.bytes}})
    for i, (link, stats) in enumerate(zip(system.network.links, result.sim.stats, strict=True)):
        if not stats.spans:
            continue
        events.append({"ph": "M", "pid": net_pid, "tid": i + 1, "name": "thread_name", "args": {"name": f"link {link.name}"}})
        for a, b, label in stats.spans:
            events.append({"ph": "X", "pid": net_pid, "tid": i + 1, "name": label, "cat": "network",
                           "ts": a * 1e6, "dur": max((b - a) * 1e6, 1e-3)})
    return {"traceEvents": events, "displayTimeUnit": "ns"}
