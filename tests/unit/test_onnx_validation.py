"""Malformed ONNX files are refused in one line naming the file, the node or field and what is
wrong (issue 29's list), by mechanism: ONNX's operator schemas (`onnx_schemas`, checked here to
agree with ONNX's own checker on thousands of mutated nodes), ONNX's IR rules and shape rules."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, checker, helper, numpy_helper

from monet_ir import import_onnx
from monet_ir.frontend import onnx_schemas
from monet_ir.frontend.onnx_import import OnnxImportError

F = TensorProto.FLOAT
REPO = Path(__file__).resolve().parents[2]
vi = helper.make_tensor_value_info


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def relu_model(**kw):
    return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])], **kw)


def weight(name, shape, value=1.0):
    return numpy_helper.from_array(np.full(shape, value, np.float32), name)


def cleared(m, field):
    m.ClearField(field)
    return m


CASES = {
    # (model, fragments the one line must hold)
    "conv kernel larger than its padded input": (
        model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", F, [1, 3, 3, 3])],
              [vi("y", F, None)], [weight("w", (4, 3, 5, 5))]),
        ["node 'conv' (ai.onnx::Conv)", "larger than the padded input"]),
    "conv kernel too large, output type stated": (
        model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", F, [1, 3, 3, 3])],
              [vi("y", F, [1, 4, 0, 0])], [weight("w", (4, 3, 5, 5))]),
        ["node 'conv'", "larger than the padded input"]),
    "zero-size input": (model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [1, 0, 4])], [vi("y", F, None)]),
                        ["input 'x'", "1x0x4", "no elements"]),
    "negative dim": (model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [-3, 4])], [vi("y", F, None)]),
                     ["input 'x'", "negative"]),
    "overflowing dims": (model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [1 << 40, 1 << 40, 4])],
                               [vi("y", F, None)]), ["input 'x'", "2**53"]),
    "relu with two inputs": (model([helper.make_node("Relu", ["x", "x2"], ["y"], name="r")],
                                   [vi("x", F, [2, 4]), vi("x2", F, [2, 4])], [vi("y", F, [2, 4])]),
                             ["node #0 'r' (ai.onnx::Relu)", "2 inputs", "exactly 1"]),
    "relu with two outputs": (model([helper.make_node("Relu", ["x"], ["y", "z"], name="r")], [vi("x", F, [2, 4])],
                                    [vi("y", F, [2, 4])]), ["node #0 'r'", "2 outputs"]),
    "missing required attribute": (
        model([helper.make_node("Concat", ["x", "x"], ["z"], name="c")], [vi("x", F, [2, 4])], [vi("z", F, None)]),
        ["node #0 'c' (ai.onnx::Concat)", "required attribute 'axis' is missing"]),
    "unknown attribute": (model([helper.make_node("Relu", ["x"], ["y"], name="r", foo=3)], [vi("x", F, [2, 4])],
                                [vi("y", F, [2, 4])]), ["node #0 'r'", "unknown attribute 'foo'"]),
    "wrongly typed attribute": (
        model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=1.5)], [vi("x", F, [2, 4])],
              [vi("y", F, [2, 4])]), ["node #0 's'", "attribute 'axis' is of type FLOAT", "INT"]),
    "missing ir_version": (cleared(relu_model(), "ir_version"), ["ir_version is missing"]),
    "ir_version from the future": (relu_model(ir=99), ["ir_version 99 is newer"]),
    "duplicate graph output": (model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2, 4])],
                                     [vi("y", F, [2, 4]), vi("y", F, [2, 4])]), ["graph output 'y' is listed twice"]),
    "graph without outputs": (model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2, 4])], []),
                              ["the graph has no outputs"]),
    "tensor with two producers": (
        model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Sigmoid", ["x"], ["y"], name="b"),
               helper.make_node("Neg", ["y"], ["z"], name="n")], [vi("x", F, [2, 4])], [vi("z", F, [2, 4])]),
        ["node #1 'b' (ai.onnx::Sigmoid)", "output 'y' is already produced by node #0 'a'"]),
    "node output redefines a graph input": (
        model([helper.make_node("Relu", ["x"], ["x"], name="r")], [vi("x", F, [2, 4])], [vi("x", F, [2, 4])]),
        ["node #0 'r'", "output 'x' is already a graph input"]),
    "two initializers of one name": (
        model([helper.make_node("Add", ["x", "b"], ["y"])], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])],
              [weight("b", (4,), 1.0), weight("b", (4,), 2.0)]), ["initializer 'b' is defined twice"]),
    "nodes out of topological order": (
        model([helper.make_node("Neg", ["y"], ["z"], name="n"), helper.make_node("Relu", ["x"], ["y"], name="r")],
              [vi("x", F, [2, 4])], [vi("z", F, [2, 4])]),
        ["node #0 'n'", "produced by node #1 'r'", "topological order"]),
    "initializer data shorter than its shape": (
        model([helper.make_node("Add", ["x", "b"], ["y"])], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])],
              [TensorProto(name="b", data_type=F, dims=[4], raw_data=b"\0" * 12)]),
        ["initializer 'b'", "12 bytes", "need 16"]),
    "opset from the future": (relu_model(opset=99), ["version 99 is not supported"]),
    "empty single input": (model([helper.make_node("Add", ["x", ""], ["y"], name="a")], [vi("x", F, [2, 4])],
                                 [vi("y", F, [2, 4])]), ["node #0 'a'", "input 1 is empty"]),
    "graph output nothing produces": (model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2, 4])],
                                            [vi("q", F, [2, 4])]), ["graph output 'q' is not produced"]),
    "undeclared domain": (model([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")],
                                [vi("x", F, [2, 4])], [vi("y", F, [2, 4])]), ["no opset_import entry"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_model_is_one_line_naming_file_and_place(case):
    m, fragments = CASES[case]
    with pytest.raises(OnnxImportError) as info:
        import_onnx(m.SerializeToString(), source_name="bad.onnx")
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith("bad.onnx: "), problems
    for fragment in fragments:
        assert fragment in problems[0], problems


def external_model(tmp_path: Path, location: str, offset: int = 0, length: int | None = 64 * 64 * 4) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "data.bin").write_bytes(b"\0" * (64 * 64 * 4))
    t = TensorProto(name="w", data_type=F, dims=[64, 64], data_location=TensorProto.EXTERNAL)
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for key, value in entries.items():
        t.external_data.add(key=key, value=value)
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", F, [2, 64])],
              [vi("y", F, [2, 64])], [t])
    path = folder / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


@pytest.mark.parametrize("location, offset, length, fragment", [
    ("data.bin", 0, 100, "length 100 bytes does not match"),
    ("data.bin", 4096, 64 * 64 * 4, "needs bytes 4096..20480"),
    ("data.bin", 8, None, "needs bytes 8..16392"),
    ("../outside.bin", 0, 64 * 64 * 4, "points outside the model's folder"),
    ("/etc/passwd", 0, 64 * 64 * 4, "is an absolute path"),
    ("link.bin", 0, 64 * 64 * 4, "outside the model's folder"),
])
def test_external_data_that_does_not_fit_or_leaves_the_folder(tmp_path, location, offset, length, fragment):
    (tmp_path / "outside.bin").write_bytes(b"\0" * (64 * 64 * 4))
    path = external_model(tmp_path, location, offset, length)
    os.symlink(tmp_path / "outside.bin", path.parent / "link.bin")
    with pytest.raises(OnnxImportError) as info:
        import_onnx(path)
    assert len(info.value.problems) == 1 and "initializer 'w'" in info.value.problems[0]
    assert fragment in info.value.problems[0], info.value.problems
    # monet-run reads weights through its own path: the same check
    from monet_ir.interp.run import BindingError, load_parameters

    with pytest.raises(BindingError, match="initializer 'w'"):
        load_parameters(path)


def test_external_data_inside_the_folder_or_absent_imports(tmp_path):
    path = external_model(tmp_path, "data.bin")
    assert "tensor<64x64xf32>" in str(import_onnx(path))
    os.mkdir(path.parent / "weights")
    os.rename(path.parent / "data.bin", path.parent / "weights" / "data.bin")
    path = external_model(tmp_path, "weights/data.bin")
    import_onnx(path)
    (path.parent / "weights" / "data.bin").unlink()  # weight-stripped: imports by shape
    import_onnx(path)


def test_cli_prints_one_line_and_exits_1(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(CASES["relu with two inputs"][0].SerializeToString())
    result = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet_opt", str(path)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"monet-opt: error: {path}: node #0 'r' (ai.onnx::Relu): 2 inputs, but "
                                          "ONNX's Relu-14 takes exactly 1"]


def test_malformed_node_inside_a_subgraph_is_found_by_onnx_checker():
    then = helper.make_graph([helper.make_node("Relu", ["x", "x"], ["t"], name="inner")], "then", [],
                             [vi("t", F, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [2])])
    m = model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
              [vi("c", TensorProto.BOOL, []), vi("x", F, [2])], [vi("y", F, [2])])
    with pytest.raises(OnnxImportError) as info:
        import_onnx(m.SerializeToString(), source_name="bad.onnx")
    assert len(info.value.problems) == 1 and info.value.problems[0].startswith("bad.onnx: node #0 'if'")


# ---------------------------------------------------------------------- the schema table


def test_schema_table_is_onnx_s():
    """Every default-domain operator version the installed ONNX knows (up to the table's opset)
    is in the table as ONNX's registry describes it (regenerate with
    `python -m monet_ir.frontend.onnx_schemas` after an ONNX upgrade that changes one)."""
    from monet_ir.frontend.onnx_schema_data import SCHEMAS

    fresh = onnx_schemas.table_from_onnx()
    for name, record in fresh.items():
        assert SCHEMAS.get(name) == record, name


def _mutated(node: onnx.NodeProto, rng: random.Random) -> onnx.NodeProto:
    out = onnx.NodeProto()
    out.CopyFrom(node)
    kind = rng.randrange(13)
    attributes = out.attribute
    if kind == 0:
        out.input.append(rng.choice(["", "extra"]))
    elif kind == 1 and out.input:
        del out.input[-1]
    elif kind == 2 and out.input:
        out.input[rng.randrange(len(out.input))] = ""
    elif kind == 3:
        out.output.append(rng.choice(["", "extra"]))
    elif kind == 4 and out.output:
        out.output[rng.randrange(len(out.output))] = ""
    elif kind == 5 and attributes:
        del attributes[rng.randrange(len(attributes))]
    elif kind == 6:
        attributes.append(helper.make_attribute(rng.choice(["foo", "axis", "alpha", "__internal", "perm"]),
                                                rng.choice([1, 1.5, [1, 2], "a"])))
    elif kind == 7 and attributes:
        attributes[rng.randrange(len(attributes))].type = rng.choice([1, 2, 3, 4, 6, 7])
    elif kind == 8 and attributes:
        attributes[rng.randrange(len(attributes))].f = 2.5
    elif kind == 9 and attributes:
        attributes.append(attributes[rng.randrange(len(attributes))])
    elif kind == 10 and attributes:
        attributes[rng.randrange(len(attributes))].ClearField("type")
    elif kind == 11 and attributes:
        attributes[rng.randrange(len(attributes))].name = ""
    elif kind == 12 and attributes:
        for field in ("ints", "floats", "strings", "i", "f", "s", "t"):
            attributes[rng.randrange(len(attributes))].ClearField(field)
    return out


def test_node_check_agrees_with_onnx_checker_on_mutated_nodes():
    """Our schema check and ONNX's `check_node` give the same verdict on 3,000 seeded mutations
    of the corpus's nodes (inputs and outputs added, dropped or emptied; attributes dropped,
    added, retyped, duplicated, unnamed, moved to another field, emptied)."""
    rng = random.Random(29)
    pool = []
    for path in sorted((REPO / "tests" / "data" / "corpus").glob("*.onnx"))[:40]:
        m = onnx.load(path, load_external_data=False)
        opset = {e.domain: e.version for e in m.opset_import}[""]
        pool += [(n, opset) for n in m.graph.node if not any(a.type in (5, 10) for a in n.attribute)]
    assert len(pool) > 1000
    refused = compared = 0
    for _ in range(3000):
        node, opset = rng.choice(pool)
        node = _mutated(node, rng)
        schema = onnx_schemas.schema_of(node.op_type, opset)
        ours = onnx_schemas.node_problem(node, schema)
        ctx = checker.C.CheckerContext()
        ctx.ir_version = 8
        ctx.opset_imports = {"": opset}
        try:
            checker.check_node(node, ctx, checker.C.LexicalScopeContext())
            theirs = None
        except checker.ValidationError as e:
            theirs = str(e).splitlines()[0]
        assert (ours is None) == (theirs is None), (node, ours, theirs)
        compared += 1
        refused += ours is not None
    assert refused > 1000 and compared - refused > 500


def test_resize_scales_kept_as_external_data_still_give_its_shape(tmp_path):
    """onnx.save(..., size_threshold=0) moves even a Resize's 4 scales to external data, which
    ONNX's whole-graph inference does not read: the node's own inference reads them."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    m = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="nearest")],
              [vi("x", F, [1, 2, 3, 3])], [vi("y", F, None)], [scales], opset=18)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    assert "tensor<1x2x6x6xf32>" in str(import_onnx(path))


