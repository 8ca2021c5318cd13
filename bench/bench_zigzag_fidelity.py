"""Benchmark (not a test): `monet report` against ZigZag on ZigZag's own shipped files.

For each network (ResNet-18 from ../shared, and ZigZag's shipped MobileNetV2, used to tune
nothing) and each core of ZigZag 3.9.1's shipped hardware (`tpu_like` with its mapping file
`tpu_like.yaml`, `eyeriss_like` with `default.yaml`, the mapping ZigZag's own examples pair with
it), run

* ZigZag (`get_hardware_performance_zigzag`: LOMA, lpf limit 6) on the ONNX file with the shipped
  hardware and mapping YAMLs, under `--objective latency` and `energy`;
* MONET through its command line, as a user would: ``monet report MODEL --target HW.yaml
  --mapping MAPPING.yaml --inference --precision int8 --mapper fast|exhaustive
  --mapper-objective latency|energy --no-cost-cache``;

and print per conv/gemm layer latency and energy with their ratios (ours / ZigZag), the median
|error| and the worst ratio per (network, core, objective, mapper), totals, and the CPU time of
both tools on the same layers (the ratio ZigZag / MONET). `--mirror` also runs the mirror-nest
check (bench/bench_mirror_nests.py) on the whole export corpus.

ZigZag runs in its own venv (``--zigzag-python``, default /work/venvs/zigzag/bin/python or
bench/out/zigzag-venv, created on first use with ``pip install zigzag-dse==3.9.1 six``) through
this file in ``--worker`` mode; its results are cached in bench/out/zigzag_cache.json (``--no-cache``
re-runs it).

Usage: python bench/bench_zigzag_fidelity.py [--cores tpu_like eyeriss_like] [--objectives latency energy]
       [--mappers fast exhaustive] [--networks resnet18 mobilenetv2] [--no-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from shared_path import SHARED as SHARED_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SHARED = str(SHARED_DIR)
ZIGZAG_VENV = os.path.join(OUT, "zigzag-venv")
CACHE = os.path.join(OUT, "zigzag_cache.json")
# core -> the shipped mapping file ZigZag's examples pair with it
CORES = {"tpu_like": "tpu_like", "eyeriss_like": "default"}
NETWORKS = {"resnet18": "shared", "mobilenetv2": "zigzag"}
LOOP_NEST_OPS = ("nn.conv", "nn.gemm", "nn.matmul")


# ---------------------------------------------------------------- ZigZag side (worker)


def worker(model: str, hardware: str, mapping: str, objective: str, out_path: str) -> None:
    """Run ZigZag on one network (in ZigZag's venv) and write its per-layer figures."""
    import logging

    logging.disable(logging.CRITICAL)
    from zigzag.api import get_hardware_performance_zigzag  # type: ignore

    with tempfile.TemporaryDirectory() as dump:
        start = time.process_time()
        _, _, cmes = get_hardware_performance_zigzag(
            model, hardware, mapping, opt=objective, dump_folder=dump, lpf_limit=6,
            loma_show_progress_bar=False)
        cpu = time.process_time() - start
    layers = {}
    for cme, _ in cmes[0][1]:
        layers[cme.layer.name] = {"latency": float(cme.latency_total2), "energy": float(cme.energy_total),
                                  "macs": int(cme.layer.total_mac_count)}
    with open(out_path, "w") as handle:
        json.dump({"layers": layers, "cpu_s": cpu}, handle, indent=1)


# ---------------------------------------------------------------- driver


def zigzag_python(given: str | None) -> str:
    for python in (given, "/work/venvs/zigzag/bin/python", os.path.join(ZIGZAG_VENV, "bin", "python")):
        if python and os.path.exists(python):
            if subprocess.run([python, "-c", "import zigzag, six"], capture_output=True).returncode == 0:
                return python
    python = os.path.join(ZIGZAG_VENV, "bin", "python")
    print(f"creating {ZIGZAG_VENV} with zigzag-dse==3.9.1 (a few minutes)...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", ZIGZAG_VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "zigzag-dse==3.9.1", "six"], check=True)
    return python


def zigzag_inputs(python: str) -> str:
    probe = subprocess.run([python, "-c", "import os, zigzag; print(os.path.dirname(zigzag.__file__))"],
                           capture_output=True, text=True, check=True)
    return os.path.join(probe.stdout.strip(), "inputs")


def network_path(name: str, inputs: str) -> str:
    if NETWORKS[name] == "shared":
        return os.path.join(SHARED, "models", "stream_resnet18_inference.onnx")
    return os.path.join(inputs, "workload", f"{name}.onnx")


def run_zigzag(python: str, inputs: str, network: str, core: str, objective: str, use_cache: bool) -> dict:
    cache = {}
    if use_cache and os.path.exists(CACHE):
        with open(CACHE) as handle:
            cache = json.load(handle)
    key = f"{network}/{core}/{CORES[core]}/{objective}"
    if key not in cache:
        out_path = os.path.join(OUT, f"zigzag_run_{os.getpid()}.json")
        print(f"  running ZigZag: {key} ...", flush=True)
        subprocess.run([python, os.path.abspath(__file__), "--worker", network_path(network, inputs),
                        os.path.join(inputs, "hardware", f"{core}.yaml"),
                        os.path.join(inputs, "mapping", f"{CORES[core]}.yaml"), objective, out_path], check=True)
        with open(out_path) as handle:
            result = json.load(handle)
        os.remove(out_path)
        # read again before writing: another run of this bench may have added entries meanwhile
        cache = {}
        if os.path.exists(CACHE):
            with open(CACHE) as handle:
                cache = json.load(handle)
        cache[key] = result
        os.makedirs(OUT, exist_ok=True)
        with open(CACHE + ".tmp", "w") as handle:
            json.dump(cache, handle, indent=1)
        os.replace(CACHE + ".tmp", CACHE)
    return cache[key]


