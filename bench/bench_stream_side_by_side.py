"""Benchmark (not a test): MONET next to Stream on the same inference workload and hardware.

Workload: Stream's shape-only ResNet-18 inference model (../shared/models/
stream_resnet18_inference.onnx), inference only (no autodiff), int8 (ZigZag/Stream's 8-bit
convention: 8-bit weights and activations, 16-bit partial sums).
Hardware: Stream's `tpu_like_quad_core` system (../shared/stream_hw/tpu_like_quad_core.yaml):
4 TPU-like 32x32 cores with a 2 MiB SRAM each, a 3x3x8 pooling core, a 64-lane SIMD core, a
ring 0-1-2-3-0 plus links from every TPU core to the pooling and SIMD cores (32 bit/cycle,
0 link energy), and one 64 bit/cycle DRAM port at 1000 pJ per 64-bit access.
Mapping (Stream's example for this system): Conv/Gemm may go to any of cores 0-3, pooling to
core 4, element-wise Add to core 5 (our Relu needs a vector core too: core 5; Stream turns Relu
into a zero-cost dummy node).

Stream side: the PyPI release (stream-dse 0.0.8 + zigzag-dse 2.4.3, "numpy<2", "pandas<2.3",
plotly; the pins of shared/notes/stream-zigzag.md §1) in its own venv under bench/out/stream-venv,
driven by the shared tool ../shared/tools/run_stream_pypi.py (run as a subprocess with that
venv's python, layer-by-layer: --hint-loops "", GA 4 individuals x 4 generations). 0.0.8 takes
hardware and mapping as Python modules and its bundled `TPU_like_quad_core` module is *not*
the YAML hardware (separate 1 MB W/A SRAMs, 64 bit/cycle mesh, infinite-bandwidth SIMD links), so
this file's worker mode builds the 0.0.8 accelerator object from the YAML files (ZigZag 2.4.3
MemoryInstance/MemoryHierarchy/Core, Stream CommunicationLink/Accelerator) and registers it and
the mapping as importable modules before it runs the tool unchanged. It also records every
scheduled CN (layer, core, start, end, energy) for the per-layer table. The GA is seeded
(--seed, PYTHONHASHSEED=0) so re-runs agree. Results are cached in bench/out/stream_results.json
(Stream takes 30-40 s here, minutes on larger graphs); --rerun-stream forces a new run; a failed
run goes to bench/out/stream_error.json and leaves the cache alone.

MONET side: `monet report MODEL --target SYSTEM.yaml --inference --precision int8 --mapping
MAP.yaml --no-plots`, run --repeat times as a subprocess (end-to-end wall and CPU time), plus one
in-process pipeline run (cold cost cache) timed like the Stream tool times its pipeline. It runs
twice: on the model as is, and on the model with its Relu removed ("MONET no Relu"), which is
the graph Stream actually schedules. Results and the reading of the gaps: docs/stream-comparison.md.

If Stream cannot be installed or run, the reason is printed and stored, and only our side is shown.

Usage: python bench/bench_stream_side_by_side.py [--rerun-stream] [--repeat 3]
       [--stream-timeout 2400] [--hint-loops ""] [--ga-gen 4 --ga-ind 4] [--seed 0] [--skip-stream]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SHARED = os.path.join(os.path.dirname(REPO), "shared")
MODEL = os.path.join(SHARED, "models", "stream_resnet18_inference.onnx")
SYSTEM = os.path.join(SHARED, "stream_hw", "tpu_like_quad_core.yaml")
TOOL = os.path.join(SHARED, "tools", "run_stream_pypi.py")
STREAM_VENV = os.path.join(OUT, "stream-venv")
STREAM_PY = os.path.join(STREAM_VENV, "bin", "python")
STREAM_OUT = os.path.join(OUT, "stream_lbl")
STREAM_CACHE = os.path.join(OUT, "stream_results.json")
OURS_OUT = os.path.join(OUT, "monet_stream_cmp")
OURS_MAPPING = os.path.join(OUT, "monet_mapping_tpu_like_quad_core.yaml")
STREAM_PINS = ["stream-dse==0.0.8", "zigzag-dse==2.4.3", "plotly", "numpy<2", "pandas<2.3"]
HW_MODULE = "monet_bench_stream_hw"
MAPPING_MODULE = "monet_bench_stream_mapping"

# Stream's example mapping for tpu_like_quad_core (ONNX op type -> allowed cores).
STREAM_MAPPING = {
    "default": [0, 1, 2, 3],
    "Conv": [0, 1, 2, 3],
    "Gemm": [0, 1, 2, 3],
    "MaxPool": [4],
    "AveragePool": [4],
    "GlobalAveragePool": [4],
    "Add": [5],
}
# Ours: the same, plus Relu on the SIMD core (our MAC arrays run no vector ops).
OURS_MAPPING_ENTRIES = {k: v for k, v in STREAM_MAPPING.items() if k != "default"} | {"Relu": [5]}


# ====================================================================== Stream side (worker)
# Everything below up to "parent side" runs inside bench/out/stream-venv (Python 3.11,
# stream-dse 0.0.8, zigzag-dse 2.4.3); only the standard library is imported at module level.


def _port_allocation(memory: dict) -> tuple[dict[str, str], dict[str, int], dict[str, int]]:
    """ZigZag 2.4.3 names ports r_port_i / w_port_i / rw_port_i by kind; map the YAML's port names
    onto those and return (name map, port counts, bandwidths per kind)."""
    counts = {"read": 0, "write": 0, "read_write": 0}
    prefix = {"read": "r_port", "write": "w_port", "read_write": "rw_port"}
    names, bw_max, bw_min = {}, {}, {}
    for port in memory["ports"]:
        kind = port["type"]
        counts[kind] += 1
        names[port["name"]] = f"{prefix[kind]}_{counts[kind]}"
        bw_max[kind] = max(bw_max.get(kind, 0), port["bandwidth_max"])
        bw_min[kind] = min(bw_min.get(kind, port["bandwidth_min"]), port["bandwidth_min"])
    return names, counts, {"max": bw_max, "min": bw_min}


def _memory_instance(name: str, memory: dict):
    from zigzag.classes.hardware.architecture.memory_instance import MemoryInstance

    names, counts, bw = _port_allocation(memory)
    rw = "read_write"
    r_max = bw["max"].get("read", bw["max"].get(rw, 0))
    w_max = bw["max"].get("write", bw["max"].get(rw, 0))
    r_min = bw["min"].get("read", bw["min"].get(rw, r_max))
    w_min = bw["min"].get("write", bw["min"].get(rw, w_max))
    instance = MemoryInstance(
        name=name,
        size=memory["size"],
        r_bw=r_max,
        w_bw=w_max,
        r_cost=memory["r_cost"],
        w_cost=memory["w_cost"],
        area=memory.get("area", 0),
        r_port=counts["read"],
        w_port=counts["write"],
        rw_port=counts[rw],
        latency=memory.get("latency", 1),
        min_r_granularity=r_min,
        min_w_granularity=w_min,
    )
    port_alloc = []
    for operand in memory["operands"]:
        alloc = {"fh": None, "tl": None, "fl": None, "th": None}
        for port in memory["ports"]:
            for entry in port.get("allocation", []):
                op, direction = (s.strip() for s in entry.split(","))
                if op == operand:
                    alloc[direction] = names[port["name"]]
        port_alloc.append(alloc)
    return instance, tuple(memory["operands"]), tuple(port_alloc)


def _served(served: list[str], dims: list[str]):
    if served and set(served) == set(dims):
        return "all"
    if not served:
        return {tuple(0 for _ in dims)}
    return {tuple(1 if d == s else 0 for d in dims) for s in served}


def _zigzag_core(core_id: int, path: str, kind: str):
    """A ZigZag 2.4.3 / Stream 0.0.8 Core equivalent to a ZigZag YAML core file."""
    import yaml
    from zigzag.classes.hardware.architecture.core import Core
    from zigzag.classes.hardware.architecture.memory_hierarchy import MemoryHierarchy
    from zigzag.classes.hardware.architecture.operational_array import MultiplierArray
    from zigzag.classes.hardware.architecture.operational_unit import Multiplier
    from stream.classes.hardware.architecture.pooling_array import PoolingArray
    from stream.classes.hardware.architecture.pooling_unit import PoolingUnit
    from stream.classes.hardware.architecture.simd_array import SimdArray
    from stream.classes.hardware.architecture.simd_unit import SimdUnit

    with open(path) as f:
        spec = yaml.safe_load(f)
    array = spec["operational_array"]
    dims = list(array["dimensions"])
    if kind == "offchip":
        # as Stream's own off-chip core: a 1x1 array nothing is mapped to
        operational_array = MultiplierArray(Multiplier([8, 8], float("inf"), 0), {d: 1 for d in dims})
    else:
        unit_cls, array_cls = {"pooling": (PoolingUnit, PoolingArray), "simd": (SimdUnit, SimdArray)}.get(
            kind, (Multiplier, MultiplierArray)
        )
        unit = unit_cls([8, 8], array["unit_energy"], array.get("unit_area", 0))
        operational_array = array_cls(unit, dict(zip(dims, array["sizes"])))
    hierarchy = MemoryHierarchy(operational_array=operational_array)
    for name, memory in spec["memories"].items():  # innermost first, as ZigZag's YAML reader
        instance, operands, port_alloc = _memory_instance(name, memory)
        hierarchy.add_memory(
            memory_instance=instance,
            operands=operands,
            port_alloc=port_alloc,
            served_dimensions=_served(memory.get("served_dimensions", []), dims),
        )
    dataflows = None
    if "dataflows" in spec:
        dataflow = {}
        for dim, unrolls in spec["dataflows"].items():
            loop, factor = (s.strip() for s in unrolls[0].split(","))
            dataflow[dim] = (loop, int(factor))
        dataflows = [dataflow]
    return Core(core_id, operational_array, hierarchy, dataflows)


def _core_kind(filename: str) -> str:
    base = os.path.basename(filename).lower()
    if "pool" in base:
        return "pooling"
    if "simd" in base or "vec" in base:
        return "simd"
    return "mac_array"


def build_stream_accelerator(system_path: str):
    """Stream 0.0.8's Accelerator for a Stream system YAML of the 2025 tree (cores, offchip_core,
    core_connectivity, bandwidth, unit_energy_cost), built the way that tree's factory builds it:
    a link pair per "a, b" entry, every core linked to the off-chip core by one shared link of the
    DRAM port's bandwidth when DRAM has a single read-write port."""
    import networkx as nx
    import yaml
    from stream.classes.hardware.architecture.accelerator import Accelerator
    from stream.classes.hardware.architecture.communication_link import CommunicationLink

    folder = os.path.dirname(os.path.abspath(system_path))

    def core_file(name: str) -> str:
        for cand in (os.path.join(folder, name), os.path.join(folder, "cores", name)):
            if os.path.exists(cand):
                return cand
        raise FileNotFoundError(f"{system_path}: core file {name} not found")

    with open(system_path) as f:
        system = yaml.safe_load(f)
    if system.get("core_memory_sharing"):
        raise NotImplementedError("core_memory_sharing is not translated to Stream 0.0.8")
    cores = {int(i): _zigzag_core(int(i), core_file(p), _core_kind(p)) for i, p in system["cores"].items()}
    offchip_id = len(cores)
    offchip = _zigzag_core(offchip_id, core_file(system["offchip_core"]), "offchip")
    bandwidth, unit_energy = system["bandwidth"], system["unit_energy_cost"]
    edges = []
    for entry in system["core_connectivity"]:
        ids = [int(s) for s in str(entry).split(",")]
        if len(ids) != 2:
            raise NotImplementedError("shared buses are not translated to Stream 0.0.8")
        a, b = cores[ids[0]], cores[ids[1]]
        edges.append((a, b, {"cl": CommunicationLink(a, b, bandwidth, unit_energy)}))
        edges.append((b, a, {"cl": CommunicationLink(b, a, bandwidth, unit_energy)}))
    dram = offchip.mem_hierarchy_dict["O"][0]
    r_bw, w_bw = offchip.mem_r_bw_dict["O"][0], offchip.mem_w_bw_dict["O"][0]
    if len(dram.port_list) == 1:
        to_dram = from_dram = CommunicationLink(offchip, "Any", w_bw, unit_energy, bidirectional=True)
    else:
        to_dram = CommunicationLink("Any", offchip, w_bw, unit_energy)
        from_dram = CommunicationLink(offchip, "Any", r_bw, unit_energy)
    for core in cores.values():
        edges.append((core, offchip, {"cl": to_dram}))
        edges.append((offchip, core, {"cl": from_dram}))
    return Accelerator(system["name"], nx.DiGraph(edges), offchip_core_id=offchip_id)


