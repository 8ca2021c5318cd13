"""Every MONET op's declarative assembly format compiles (they are compiled on first use, not at
import: `dialects.base.irdl_op_definition`), and the format text stays on the op definition."""

from __future__ import annotations

from dialects import get_all_dialects
from xdsl.irdl.declarative_assembly_format import FormatProgram


def test_every_assembly_format_compiles():
    compiled = 0
    for name, factory in get_all_dialects().items():
        for op in factory().operations:
            fmt = op.assembly_format
            if fmt is None:
                continue
            assert op.get_irdl_definition().assembly_format == fmt, op.name
            assert isinstance(op.format_program(), FormatProgram), op.name
            assert op.format_program() is op.format_program()  # compiled once
            compiled += 1
    assert compiled >= 80


def test_a_malformed_format_fails_on_first_use_naming_the_op():
    import pytest
    from xdsl.irdl import IRDLOperation, operand_def
    from xdsl.irdl.operations import PyRDLOpDefinitionError

    from dialects.base import irdl_op_definition

    @irdl_op_definition
    class BrokenOp(IRDLOperation):
        name = "test.broken"
        x = operand_def()
        assembly_format = "$x $y attr-dict"

    with pytest.raises(PyRDLOpDefinitionError, match="BrokenOp"):
        BrokenOp.format_program()
