"""Idle neighbours quiet: SGLang's `--sleep-on-idle` where servers share a host.

An SGLang scheduler with no request spins: its event loop polls its sockets without blocking,
holding one host core busy. Where specgate boots servers side by side on one host
(`launch.coexist`, or a sweep's parallel slots), every server not being measured at that moment is
such an idle scheduler, and their spinning takes host time that the measured server's draft-verify
cycle (host code on its critical path) needs: the speculative servers of one run slowed down
together in the H200 data, all booted without the flag. `--sleep-on-idle` makes an idle scheduler
block on its sockets (a zmq poll that an arriving request ends at once); what a request computes
and the code it runs are the same, so the launch digest leaves the flag out
(`sglang_cli.DIGEST_IGNORED`).

`init` writes the flag, the shipped GPU deployments that boot side by side carry it, and `specgate
check` names a config that runs side by side without it where its release has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specgate import sglang_cli

if TYPE_CHECKING:
    from specgate.deployment import Deployment

SLEEP_ON_IDLE = "--sleep-on-idle"
# Launchers whose servers specgate starts on hosts it picks (a url server runs where its owner put it).
_STARTED_HERE = ("local", "ssh")


@dataclass(frozen=True)
class SpinningConfig:
    """A config whose server would idle spinning beside its neighbours."""

    config: str
    release: str  # the release whose parser has the flag (declared, else the newest specgate knows)
    declared: bool


def share_a_host(dep: Deployment) -> bool:
    """Servers specgate starts that are up at once on one host: booted side by side
    (`launch.coexist`) or in a sweep's parallel slots, by the local or ssh launcher. Not the
    simulator's: its idle server waits in http.server's selector, it never spins."""
    if dep.simulator or dep.launch.launcher not in _STARTED_HERE:
        return False
    return dep.launch.coexist or (dep.sweep is not None and dep.sweep.parallel > 1)


def gives_sleep_on_idle(argv: list[str] | tuple[str, ...]) -> bool:
    return any(arg.partition("=")[0] == SLEEP_ON_IDLE for arg in argv)


def spinning_configs(dep: Deployment) -> list[SpinningConfig]:
    """Each config that shares a host with its neighbours, whose release takes --sleep-on-idle, and
    whose launch (launch.args and its own args) does not give it. The release is the declared one
    (`sglang_release`), else the newest release specgate has a table for; a declared release
    specgate has no table for is not judged."""
    if not share_a_host(dep):
        return []
    out = []
    for name, cfg in dep.configs.items():
        if gives_sleep_on_idle([*dep.launch.args, *cfg.args]):
            continue
        declared = cfg.declared_release(dep.launch)
        table = sglang_cli.table_for(sglang_cli.parse_release(declared)) if declared else sglang_cli.newest()
        if table is not None and table.option(SLEEP_ON_IDLE) is not None:
            out.append(SpinningConfig(name, declared or table.name, declared is not None))
    return out