def _cn_record(n) -> dict:
    return {
        "name": getattr(n, "name", None),
        "type": getattr(n, "type", None),
        "id": list(n.id) if isinstance(n.id, tuple) else n.id,
        "sub_id": getattr(n, "sub_id", None),
        "core": n.core_allocation,
        "start": float(n.start) if n.start is not None else None,
        "end": float(n.end) if n.end is not None else None,
        "runtime": float(n.runtime) if n.runtime is not None else None,
        "onchip_energy": float(n.onchip_energy or 0.0),
        "offchip_energy": float(n.offchip_energy or 0.0),
        "too_large_operands": list(getattr(n, "too_large_operands", []) or []),
    }


def _memory_record(mm) -> dict:
    """Per top-level memory instance: when its occupancy peaked, and what it still holds when the
    schedule ends (tensors are freed when no consumer on that core is left)."""
    out = {}
    for inst, cumsum in mm.top_instance_stored_cumsum.items():
        cores = "+".join(str(c.id) for c in mm.cores_per_top_instance.get(inst, []))
        peak_at = float(cumsum[cumsum[:, 1].argmax(), 0]) if len(cumsum) else 0.0
        held = [{"layer": getattr(t.origin, "name", str(t.origin)), "operand": t.layer_operand, "bytes": t.size / 8}
                for t in mm.top_instance_stored_tensors.get(inst, [])]
        out[f"core{cores}:{inst.name}"] = {"peak_at": peak_at, "held_at_end": held}
    return out


