"""monet sweep: a hardware grid over a small target template (MLP training step)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from monet_ir.explore import sweep
from monet_ir.tools.monet import main as monet_main

DATA = Path(__file__).resolve().parents[1] / "data" / "models"

TEMPLATE = """
name: tiny
frequency_hz: 1.0e9
dram: {name: dram, capacity: 1 GiB, bandwidth_GBps: 8.0, read_energy_pj_per_bit: 10.0}
templates:
  mac: &mac
    kind: mac_array
    array: {dims: {D1: 16, D2: 16}, dataflow: {D1: ["K, 16"], D2: ["C, 16"]}}
    precisions: {fp32: {bits: 32, energy_pj: 0.8}}
    memories:
      rf: {size: 64 B, operands: [W], read_bw: 32, read_energy_pj: 0.1, write_energy_pj: 0.1}
      acc: {size: 4 B, operands: [O], served_dims: [D2], read_bw: 32, read_energy_pj: 0.02, write_energy_pj: 0.02}
      sram: {size: 256 KiB, operands: [I, W, O], served_dims: [D1, D2], read_bw: 512, read_energy_pj: 50.0,
             write_energy_pj: 60.0}
cores:
  - {<<: *mac, name: mac0}
  - name: vec
    kind: simd
    array: {dims: {D1: 16}, dataflow: {D1: ["K, 16"]}}
    precisions: {fp32: {bits: 32, energy_pj: 0.9}}
    memories:
      sram: {size: 64 KiB, operands: [I, W, O], served_dims: [D1], read_bw: 512, read_energy_pj: 30.0,
             write_energy_pj: 35.0}
interconnect: {topology: bus, bandwidth_bits: 64, energy_pj_per_bit: 0.1}
"""


@pytest.fixture
def template(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TEMPLATE)
    return path


def run(args: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        monet_main(args)
    assert exit_.value.code == 0


def test_sweep_grid(tmp_path, template, capsys):
    out = tmp_path / "out"
    run(["sweep", str(DATA / "mlp_b4.onnx"), "--target-template", str(template), "--out", str(out),
         "--set", "count(mac)=1,2", "--set", "dram.bandwidth_GBps=4,16"])
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert len(rows) == 4
    assert [(int(r["count(mac)"]), float(r["dram.bandwidth_GBps"])) for r in rows] == [(1, 4), (1, 16), (2, 4), (2, 16)]
    data = json.loads((out / "sweep.json").read_text())
    designs = data["designs"]
    assert all("error" not in d for d in designs)
    # more DRAM bandwidth never slows the step down; a second MAC core adds area
    assert designs[1]["latency_cycles"] <= designs[0]["latency_cycles"]
    assert designs[2]["area_proxy"] > designs[0]["area_proxy"]
    assert designs[2]["macs"] == 2 * 256 + 16
    assert (out / "sweep.svg").is_file() and not (out / "sweep.png").exists()
    loaded = yaml.safe_load((out / "designs" / "design_3.yaml").read_text())
    assert [c["name"] for c in loaded["cores"]] == ["mac0", "mac1", "vec"]
    printed = capsys.readouterr().out
    assert "latency (cycles)" in printed and "area proxy" in printed


def test_sweep_section_and_joined_paths(tmp_path, template):
    path = tmp_path / "with_sweep.yaml"
    path.write_text(template.read_text() + "sweep:\n  cores.*.memories.sram.size: [128 KiB, 512 KiB]\n")
    out = tmp_path / "out2"
    run(["sweep", str(DATA / "mlp_b4.onnx"), "--target-template", str(path), "--out", str(out), "--no-plots",
         "--set", "cores.0.array.dims.D1+cores.0.array.dims.D2=8,16"])
    designs = json.loads((out / "sweep.json").read_text())["designs"]
    assert len(designs) == 4
    assert not list(out.glob("sweep.*g"))
    small, large = designs[0], designs[2]
    assert small["cores.*.memories.sram.size"] == "128 KiB" and large["cores.*.memories.sram.size"] == "512 KiB"
    assert large["sram_bytes"] > small["sram_bytes"]
    assert designs[1]["macs"] > designs[0]["macs"]


def test_bad_path_is_one_line(tmp_path, template, capsys):
    with pytest.raises(SystemExit) as exit_:
        monet_main(["sweep", str(DATA / "mlp_b4.onnx"), "--target-template", str(template), "--out",
                    str(tmp_path / "o"), "--set", "cores.*.nothing.here=1,2"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "matches nothing" in err[0]


def test_apply_paths():
    data = {"a": [{"x": 1, "y": {"z": 2}}, {"x": 3}], "b": {"c": 4}}
    sweep.apply(data, "a.*.x", 9)
    assert data["a"][0]["x"] == 9 and data["a"][1]["x"] == 9
    sweep.apply(data, "a.0.y.z+b.c", 7)
    assert data["a"][0]["y"]["z"] == 7 and data["b"]["c"] == 7
    assert sweep.parse_values("8, 16.5, 2 MiB") == [8, 16.5, "2 MiB"]


def test_a_builtin_target_is_a_template(tmp_path):
    out = tmp_path / "builtin"
    run(["sweep", str(DATA / "mlp_b4.onnx"), "--target-template", "datacenter", "--out", str(out), "--no-plots",
         "--set", "dram.bandwidth_GBps=800,1640"])
    designs = json.loads((out / "sweep.json").read_text())["designs"]
    assert len(designs) == 2 and all("error" not in d for d in designs)
    assert designs[1]["latency_cycles"] <= designs[0]["latency_cycles"]
