"""ONNX → MONET IR importer.

`import_onnx(path)` loads an ONNX model (weights are never read: weight-stripped files whose
external data is absent import with shapes only), resolves every shape statically (ONNX shape
inference with data propagation, after pinning the symbolic dimensions the caller gives),
folds the constant sub-graphs (`monet_ir.frontend.folding`) and builds one `func.func` of
`nn`/`grad`/`train` ops (converters in `monet_ir.frontend.onnx_ops`).

Problems are collected for the whole file and raised together as `OnnxImportError`, one line
each: `<file>: node '<name>' (<domain>::<op_type>): <problem>`.
"""

from __future__ import annotations

import math
import re
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from monet_ir import graph
from monet_ir.errors import MonetError, internal_errors_at
from monet_ir.frontend.attrs import WrongAttributeType, attr, attrs_of, node_name

# ONNX versions of the default domain whose semantics the converters implement.
MIN_OPSET, MAX_OPSET = 7, 22
KNOWN_DOMAINS = {
    "": (MIN_OPSET, MAX_OPSET),
    "ai.onnx": (MIN_OPSET, MAX_OPSET),
    "com.microsoft": (1, 1),
    "ai.onnx.ml": (1, 5),
    "ai.onnx.training": (1, 1),
    "ai.onnx.preview.training": (1, 1),
    "com.microsoft.experimental": (1, 1),
    "com.microsoft.nchwc": (1, 1),
    "org.pytorch.aten": (1, 1),
}


