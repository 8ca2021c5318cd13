"""A core file without an off-chip memory is never priced silently: the report warns on stderr,
in report.json and in report.txt that off-chip traffic is unpriced and unbounded, unless the user
names a Stream system whose DRAM the target takes (`--offchip`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from monet_ir.tools.monet import main
from targets import TargetError, get_target, offchip_dram

DATA = Path(__file__).resolve().parents[1] / "data"
STREAM = DATA / "stream_hw"
LENET = DATA / "models" / "lenet5_b4.onnx"


def _report(tmp_path: Path, capsys, *extra: str) -> tuple[dict, str, str]:
    core = tmp_path / "tpu_like.yaml"  # copied alone: no offchip.yaml beside it
    shutil.copy(STREAM / "cores" / "tpu_like.yaml", core)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(LENET), "--target", str(core), "--out", str(out), "--no-plots", *extra])
    assert exit_info.value.code == 0
    return json.loads((out / "report.json").read_text()), (out / "report.txt").read_text(), capsys.readouterr().err


def test_a_core_file_alone_says_off_chip_traffic_is_unpriced(tmp_path, capsys):
    report, text, err = _report(tmp_path, capsys)
    assert "off-chip traffic is unpriced and unbounded" in err
    assert any("unpriced and unbounded" in w for w in report["warnings"])
    assert "WARNING" in text and "unpriced and unbounded" in text


def test_offchip_gives_the_core_a_stream_systems_dram(tmp_path, capsys):
    alone, _, _ = _report(tmp_path, capsys)
    priced, text, err = _report(tmp_path, capsys, "--offchip", str(STREAM / "tpu_like_quad_core.yaml"))
    assert "warnings" not in priced and "unpriced" not in err and "WARNING" not in text
    assert priced["energy_pj"] > alone["energy_pj"]
    dram = offchip_dram(str(STREAM / "tpu_like_quad_core.yaml"))
    assert get_target(str(STREAM / "cores" / "tpu_like.yaml"), offchip=str(STREAM / "tpu_like_quad_core.yaml")).dram == dram


def test_offchip_that_is_no_dram_is_a_one_line_error(tmp_path):
    with pytest.raises(TargetError) as error:
        offchip_dram(str(STREAM / "cores" / "tpu_like.yaml"))
    assert "\n" not in str(error.value).strip()
