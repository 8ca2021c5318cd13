"""Nothing half-written looks whole (monet_ir/files.py): a full disk or a kill at every file write
of `monet report` leaves each file old or new, never a part, and no manifest; an unwritable --out
is refused before any work; environment errors are one line, exit 1; the PNG plot worker never
imports from the current folder and its death costs only the plots. Seeded where it draws."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from monet_ir import files
from monet_ir.tools import monet
from monet_ir.tools.monet import main as monet_main

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
MLP = str(DATA / "models" / "mlp_b4.onnx")
OLD, NEW = "edge_npu", "tpu_like_quad_core"  # two targets: every output differs between the runs


def report(out: Path, target: str, *extra: str) -> list[str]:
    return ["report", MLP, "--target", target, "--out", str(out), *extra]


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        monet_main(argv)
    return exit_.value.code, [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """A complete report folder on OLD and the one a run on NEW writes (SVG plots)."""
    root = tmp_path_factory.mktemp("runs")
    for name, target in (("old", OLD), ("new", NEW)):
        with pytest.raises(SystemExit) as exit_:
            monet_main(report(root / name, target))
        assert exit_.value.code == 0
        assert files.check_run(root / name) == []
    return root / "old", root / "new"


def _names(*folders: Path) -> set[str]:
    return {p.name for folder in folders for p in folder.iterdir()}


def assert_old_or_new(folder: Path, old: Path, new: Path) -> None:
    """Every file whole: the old run's bytes or the new run's, never a part; no temporary file
    left; no manifest unless the run completed (then it matches its files)."""
    for name in _names(old, new) - {files.MANIFEST}:
        path = folder / name
        if not path.exists():
            assert not (old / name).exists(), name
            continue
        data = path.read_bytes()
        assert data == (new / name).read_bytes() or (old / name).exists() and data == (old / name).read_bytes(), name
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


class Killed(BaseException):
    """A kill at that point of the run (nothing catches it, as nothing catches SIGKILL)."""


WRITES = 8  # report.json, layers.csv, report.txt, trace.json, three SVG plots, manifest.json


@pytest.mark.parametrize("failure", ["ENOSPC", "kill"])
def test_a_failure_at_every_write_leaves_each_file_old_or_new(runs, tmp_path, monkeypatch, capsys, failure):
    old, new = runs
    for n in range(1, WRITES + 2):
        folder = tmp_path / f"write{n}"
        shutil.copytree(old, folder)
        writes = []

        def fill(f, content, n=n):
            writes.append(len(content))
            if len(writes) == n:
                f.write(content[:len(content) // 2])  # part of it on disk, then the failure
                if failure == "ENOSPC":
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                raise Killed
            f.write(content)

        monkeypatch.setattr(files, "_fill", fill)
        if n > WRITES:  # no failure: the run completes
            assert run(report(folder, NEW), capsys)[0] == 0 and len(writes) == WRITES
            assert files.check_run(folder) == []
            assert_old_or_new(folder, new, new)
            continue
        if failure == "ENOSPC":
            code, errors = run(report(folder, NEW), capsys)
            assert code == 1 and len(errors) == 1 and "No space left on device" in errors[0], errors
            assert str(folder) in errors[0] and "internal error" not in errors[0]
        else:
            with pytest.raises(Killed):
                monet_main(report(folder, NEW))
        assert files.check_run(folder) != []  # the folder says it is not a complete run
        assert not (folder / files.MANIFEST).exists()
        assert_old_or_new(folder, old, new)


def test_a_real_file_size_limit_mid_write(runs, tmp_path):
    """The kernel refuses the write part-way (RLIMIT_FSIZE: EFBIG), as a full disk would."""
    old, new = runs
    folder = tmp_path / "limited"
    shutil.copytree(old, folder)
    limit = (new / "report.txt").stat().st_size + 1  # report.json (written first) is larger

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    env = {**os.environ, "MONET_COST_CACHE": "off"}
    done = subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", *report(folder, NEW)], capture_output=True,
                          text=True, cwd=REPO, env=env, preexec_fn=limited)
    errors = [line for line in done.stderr.splitlines() if not line.startswith("[")]
    assert done.returncode == 1 and len(errors) == 1 and "File too large" in errors[0], done.stderr
    assert "report.json" in errors[0]
    assert (folder / "report.json").read_bytes() == (old / "report.json").read_bytes()
    assert_old_or_new(folder, old, new)
    assert not (folder / files.MANIFEST).exists()


KILL_AT_THIRD_WRITE = """
import os, signal
from monet_ir import files
real, count = files._fill, []
def fill(f, content):
    count.append(1)
    if len(count) == 3:
        f.write(content[:len(content) // 2]); f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    real(f, content)
files._fill = fill
"""


def test_sigkill_mid_write(runs, tmp_path):
    old, new = runs
    folder = tmp_path / "killed"
    shutil.copytree(old, folder)
    code = f"{KILL_AT_THIRD_WRITE}\nimport sys\nfrom monet_ir.tools.monet import main\nmain(sys.argv[1:])\n"
    done = subprocess.run([sys.executable, "-c", code, *report(folder, NEW)], capture_output=True, cwd=REPO)
    assert done.returncode == -signal.SIGKILL
    assert (folder / "report.json").read_bytes() == (new / "report.json").read_bytes()  # writes 1, 2 done
    assert (folder / "report.txt").read_bytes() == (old / "report.txt").read_bytes()  # write 3 killed
    assert not (folder / files.MANIFEST).exists() and files.check_run(folder) != []
    hidden = [p for p in folder.iterdir() if p.name.startswith(".")]
    assert len(hidden) == 1 and hidden[0].name.startswith(".report.txt.")  # SIGKILL leaves only a hidden part
    hidden[0].unlink()
    assert_old_or_new(folder, old, new)


def test_the_manifest_lists_every_file_and_notices_an_edit(runs, tmp_path):
    _, new = runs
    import json

    manifest = json.loads((new / files.MANIFEST).read_text())
    assert manifest["complete"] and manifest["tool"] == "monet report"
    assert set(manifest["files"]) == {"report.json", "layers.csv", "report.txt", "trace.json", "gantt.svg",
                                      "memory.svg", "energy.svg"}
    folder = tmp_path / "edited"
    shutil.copytree(new, folder)
    (folder / "layers.csv").write_text((folder / "layers.csv").read_text()[:-10])
    assert files.check_run(folder) == [f"{folder / 'layers.csv'}: differs from {files.MANIFEST}"]


def test_an_unwritable_out_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(monet, "make_report", no_work)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, errors = run(report(blocker / "out", NEW), capsys)  # a folder under a file
    assert code == 1 and len(errors) == 1 and "--out" in errors[0] and "Not a directory" in errors[0]
    for number in (errno.EROFS, errno.EACCES, errno.ENOSPC):  # (as root, chmod does not refuse a write)
        def refuse(folder, name, number=number):
            raise OSError(number, os.strerror(number))

        monkeypatch.setattr(files, "_temporary", refuse)
        code, errors = run(report(tmp_path / "out", NEW), capsys)
        assert code == 1 and len(errors) == 1 and os.strerror(number) in errors[0] and "--out" in errors[0], errors
    monkeypatch.undo()

    def read_only(folder, name):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(files, "_temporary", read_only)
    for argv in (["explore", MLP, "--target", NEW, "--out", str(tmp_path / "e"), "--generations", "1"],
                 ["sweep", MLP, "--target-template", "edge_npu", "--out", str(tmp_path / "s")],
                 ["plan", MLP, "--system", "2x2_edge_npu", "--out", str(tmp_path / "p")]):
        code, errors = run(argv, capsys)
        assert code == 1 and len(errors) == 1 and "cannot write there" in errors[0], (argv, errors)
        assert not any("building" in line or "importing" in line for line in errors)


@pytest.mark.parametrize("raised,fragment", [
    (MemoryError(), "out of memory"),
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    (OSError(errno.ENOSPC, "No space left on device", "/data/x"), "/data/x: no space left on the device"),
    (OSError(errno.EMFILE, "Too many open files"), "too many open files"),
])
def test_environment_errors_are_one_line_exit_1(tmp_path, monkeypatch, capsys, raised, fragment):
    def fails(*args, **kwargs):
        raise raised

    monkeypatch.setattr(monet, "make_report", fails)
    code, errors = run(report(tmp_path / "out", NEW), capsys)
    assert code == 1 and len(errors) == 1 and fragment in errors[0] and "internal error" not in errors[0], errors


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e400"])
def test_non_finite_numbers_in_a_target_file_are_one_line(tmp_path, capsys, value):
    from targets import builtin_target_path

    text = Path(builtin_target_path("edge_npu")).read_text()
    for field, old_text in (("frequency_hz", "frequency_hz: 800.0e6"), ("size", "size: 512 KiB")):
        assert old_text in text, old_text
        path = tmp_path / f"{field}.yaml"
        path.write_text(text.replace(old_text, old_text.split(":")[0] + f": {value}", 1))
        code, errors = run(["targets", str(path)], capsys)
        assert code == 1 and errors and all(str(path) in e and "finite" in e for e in errors), errors


TRAPS = ("pickle", "json", "matplotlib", "numpy", "monet_ir")


def _console(*args: str) -> list[str]:
    """`monet ARGS` as its console script starts it: the current folder is not on sys.path."""
    code = "import sys; del sys.path[0]; from monet_ir.tools.monet import main; main(sys.argv[1:])"
    return [sys.executable, "-c", code, *args]


def test_the_png_worker_never_imports_from_the_current_folder(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    canary = tmp_path / "canary"
    for name in TRAPS:
        (cwd / f"{name}.py").write_text(f"open({str(canary)!r}, 'a').write({name!r} + '\\n')\n")
    out = tmp_path / "out"
    done = subprocess.run(_console(*report(out, NEW, "--plot-format", "png")), capture_output=True, text=True,
                          cwd=cwd, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert not canary.exists(), canary.read_text()
    assert all((out / f"{name}.png").read_bytes().startswith(b"\x89PNG") for name in ("gantt", "memory", "energy"))
    assert files.check_run(out) == []


@pytest.mark.parametrize("death", ["os._exit(3)", "os.kill(os.getpid(), 9)"])
def test_a_plot_worker_that_dies_costs_only_the_plots(runs, tmp_path, monkeypatch, capsys, death):
    from monet_ir.emit import step_report

    _, new = runs
    monkeypatch.setattr(step_report, "_PLOT_WORKER", f"import os; {death}")
    out = tmp_path / "out"
    code, errors = run(report(out, NEW, "--plot-format", "png"), capsys)
    assert code == 1 and len(errors) == 1, errors
    assert "the PNG plots were not drawn" in errors[0] and ("status 3" in errors[0] or "SIGKILL" in errors[0])
    for name in ("report.json", "layers.csv", "report.txt", "trace.json"):
        assert (out / name).read_bytes() == (new / name).read_bytes(), name
    assert not (out / files.MANIFEST).exists() and not list(out.glob("*.png"))


def test_ray_copies_go_to_a_private_folder_never_a_planted_link(tmp_path):
    import tempfile

    from monet_ir.explore import ga
    from monet_ir.explore.evaluate import ExploreError, StepConfig
    from targets import builtin_target_path

    template = tmp_path / "hw" / "mine.yaml"
    template.parent.mkdir()
    template.write_text(Path(builtin_target_path(NEW)).read_text())
    shipped = ga.shipped_files(StepConfig(MLP, str(template)))
    key = ga.work_key(StepConfig(MLP, str(template)), "schedule", shipped)
    victim = tmp_path / "victim"
    victim.mkdir()
    planted = Path(tempfile.gettempdir()) / f"monet-explore-{key}"  # the name copies went to before
    planted.symlink_to(victim)
    try:
        elsewhere = StepConfig(str(tmp_path / "gone" / "mlp_b4.onnx"), str(tmp_path / "gone" / "mine.yaml"))
        there = ga.materialize(elsewhere, shipped, key)
        folder = Path(there.model).parents[1]
        assert not list(victim.iterdir()) and planted.resolve() != folder.resolve()
        assert not folder.is_symlink() and folder.stat().st_mode & 0o777 == 0o700
        assert Path(there.model).read_bytes() == Path(MLP).read_bytes()
        assert Path(there.target).read_text() == template.read_text()
        assert Path(ga.materialize(elsewhere, shipped, key).model).parents[1] == folder  # once per key
        with pytest.raises(ExploreError, match="not a path inside its folder"):
            ga.materialize(elsewhere, [("model", "../../escape.onnx", b"x")], key)
    finally:
        planted.unlink()


def test_a_multi_chip_report_is_marked_complete_and_a_dead_plot_worker_is_one_line(tmp_path, monkeypatch, capsys):
    from monet_ir.emit import step_report

    out = tmp_path / "system"
    argv = ["report", MLP, "--system", "2x2_edge_npu", "--parallel", "dp=4", "--out", str(out)]
    assert run(argv, capsys)[0] == 0
    assert files.check_run(out) == [] and (out / "gantt.svg").exists()
    monkeypatch.setattr(step_report, "_PLOT_WORKER", "import os; os.kill(os.getpid(), 9)")
    code, errors = run([*argv, "--plot-format", "png"], capsys)
    assert code == 1 and len(errors) == 1 and "the PNG plots were not drawn" in errors[0] and "SIGKILL" in errors[0]
    assert "report.json, report.txt and trace.json" in errors[0]
    assert not (out / files.MANIFEST).exists() and (out / "report.json").exists()


def test_monet_opt_writes_its_output_whole_or_not_at_all(tmp_path, capsys):
    from monet_ir.tools.monet_opt import main as opt_main

    def opt(*argv: str) -> int:
        with pytest.raises(SystemExit) as exit_:
            opt_main(list(argv))
        return exit_.value.code

    good, bad, out = tmp_path / "good.mlir", tmp_path / "bad.mlir", tmp_path / "out.mlir"
    good.write_text("builtin.module {}\n")
    bad.write_text("builtin.module {}\n// -----\nbuiltin.module { bogus }\n")  # the second chunk fails
    out.write_text("old\n")
    assert opt(str(bad), "--split-input-file", "-o", str(out)) == 1
    assert out.read_text() == "old\n" and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert opt(str(good), "-o", str(out)) == 0 and out.read_text().startswith("builtin.module {")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert opt(str(good), "-o", str(blocker / "out.mlir")) == 1
    assert "-o " in capsys.readouterr().err