def run_monet(inputs: str, network: str, core: str, mapper: str, objective: str) -> tuple[dict, float]:
    """Per loop-nest layer (ONNX node name) latency and energy from `monet report`, and its CPU time."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "monet_ir.tools.monet", "report", network_path(network, inputs),
                   "--target", os.path.join(inputs, "hardware", f"{core}.yaml"),
                   "--mapping", os.path.join(inputs, "mapping", f"{CORES[core]}.yaml"),
                   "--inference", "--precision", "int8", "--mapper", mapper, "--mapper-objective", objective,
                   "--out", out, "--no-plots", "--no-cost-cache"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, check=True, capture_output=True, cwd=REPO)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(os.path.join(out, "report.json")) as handle:
            report = json.load(handle)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    layers = {row["name"]: {"latency": row["latency_cycles"], "energy": row["energy_pj"]}
              for row in report["layers"] if row["op"] in LOOP_NEST_OPS}
    return layers, cpu


def compare(title: str, ours: dict, reference: dict, verbose: bool) -> dict:
    names = [name for name in reference if name in ours]
    missing = [name for name in reference if name not in ours]
    if missing:
        print(f"  {title}: {len(missing)} ZigZag layers have no MONET counterpart: {missing[:3]}")
    lat = [ours[n]["latency"] / reference[n]["latency"] for n in names]
    energy = [ours[n]["energy"] / reference[n]["energy"] for n in names]
    if verbose:
        print(f"  {'layer':44s} {'zz cycles':>11s} {'ours':>11s} {'ratio':>7s}  {'zz pJ':>11s} {'ours':>11s} {'ratio':>7s}")
        for n, lr, er in zip(names, lat, energy):
            print(f"  {n[:44]:44s} {reference[n]['latency']:11.0f} {ours[n]['latency']:11.0f} {lr:7.4f}  "
                  f"{reference[n]['energy']:11.4g} {ours[n]['energy']:11.4g} {er:7.4f}")
    total_lat = sum(ours[n]["latency"] for n in names) / sum(reference[n]["latency"] for n in names)
    total_energy = sum(ours[n]["energy"] for n in names) / sum(reference[n]["energy"] for n in names)
    summary = {
        "layers": len(names),
        "median_latency_error": statistics.median(abs(r - 1) for r in lat),
        "median_energy_error": statistics.median(abs(r - 1) for r in energy),
        "worst_latency": max(max(r, 1 / r) for r in lat),
        "worst_energy": max(max(r, 1 / r) for r in energy),
        "total_latency": total_lat,
        "total_energy": total_energy,
    }
    print(f"  {title:44s} layers {summary['layers']:3d}  median |err| lat {100 * summary['median_latency_error']:5.2f} % "
          f"energy {100 * summary['median_energy_error']:5.2f} %  worst lat {summary['worst_latency']:.3f}x "
          f"energy {summary['worst_energy']:.3f}x  total lat {total_lat:.4f} energy {total_energy:.4f}", flush=True)
    return summary


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:7])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", nargs="+", default=list(CORES), choices=list(CORES))
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--objectives", nargs="+", default=["latency", "energy"], choices=["latency", "energy"])
    parser.add_argument("--mappers", nargs="+", default=["exhaustive", "fast"], choices=["exhaustive", "fast"])
    parser.add_argument("--zigzag-python", help="a Python with zigzag-dse==3.9.1 and six")
    parser.add_argument("--no-cache", action="store_true", help="re-run ZigZag even when cached")
    parser.add_argument("--layers", action="store_true", help="print every layer")
    parser.add_argument("--json", help="write the summaries to this file")
    parser.add_argument("--mirror", action="store_true", help="also run the mirror-nest check on the whole corpus")
    args = parser.parse_args()
    if "resnet18" in args.networks and not os.path.exists(os.path.join(SHARED, "models")):
        print(f"skipped resnet18: {SHARED}/models not found (needs ../shared)")
        args.networks = [n for n in args.networks if n != "resnet18"]
    os.makedirs(OUT, exist_ok=True)
    python = zigzag_python(args.zigzag_python)
    inputs = zigzag_inputs(python)
    results = {}
    for network in args.networks:
        for core in args.cores:
            for objective in args.objectives:
                reference = run_zigzag(python, inputs, network, core, objective, not args.no_cache)
                for mapper in args.mappers:
                    ours, cpu = run_monet(inputs, network, core, mapper, objective)
                    title = f"{network} {core} {objective} {mapper}"
                    summary = compare(title, ours, reference["layers"], args.layers)
                    summary["monet_cpu_s"] = cpu
                    summary["zigzag_cpu_s"] = reference["cpu_s"]
                    print(f"  {'':44s} CPU: MONET {cpu:.2f} s (whole report), ZigZag {reference['cpu_s']:.1f} s: "
                          f"ZigZag / MONET = {reference['cpu_s'] / cpu:.1f}x", flush=True)
                    results[title] = summary
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    if args.mirror:
        print("\nmirror nests (bench/bench_mirror_nests.py):", flush=True)
        return subprocess.run([sys.executable, os.path.join(HERE, "bench_mirror_nests.py")], cwd=REPO).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
