"""The gate run's options, declared once: the pytest plugin adds each as `--specgate-NAME`, the
CLI's `specgate run` and `specgate baseline update` as `--NAME`, and the CLI hands the ones given
to pytest under the plugin's spelling (pytest_args)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Option:
    name: str  # the CLI's --NAME, the plugin's --specgate-NAME
    help: str
    integer: bool = False  # an int value; else a string (or, with flag, none)
    flag: bool = False  # store_true
    on_cli: bool = True  # also a flag of `specgate run` / `baseline update` (else the CLI sets it itself)
    cli_help: str | None = None  # where the CLI's meaning reads differently (its defaults come from specgate.toml)

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under (the CLI's namespace)."""
        return self.name.replace("-", "_")

    @property
    def pytest_dest(self) -> str:
        """What `config.getoption` takes."""
        return f"specgate_{self.dest}"

    @property
    def pytest_flag(self) -> str:
        return f"--specgate-{self.name}"

    @property
    def said(self) -> str:
        """The option as a message names it: a user may have started `specgate run` or pytest."""
        if not self.on_cli:
            return self.pytest_flag
        return f"--{self.name} ({self.pytest_flag} under pytest)"


DEPLOYMENT = Option(
    "deployment",
    "deployment name in fixtures/deployments or a .toml path (default: the project's, else sim, the SIMULATOR)",
    on_cli=False,  # the CLI's positional argument
)
REPORT_DIR = Option(
    "report-dir", "where report.md/json/png, logs and the benchmark JSON go (default: the project's report_dir, specgate-report)"
)
BASELINES_DIR = Option(
    "baselines-dir", "root of stored baselines (default: the project's, see specgate.toml; in specgate's checkout baselines/)"
)
UPDATE_BASELINES = Option(
    "update-baselines", "write this run's figures as the stored baseline", flag=True, on_cli=False  # `specgate baseline update`
)
ALLOW_FINGERPRINT_MISMATCH = Option(
    "allow-fingerprint-mismatch", "compare with a baseline from other hardware/software", flag=True
)
EXAMPLES = Option("examples", "equivalence examples per speculative config", integer=True)
ALLOW_UNCOMPARED = Option(
    "allow-uncompared",
    "gates that could not compare (or could not fail) and partial runs warn instead of failing the run",
    flag=True,
)
CASE_SEED = Option(
    "case-seed",
    "draw the equivalence cases from this seed (default: derived from the commit, so they vary per change)",
    integer=True,
)
SEED = Option(
    "seed", "fix the order of the interleaved measurement rounds (default: a fresh random order each run)", integer=True
)

RUN_OPTIONS = (
    DEPLOYMENT,
    REPORT_DIR,
    BASELINES_DIR,
    UPDATE_BASELINES,
    ALLOW_FINGERPRINT_MISMATCH,
    EXAMPLES,
    ALLOW_UNCOMPARED,
    CASE_SEED,
    SEED,
)


def _kwargs(option: Option) -> dict[str, Any]:
    if option.flag:
        return {"action": "store_true"}
    return {"type": int, "default": None} if option.integer else {"default": None}


def add_to_pytest(group: Any) -> None:
    """The plugin's options (pytest's OptionGroup)."""
    for option in RUN_OPTIONS:
        group.addoption(option.pytest_flag, help=option.help, **_kwargs(option))


def add_to_cli(parser: argparse.ArgumentParser) -> None:
    """`specgate run`'s and `baseline update`'s own flags."""
    for option in RUN_OPTIONS:
        if option.on_cli:
            parser.add_argument(f"--{option.name}", help=option.cli_help or option.help, **_kwargs(option))


def given(config: pytest.Config, option: Option) -> Any:
    return config.getoption(option.pytest_dest)


def pytest_args(args: argparse.Namespace, resolved: dict[str, str]) -> list[str]:
    """The plugin flags for the CLI options given (a path resolved by the caller in `resolved`)."""
    out = []
    for option in RUN_OPTIONS:
        if not option.on_cli:
            continue
        value = resolved.get(option.name, getattr(args, option.dest, None))
        if option.flag:
            if value:
                out.append(option.pytest_flag)
        elif value is not None:
            out.append(f"{option.pytest_flag}={value}")
    return out
