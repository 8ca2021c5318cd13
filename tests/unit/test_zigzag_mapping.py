"""ZigZag's mapping files (`--mapping`, told apart by their keys) and the mapper's options
(`--mapper fast|exhaustive`, `--mapper-objective`, `--grad-dataflow`): the spatial mapping is
looked up by layer name, then op type, then `default`, cut to the array and the layer as ZigZag
cuts it, applied literally to gradient nests unless translated; the exhaustive mapper searches
LOMA's whole permutation space; what cannot be honoured is a one-line error."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from monet_ir.cost import CostError, LoopNestSig, cost_of
from monet_ir.cost.loopnest import NestModel, loop_prime_factors, search, unique_orderings
from monet_ir.cost.signature import NestMapping
from monet_ir.schedule.mapping import MappingError, load_allocation
from targets import get_target
from targets.model import MapperOptions

DATA = Path(__file__).resolve().parents[1] / "data"
TPU = str(DATA / "zigzag_hw" / "tpu_like.yaml")
EYERISS = str(DATA / "zigzag_hw" / "eyeriss_like.yaml")
TPU_MAPPING = str(DATA / "zigzag_mapping" / "tpu_like.yaml")
DEFAULT_MAPPING = str(DATA / "zigzag_mapping" / "default.yaml")
STEM = LoopNestSig(kind="conv", k=64, c=3, oy=112, ox=112, fy=7, fx=7, stride=(2, 2), pads=(3, 3, 2, 2))
CONV3 = LoopNestSig(kind="conv", k=64, c=64, oy=56, ox=56, fy=3, fx=3, pads=(1, 1, 1, 1))


def _core(path: str = TPU, **mapper):
    return get_target(path, mapper=MapperOptions(**mapper)).cores[0]


def _spatial(cost) -> str:
    return cost.mapping.split(";")[0]


def test_a_zigzag_mapping_file_is_read_by_its_keys():
    allocation = load_allocation(TPU_MAPPING)
    assert allocation.entries == {}  # no core allocation: one core
    assert allocation.nests["default"].spatial == (("D1", "K", 32), ("D2", "C", 32))
    assert not allocation.nests["default"].swap_inputs
    temporal = allocation.nests["example_name_of_layer0"].temporal
    assert temporal[0] == ("OX", 112) and temporal[-1] == ("K", 2)


def test_the_mapping_replaces_the_dataflow_and_is_cut_to_the_layer():
    core = _core()
    mapped = replace(STEM, mapping=load_allocation(TPU_MAPPING).nests["default"])
    # ZigZag's mapping says K32 x C32; the stem has 3 input channels: C is cut to 3
    assert _spatial(cost_of(mapped, core)) == "spatial D1:K32 D2:C3"


def test_lookup_is_node_name_then_op_type_then_default(tmp_path):
    path = tmp_path / "mapping.yaml"
    path.write_text("- name: default\n  spatial_mapping: {D1: [K, 32], D2: [C, 32]}\n"
                    "- name: Conv\n  spatial_mapping: {D1: [OX, 32], D2: [K, 32]}\n"
                    "- name: /conv1/Conv\n  spatial_mapping: {D1: [OY, 32], D2: [OX, 32]}\n")
    allocation = load_allocation(str(path))
    assert allocation.nest_entry("/conv1/Conv", "nn.conv", "forward") == "/conv1/Conv"
    assert allocation.nest_entry("/layer1/Conv", "nn.conv", "forward") == "Conv"
    assert allocation.nest_entry("/conv1/Conv", "grad.conv_input", "backward") == "/conv1/Conv"
    assert allocation.nest_entry("/fc/Gemm", "nn.gemm", "forward") == "default"


def test_gradient_nests_take_the_mapping_literally_unless_translated():
    mapping = NestMapping((("D1", "K", 32), ("D2", "C", 32)), entry="test")
    grad_weight = replace(CONV3, kind="conv_grad_weight", output_operand="W", mapping=mapping)
    literal = cost_of(grad_weight, _core())
    translated = cost_of(grad_weight, _core(grad_dataflow="translate"))
    assert _spatial(literal) == "spatial D1:K32 D2:C32"
    assert _spatial(translated) != _spatial(literal)


@pytest.mark.parametrize("text, says", [
    ("- name: default\n  spatial_mapping: {D1: [IX, 4]}\n", "loop dimension 'IX'"),
    ("- name: default\n  spatial_mapping: {D1: [K, 32]}\n  memory_operand_links: {O: I1, W: I2, I: O}\n",
     "memory_operand_links"),
    ("- name: default\n  spatial_mapping: {D1: [K, 32]}\n  spatial_mapping_hint: {D1: [K]}\n", "spatial_mapping_hint"),
    ("- name: default\n  temporal_ordering: [[K, -2]]\n", "positive integer"),
])
def test_what_cannot_be_honoured_is_a_one_line_error(tmp_path, text, says):
    path = tmp_path / "mapping.yaml"
    path.write_text(text)
    with pytest.raises(MappingError) as error:
        load_allocation(str(path))
    message = str(error.value)
    assert says in message and "\n" not in message and str(path) in message


def test_a_mapping_naming_an_array_dimension_the_core_lacks_is_an_error():
    mapped = replace(CONV3, mapping=NestMapping((("D3", "K", 4),), entry="m.yaml entry [0] 'default'"))
    with pytest.raises(CostError, match="D3"):
        cost_of(mapped, _core())


def test_temporal_ordering_is_honoured_and_checked():
    order = (("OX", 56), ("OY", 56), ("FX", 3), ("FY", 3), ("K", 2), ("C", 2))
    mapped = replace(CONV3, mapping=NestMapping((("D1", "K", 32), ("D2", "C", 32)), temporal=order, entry="e"))
    cost = cost_of(mapped, _core())
    assert "OX56" in cost.mapping
    wrong = replace(CONV3, mapping=NestMapping((("D1", "K", 32), ("D2", "C", 32)), temporal=(("OX", 5),), entry="e"))
    with pytest.raises(CostError, match="temporal_ordering"):
        cost_of(wrong, _core())


def test_swapped_operand_links_put_the_inputs_in_each_others_memories():
    plain = cost_of(replace(CONV3, mapping=NestMapping((("D1", "K", 14), ("D2", "C", 12)), entry="e")), _core(EYERISS))
    swapped = cost_of(replace(CONV3, mapping=NestMapping((("D1", "K", 14), ("D2", "C", 12)), swap_inputs=True,
                                                         entry="e")), _core(EYERISS))
    assert plain.energy_pj != swapped.energy_pj


def _multiset_permutations(lpfs) -> int:
    count = math.factorial(len(lpfs))
    for repeats in Counter(lpfs).values():
        count //= math.factorial(repeats)
    return count


def test_exhaustive_mapper_tries_every_order_loma_would(monkeypatch):
    model = NestModel(CONV3, _core(search="exhaustive"))
    lpfs = loop_prime_factors(model.temporal)
    assert len(list(unique_orderings(lpfs, cap=None))) == _multiset_permutations(lpfs)
    evaluated = []
    original = NestModel.evaluate
    monkeypatch.setattr(NestModel, "evaluate", lambda self, m: evaluated.append(m.order) or original(self, m))
    search(model)
    assert 0 < len(evaluated) <= _multiset_permutations(lpfs) and len(set(evaluated)) == len(evaluated)


@pytest.mark.parametrize("sig", [STEM, CONV3, replace(CONV3, output_operand="I"), replace(CONV3, output_operand="W")],
                         ids=["stem", "conv3", "dx", "dw"])
def test_exhaustive_is_never_worse_and_objectives_order_their_figure(sig):
    fast = cost_of(sig, _core(EYERISS))
    exhaustive = cost_of(sig, _core(EYERISS, search="exhaustive"))
    energy = cost_of(sig, _core(EYERISS, search="exhaustive", objective="energy"))
    edp = cost_of(sig, _core(EYERISS, search="exhaustive", objective="edp"))
    assert exhaustive.latency_cycles <= fast.latency_cycles
    assert energy.energy_pj <= exhaustive.energy_pj
    assert exhaustive.latency_cycles <= energy.latency_cycles
    product = edp.latency_cycles * edp.energy_pj
    assert product <= exhaustive.latency_cycles * exhaustive.energy_pj * (1 + 1e-12)
    assert product <= energy.latency_cycles * energy.energy_pj * (1 + 1e-12)


def test_mapper_options_are_part_of_the_core_and_its_cache_key():
    from monet_ir.cost import disk_cache

    fast, exhaustive = _core(), _core(search="exhaustive")
    assert fast != exhaustive and hash(fast) != hash(exhaustive)
    assert disk_cache.core_key(fast) != disk_cache.core_key(exhaustive)
    with pytest.raises(ValueError, match="search"):
        MapperOptions(search="greedy")


def test_command_line_report_with_zigzag_files(tmp_path, capsys):
    from monet_ir.tools.monet import main

    out = tmp_path / "out"
    model = DATA / "models" / "lenet5_b4.onnx"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(model), "--target", TPU, "--mapping", TPU_MAPPING, "--inference", "--precision", "int8",
              "--mapper", "exhaustive", "--mapper-objective", "energy", "--out", str(out), "--no-plots"])
    assert exit_info.value.code == 0
    report = json.loads((out / "report.json").read_text())
    assert any("Pooling" in note for note in report["mapping_notes"])
    assert report["latency_cycles"] > 0


def test_pass_options_choose_the_mapper():
    from xdsl.context import Context

    from monet_ir import import_onnx
    from passes.annotate_cost import AnnotateCostPass
    from passes.schedule import SchedulePass

    module = import_onnx(DATA / "models" / "lenet5_b4.onnx")
    AnnotateCostPass(target=TPU, precision="int8", mapper="exhaustive", mapper_objective="energy").apply(Context(), module)
    assert module.attributes["monet.mapper"].data == "exhaustive,energy,auto"
    SchedulePass(mapping=TPU_MAPPING).apply(Context(), module)
    assert module.attributes["monet.mapper"].data == "exhaustive,energy,auto"
    from xdsl.utils.exceptions import PassFailedException

    with pytest.raises(PassFailedException, match="objective"):
        AnnotateCostPass(target=TPU, mapper_objective="speed").apply(Context(), import_onnx(DATA / "models" / "lenet5_b4.onnx"))


def test_fast_mapper_searches_every_order_for_energy_where_that_is_cheap():
    from monet_ir.cost.loopnest import MAX_ORDERINGS, ordering_count

    model = NestModel(CONV3, _core())
    assert ordering_count(loop_prime_factors(model.temporal)) <= MAX_ORDERINGS
    fast = cost_of(CONV3, _core(objective="energy"))
    exhaustive = cost_of(CONV3, _core(search="exhaustive", objective="energy"))
    assert (fast.latency_cycles, fast.energy_pj) == (exhaustive.latency_cycles, exhaustive.energy_pj)
