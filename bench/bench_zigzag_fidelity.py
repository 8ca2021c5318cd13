"""Benchmark (not a test): our per-layer cost model against ZigZag on the same core YAMLs.

For each Conv/Gemm layer of Stream's ResNet-18 inference model and each of the `tpu_like` and
`eyeriss_like` core descriptions in ../shared/stream_hw/cores, run ZigZag 3.9.1 (LOMA,
latency-optimal, lpf limit 6) and our `monet_ir.cost.cost_of` on the same core file, and print
latency, energy and their ratios per layer, the median |error| and the worst ratio.

Operands that do not fit the core's top memory get Stream's off-chip DRAM (`offchip.yaml`)
above them, as Stream does for "too large operands"; our model applies the same rule with the
DRAM the loader reads from that file.

ZigZag runs in its own venv (bench/out/zigzag-venv, created on first use with
``pip install zigzag-dse==3.9.1 six``) through this same file in ``--worker`` mode; its results
are cached in bench/out/zigzag_cache.json, so re-runs only re-run our model.

Usage: python bench/bench_zigzag_fidelity.py [--cores tpu_like eyeriss_like] [--no-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from shared_path import SHARED as SHARED_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SHARED = str(SHARED_DIR)
CORES_DIR = os.path.join(SHARED, "stream_hw", "cores")
OFFCHIP = os.path.join(CORES_DIR, "offchip.yaml")
MODEL = os.path.join(SHARED, "models", "stream_resnet18_inference.onnx")
ZIGZAG_VENV = os.path.join(OUT, "zigzag-venv")
CACHE = os.path.join(OUT, "zigzag_cache.json")
ZIGZAG_OPERAND = {"W": "I2", "I": "I1", "O": "O"}


# ---------------------------------------------------------------- shared by both sides


def layer_record(name: str, sig) -> dict:
    from dataclasses import asdict

    record = asdict(sig)
    record["name"] = name
    return record


def tensor_bits(record: dict) -> dict[str, int]:
    """Stored size of each tensor in bits, the output at partial-sum width (ZigZag's
    operand_size_bit, which Stream compares with the top memory)."""
    sy, sx = record["stride"]
    dy, dx = record["dilation"]
    pads = record["pads"]
    iy = max(1, (record["oy"] - 1) * sy + (record["fy"] - 1) * dy + 1 - pads[0] - pads[2])
    ix = max(1, (record["ox"] - 1) * sx + (record["fx"] - 1) * dx + 1 - pads[1] - pads[3])
    return {
        "W": record["g"] * record["k"] * record["c"] * record["fy"] * record["fx"] * record["w_bits"],
        "I": record["b"] * record["g"] * record["c"] * iy * ix * record["i_bits"],
        "O": record["b"] * record["g"] * record["k"] * record["oy"] * record["ox"] * record["psum_bits"],
    }


# ---------------------------------------------------------------- ZigZag side (worker)


def zigzag_layer(record: dict, layer_id: int) -> dict:
    """The layer in ZigZag's workload format, as ZigZag's own ONNX parser would build it."""
    precision = {"W": record["w_bits"], "I": record["i_bits"], "O": record["psum_bits"], "O_final": record["o_bits"]}
    if record["kind"] == "conv":
        sy, sx = record["stride"]
        dy, dx = record["dilation"]
        pads = record["pads"]
        iy_span = max(1, (record["oy"] - 1) * sy + (record["fy"] - 1) * dy + 1 - pads[0] - pads[2])
        ix_span = max(1, (record["ox"] - 1) * sx + (record["fx"] - 1) * dx + 1 - pads[1] - pads[3])
        return {
            "id": layer_id,
            "name": record["name"],
            "operator_type": "Conv",
            "equation": "O[b][g][k][oy][ox]+=W[g][k][c][fy][fx]*I[b][g][c][iy][ix]",
            "dimension_relations": [f"ix={sx}*ox+{dx}*fx", f"iy={sy}*oy+{dy}*fy"],
            "loop_dims": ["B", "K", "G", "OX", "OY", "C", "FX", "FY"],
            "loop_sizes": [record[d] for d in ("b", "k", "g", "ox", "oy", "c", "fx", "fy")],
            "operand_precision": precision,
            "pr_loop_dims": ["IX", "IY"],
            "pr_loop_sizes": [ix_span, iy_span],
            "padding": [[pads[1], pads[3]], [pads[0], pads[2]]],
        }
    return {
        "id": layer_id,
        "name": record["name"],
        "operator_type": "Gemm",
        "equation": "O[d][k]+=I[d][c]*W[c][k]",
        "dimension_relations": [],
        "loop_dims": ["C", "D", "K"],
        "loop_sizes": [record["c"], record["b"], record["k"]],
        "operand_precision": precision,
    }


def spilled_operands(record: dict, core: dict) -> list[str]:
    """Operands that get DRAM above them: those larger than their top memory, then the largest
    remaining ones while the operands sharing a top memory do not fit in it together."""
    bits = tensor_bits(record)
    top = {}
    for op, zz_op in ZIGZAG_OPERAND.items():
        holders = [name for name, mem in core["memories"].items() if zz_op in mem["operands"]]
        top[op] = holders[-1]
    spilled = [op for op in ("W", "I", "O") if bits[op] > core["memories"][top[op]]["size"]]
    for memory in set(top.values()):
        sharing = sorted((op for op in top if top[op] == memory and op not in spilled), key=lambda o: -bits[o])
        while sharing and sum(bits[o] for o in sharing) > core["memories"][memory]["size"]:
            spilled.append(sharing.pop(0))
    return spilled


def worker(core_path: str, offchip_path: str, layers_path: str, out_path: str) -> None:
    import logging

    import yaml

    logging.disable(logging.CRITICAL)
    from zigzag.api import get_hardware_performance_zigzag  # type: ignore

    with open(core_path) as handle:
        core = yaml.safe_load(handle)
    with open(offchip_path) as handle:
        offchip = yaml.safe_load(handle)
    with open(layers_path) as handle:
        records = json.load(handle)
    scratch = out_path + ".d"
    os.makedirs(scratch, exist_ok=True)
    mapping = [
        {
            "name": "default",
            "spatial_mapping": {d: list(v) for d, v in core["dataflows"].items()},
            "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"},
        }
    ]
    mapping_path = os.path.join(scratch, "mapping.yaml")
    with open(mapping_path, "w") as handle:
        yaml.safe_dump(mapping, handle)
    results = {}
    for index, record in enumerate(records):
        spilled = spilled_operands(record, core)
        hardware = json.loads(json.dumps(core))
        if spilled:
            dram = json.loads(json.dumps(offchip["memories"]["dram"]))
            keep = {ZIGZAG_OPERAND[o] for o in spilled}
            dram["operands"] = [o for o in ("I1", "I2", "O") if o in keep]
            for port in dram["ports"]:
                port["allocation"] = [a for a in port["allocation"] if a.split(",")[0].strip() in keep]
            hardware["memories"]["dram"] = dram
        hw_path = os.path.join(scratch, f"hw_{index}.yaml")
        with open(hw_path, "w") as handle:
            yaml.safe_dump(hardware, handle, sort_keys=False)
        start = time.time()
        _, _, cmes = get_hardware_performance_zigzag(
            [zigzag_layer(record, 0)],
            hw_path,
            mapping_path,
            opt="latency",
            dump_folder=os.path.join(scratch, f"dump_{index}"),
            lpf_limit=6,
            loma_show_progress_bar=False,
        )
        cme = cmes[0][1][0][0]
        results[record["name"]] = {
            "latency": float(cme.latency_total2),
            "energy": float(cme.energy_total),
            "mac_energy": float(cme.mac_energy),
            "ideal_temporal": float(cme.ideal_temporal_cycle),
            "stall": float(cme.stall_slack_comb),
            "onload": float(cme.data_onloading_cycle),
            "offload": float(cme.data_offloading_cycle),
            "spilled": spilled,
            "macs": int(cme.layer.total_mac_count),
            "mem": {str(k): [float(x) for x in v] for k, v in cme.mem_energy_breakdown.items()},
            "temporal": {
                str(k): [[f"{d}{s}" for d, s in level] for level in v]
                for k, v in cme.temporal_mapping.mapping_dic_origin.items()
            },
            "wall_s": round(time.time() - start, 2),
        }
        print(f"  zigzag {os.path.basename(core_path)} {record['name']}: {results[record['name']]['wall_s']} s", flush=True)
        with open(out_path, "w") as handle:
            json.dump(results, handle, indent=1)


# ---------------------------------------------------------------- our side (driver)


def ensure_zigzag_venv() -> str:
    python = os.path.join(ZIGZAG_VENV, "bin", "python")
    if os.path.exists(python):
        probe = subprocess.run([python, "-c", "import zigzag, six"], capture_output=True)
        if probe.returncode == 0:
            return python
    print(f"creating {ZIGZAG_VENV} with zigzag-dse==3.9.1 (a few minutes)...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", ZIGZAG_VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "zigzag-dse==3.9.1", "six"], check=True)
    return python


def model_layers() -> list[tuple[str, object]]:
    sys.path.insert(0, REPO)
    from monet_ir.cost.onnx_layers import load_shaped_model, model_layer_sigs

    return model_layer_sigs(load_shaped_model(MODEL))


def run_zigzag(core_names: list[str], records: list[dict], use_cache: bool) -> dict:
    cache = {}
    if use_cache and os.path.exists(CACHE):
        with open(CACHE) as handle:
            cache = json.load(handle)
    jobs = []
    for core_name in core_names:
        missing = [r for r in records if r["name"] not in cache.get(core_name, {})]
        if not missing:
            continue
        python = ensure_zigzag_venv()
        layers_path = os.path.join(OUT, f"layers_{core_name}.json")
        with open(layers_path, "w") as handle:
            json.dump(missing, handle)
        out_path = os.path.join(OUT, f"zigzag_{core_name}.json")
        command = [python, os.path.abspath(__file__), "--worker", os.path.join(CORES_DIR, f"{core_name}.yaml"), OFFCHIP, layers_path, out_path]
        jobs.append((core_name, out_path, subprocess.Popen(command)))
    for core_name, out_path, process in jobs:
        if process.wait() != 0:
            raise SystemExit(f"ZigZag worker for {core_name} failed")
        with open(out_path) as handle:
            cache.setdefault(core_name, {}).update(json.load(handle))
    os.makedirs(OUT, exist_ok=True)
    with open(CACHE, "w") as handle:
        json.dump(cache, handle, indent=1)
    return cache


def compare(core_name: str, layers, reference: dict) -> tuple[list[float], list[float]]:
    from monet_ir.cost import cost_of
    from targets import target_from_zigzag_core

    target = target_from_zigzag_core(os.path.join(CORES_DIR, f"{core_name}.yaml"), OFFCHIP)
    core = target.cores[0]
    lat_ratios, energy_ratios = [], []
    print(f"\n== {core_name}")
    print(f"{'layer':48s} {'zz lat':>11s} {'our lat':>11s} {'ratio':>6s}  {'zz pJ':>12s} {'our pJ':>12s} {'ratio':>6s}")
    start = time.perf_counter()
    costs = {name: cost_of(sig, core) for name, sig in layers}
    ours_s = time.perf_counter() - start
    for name, sig in layers:
        ref = reference[name]
        cost = costs[name]
        lat_ratio = cost.latency_cycles / ref["latency"]
        en_ratio = cost.energy_pj / ref["energy"]
        lat_ratios.append(lat_ratio)
        energy_ratios.append(en_ratio)
        print(f"{name[:48]:48s} {ref['latency']:11.0f} {cost.latency_cycles:11.0f} {lat_ratio:6.3f}  {ref['energy']:12.4g} {cost.energy_pj:12.4g} {en_ratio:6.3f}")
    lat_err = [abs(r - 1) for r in lat_ratios]
    en_err = [abs(r - 1) for r in energy_ratios]
    worst = max(max(r, 1 / r) for r in lat_ratios + energy_ratios)
    print(
        f"{core_name}: median |latency error| {100 * statistics.median(lat_err):.1f}%  "
        f"median |energy error| {100 * statistics.median(en_err):.1f}%  "
        f"max latency ratio {max(max(r, 1 / r) for r in lat_ratios):.2f}x  "
        f"max energy ratio {max(max(r, 1 / r) for r in energy_ratios):.2f}x  worst {worst:.2f}x  "
        f"(our model {1000 * ours_s:.0f} ms for {len(layers)} layers, ZigZag "
        f"{sum(reference[n]['wall_s'] for n, _ in layers):.0f} s)"
    )
    return lat_err, en_err


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", nargs="+", default=["tpu_like", "eyeriss_like"])
    parser.add_argument("--no-cache", action="store_true", help="re-run ZigZag even when cached")
    parser.add_argument("--zigzag-only", action="store_true", help="only fill the ZigZag cache")
    args = parser.parse_args()
    if not os.path.exists(MODEL):
        print(f"skipped: {MODEL} not found (needs ../shared)")
        return 0
    os.makedirs(OUT, exist_ok=True)
    layers = model_layers()
    records = [layer_record(name, sig) for name, sig in layers]
    cache = run_zigzag(args.cores, records, not args.no_cache)
    if args.zigzag_only:
        return 0
    for core_name in args.cores:
        compare(core_name, layers, cache[core_name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