def test_a_stated_type_that_does_not_fit_names_the_node_even_among_namesakes():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="node"), helper.make_node("Neg", ["a"], ["b"], name="node")]
    m = model(nodes, [vi("x", F, [2, 4])], [vi("b", F, [2, 4])])
    m.graph.value_info.extend([vi("a", F, [2, 4])])
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 5
    with pytest.raises(OnnxImportError) as info:
        import_onnx(m.SerializeToString(), source_name="bad.onnx")
    assert info.value.problems[0].startswith("bad.onnx: node #1 'node' (ai.onnx::Neg): the types the file gives")


def test_a_node_fed_by_a_refused_node_says_nothing_more():
    """A window refused on the first node: the Shape of its output (which would otherwise fold)
    and the nodes after it are not reported again."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[0, 0]),
             helper.make_node("Shape", ["y"], ["s"], name="shape"),
             helper.make_node("Reshape", ["y", "s"], ["z"], name="reshape")]
    m = model(nodes, [vi("x", F, [1, 3, 8, 8])], [vi("z", F, None)], [weight("w", (4, 3, 3, 3))])
    with pytest.raises(OnnxImportError) as info:
        import_onnx(m.SerializeToString(), source_name="bad.onnx")
    assert len(info.value.problems) == 1 and "node 'conv'" in info.value.problems[0], info.value.problems


def test_an_attribute_given_twice_on_a_node_onnx_has_no_schema_for():
    node = helper.make_node("Gelu", ["x"], ["y"], name="g", domain="com.microsoft")
    node.attribute.extend([helper.make_attribute("approximate", "tanh")] * 2)
    m = model([node], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(OnnxImportError) as info:
        import_onnx(m.SerializeToString(), source_name="bad.onnx")
    assert info.value.problems == ["bad.onnx: node #0 'g' (com.microsoft::Gelu): attribute 'approximate' is given twice"]