def stream_worker(argv: list[str]) -> int:
    """Runs in the Stream venv: registers the hardware and mapping modules, then runs the shared
    tool unchanged (runpy) with `argv`; afterwards writes every scheduled CN to cns.json."""
    import importlib.machinery
    import runpy
    import types

    ap = argparse.ArgumentParser()
    ap.add_argument("--system", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--cns-out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ours, tool_args = ap.parse_known_args(argv)
    if tool_args and tool_args[0] == "--":
        tool_args = tool_args[1:]

    hw = types.ModuleType(HW_MODULE)
    hw.__spec__ = importlib.machinery.ModuleSpec(HW_MODULE, None)
    hw.accelerator = build_stream_accelerator(ours.system)
    mp = types.ModuleType(MAPPING_MODULE)
    mp.__spec__ = importlib.machinery.ModuleSpec(MAPPING_MODULE, None)
    mp.mapping = {k: {"core_allocation": v if len(v) > 1 else v[0]} for k, v in STREAM_MAPPING.items()}
    sys.modules[HW_MODULE], sys.modules[MAPPING_MODULE] = hw, mp

    from zigzag.classes.stages import MainStage  # type: ignore

    original_run = MainStage.run

    def run_and_record(self):
        results = original_run(self)
        scme = results[0][0] if results else None
        # MainStage also runs ZigZag's per-CN pipelines; only Stream's outer result has a workload
        if hasattr(scme, "workload") and hasattr(getattr(scme, "accelerator", None), "memory_manager"):
            cns = [_cn_record(n) for n in scme.workload.nodes()]
            with open(ours.cns_out, "w") as fh:
                json.dump({"latency": float(scme.latency), "cns": cns,
                           "memories": _memory_record(scme.accelerator.memory_manager)}, fh, indent=1)
        return results

    MainStage.run = run_and_record
    # Stream's GA (DEAP) draws from `random`: seed it so that re-runs give the same allocation
    import random

    import numpy

    random.seed(ours.seed)
    numpy.random.seed(ours.seed)
    sys.argv = [ours.tool, *tool_args]
    try:
        runpy.run_path(ours.tool, run_name="__main__")
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


# ====================================================================== parent side


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{platform.node()}: {os.cpu_count()} CPUs ({cpu}), {mem}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def file_digest(*paths: str) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def worker_digest() -> str:
    """Hash of what decides Stream's result on our side: the pins, the mapping and the worker code
    (between the two section markers), so that edits elsewhere in this file keep the cache."""
    with open(os.path.abspath(__file__), "rb") as f:
        text = f.read()
    worker = text.split(b"= Stream side (worker)", 1)[-1].split(b"= parent side", 1)[0]
    return hashlib.sha256(json.dumps([STREAM_MAPPING, STREAM_PINS]).encode() + worker).hexdigest()[:16]


def stream_config(args) -> dict:
    cores_dir = os.path.join(os.path.dirname(SYSTEM), "cores")
    core_files = [os.path.join(cores_dir, f) for f in ("tpu_like.yaml", "pooling.yaml", "simd.yaml", "offchip.yaml")]
    return {
        "model": os.path.basename(MODEL),
        "model_sha": file_digest(MODEL),
        "system": os.path.basename(SYSTEM),
        "hardware_sha": file_digest(SYSTEM, *core_files),
        "tool_sha": file_digest(TOOL),
        "worker_sha": worker_digest(),
        "hint_loops": args.hint_loops,
        "ga_gen": args.ga_gen,
        "ga_ind": args.ga_ind,
        "lpf_limit": args.lpf_limit,
        "seed": args.seed,
    }


def ensure_stream_venv() -> tuple[bool, str]:
    """Create bench/out/stream-venv with the pinned Stream 0.0.8 stack if missing."""
    log = os.path.join(OUT, "stream-install.log")
    check = [STREAM_PY, "-c", "import stream, zigzag.classes, plotly, numpy; assert numpy.__version__ < '2'"]
    if os.path.exists(STREAM_PY) and subprocess.run(check, capture_output=True).returncode == 0:
        return True, "existing venv"
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        # the notes' venvs are Python 3.11 (0.0.8 predates 3.12); fall back to this interpreter
        python = shutil.which("python3.11") or sys.executable
        steps = [[python, "-m", "venv", "--clear", STREAM_VENV], [STREAM_PY, "-m", "pip", "install", *STREAM_PINS]]
        for cmd in steps:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            try:
                rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=1800).returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                return False, f"{' '.join(cmd[:4])}: {exc} (log: {log})"
            if rc != 0:
                return False, f"`{' '.join(cmd)}` exited {rc}; last lines of {log}:\n" + tail(log, 15)
    res = subprocess.run(check, capture_output=True, text=True)
    if res.returncode != 0:
        return False, f"the installed Stream does not import: {res.stderr.strip().splitlines()[-1:]}"
    return True, f"installed in {time.perf_counter() - t0:.0f} s ({' '.join(STREAM_PINS)})"


