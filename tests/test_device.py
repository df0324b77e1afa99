"""device = "cuda" and --device: skipped, never failed, where no GPU is present."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import check, make_case
from gradcheck.cli.main import main

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="these tests check behaviour without a GPU")


def test_a_cuda_formula_case_is_skipped_with_the_reason():
    result = check(make_case("sum(tanh(x))", {"x": [4]}, device="cuda"))
    assert result.status == "skipped"
    assert "cuda" in result.message and "no such device" in result.message


def test_device_flag_skips_every_case_and_exits_zero(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('[[case]]\nname = "a"\nexpr = "sum(x**2)"\ninputs.x = { shape = [3] }\n')
    assert main(["run", str(path), "--device", "cuda", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["skipped"] == 1 and report["summary"]["failed"] == 0
    assert main(["run", str(path), "--device", "cpu"]) == 0
