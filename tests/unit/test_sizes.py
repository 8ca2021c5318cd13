"""Sizes mean what their units say, in every option and file: kB/MB/GB are powers of 1000,
KiB/MiB/GiB powers of 1024."""

from __future__ import annotations

import pytest

from monet_ir.errors import UsageError
from monet_ir.options import parse_size
from passes.activation_checkpoint import parse_bytes
from targets.errors import Problems
from targets.fields import Fields


@pytest.mark.parametrize("text,expected", [
    ("4000000", 4_000_000), ("10MB", 10_000_000), ("10 MiB", 10 * 2**20), ("2.5MiB", int(2.5 * 2**20)),
    ("512KiB", 512 * 1024), ("512 kB", 512_000), ("1GB", 10**9), ("1 GiB", 2**30), ("64 B", 64),
])
def test_units_have_their_real_meanings(text, expected):
    assert parse_size(text, "--budget") == expected
    assert parse_bytes(text) == expected  # activation-checkpoint's memory-budget=...


@pytest.mark.parametrize("text", ["ten MB", "10 XB", "", "1e3 parsecs", "-5MB"])
def test_a_bad_size_names_the_option(text):
    with pytest.raises(UsageError, match=r"^--budget .*expected a byte count"):
        parse_size(text, "--budget")


def test_target_files_read_the_same_units():
    problems = Problems("t.yaml")
    fields = Fields(problems)
    data = {"a": "2 MB", "b": "2 MiB", "c": "16 bits", "d": 4}
    assert fields.size_bits(data, "a", "", unit_bits=8) == 8 * 2_000_000
    assert fields.size_bits(data, "b", "", unit_bits=8) == 8 * 2 * 2**20
    assert fields.size_bits(data, "c", "", unit_bits=8) == 16
    assert fields.size_bits(data, "d", "", unit_bits=8) == 32
    assert not problems