def tail(path: str, n: int) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def run_stream(args, config: dict) -> dict:
    ok, how = ensure_stream_venv()
    if not ok:
        return {"ok": False, "error": f"Stream 0.0.8 could not be installed: {how}", "config": config}
    shutil.rmtree(STREAM_OUT, ignore_errors=True)
    os.makedirs(STREAM_OUT, exist_ok=True)
    cns_path = os.path.join(STREAM_OUT, "cns.json")
    log_path = os.path.join(STREAM_OUT, "stream.log")
    cmd = [STREAM_PY, os.path.abspath(__file__), "--stream-worker", "--system", SYSTEM, "--tool", TOOL,
           "--cns-out", cns_path, "--seed", str(args.seed), "--",
           "--hardware", HW_MODULE, "--workload", MODEL, "--mapping", MAPPING_MODULE,
           "--hint-loops", args.hint_loops, "--ga-gen", str(args.ga_gen), "--ga-ind", str(args.ga_ind),
           "--lpf-limit", str(args.lpf_limit), "--out", STREAM_OUT]
    env = dict(os.environ, PYTHONPATH=HERE, MPLBACKEND="Agg", PYTHONUNBUFFERED="1", PYTHONHASHSEED="0")
    print(f"running Stream 0.0.8 ({how}); log: {log_path} (timeout {args.stream_timeout:.0f} s)", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=STREAM_OUT, env=env,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=args.stream_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return {"ok": False, "config": config,
                    "error": f"Stream did not finish within {args.stream_timeout:.0f} s (killed); log {log_path}:\n"
                             + tail(log_path, 10)}
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary_path = os.path.join(STREAM_OUT, "summary.json")
    if rc != 0 or not os.path.exists(summary_path):
        return {"ok": False, "config": config,
                "error": f"Stream exited {rc}; last lines of {log_path}:\n" + tail(log_path, 20)}
    with open(summary_path) as f:
        summary = json.load(f)
    cns = None
    if os.path.exists(cns_path):
        with open(cns_path) as f:
            cns = json.load(f)["cns"]
    versions = subprocess.run([STREAM_PY, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True)
    pinned = {}
    if versions.returncode == 0:
        pinned = {p["name"]: p["version"] for p in json.loads(versions.stdout)
                  if p["name"].lower() in ("stream-dse", "zigzag-dse", "numpy", "pandas", "networkx", "onnx", "deap")}
    return {
        "ok": True,
        "config": config,
        "measured": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "packages": pinned,
        "process_wall_s": round(wall, 2),
        "process_cpu_s": round(cpu, 2),
        "summary": summary,
        "cns": cns,
    }


def stream_results(args) -> dict:
    missing = [p for p in (TOOL, MODEL, SYSTEM) if not os.path.exists(p)]
    if missing:
        return {"ok": False, "error": f"not found: {', '.join(missing)} (the shared/ folder beside the checkout)"}
    config = stream_config(args)
    if not args.rerun_stream and os.path.exists(STREAM_CACHE):
        with open(STREAM_CACHE) as f:
            cached = json.load(f)
        if cached.get("config") == config and cached.get("ok"):
            cached["from_cache"] = True
            return cached
    result = run_stream(args, config)
    # a failed run is kept apart, so that it does not replace a good cached result
    with open(STREAM_CACHE if result["ok"] else os.path.join(OUT, "stream_error.json"), "w") as f:
        json.dump(result, f, indent=1)
    result["from_cache"] = False
    return result


# ---------------------------------------------------------------------- ours


def write_our_mapping() -> None:
    with open(OURS_MAPPING, "w") as f:
        for name, cores in OURS_MAPPING_ENTRIES.items():
            f.write(f"- name: {name}\n  core_allocation: {list(cores)}\n")


def write_model_without_relu() -> str:
    """The model with every Relu removed (its consumers read the Relu's input): what Stream 0.0.8
    schedules, since it parses Relu as a zero-cost DummyNode. Weights stay external references."""
    import onnx

    model = onnx.load(MODEL, load_external_data=False)
    alias = {}
    keep = []
    for node in model.graph.node:
        if node.op_type == "Relu":
            alias[node.output[0]] = alias.get(node.input[0], node.input[0])
        else:
            keep.append(node)
    outputs = {o.name for o in model.graph.output}
    if outputs & set(alias):
        raise ValueError("a Relu output is a graph output")
    for node in keep:
        for i, name in enumerate(node.input):
            if name in alias:
                node.input[i] = alias[name]
    del model.graph.node[:]
    model.graph.node.extend(keep)
    infos = [v for v in model.graph.value_info if v.name not in alias]
    del model.graph.value_info[:]
    model.graph.value_info.extend(infos)
    path = os.path.join(OUT, "stream_resnet18_inference_no_relu.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def run_ours(model: str, out: str, repeat: int) -> dict:
    write_our_mapping()
    monet = shutil.which("monet", path=os.path.dirname(sys.executable)) or shutil.which("monet")
    base = [monet] if monet else [sys.executable, "-m", "monet_ir.tools.monet"]
    cmd = [*base, "report", model, "--target", SYSTEM, "--inference", "--precision", "int8",
           "--mapping", OURS_MAPPING, "--out", out, "--no-plots"]
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if res.returncode != 0:
            raise SystemExit(f"`{' '.join(cmd)}` failed ({res.returncode}):\n{res.stderr}")
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    return {"report": report, "walls": walls, "cpus": cpus, "pipeline_s": None, "cmd": cmd, "base": base}


def time_pipeline_in_process(ours: dict) -> None:
    """The same pipeline in this process (first call: cold cost cache), i.e. the part the Stream
    tool's own wall_s covers (it starts its clock after the imports)."""
    try:
        from monet_ir.tools.monet import Progress, build_parser, make_report
    except ImportError:
        return
    ns = build_parser().parse_args(ours["cmd"][len(ours["base"]):])
    t0 = time.perf_counter()
    make_report(ns, Progress(enabled=False))
    ours["pipeline_s"] = time.perf_counter() - t0


# ---------------------------------------------------------------------- table

LABEL_WIDTH = 46


def fmt(x, digits: int = 0) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:,.{digits}f}"


def ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def row(label: str, values: list, digits: int = 0) -> str:
    """values: [ours, ours without Relu, Stream]; then ours/Stream and (no Relu)/Stream."""
    ours, norelu, stream = values
    cells = [fmt(v, digits) for v in values] + [ratio(ours, stream), ratio(norelu, stream)]
    return f"  {label:<{LABEL_WIDTH}} {cells[0]:>15} {cells[1]:>15} {cells[2]:>15} {cells[3]:>8} {cells[4]:>8}"


def header(title: str) -> str:
    return (f"\n{title}\n  {'':<{LABEL_WIDTH}} {'MONET':>15} {'MONET no Relu':>15} {'Stream 0.0.8':>15} "
            f"{'ours/St':>8} {'noRelu/St':>8}")


def stream_memory_key(ours_name: str, stream_names) -> str | None:
    """'core0.sram_2MB' -> 'core0:sram_2MB'; our 'dram' -> Stream's off-chip core's 'coreN:dram'."""
    if ours_name.startswith("core"):
        return ours_name.replace(".", ":", 1)
    return next((k for k in stream_names if k.endswith(":dram")), None)


def energy_groups(rep: dict | None) -> dict:
    if rep is None:
        return {}
    b = rep.get("energy_breakdown_pj", {})
    return {
        "ops": b.get("compute", 0.0) + b.get("onchip_memory", 0.0),
        "mac": b.get("compute"),
        "offchip": b.get("offchip_memory"),
        "c2c": b.get("interconnect"),
        "links": None,
    }


def stream_energy_groups(s: dict) -> dict:
    b = s.get("energy_breakdown_pJ")
    if not b:
        return {}
    g = lambda *keys: sum(b.get(k, 0.0) for k in keys)  # noqa: E731
    return {
        "ops": g("total_cn_onchip_energy"),
        "offchip": g("total_cn_offchip_memory_energy", "total_eviction_to_offchip_memory_energy",
                     "total_sink_layer_output_offchip_memory_energy"),
        "cn_offchip": g("total_cn_offchip_memory_energy"),
        "evict": g("total_eviction_to_offchip_memory_energy"),
        "sink": g("total_sink_layer_output_offchip_memory_energy"),
        "c2c": g("total_core_to_core_memory_energy"),
        "links": g("total_cn_offchip_link_energy", "total_eviction_to_offchip_link_energy",
                   "total_sink_layer_output_offchip_link_energy", "total_core_to_core_link_energy"),
    }


def print_table(ours: dict, norelu: dict | None, stream: dict, args) -> None:
    rep = ours["report"]
    rep2 = norelu["report"] if norelu else None
    ok = stream.get("ok")
    s = stream.get("summary", {}) if ok else {}
    print(f"\nWorkload {os.path.basename(MODEL)} (inference, int8), system {os.path.basename(SYSTEM)}; mapping "
          "Conv/Gemm -> cores 0-3, MaxPool/GlobalAveragePool -> 4, Add -> 5 (ours: also Relu -> 5).")
    print("'MONET no Relu': the same model with its 17 Relu removed, as Stream sees it (Relu = zero-cost dummy).")
    if ok:
        print(f"Stream: stream-dse 0.0.8 (PyPI), layer-by-layer (hint_loops {args.hint_loops!r}), "
              f"GA {args.ga_ind} individuals x {args.ga_gen} generations, {s.get('n_cns')} CNs; "
              + (f"cached result measured {stream.get('measured')}" if stream.get("from_cache")
                 else f"measured now ({stream.get('measured')})"))
    else:
        print("Stream: MISSING -- " + stream.get("error", "not run"))

    get = lambda r, k: r.get(k) if r else None  # noqa: E731
    print(header("Totals"))
    print(row("latency (cycles)", [rep["latency_cycles"], get(rep2, "latency_cycles"), s.get("latency_cycles")]))
    print(row("energy (pJ)", [rep["energy_pj"], get(rep2, "energy_pj"), s.get("energy_pJ")]))

    eo, en, es = energy_groups(rep), energy_groups(rep2), stream_energy_groups(s)
    print(header("Energy breakdown (pJ)"))
    print(row("ops: MAC/op + on-chip memories (ZigZag-style)", [eo["ops"], en.get("ops"), es.get("ops")]))
    print(row("  of which MAC/op energy", [eo["mac"], en.get("mac"), None]))
    print(row("off-chip memory (DRAM accesses), all", [eo["offchip"], en.get("offchip"), es.get("offchip")]))
    print(row("  Stream: CN fetches from DRAM + too-large ops", [None, None, es.get("cn_offchip")]))
    print(row("  Stream: evictions to DRAM", [None, None, es.get("evict")]))
    print(row("  Stream: sink-layer outputs to DRAM", [None, None, es.get("sink")]))
    print(row("core-to-core (ours: links/DRAM hops; St: SRAM)", [eo["c2c"], en.get("c2c"), es.get("c2c")]))
    print(row("link activity (unit_energy_cost is 0 here)", [None, None, es.get("links")]))
    for label, r in (("ours", rep), ("ours, no Relu", rep2)):
        if r and r.get("transfers"):
            print(f"  ({label} transfers: " + "; ".join(f"{k} {v['count']} x {v['bytes']:,} B {v['energy_pj']:,.0f} pJ"
                                                     for k, v in r["transfers"].items()) + ")")

    print(header("Peak memory (bytes)"))
    peaks = rep["memory"].get("peak_bytes", {})
    peaks2 = rep2["memory"].get("peak_bytes", {}) if rep2 else {}
    caps = rep["memory"].get("capacity_bytes", {})
    speaks = {k: v / 8 for k, v in s.get("peak_memory_bits", {}).items()}
    used = set()
    for name, peak in peaks.items():
        key = stream_memory_key(name, speaks)
        used.add(key)
        print(row(f"{name} (cap. {caps.get(name, 0):,.0f})", [peak, peaks2.get(name), speaks.get(key)]))
    for k, v in speaks.items():
        if k not in used:
            print(row(f"Stream only: {k}", [None, None, v]))

    print(header("Run time (s)"))
    med = lambda r, k: statistics.median(r[k]) if r else None  # noqa: E731
    print(row(f"process wall (ours: median of {len(ours['walls'])}; St: 1)",
              [med(ours, "walls"), med(norelu, "walls"), stream.get("process_wall_s")], 2))
    print(row("process CPU, user+sys", [med(ours, "cpus"), med(norelu, "cpus"), stream.get("process_cpu_s")], 2))
    print(row("pipeline only (after imports; Stream's wall_s)",
              [ours.get("pipeline_s"), get(norelu, "pipeline_s"), s.get("wall_s")], 2))

    if ok and stream.get("cns"):
        print_layers(rep, stream["cns"])


def print_layers(rep: dict, cns: list[dict]) -> None:
    per_layer: dict[str, dict] = {}
    for cn in cns:
        d = per_layer.setdefault(cn["name"], {"core": set(), "start": None, "runtime": 0.0, "energy": 0.0,
                                              "too_large": set()})
        d["core"].add(cn["core"])
        d["start"] = cn["start"] if d["start"] is None else min(d["start"], cn["start"])
        d["runtime"] += cn["runtime"] or 0.0
        d["energy"] += cn["onchip_energy"] + cn["offchip_energy"]
        d["too_large"].update(cn["too_large_operands"])
    print("\nPer layer (MONET run with Relu). Stream: CN runtime and on+off-chip energy from ZigZag 2.4.3; "
          "ours: op latency and energy.\n'core' = ours/Stream; 'tl' = Stream's too-large operands (kept in DRAM).")
    print(f"  {'layer':<36} {'core':>5} {'lat ours':>10} {'lat St':>10} {'ratio':>6} "
          f"{'E ours (pJ)':>13} {'E St (pJ)':>13} {'ratio':>6} {'start ours':>10} {'start St':>10}  tl")
    lat_o = lat_s = e_o = e_s = 0.0
    for layer in rep.get("layers", []):
        sd = per_layer.get(layer["name"])
        cores = f"{layer['core']}/" + (",".join(str(c) for c in sorted(sd["core"])) if sd else "-")
        if sd:
            lat_o += layer["latency_cycles"]
            lat_s += sd["runtime"]
            e_o += layer["energy_pj"]
            e_s += sd["energy"]
        st = lambda k: sd[k] if sd else None  # noqa: E731
        print(f"  {layer['name'][-36:]:<36} {cores:>5} {fmt(layer['latency_cycles']):>10} {fmt(st('runtime')):>10} "
              f"{ratio(layer['latency_cycles'], st('runtime')):>6} {fmt(layer['energy_pj']):>13} "
              f"{fmt(st('energy')):>13} {ratio(layer['energy_pj'], st('energy')):>6} {fmt(layer['start_cycle']):>10} "
              f"{fmt(st('start')):>10}  {','.join(sorted(sd['too_large'])) if sd else ''}")
    print(f"  {'sum over layers in both':<36} {'':>5} {fmt(lat_o):>10} {fmt(lat_s):>10} {ratio(lat_o, lat_s):>6} "
          f"{fmt(e_o):>13} {fmt(e_s):>13} {ratio(e_o, e_s):>6}")
    missing = [n for n in per_layer if n not in {l["name"] for l in rep.get("layers", [])}]
    if missing:
        print(f"  Stream CNs with no op of ours: {missing}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--stream-worker":
        return stream_worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rerun-stream", action="store_true", help="ignore bench/out/stream_results.json")
    ap.add_argument("--repeat", type=int, default=3, help="runs of `monet report` for timing")
    ap.add_argument("--stream-timeout", type=float, default=2400.0, help="seconds (default 40 min)")
    ap.add_argument("--hint-loops", default="", help='Stream CN granularity; "" = layer-by-layer')
    ap.add_argument("--ga-gen", type=int, default=4)
    ap.add_argument("--ga-ind", type=int, default=4)
    ap.add_argument("--lpf-limit", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0, help="seed of Stream's GA (random, numpy)")
    ap.add_argument("--skip-stream", action="store_true", help="only our side")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    stream = {"ok": False, "error": "skipped (--skip-stream)"} if args.skip_stream else stream_results(args)
    ours = run_ours(MODEL, OURS_OUT, args.repeat)
    norelu = run_ours(write_model_without_relu(), OURS_OUT + "_no_relu", args.repeat)
    time_pipeline_in_process(ours)
    print_table(ours, norelu, stream, args)
    print(f"\nmachine: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
