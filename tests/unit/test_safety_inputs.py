"""Adversarial input files at every entry point that reads YAML or JSON (monet_ir/untrusted.py):
alias bombs, merge-key bombs, recursive aliases, deep nesting and oversized files are refused in
one line before any value is read, and what a message quotes from a file is bounded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from monet_ir import untrusted
from monet_ir.errors import MAX_MESSAGE_CHARS
from monet_ir.tools.monet import main as monet_main
from targets import builtin_target_path, get_target
from targets.errors import TargetError

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
MLP = str(DATA / "models" / "mlp_b4.onnx")


def bomb(levels: int = 9) -> str:
    """Top-level keys defining `*b{levels}`: 9**levels strings of three letters in ~50 bytes a level
    (levels=9: 387 million strings from ~480 bytes, the issue's "billion laughs")."""
    lines = ["_b0: &b0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"_b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def merge_bomb(levels: int = 30) -> str:
    """Merge keys doubling a mapping each level (PyYAML flattens merges into lists of pairs)."""
    lines = ["_m0: &m0 {a: 1, b: 2}"]
    lines += [f"_m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}]}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def with_bomb(text: str, old: str, new: str, kind: str = "alias") -> str:
    assert old in text, old
    head = bomb() if kind == "alias" else merge_bomb() if kind == "merge" else "_r: &r [*r]\n"
    return head + text.replace(old, new, 1)


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        monet_main(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]
    return exit_.value.code, errors


def assert_refused(code: int, errors: list[str], *fragments: str) -> None:
    assert code == 1, errors
    assert len(errors) == 1, errors
    assert "Traceback" not in errors[0] and len(errors[0]) < 600
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


KINDS = {"alias": "alias bomb", "merge": "alias bomb", "recursive": "recursive alias"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_own_target_format(tmp_path, capsys, kind):
    text = Path(builtin_target_path("edge_npu")).read_text()
    path = tmp_path / "bomb.yaml"
    value = "*r" if kind == "recursive" else "*b9" if kind == "alias" else "*m30"
    path.write_text(with_bomb(text, "op_kinds: [loop_nest]", f"op_kinds: {value}", kind))
    assert_refused(*run(["targets", str(path)], capsys), str(path), KINDS[kind])


@pytest.mark.parametrize("entry", ["core", "offchip", "system", "zigzag"])
def test_stream_system_core_offchip_and_zigzag_files(tmp_path, capsys, entry):
    folder = tmp_path / "hw"
    shutil.copytree(DATA / "stream_hw", folder)
    system = folder / "tpu_like_quad_core.yaml"
    if entry == "core":
        core = folder / "cores" / "simd.yaml"
        core.write_text(with_bomb(core.read_text(), "operands: [I1, I2, O]", "operands: *b9"))
        bad = core
    elif entry == "offchip":
        core = folder / "cores" / "offchip.yaml"
        core.write_text(bomb() + core.read_text() + "_x: *b9\n")
        bad = core
    elif entry == "system":
        system.write_text(with_bomb(system.read_text(), "bandwidth: 32", "bandwidth: *b9"))
        bad = system
    else:
        zigzag = tmp_path / "core.yaml"
        zigzag.write_text(with_bomb((DATA / "zigzag_hw" / "tpu_like.yaml").read_text(), "name:", "_n: *b9\nname:"))
        system = bad = zigzag
    assert_refused(*run(["targets", str(system)], capsys), str(bad), "alias bomb")


def test_multi_chip_system_file(tmp_path, capsys):
    path = tmp_path / "system.yaml"
    text = (REPO / "targets" / "builtin" / "systems" / "2x2_edge_npu.yaml").read_text()
    path.write_text(with_bomb(text, "torus: [2, 2]", "torus: *b9"))
    assert_refused(*run(["plan", MLP, "--system", str(path), "--out", str(tmp_path / "o")], capsys),
                   str(path), "alias bomb")


def test_mapping_file(tmp_path, capsys):
    path = tmp_path / "mapping.yaml"
    path.write_text(bomb() + "mapping:\n  - {name: *b9, core_allocation: [0]}\n")
    code, errors = run(["report", MLP, "--target", "edge_npu", "--out", str(tmp_path / "o"), "--no-plots",
                        "--mapping", str(path)], capsys)
    assert_refused(code, errors, str(path), "alias bomb")


def test_sweep_template(tmp_path, capsys):
    path = tmp_path / "template.yaml"
    text = Path(builtin_target_path("edge_npu")).read_text()
    path.write_text(with_bomb(text, "op_kinds: [loop_nest]", "op_kinds: *b9"))
    code, errors = run(["sweep", MLP, "--target-template", str(path), "--set", "dram.bandwidth_GBps=1,2",
                        "--out", str(tmp_path / "o"), "--no-plots"], capsys)
    assert_refused(code, errors, str(path), "alias bomb")


def test_plan_files_deep_oversized_and_long_values(tmp_path, capsys, monkeypatch):
    path = tmp_path / "plan.json"
    argv = ["report", str(DATA / "models" / "lenet5_b4.onnx"), "--target", "edge_npu", "--out", str(tmp_path / "o"),
            "--no-plots", "--checkpoint", f"plan={path}"]
    path.write_text('{"activations": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert_refused(*run(argv, capsys), str(path), "nested too deeply")
    path.write_text(json.dumps({"activations": {"/conv1/Conv": "x" * 1_000_000}}))
    assert_refused(*run(argv, capsys), str(path), "unknown decision")
    monkeypatch.setattr(untrusted, "MAX_JSON_BYTES", 1000)
    assert_refused(*run(argv, capsys), str(path), "more than such a file may have")


def test_loader_limits_directly():
    with pytest.raises(Exception, match="alias bomb"):
        untrusted.load_yaml(bomb(12))  # 282 billion strings
    with pytest.raises(Exception, match="alias bomb"):
        untrusted.load_yaml(merge_bomb(40))
    with pytest.raises(Exception, match="recursive alias"):
        untrusted.load_yaml("a: &a {b: *a}\n")
    with pytest.raises(Exception, match="nested more than"):
        untrusted.load_yaml("a: " + "[" * 300 + "]" * 300)
    # what aliases are for: a template merged into a few cores (the built-in targets), or a value
    # repeated up to the budget, loads
    assert untrusted.load_yaml(bomb(4))["_b4"][0][0][0][0] == ["lol"] * 9  # 59,049 strings
    data = untrusted.load_yaml("t: &t {a: 1, b: [1, 2]}\ncores: [{<<: *t, n: 0}, {<<: *t, n: 1}]\n")
    assert data["cores"][1] == {"a": 1, "b": [1, 2], "n": 1}


def test_messages_quoting_a_value_are_bounded(tmp_path, capsys):
    text = Path(builtin_target_path("edge_npu")).read_text()
    path = tmp_path / "long.yaml"
    path.write_text(text.replace("op_kinds: [loop_nest]", "op_kinds: [" + "x" * 2_000_000 + "]", 1))
    with pytest.raises(TargetError) as error:
        get_target(str(path))
    assert all(len(line) <= 600 for line in error.value.problems)
    code, errors = run(["targets", str(path)], capsys)
    assert code == 1 and errors and all(len(line) <= MAX_MESSAGE_CHARS + 100 for line in errors)


def test_oversized_yaml_is_refused_unread(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(Path(builtin_target_path("edge_npu")).read_text())
    monkeypatch.setattr(untrusted, "MAX_YAML_BYTES", 100)
    assert_refused(*run(["targets", str(path)], capsys), str(path), "more than such a file may have")


# ---------------------------------------------------------------------- monet-run's npz files


def _npz(path: Path, members: list[tuple[str, dict, int]]) -> Path:
    """An npz whose members declare (header dict) and hold `data` zero bytes, deflated (a
    zip bomb when the declared data is large)."""
    import io
    import zipfile

    import numpy as np

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, header, data in members:
            with archive.open(name, "w", force_zip64=True) as member:
                text = io.BytesIO()
                np.lib.format.write_array_header_1_0(text, {"fortran_order": False, **header})
                member.write(text.getvalue())
                chunk = bytes(min(data, 1 << 20))
                for start in range(0, data, len(chunk) or 1):
                    member.write(chunk[:data - start])
    return path


def run_monet_run(argv: list[str], capsys) -> tuple[int, list[str]]:
    from monet_ir.tools.monet_run import main as run_main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_main(argv)
    return exit_.value.code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


X = {"descr": "<f4", "shape": (4, 784)}  # mlp_b4's input


@pytest.mark.parametrize("members,fragment", [
    ([("x.npy", {"descr": "<f4", "shape": (10_000_000,)}, 40_000_000)], "has shape [10000000] of float32"),
    ([("x.npy", {"descr": "<f4", "shape": (4, 784)}, 40_000_000)], "in a member of 40,000,128 bytes"),
    ([("x.npy", X, 4 * 784 * 4), ("x.npy", X, 4 * 784 * 4)], "'x' is there twice"),
    ([("x.npy", X, 4 * 784 * 4), ("evil.pkl", X, 16)], "member 'evil.pkl' is not an .npy array"),
    ([("x.npy", X, 4 * 784 * 4), ("y.npy", X, 4 * 784 * 4)], "array 'y' names nothing the step takes"),
    ([("x.npy", {"descr": "|O", "shape": (4, 784)}, 4 * 784 * 8)], "holds Python objects"),
])
def test_npz_members_are_checked_before_any_is_read(tmp_path, capsys, monkeypatch, members, fragment):
    import warnings

    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (zipfile warns of the duplicate name)
        path = _npz(tmp_path / "in.npz", members)
    assert path.stat().st_size < 200_000  # declaring up to 40 MB

    def never(*args, **kwargs):
        raise AssertionError("an array was read")

    monkeypatch.setattr(np.lib.format, "read_array", never)
    code, errors = run_monet_run([MLP, "--inputs", str(path), "--out", str(tmp_path / "o.npz")], capsys)
    assert code == 1 and len(errors) == 1 and f"--inputs {path}" in errors[0] and fragment in errors[0], errors


def test_a_good_npz_still_runs(tmp_path, capsys):
    import numpy as np

    rng = np.random.default_rng(3)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal((4, 784)).astype(np.float32),
             labels=rng.integers(0, 10, 4))
    code, errors = run_monet_run([MLP, "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "o")], capsys)
    assert code == 0, errors
    with np.load(tmp_path / "o.npz") as out:  # (.npz appended to a name without it, as numpy does)
        assert np.isfinite(out["loss"])
