"""MX formats in target descriptions: per-format MAC rates and energies, and `snax_mx`."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from monet_ir.cost import cost_of
from monet_ir.cost.signature import LoopNestSig
from monet_ir.tools.monet import Progress, build_parser, make_report
from targets import TargetError, get_target, load_target_file
from targets.precision_choice import choose_precision

ONE_CORE = """
name: one
dram: {name: dram, capacity: 1 GiB, bandwidth_GBps: 8.0, read_energy_pj_per_bit: 10.0}
cores:
  - name: npu
    kind: mac_array
    array: {dims: {D1: 8, D2: 8}, dataflow: {D1: ["K, 8"], D2: ["C, 8"]}}
    precisions: {PRECISIONS}
    op_kinds: [loop_nest, vector]
    memories:
      sram: {size: 256 KiB, operands: [I, W, O], served_dims: [D1, D2], read_bw: 512, read_energy_pj: 50.0,
             write_energy_pj: 60.0}
"""


def target(tmp_path, precisions: str):
    path = tmp_path / "one.yaml"
    path.write_text(ONE_CORE.replace("{PRECISIONS}", precisions))
    return load_target_file(str(path))


def nest(fmt: str, bits: int, n: int = 64) -> LoopNestSig:
    return LoopNestSig(kind="matmul", b=n, k=n, c=n, w_bits=bits + 0.25, i_bits=bits + 0.25, o_bits=bits + 0.25,
                       psum_bits=32, mac_width=bits, mac_format=fmt)


def test_a_core_prices_an_mx_format_at_its_entry_or_family(tmp_path):
    t = target(tmp_path, "{int8: {bits: 8, energy_pj: 0.1}, mxfp8: {energy_pj: 0.5, ops_per_cycle: 4}, "
                         "mxfp4_e2m1: {energy_pj: 0.2, ops_per_cycle: 8}}")
    core = t.cores[0]
    assert core.precision_for(8, "mxfp8_e5m2").name == "mxfp8"
    assert core.precision_for(4, "mxfp4_e2m1").name == "mxfp4_e2m1"
    assert core.precision_for(8, "mxint8").name == "int8"  # no MXINT8 entry: by width
    assert core.precision_for(8).name == "int8"  # plain formats never pick an MX entry
    assert core.precision_for(6, "mxfp6_e2m3").name == "int8"
    fast, slow = cost_of(nest("mxfp4_e2m1", 4), core), cost_of(nest("mxint8", 8), core)
    assert fast.latency_cycles < slow.latency_cycles
    assert fast.breakdown_pj["mac"] == pytest.approx(0.2 * 64 ** 3)
    assert slow.breakdown_pj["mac"] == pytest.approx(0.1 * 64 ** 3)


@pytest.mark.parametrize("entry,words", [("mxfp9: {energy_pj: 1.0}", "unknown MX format"),
                                         ("mxfp4: {bits: 8, energy_pj: 1.0}", "8 differs from the mxfp4 element width 4")])
def test_bad_mx_entries_name_the_field(tmp_path, entry, words):
    with pytest.raises(TargetError, match=words) as err:
        target(tmp_path, "{" + entry + "}")
    assert "one.yaml: cores[0].precisions.mx" in str(err.value)


def test_snax_mx_peaks_follow_the_paper():
    core = get_target("snax_mx").cores[0]
    peaks = {f: core.array.units * core.precision_for(0, f).ops_per_cycle * 2 * core.clock_hz / 1e9
             for f in ("mxint8", "mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1")}
    assert peaks == {"mxint8": 64.0, "mxfp8_e4m3": 256.0, "mxfp6_e3m2": 256.0, "mxfp4_e2m1": 512.0}
    # energy per MAC from the paper's GOPS/W at 2 ops per MAC
    for fmt, gops_per_w in (("mxint8", 657), ("mxfp8_e4m3", 1438), ("mxfp6_e2m3", 1675), ("mxfp4_e2m1", 4065)):
        assert core.precision_for(0, fmt).energy_pj == pytest.approx(2000 / gops_per_w, rel=0.01)


def test_snax_mx_runs_mx_by_default_and_refuses_fp32(tmp_path):
    t = get_target("snax_mx")
    choice = choose_precision(t, None)
    assert choice.policy is not None and choice.policy.uniform == "mxfp8_e4m3"
    with pytest.raises(TargetError, match=r"core 0 \('mx_array'\) cannot run fp32"):
        choose_precision(t, "fp32")
    w = numpy_helper.from_array(np.zeros((64, 64), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 64])], [w])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "mm.onnx"))
    args = build_parser().parse_args(["report", str(tmp_path / "mm.onnx"), "--target", "snax_mx", "--out", "x", "--loss", "mse"])
    r = make_report(args, Progress(enabled=False))[0]
    assert "quantize{" in r["pipeline"] and r["precision"].startswith("mxfp8_e4m3")
    cores = {row["op"]: row["core"] for row in r["layers"]}
    assert cores["nn.matmul"] == 0 and cores["mx.quantize"] == 1
