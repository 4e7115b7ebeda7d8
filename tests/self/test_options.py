"""The gate run's options are declared once (specgate.options): the plugin and the CLI offer the
same ones, and what `specgate run` is given reaches the plugin with the same value."""

from __future__ import annotations

import argparse

from specgate import options
from specgate.cli.parser import build_parser, split_pytest_args


class _Group:
    """What of pytest's OptionGroup the plugin uses, onto a plain argparse parser."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser()
        self.flags: list[str] = []

    def addoption(self, flag: str, **kwargs: object) -> None:
        self.flags.append(flag)
        self.parser.add_argument(flag, **kwargs)  # type: ignore[arg-type]


def test_every_cli_option_of_run_is_a_plugin_option():
    group = _Group()
    options.add_to_pytest(group)
    assert group.flags == [o.pytest_flag for o in options.RUN_OPTIONS]
    run = next(a for a in build_parser()._subparsers._group_actions[0].choices.values() if a.prog.endswith(" run"))
    flags = {flag for action in run._actions for flag in action.option_strings}
    for option in options.RUN_OPTIONS:
        assert (f"--{option.name}" in flags) == option.on_cli, option.name


def test_what_the_cli_is_given_reaches_the_plugin_unchanged(tmp_path):
    argv = ["run", "--examples", "7", "--case-seed", "3", "--seed", "11", "--allow-uncompared", "--baselines-dir", str(tmp_path)]
    args = build_parser().parse_args(split_pytest_args(argv)[0])
    handed = options.pytest_args(args, {"report-dir": str(tmp_path / "r"), "baselines-dir": str(tmp_path)})
    group = _Group()
    options.add_to_pytest(group)
    parsed = vars(group.parser.parse_args(handed))
    assert parsed[options.EXAMPLES.pytest_dest] == 7
    assert parsed[options.CASE_SEED.pytest_dest] == 3 and parsed[options.SEED.pytest_dest] == 11
    assert parsed[options.ALLOW_UNCOMPARED.pytest_dest] is True
    assert parsed[options.ALLOW_FINGERPRINT_MISMATCH.pytest_dest] is False
    assert parsed[options.BASELINES_DIR.pytest_dest] == str(tmp_path)
    assert parsed[options.REPORT_DIR.pytest_dest] == str(tmp_path / "r")
