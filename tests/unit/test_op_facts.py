"""Facts about an op live on its class (dialects/interfaces.py), not in tables keyed by its name.

- every op of MONET's dialects has exactly one cost interface (a loop nest, a vector op's work,
  or free), and the loop nests say what `quantize`, the scheduler and the FLOP count need;
- an op without a cost interface is an error naming it, never a silent default;
- no table keyed by op names or op classes remains in the code (the tables the cost adapter,
  the scheduler, the mapping, `quantize` and the interpreter used to hold);
- a new op added the way docs/architecture.md's recipe says (here a toy `Softplus` in a dialect
  of the test's own, with its ONNX converter, gradient rule and numpy kernel) is imported,
  differentiated, priced, allocated by its ONNX name, scheduled and run, with no other change.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from xdsl.ir import Dialect
from xdsl.irdl import AnyAttr, VarConstraint, operand_def, result_def, traits_def

from dialects import get_all_dialects, grad, nn
from dialects.base import MonetOp, irdl_op_definition
from dialects.interfaces import CostFree, LoopNestOp, OnnxNames, VectorWork

REPO = Path(__file__).resolve().parents[2]


def _compute_dialects():
    return [get_all_dialects()[name]() for name in ("nn", "grad", "train", "mx", "collective")]


def test_every_op_has_exactly_one_cost_interface():
    for dialect in _compute_dialects():
        for op in dialect.operations:
            kinds = [op.get_trait(VectorWork) is not None, op.has_trait(CostFree), issubclass(op, LoopNestOp)]
            assert sum(kinds) == 1, f"{op.name}: cost interfaces {kinds} (VectorWork, CostFree, LoopNestOp)"


def test_loop_nests_declare_roles_and_reduction_axes():
    nests = [op for d in _compute_dialects() for op in d.operations if issubclass(op, LoopNestOp)]
    assert {op.name for op in nests} == {"nn.conv", "nn.conv_transpose", "nn.gemm", "nn.matmul", "grad.conv_input",
                                         "grad.conv_weight", "grad.matmul_lhs", "grad.matmul_rhs"}
    for op in nests:
        operands, result = op.NEST_ROLES
        assert set(operands) <= {"W", "I", "O"} and result in "WIO" and result not in operands[:2], op.name


def test_an_op_without_a_cost_interface_is_an_error():
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import FloatAttr, f32

    from monet_ir.analysis.ir_signatures import NoCostInterface, signature_of

    one = arith.ConstantOp(FloatAttr(1.0, f32))
    with pytest.raises(NoCostInterface, match="arith.constant has no cost interface"):
        signature_of(one)


def test_a_loop_nest_missing_a_method_cannot_be_built():
    @irdl_op_definition
    class HalfNest(nn.UnaryOp, LoopNestOp):
        name = "toy.half_nest"

    with pytest.raises(TypeError, match="abstract"):
        HalfNest.create(operands=[], result_types=[])


# ---------------------------------------------------------------------- no side tables

OP_NAME = re.compile(r"^(nn|grad|train|mx|hw|collective)\.[a-z_0-9]+$")


def _op_key(node: ast.AST) -> bool:
    """An op name (`"nn.relu"`) or an op class (`nn.ReluOp`, `N.ReluOp`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(OP_NAME.match(node.value))
    return isinstance(node, ast.Attribute) and bool(re.match(r"^[A-Z]\w*Op$", node.attr))


def side_tables(root: Path) -> list[str]:
    """Dict displays with two or more keys naming ops, and tuples or sets of three or more op
    names, in the code below the tests."""
    found = []
    for package in ("monet_ir", "passes", "targets", "dialects"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Dict) and sum(_op_key(k) for k in node.keys if k is not None) >= 2:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: a dict keyed by ops")
                elif isinstance(node, ast.Tuple | ast.Set | ast.List) and sum(
                        isinstance(e, ast.Constant) and _op_key(e) for e in node.elts) >= 3:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: a collection of op names")
    return found


def test_no_side_table_keyed_by_op_remains():
    assert side_tables(REPO) == []


def test_the_side_table_check_finds_one(tmp_path):
    package = tmp_path / "monet_ir"
    package.mkdir()
    (package / "table.py").write_text('WORK = {"nn.relu": 1, "nn.gelu": 8}\nKIND = {nn.SoftmaxOp: "softmax", '
                                      'grad.SoftmaxGradOp: "softmax"}\n')
    assert len(side_tables(tmp_path)) == 2


# ---------------------------------------------------------------------- a new op, by the recipe


@irdl_op_definition
class ToySoftplusOp(nn.UnaryOp):
    """log(1 + exp(x)). `%y = toy.softplus %x : tensor<4x8xf32>`"""

    name = "toy.softplus"
    traits = traits_def(VectorWork(5), OnnxNames("ToySoftplus"))


@irdl_op_definition
class ToySoftplusGradOp(grad.ElementwiseGradOp):
    """dy * sigmoid(x). `%dx = toy.softplus_grad %dy, %x : tensor<4x8xf32>`"""

    name = "toy.softplus_grad"
    traits = traits_def(VectorWork(5), OnnxNames("ToySoftplusGrad", "ToySoftplus"))


@irdl_op_definition
class ToyBareOp(MonetOp):
    """An op someone forgot to describe: no cost interface."""

    name = "toy.bare"
    T: ClassVar = VarConstraint("T", AnyAttr())
    input = operand_def(T)
    result = result_def(T)


TOY = Dialect("toy", [ToySoftplusOp, ToySoftplusGradOp, ToyBareOp], [])
DOMAIN = "toy.monet"


@pytest.fixture
def toy_op(monkeypatch):
    """The recipe's places: converter (frontend), gradient rule (autodiff), numpy kernels (interp)."""
    from monet_ir.frontend import onnx_import, onnx_ops
    from monet_ir.interp import numpy_impl
    from passes import autodiff

    def convert(imp, node):
        onnx_ops.emit(imp, node, ToySoftplusOp, [imp.value(node.input[0])], onnx_ops.same_type(imp, node))

    monkeypatch.setitem(onnx_import.KNOWN_DOMAINS, DOMAIN, (1, 1))  # an op of a new ONNX domain
    monkeypatch.setitem(onnx_ops.CONVERTERS, (DOMAIN, "ToySoftplus"), convert)
    monkeypatch.setattr(autodiff, "RULES", dict(autodiff.RULES))
    autodiff.elementwise_rule(ToySoftplusOp, ToySoftplusGradOp, "input")
    monkeypatch.setitem(numpy_impl.IMPLS, ToySoftplusOp, lambda op, env: np.logaddexp(0.0, env[op.input]))
    monkeypatch.setitem(numpy_impl.IMPLS, ToySoftplusGradOp,
                        lambda op, env: env[op.grad] / (1.0 + np.exp(-env[op.saved])))


def _toy_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("ToySoftplus", ["h"], ["y"], name="soft", domain=DOMAIN)]
    graph = helper.make_graph(nodes, "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [w],
                              value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [4, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    onnx.save(model, path)


def test_a_new_op_following_the_recipe_runs_through_every_tool(toy_op, tmp_path):
    import monet_ir
    from monet_ir import graph
    from monet_ir.interp.run import run_module

    model = tmp_path / "toy.onnx"
    _toy_model(model)
    # the frontend and the interpreter: the imported step computes softplus(x @ w)
    forward = monet_ir.import_onnx(str(model))
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
    result = run_module(forward, {"w": w}, {"x": x})
    np.testing.assert_allclose(result.outputs[0], np.logaddexp(0.0, x @ w), rtol=1e-6)
    # autodiff, the cost interface, the ONNX name of a mapping file, the scheduler
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("- name: ToySoftplus\n  core_allocation: [2]\n")
    built = monet_ir.build_step(str(model), target="edge_npu", loss="mse", labels="y_ref", mapping=str(mapping))
    ops = {op.name: op for op in graph.compute_ops(graph.step_function(built.module))}
    assert "toy.softplus_grad" in ops and "monet.costs" in ops["toy.softplus"].attributes
    from monet_ir.analysis.ir_signatures import signature_of

    assert signature_of(ops["toy.softplus"]).ops == 5 * 4 * 16
    tasks = built.schedule.graph.tasks
    cores = {tasks[t.task].op: t.core for t in built.schedule.tasks}
    assert cores["toy.softplus"] == 2
    # the dialect in a context: the step prints and parses again
    ctx = monet_ir.make_context()
    ctx.load_dialect(TOY)
    from xdsl.parser import Parser

    text = monet_ir.print_module(built.module)
    assert "toy.softplus" in text and monet_ir.print_module(Parser(ctx, text).parse_module()) == text


def test_an_op_without_a_cost_interface_stops_the_report_with_one_line(tmp_path):
    from xdsl.context import Context
    from xdsl.utils.exceptions import PassFailedException

    import monet_ir
    from monet_ir import graph
    from monet_ir.errors import MonetError
    from passes.annotate_cost import AnnotateCostPass

    module = monet_ir.import_onnx(str(REPO / "tests" / "data" / "models" / "mlp_b4.onnx"))
    fn = graph.step_function(module)
    first = next(iter(graph.compute_ops(fn)))
    bare = ToyBareOp.create(operands=[first.results[0]], result_types=[first.results[0].type])
    fn.body.block.insert_op_after(bare, first)
    with pytest.raises((MonetError, PassFailedException), match="toy.bare has no cost interface"):
        AnnotateCostPass(target="edge_npu").apply(Context(), module)
