"""The drafter-making commands live in the lab's CLI (`specgate-lab`, `python -m specgate_lab`),
not in the product's."""

from __future__ import annotations

import pytest

from specgate.cli import build_parser
from specgate_lab.cli import build_parser as lab_parser
from specgate_lab.cli import main as lab_main


def test_the_product_cli_has_no_assets_command(capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["assets", "smollm2", "/tmp/x"])
    assert exited.value.code == 2 and "invalid choice: 'assets'" in capsys.readouterr().err


def test_the_lab_cli_takes_the_drafter_flags_and_checks_them(capsys, tmp_path):
    args = lab_parser().parse_args(["assets", "smollm2-eagle3", str(tmp_path), "--stage", "refine", "--lr", "1e-4"])
    assert (args.stage, args.lr, args.batch_tokens, args.epochs) == ("refine", 1e-4, 16384, 12)
    assert lab_main(["assets", "smollm2-eagle3", str(tmp_path), "--lr", "2"]) == 2
    assert "specgate-lab: error: --lr 2: expected a learning rate between 0 and 1" in capsys.readouterr().err
