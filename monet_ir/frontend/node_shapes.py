"""Static output types of one node from what the importer knows when it reaches it.

ONNX's whole-graph shape inference gives up on shapes computed by sub-graphs it cannot
propagate (a ViT's class token `Expand`ed to `Concat(Shape(x)[0], 1, D)` through `Where`,
`Equal` and `ConstantOfShape`; a ShuffleNet's `Slice` whose ends are `Shape(x)[1] / 2`). The
importer folds those sub-graphs to constants as it converts nodes in order, so when it reaches
such a node every input is either a value it knows or a tensor of static type. `infer_outputs`
then runs ONNX's inference on that single node, with the known values as initializers, which
resolves every shape that is static once the inputs' shapes are (Expand, Reshape, Tile, Range,
ConstantOfShape, Slice with computed starts/ends, Where, ...).
"""

from __future__ import annotations

from typing import Any

# values larger than this are given to the single-node inference by type only
MAX_CONST_ELEMENTS = 1 << 16


def infer_outputs(imp: Any, node: Any) -> dict[str, Any]:
    """{output name: ONNX TypeProto} for the outputs of `node` ONNX can now shape."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from monet_ir.types import onnx_elem_of

    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return {}
    inputs, initializers, seen = [], [], set()
    for name in node.input:
        if not name or name in seen:
            continue
        seen.add(name)
        t = imp.known(name)
        if t is None:
            return {}
        value = None
        if t.const is not None:
            try:
                value = np.asarray(imp.const_array(name))
            except Exception:  # a weight whose data is not shipped: its type is enough
                value = None
        elif t.ssa is not None and name in imp.initializer_protos:
            # a small float initializer imports as a parameter, but an operator's inference may
            # need its data (a Resize's scales; ONNX's whole-graph inference could not read it
            # when the file keeps it as external data)
            value = imp.small_initializer_value(name, MAX_CONST_ELEMENTS)
        if value is not None and value.size <= MAX_CONST_ELEMENTS and value.dtype != object:
            initializers.append(numpy_helper.from_array(value, name))
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                                        list(value.shape)))
            continue
        tt = t.type if t.type is not None else imp.value_types.get(name)
        if tt is None and t.ssa is not None:
            tt = t.ssa.type
        elem = onnx_elem_of(tt.get_element_type()) if tt is not None else None
        if elem is None:
            return {}
        inputs.append(helper.make_tensor_value_info(name, elem, list(tt.get_shape())))
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "node", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=list(imp.model.opset_import), ir_version=imp.model.ir_version)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # ONNX's inference rejects the node: the converter will say why
        return {}
    found = {}
    for vi in list(inferred.graph.output) + list(inferred.graph.value_info):
        tt = vi.type.tensor_type
        if vi.name in node.output and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            found[vi.name] = vi.type
    return found