class OnnxImportError(MonetError):
    """All problems found in one ONNX file; str() gives one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Tensor:
    """What the importer knows about one ONNX value: its type and, if known, its value or SSA value."""

    type: TensorType | None
    const: Any = None  # numpy array when the value is known at import
    ssa: SSAValue | None = None


@dataclass
class ImportOptions:
    dims: Mapping[str, int] = field(default_factory=dict)
    """Values for symbolic dimensions (`dim_param`), e.g. {"batch": 32}."""
    function_name: str = "main"
    frozen: tuple[str, ...] = ()
    """Parameters to import as non-trainable (by ONNX initializer name)."""
    capacity_factor: float = 1.0
    """The static bound of data-dependent counts (`monet_ir.frontend.onnx_indexing`): tokens per
    expert = capacity factor x tokens x k / experts."""


def import_onnx(
    source: str | os.PathLike[str] | bytes | IO[bytes],
    *,
    dims: Mapping[str, int] | None = None,
    function_name: str = "main",
    frozen: tuple[str, ...] = (),
    source_name: str | None = None,
    value_names: dict[str, SSAValue] | None = None,
    capacity_factor: float = 1.0,
) -> ModuleOp:
    """Import an ONNX file (a path, its bytes or a binary stream) as a verified MONET module.

    `value_names`, when given, is filled with the SSA value of every ONNX tensor name that has
    one (aliases such as an Identity's output share their input's value)."""
    if not capacity_factor > 0 or not math.isfinite(capacity_factor):
        raise OnnxImportError([f"--capacity-factor {capacity_factor}: must be a positive number"])
    options = ImportOptions(dict(dims or {}), function_name, tuple(frozen), capacity_factor)
    name, model, base_dir = _load(source, source_name)
    importer = OnnxImporter(model, name, base_dir, options)
    module = importer.run()
    if value_names is not None:
        value_names.update({n: t.ssa for n, t in importer.values.items() if t.ssa is not None})
    return module


def _load(source: Any, source_name: str | None) -> tuple[str, Any, str | None]:
    import onnx
    from google.protobuf.message import DecodeError

    base_dir = None
    if isinstance(source, (str, os.PathLike)):
        name = source_name or os.fspath(source)
        base_dir = os.path.dirname(os.path.abspath(name))
        from monet_ir.frontend.zigzag_workload import WorkloadError, is_zigzag_workload, workload_model

        if is_zigzag_workload(os.fspath(source)):
            try:
                return name, workload_model(os.fspath(source)), base_dir
            except WorkloadError as e:
                raise OnnxImportError([str(e)]) from None
        try:
            with open(source, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError([f"{name}: cannot read file: {e.strerror}"]) from None
    elif isinstance(source, bytes):
        name, data = source_name or "<bytes>", source
    else:
        name = source_name or getattr(source, "name", None) or "<stdin>"
        if not isinstance(name, str):
            name = "<stdin>"
        data = source.read()
    if base_dir is None and name not in ("<bytes>", "<stdin>") and os.path.isfile(name):
        # the bytes or stream of a file (monet-opt reads its input itself): external data and
        # its checks are relative to that file's folder, not to the current one
        base_dir = os.path.dirname(os.path.abspath(name))
    if not data:
        raise OnnxImportError([f"{name}: empty file, not an ONNX model"])
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise OnnxImportError([f"{name}: malformed or truncated ONNX file ({e})"]) from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise OnnxImportError([f"{name}: not an ONNX model (no graph)"])
    bad_text = _non_utf8_field(model)
    if bad_text:
        raise OnnxImportError([f"{name}: malformed ONNX file: {bad_text} is not valid UTF-8"])
    return name, model, base_dir


def _non_utf8_field(model: Any) -> str | None:
    """Where a name the importer reads holds bytes that are not UTF-8 (protobuf then gives
    bytes instead of str), or None."""
    for entry in model.opset_import:
        if isinstance(entry.domain, bytes):
            return "an opset domain"
    g = model.graph
    for i, node in enumerate(g.node):
        fields = [node.name, node.op_type, node.domain, *node.input, *node.output, *(a.name for a in node.attribute)]
        if any(isinstance(f, bytes) for f in fields):
            return f"a name in node #{i} ({node.op_type!r})"
    for what, values in (("graph input", g.input), ("graph output", g.output), ("value_info", g.value_info),
                         ("initializer", g.initializer)):
        for i, v in enumerate(values):
            if isinstance(v.name, bytes):
                return f"the name of {what} #{i}"
    return None


class OnnxImporter:
    """Builds the step function from one ONNX graph; see the module docstring."""

    def __init__(self, model: Any, source_name: str, base_dir: str | None, options: ImportOptions):
        self.model = model
        self.graph = model.graph
        self.file = source_name
        self.base_dir = base_dir
        self.options = options
        self.problems: list[str] = []
        self.values: dict[str, Tensor] = {}
        self.block = Block()
        self.type_cache: dict[tuple, TensorType] = {}
        self.bad_shapes: dict[str, str] = {}  # tensor name -> why its stated or inferred shape is impossible
        self.failed: set[str] = set()  # outputs of nodes that could not be imported
        self.constants: dict[tuple, SSAValue] = {}
        self.maybe_dead: set[Operation] = set()  # ops whose uses a converter may have bypassed
        self.opset = 17
        from monet_ir.frontend import ort_training

        from monet_ir.frontend.routing import RoutingShadow

        self.routing = RoutingShadow(options.capacity_factor)
        self.ort = ort_training.detect(self.graph)
        self.producers = {o: n for n in self.graph.node for o in n.output} if self.ort else {}

    # ------------------------------------------------------------------ driver

    def run(self) -> ModuleOp:
        self._check_opsets()
        self._fail_if_problems()
        from monet_ir.frontend.onnx_checks import validate_model

        self.problems += validate_model(self.model, self.file, self.base_dir)
        self._fail_if_problems()
        self._pin_dims()
        self._fail_if_problems()
        shaped = self._infer_shapes()
        self._fail_if_problems()
        self._collect_types(shaped)
        self._declare_arguments()
        self._fail_if_problems()
        self._convert_nodes()
        self._fail_if_problems()
        module = self._finish()
        from xdsl.utils.exceptions import VerifyException

        try:
            module.verify()
        except VerifyException as e:
            raise OnnxImportError([self._verify_problem(module, e)]) from None
        return module

    def _verify_problem(self, module: ModuleOp, error: Exception) -> str:
        """The line for IR that does not verify, naming the ONNX node of the first op that fails
        (a type the file states that does not fit what the node computes)."""
        from xdsl.utils.exceptions import VerifyException

        from monet_ir.frontend.onnx_checks import describe_node

        first = str(error).splitlines()[0]
        index = {node_name(n): i for i, n in reversed(list(enumerate(self.graph.node)))}
        producer = {out: i for i, n in enumerate(self.graph.node) for out in n.output if out}
        tensor_of = {id(t.ssa): name for name, t in self.values.items() if t.ssa is not None}
        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except VerifyException as e:
                # the ONNX node: by the tensor the op computes (node names need not be unique),
                # else by the op's origin name
                i = next((producer[tensor_of[id(r)]] for r in op.results
                          if id(r) in tensor_of and tensor_of[id(r)] in producer), None)
                origin = op.properties.get("node")
                if i is None and isinstance(origin, StringAttr):
                    i = index.get(origin.data)
                if i is not None:
                    return (f"{self.file}: {describe_node(i, self.graph.node[i])}: the types the file gives do not "
                            f"fit the node: {str(e).splitlines()[0]}")
                first = str(e).splitlines()[0]
                break
        return f"{self.file}: imported IR does not verify: {first}"

    def problem(self, node: Any | None, message: str) -> None:
        if node is None:
            self.problems.append(f"{self.file}: {message}")
        else:
            self.problems.append(
                f"{self.file}: node '{node_name(node)}' ({node.domain or 'ai.onnx'}::{node.op_type}): {message}"
            )

    def _fail_if_problems(self) -> None:
        if self.problems:
            raise OnnxImportError(self.problems)

    # ------------------------------------------------------------------ checks and shapes

    def _check_opsets(self) -> None:
        used = {n.domain for n in self.graph.node}
        for entry in self.model.opset_import:
            domain = entry.domain
            if domain in ("", "ai.onnx"):
                self.opset = entry.version
            known = KNOWN_DOMAINS.get(domain)
            if known is None:
                if domain in used:
                    self.problem(None, f"opset domain '{domain}' (version {entry.version}) is not supported")
            elif not known[0] <= entry.version <= known[1] and domain in used | {""}:
                self.problem(
                    None,
                    f"opset {domain or 'ai.onnx'} version {entry.version} is not supported "
                    f"(supported: {known[0]}..{known[1]})",
                )
        declared = {e.domain for e in self.model.opset_import} | {"ai.onnx"}
        for node in self.graph.node:
            if node.domain not in declared and node.domain not in KNOWN_DOMAINS:
                self.problem(node, f"domain '{node.domain}' is neither declared nor supported")

    def _pin_dims(self) -> None:
        pinned = self.options.dims
        used: set[str] = set()
        for value in self.graph.input:
            for i, dim in enumerate(value.type.tensor_type.shape.dim):
                if dim.HasField("dim_value"):
                    continue
                param = dim.dim_param
                if param in pinned:
                    dim.dim_value = int(pinned[param])
                    used.add(param)
                else:
                    hint = f"; pin it with --dim {param}=N" if param else ""
                    self.problem(
                        None,
                        f"input '{value.name}' has a dynamic dimension {i} ('{param or '?'}') "
                        f"that cannot be resolved statically{hint}",
                    )
        for name in pinned:
            if name not in used:
                self.problem(None, f"--dim {name}: no graph input has a symbolic dimension named '{name}'")

    def _infer_shapes(self) -> Any:
        import onnx

        from monet_ir.frontend import ort_training

        if not self.ort and _shapes_complete(self.model.graph):
            # (PyTorch's dynamo exporter writes every value's type) ONNX's inference, which
            # keeps the types a model states, would add nothing; its operator registry alone
            # takes ~20 ms to set up in a process
            return self.model
        # large initializers that cannot be shape data go by type only (`_shape_only_copy`)
        model = _shape_only_copy(self.model)
        # Shapes of ONNX Runtime ops, and of standard ops ONNX leaves unshaped, come from our
        # own rules; re-running the inference propagates them through the ops that follow.
        # each round can unblock one more layer (a training-mode BatchNormalization with one
        # output stops ONNX's inference), so a deep network needs as many rounds as it has such
        # layers; a round that adds nothing ends the loop
        for _ in range(len(model.graph.node) + 1):
            try:
                model = onnx.shape_inference.infer_shapes(model, data_prop=True)
            except Exception as e:  # onnx raises its own InferenceError and others
                self.problem(None, f"ONNX shape inference failed: {str(e).splitlines()[0]}")
                return model
            added = ort_training.add_missing_shapes(model.graph)
            if not added:
                break
        return model

    def _collect_types(self, shaped: Any) -> None:
        graph_ = shaped.graph
        infos = list(graph_.input) + list(graph_.value_info) + list(graph_.output)
        self.value_types: dict[str, TensorType | None] = {}
        for vi in infos:
            self.value_types[vi.name] = self.tensor_type_of(vi.type, vi.name)
        for init in graph_.initializer:
            if init.name not in self.value_types:
                self.value_types[init.name] = self.make_type(init.data_type, list(init.dims), init.name)

    def tensor_type_of(self, type_proto: Any, name: str) -> TensorType | None:
        if not type_proto.HasField("tensor_type"):
            return None
        tt = type_proto.tensor_type
        if not tt.HasField("shape"):
            return None
        dims = []
        for d in tt.shape.dim:
            if not d.HasField("dim_value"):
                return None
            dims.append(d.dim_value)
        return self.make_type(tt.elem_type, dims, name)

    def make_type(self, onnx_elem: int, dims: list[int], name: str) -> TensorType | None:
        key = (onnx_elem, tuple(dims))
        cached = self.type_cache.get(key)
        if cached is not None:
            return cached
        bad = shape_problem(dims)
        if bad:
            self.bad_shapes[name] = bad
            return None
        elem = element_type(onnx_elem)
        if elem is None:
            return None
        t = TensorType(elem, dims)
        self.type_cache[key] = t
        return t

    # ------------------------------------------------------------------ arguments

    def _declare_arguments(self) -> None:
        from monet_ir.frontend import ort_training

        initializers = {t.name: t for t in self.graph.initializer}
        self.initializer_protos = initializers
        for name in self.options.frozen:
            # a misspelt name would leave the parameter trainable without a word
            if name not in initializers or not _is_parameter(initializers[name]):
                self.problem(None, f"--freeze '{name}': the model has no float initializer of that name")
        self.read_as_constant: set[str] = set()
        graph_inputs = [v for v in self.graph.input]
        input_names = {v.name for v in graph_inputs}
        roles = ort_training.classify_inputs(self.graph, initializers) if self.ort else {}
        trainable = _trainable_params(self.graph, initializers, self.options.frozen)
        args: list[tuple[str, str, TensorType, bool]] = []  # (onnx name, role, type, trainable)

        for v in graph_inputs:
            t = self.value_types.get(v.name)
            if t is None:
                if v.name in self.bad_shapes:
                    self.problem(None, f"input '{v.name}' has {self.bad_shapes[v.name]}")
                elif v.type.HasField("sequence_type"):
                    # ONNX Runtime's optimizer graph (generate_artifacts' optimizer_model.onnx)
                    # takes the parameters, gradients and moments as sequences
                    self.problem(None, f"input '{v.name}' is a sequence of tensors, whose shapes the file does not "
                                       "give (an ONNX Runtime optimizer graph?); sequences are not modelled")
                else:
                    self.problem(None, f"input '{v.name}' has no static tensor type")
                continue
            if v.name in initializers and not self.ort:
                continue  # an initializer listed as input (IR < 4): a parameter, below
            if 0 in t.get_shape():
                self.problem(None, f"input '{v.name}' has shape {format_shape(t.get_shape())}: it holds no "
                                   "elements")
                continue
            role, trainable_input = roles.get(v.name, ("input", False))
            if role == "const":
                self.values[v.name] = Tensor(t, const=self.initializer_value(initializers[v.name]))
                continue
            args.append((v.name, role, t, trainable_input))

        for init in self.graph.initializer:
            if init.name in input_names and self.ort:
                continue
            t = self.value_types.get(init.name)
            if t is None:
                why = self.bad_shapes.get(init.name, "an unsupported element type")
                self.problem(None, f"initializer '{init.name}' has {why}")
                continue
            if not _is_parameter(init) or (self.ort and math.prod(init.dims) == 1):
                # ORT passes the optimizer's hyper-parameters (lr, betas) as 1-element initializers
                self.values[init.name] = Tensor(t, const=_LazyInitializer(init))
                continue
            # an ORT graph names its trainable parameters by their optimizer state (graph
            # inputs); a float initializer there is a frozen weight (an embedding table, a LoRA
            # base weight), whose values the cost model never needs
            args.append((init.name, "param", t, init.name in trainable and not self.ort))

        self.block = Block(arg_types=[a[2] for a in args])
        self.arg_attr_list = []
        for (name, role, t, is_trainable), block_arg in zip(args, self.block.args, strict=True):
            block_arg.name_hint = ssa_name(name)
            self.values[name] = Tensor(t, ssa=block_arg)
            self.arg_attr_list.append(graph.arg_attrs(role, name, is_trainable))

    def initializer_value(self, init: Any) -> Any:
        from onnx import numpy_helper

        try:
            return numpy_helper.to_array(init, self.base_dir or "")
        except Exception as e:  # missing external data file, corrupt raw data
            raise _MissingData(f"initializer '{init.name}' has no readable data ({e})") from None

    # ------------------------------------------------------------------ nodes

    def _convert_nodes(self) -> None:
        from monet_ir.frontend import onnx_indexing  # noqa: F401  (registers TopK, NonZero, ScatterElements, ...)
        from monet_ir.frontend import onnx_recurrent  # noqa: F401  (registers the LSTM and GRU converters)
        from monet_ir.frontend import ort_ops  # noqa: F401  (registers ONNX Runtime training converters)
        from monet_ir.frontend import ort_training
        from monet_ir.frontend.onnx_ops import CONVERTERS, InputFailed, Unsupported

        nodes = list(self.graph.node)
        if self.ort:
            nodes = ort_training.collapse_decomposed_adam(self, nodes)
        for node in nodes:
            onnx_node = node.nodes[-1] if isinstance(node, ort_training.FusedNode) else node
            with internal_errors_at(f"{self.file}: node '{node_name(onnx_node)}' "
                                    f"({onnx_node.domain or 'ai.onnx'}::{onnx_node.op_type})"):
                self._convert_node(node, CONVERTERS, InputFailed, Unsupported)

    def _convert_node(self, node: Any, converters: dict, input_failed: type, unsupported: type) -> None:
        from monet_ir.frontend import ort_training

        if isinstance(node, ort_training.FusedNode):
            try:
                node.emit(self)
            except input_failed:
                pass  # the node that failed first has reported why
            except (unsupported, WrongAttributeType) as e:
                self.problem(node.nodes[-1], str(e))
            return
        key = (node.domain if node.domain not in ("", "ai.onnx") else "", node.op_type)
        if self.failed and any(name in self.failed for name in node.input) and self._supported(node, converters):
            self._poison(node)  # the node that failed first has said why (a Shape of it cannot fold)
            return
        try:
            if self._try_fold(node):
                return
            self._shape_outputs(node)
            converter = converters.get(key)
            if converter is None:
                self.problem(node, "unsupported operator")
                self._poison(node)
                return
            converter(self, node)
            self.routing.follow(self, node)
            self._check_outputs_not_empty(node)
        except input_failed:
            self._poison(node)  # the node that failed first has reported why
        except unsupported as e:
            self.problem(node, str(e))
            self._poison(node)
        except (_MissingData, WrongAttributeType) as e:
            self.problem(node, str(e))
            self._poison(node)
        except Exception:
            # a converter failing on a node that is not valid ONNX (a required attribute
            # missing, an attribute of the wrong type) is bad input; on a valid node, a bug
            invalid = self._schema_problem(node)
            if invalid is None:
                raise
            self.problem(node, f"invalid node: {invalid}")
            self._poison(node)

    @staticmethod
    def _supported(node: Any, converters: dict) -> bool:
        """Whether MONET maps this node's operator (converted, or evaluated at import like Shape)."""
        from monet_ir.frontend.folding import FOLDERS

        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        return (domain, node.op_type) in converters or (domain == "" and (
            node.op_type in FOLDERS or node.op_type in ("Constant", "Shape", "Size")))

    def _check_outputs_not_empty(self, node: Any) -> None:
        """A computed tensor without elements (a window larger than its padded input, a slice
        that selects nothing) is no training step MONET can cost: refuse the node that makes it."""
        from monet_ir.frontend.onnx_ops import Unsupported

        for name in node.output:
            t = self.values.get(name) if name else None
            if t is not None and t.ssa is not None and isinstance(t.ssa.type, TensorType) \
                    and 0 in t.ssa.type.get_shape():
                raise Unsupported(f"output '{name}' would have shape {format_shape(t.ssa.type.get_shape())}: it "
                                  "holds no elements")

    def _schema_problem(self, node: Any) -> str | None:
        """What ONNX's checker finds wrong with one node of the standard domain, or None; for
        an ONNX Runtime (`com.microsoft`) node, whose schemas ONNX does not know, an attribute
        of a type none of those ops takes (a corrupted file)."""
        if node.domain == "com.microsoft":
            from onnx import AttributeProto

            scalar_or_list = {AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.INTS,
                              AttributeProto.FLOATS, AttributeProto.STRINGS}
            for a in node.attribute:
                if a.type not in scalar_or_list:
                    kind = AttributeProto.AttributeType.Name(a.type) if a.type in AttributeProto.AttributeType.values() \
                        else str(a.type)
                    return f"attribute '{a.name}' has type {kind}, which the ONNX Runtime ops MONET maps do not take"
            return None
        if node.domain not in ("", "ai.onnx"):
            return None
        from onnx import checker

        ctx = checker.C.CheckerContext()
        ctx.ir_version = self.model.ir_version or 8
        ctx.opset_imports = {e.domain: e.version for e in self.model.opset_import}
        try:
            checker.check_node(node, ctx, checker.C.LexicalScopeContext())
        except Exception as e:  # onnx's ValidationError
            lines = [line for line in str(e).splitlines() if line.strip()]
            return lines[0] if lines else type(e).__name__
        return None

    def _shape_outputs(self, node: Any) -> None:
        """Outputs ONNX's whole-graph inference left unshaped get their type from the node
        alone, now that its computed inputs are known (`monet_ir.frontend.node_shapes`)."""
        if node.domain not in ("", "ai.onnx") or all(not o or self.value_types.get(o) is not None for o in node.output):
            return
        from monet_ir.frontend.node_shapes import infer_outputs

        for name, type_proto in infer_outputs(self, node).items():
            if self.value_types.get(name) is None:
                self.value_types[name] = self.tensor_type_of(type_proto, name)

    def _poison(self, node: Any) -> None:
        """Give the outputs of a node that failed typed placeholders so later nodes still
        report their own problems instead of cascading errors."""
        for out in node.output:
            if out:
                self.values[out] = Tensor(self.value_types.get(out), ssa=None)
                self.failed.add(out)

    def _try_fold(self, node: Any) -> bool:
        from monet_ir.frontend.folding import NotFoldable, fold

        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            self.values[node.output[0]] = Tensor(self.value_types.get(node.output[0]), const=constant_value(node))
            return True
        if node.op_type in ("Shape", "Size") and node.domain in ("", "ai.onnx"):
            t = self.known(node.input[0])
            if t is None:
                return False
            import numpy as np

            if t.type is not None:
                shape = list(t.type.get_shape())
            elif t.ssa is not None and isinstance(t.ssa.type, TensorType):
                shape = list(t.ssa.type.get_shape())
            elif t.const is not None and not isinstance(t.const, _LazyInitializer):
                shape = list(np.shape(t.const))
            else:
                return False
            if node.op_type == "Size":
                result = np.array(int(np.prod(shape)), dtype=np.int64)
            else:
                start = attr(node, "start", 0)
                end = attr(node, "end", len(shape))
                result = np.array(shape[start:end], dtype=np.int64)
            self.values[node.output[0]] = Tensor(self.value_types.get(node.output[0]), const=result)
            return True
        if node.op_type == "CastLike" and node.domain in ("", "ai.onnx") and self._fold_cast_like(node):
            return True
        ins = []
        for name in node.input:
            if not name:
                ins.append(None)
                continue
            t = self.known(name)
            if t is None or t.const is None:
                return False
            ins.append(self.const_array(name))
        if not node.input:
            return False
        try:
            outs = fold(node.op_type, ins, attrs_of(node), node if node.domain in ("", "ai.onnx") else None,
                        self.opset)
        except NotFoldable:
            return False
        for name, value in zip(node.output, outs, strict=False):
            self.values[name] = Tensor(self.value_types.get(name), const=value)
        return True

    def _fold_cast_like(self, node: Any) -> bool:
        """CastLike of a constant needs only the other input's element type, not its value (the
        dynamo exporter, unoptimized, writes clamp's bound as CastLike(6.0, x))."""
        import numpy as np

        from monet_ir.frontend.onnx_ops import Unsupported
        from monet_ir.types import numpy_dtype_of

        source = self.known(node.input[0])
        if source is None or source.const is None or len(node.input) < 2:
            return False
        try:
            elem = self.type_of(node.input[1]).get_element_type()
            dtype = np.dtype(numpy_dtype_of(elem))
        except (Unsupported, KeyError, TypeError, ValueError):
            return False
        value = np.asarray(self.const_array(node.input[0])).astype(dtype)
        self.values[node.output[0]] = Tensor(self.value_types.get(node.output[0]), const=value)
        return True

    # ------------------------------------------------------------------ services for converters

    def known(self, name: str) -> Tensor | None:
        return self.values.get(name)

    def parameter_data(self, name: str) -> Any:
        """The data of a parameter's initializer when the file holds it (None otherwise); the
        parameter is dropped at the end if nothing else reads it."""
        init = self.initializer_protos.get(name)
        if init is None:
            return None
        try:
            value = self.initializer_value(init)
        except _MissingData:
            return None
        self.read_as_constant.add(name)
        return value

    def small_initializer_value(self, name: str, max_elements: int) -> Any:
        """The data of an initializer of at most `max_elements` elements when the file holds it,
        else None; unlike `parameter_data`, reading it does not make the parameter a constant."""
        init = self.initializer_protos.get(name)
        if init is None or math.prod(init.dims) > max_elements:
            return None
        try:
            return self.initializer_value(init)
        except _MissingData:
            return None

    def const_array(self, name: str) -> Any:
        t = self.values[name]
        if isinstance(t.const, _LazyInitializer):
            t.const = self.initializer_value(t.const.proto)
        return t.const

    def type_of(self, name: str) -> TensorType:
        from monet_ir.frontend.onnx_ops import InputFailed, Unsupported

        t = self.values.get(name)
        if t is not None and t.type is not None:
            return t.type
        if t is not None and t.ssa is not None and isinstance(t.ssa.type, TensorType):
            return t.ssa.type
        vt = self.value_types.get(name)
        if vt is None and t is not None and t.ssa is None and t.const is None:
            raise InputFailed(f"input '{name}' comes from a node that could not be imported")
        if vt is None:
            if name in self.bad_shapes:
                raise Unsupported(f"input '{name}' has {self.bad_shapes[name]}")
            raise Unsupported(f"tensor '{name}' has no static shape (pin symbolic dimensions with --dim)")
        return vt

    def result_type(self, name: str) -> TensorType:
        from monet_ir.frontend.onnx_ops import Unsupported

        vt = self.value_types.get(name)
        if vt is None:
            if name in self.bad_shapes:
                raise Unsupported(f"output '{name}' would have {self.bad_shapes[name]}")
            raise Unsupported(f"output '{name}' has no static shape (pin symbolic dimensions with --dim)")
        return vt

    def value(self, name: str) -> SSAValue:
        """The SSA value of an ONNX tensor, materializing import-time constants as nn.constant."""
        from monet_ir.frontend.onnx_ops import InputFailed, Unsupported

        t = self.values.get(name)
        if t is None:
            raise Unsupported(f"input '{name}' is not defined by any node, input or initializer")
        if t.ssa is not None:
            return t.ssa
        if t.const is None:
            raise InputFailed(f"input '{name}' comes from a node that could not be imported")
        t.ssa = self.materialize(name, self.const_array(name), t.type)
        return t.ssa

    def materialize(self, name: str, array: Any, t: TensorType | None) -> SSAValue:
        """An nn.constant for an import-time value; identical constants (the same causal mask
        built in every transformer layer) are emitted once."""
        from dialects.nn import ConstantOp, constant_data

        value_type, raw = constant_bytes(array, t)
        key = (value_type, raw)
        existing = self.constants.get(key)
        if existing is not None:
            return existing
        op = ConstantOp.build(properties={"value": constant_data(value_type, raw)}, result_types=[value_type])
        op.set_origin(name)
        self.add(op)
        op.results[0].name_hint = ssa_name(name)
        self.constants[key] = op.results[0]
        return op.results[0]

    def add(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def bind(self, name: str, value: SSAValue) -> None:
        if not name:
            return
        if value.name_hint is None:  # an alias (Identity, no-op Reshape) keeps its first name
            value.name_hint = ssa_name(name)
        self.values[name] = Tensor(value.type if isinstance(value.type, TensorType) else None, ssa=value)

    def bind_constant(self, name: str, array: Any) -> None:
        """An output whose value is known at import (ONNX Runtime's ConcatTraining lengths)."""
        self.values[name] = Tensor(self.value_types.get(name), const=array)

    def add_state_argument(self, name: str, t: TensorType) -> SSAValue:
        """A persistent optimizer-state argument discovered while converting nodes."""
        arg = self.block.insert_arg(t, len(self.block.args))
        arg.name_hint = ssa_name(name)
        self.arg_attr_list.append(graph.arg_attrs("state", name))
        self.values[name] = Tensor(t, ssa=arg)
        return arg

    # ------------------------------------------------------------------ function

    def _finish(self) -> ModuleOp:
        outputs: list[SSAValue] = []
        for out in self.graph.output:
            if self.ort and out.name.endswith("_optimizer_end"):
                continue  # an in-place parameter update, modelled by the train op itself
            try:
                outputs.append(self.value(out.name))
            except Exception as e:  # Unsupported
                self.problem(None, f"graph output '{out.name}': {e}")
        self._fail_if_problems()
        self.block.add_op(func.ReturnOp(*outputs))
        for op in self.maybe_dead:
            if not any(r.uses for r in op.results):
                self.block.erase_op(op)
        for name in self.read_as_constant:
            arg = self.values[name].ssa
            if arg in self.block.args and not arg.uses:
                del self.arg_attr_list[arg.index]
                self.block.erase_arg(arg)
        fn = func.FuncOp(
            self.options.function_name,
            ([a.type for a in self.block.args], [o.type for o in outputs]),
            Region(self.block),
            arg_attrs=ArrayAttr(self.arg_attr_list),
        )
        module = ModuleOp([fn])
        module.attributes["monet.source"] = StringAttr(os.path.basename(self.file))
        graph.add_notices(module, "routing", self.routing.notes)
        return module


# The most elements a tensor may have: sizes, FLOPs and costs are float64 products, exact to 2**53.
MAX_ELEMENTS = 2**53


def format_shape(dims: Any) -> str:
    return "x".join(str(d) for d in dims) if len(dims) else "scalar"


def shape_problem(dims: list[int]) -> str | None:
    """Why a tensor of these dims cannot exist (a negative size, too many elements), or None."""
    if any(d < 0 for d in dims):
        return f"shape {format_shape(dims)}: a negative size"
    if math.prod(dims) > MAX_ELEMENTS:
        return f"shape {format_shape(dims)}: {math.prod(dims):.3g} elements, more than {MAX_ELEMENTS:.3g} (2**53)"
    return None


def _shapes_complete(graph: Any) -> bool:
    """Whether every output of every node has a static type in the graph's inputs, value_info or
    outputs (or is an initializer): then ONNX's shape inference has nothing to add."""
    typed = {v.name for v in graph.initializer}
    for v in (*graph.input, *graph.value_info, *graph.output):
        t = v.type
        if t.HasField("tensor_type") and t.tensor_type.HasField("shape") and \
                all(d.HasField("dim_value") for d in t.tensor_type.shape.dim):
            typed.add(v.name)
    return all(name in typed for node in graph.node for name in node.output if name)


# An initializer of at least this many elements whose data is in the file (not external) and
# whose type is not int32/int64 goes to ONNX's shape inference by type alone. ONNX's data
# propagation reads int32/int64 initializers of rank 0 or 1 as shape data (Reshape's shape,
# Slice's starts, Expand's shape, ...); any other data an inference function reads (Resize's
# scales, Range's bounds, OneHot's depth) is a handful of elements.
SHAPE_ONLY_ELEMENTS = 1024


def _shape_only_copy(model: Any) -> Any:
    """The model as ONNX's shape inference needs it: a copy whose large initializers that cannot
    be shape data carry only their name, element type and dims (or `model` itself when it has
    none). ONNX's inference takes an initializer's type from those and reads its data only when
    an operator's inference asks for that input's data; `infer_shapes` serializes the model to
    C++ and parses the result back, so a 1 MB causal mask or inline weights would cost more than
    the inference itself. Every other field is copied; `model` is not modified."""
    import onnx
    from onnx import TensorProto

    graph = model.graph
    shape_data = (TensorProto.INT32, TensorProto.INT64)
    large = {
        i for i, t in enumerate(graph.initializer)
        if t.data_type not in shape_data and t.data_location != TensorProto.EXTERNAL
        and math.prod(t.dims) >= SHAPE_ONLY_ELEMENTS
    }
    if not large:
        return model
    from monet_ir.frontend.onnx_checks import copy_fields

    copy = onnx.ModelProto()
    copy_fields(model, copy, ("graph",))
    copy_fields(graph, copy.graph, ("initializer",))
    for i, t in enumerate(graph.initializer):
        if i in large:
            copy.graph.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
        else:
            copy.graph.initializer.append(t)
    return copy


class _MissingData(Exception):
    pass


@dataclass
class _LazyInitializer:
    """An initializer whose data is read only if a converter needs its value."""

    proto: Any


# ---------------------------------------------------------------------- helpers


_NOT_SSA = re.compile(r"[^\w.]", re.ASCII)


def ssa_name(onnx_name: str) -> str | None:
    """A readable SSA name from an ONNX tensor name (xDSL accepts [A-Za-z0-9_$.-]: letters of
    other scripts become "_" too)."""
    cleaned = _NOT_SSA.sub("_", onnx_name).strip("_.")
    if not cleaned or cleaned[0].isdigit():
        return None
    return cleaned[:64]


def constant_value(node: Any) -> Any:
    import numpy as np
    from onnx import numpy_helper

    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        if a.name == "value_float":
            return np.array(a.f, dtype=np.float32)
        if a.name == "value_floats":
            return np.array(list(a.floats), dtype=np.float32)
        if a.name == "value_int":
            return np.array(a.i, dtype=np.int64)
        if a.name == "value_ints":
            return np.array(list(a.ints), dtype=np.int64)
    return None


def element_type(onnx_elem: int) -> Attribute | None:
    from monet_ir.types import element_type_from_onnx

    return element_type_from_onnx(onnx_elem)


def constant_bytes(array: Any, t: TensorType | None) -> tuple[TensorType, bytes]:
    """The tensor type and little-endian storage bytes of an import-time value."""
    import numpy as np

    from monet_ir.types import element_type_from_numpy, numpy_dtype_of

    arr = np.asarray(array)
    elem = t.get_element_type() if t is not None else element_type_from_numpy(arr.dtype)
    shape = list(arr.shape) if t is None else list(t.get_shape())
    arr = np.ascontiguousarray(arr.astype(np.dtype(numpy_dtype_of(elem)).newbyteorder("<"), copy=False)).reshape(shape)
    return TensorType(elem, shape), arr.tobytes()


def _is_parameter(init: Any) -> bool:
    from monet_ir.types import is_float_onnx

    return is_float_onnx(init.data_type) and len(init.dims) > 0


def _trainable_params(graph_: Any, initializers: dict[str, Any], frozen: tuple[str, ...]) -> set[str]:
    """Float initializers are trainable unless they are batch-norm running statistics (inputs
    3 and 4 of BatchNormalization) or frozen by the caller."""
    running = set()
    for node in graph_.node:
        if node.op_type == "BatchNormalization":
            running.update(node.input[3:5])
    return {
        name for name, init in initializers.items()
        if _is_parameter(init) and name not in running and name not in frozen
    }

