"""Gates whose servers never served: NOT RUN, with the reason, in the report's table.

A gate test whose config's server never booted (or was unreachable, or was not the server its
config declares) raises before it judges, so no verdict of it exists and it would drop out of
the gate table. Every gate the deployment asks for is named here, so each such gate keeps its
row, saying which server it needed and why that server was not there.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from specgate.deployment import Deployment
from specgate.gate_kinds import planned_gates
from specgate.verdicts.gates import NOT_RUN, UNJUDGED, Verdict


def with_not_run(
    deployment: Deployment,
    verdicts: list[Verdict],
    failed_servers: dict[str, str],
    unbooted: set[str],
    measured: Collection[tuple[str, int]] = (),
    lost_before: Mapping[str, Collection[str]] | None = None,
) -> list[Verdict]:
    """`verdicts`, and a NOT RUN verdict for every gate that needed a failed server and has no
    verdict, or only a NOT COMPARED / VACUOUS one that the loss decided: a gate whose server never
    served did not run, whatever else it could not do. A verdict stands where it was reached
    before the loss (`lost_before`: per gate test, the servers already lost when it began judging,
    session.lost_before), or on figures measured whole before it (`measured`: the (config, context
    tokens) whose speed tests all passed, session.measured_whole)."""
    lost_before = lost_before or {}
    if not failed_servers:
        return verdicts
    by_gate = {v.gate: v for v in verdicts}
    out = list(verdicts)
    for planned in planned_gates(deployment, unbooted):
        gate, config = planned.name, planned.config
        cause = next((_cause_of(s, failed_servers) for s in planned.needs if _cause_of(s, failed_servers)), None)
        had = by_gate.get(gate)
        if cause is None or (had is not None and had.status not in UNJUDGED):
            continue
        if had is not None and not cut_short(planned.needs, planned.context, failed_servers, measured):
            continue  # judged on whole figures, measured before the loss: its verdict stands
        if had is not None and had.test in lost_before and not _servers_of(planned.needs, lost_before[had.test]):
            continue  # judged before its servers were lost: the loss decided nothing of it
        server, why = cause
        verdict = Verdict(gate, config, NOT_RUN, f"the server of {server!r} {_what_became_of(why)}: {why}")
        verdict.figures["concurrency"] = planned.concurrency  # its speed row's (report.build)
        if planned.context:  # a bucket's gate: its row is the bucket's (report.build reads figures' context)
            verdict.figures["context"] = planned.context
        if had is not None:
            verdict.test = had.test  # the test that judged it before: its failure is this row's
        if had is not None:
            out[out.index(had)] = verdict
        else:
            out.append(verdict)
    return out


def cut_short(
    configs: Iterable[str], context: int, failed_servers: dict[str, str], measured: Collection[tuple[str, int]]
) -> bool:
    """Whether a failed server of `configs` left its figures at `context` (prompt tokens, 0: the
    short workload) short: it failed before every speed test of its config there passed. A server
    lost later (a later bucket, another phase) had measured there whole, and what was judged or
    recorded from those figures stands."""
    return any(_cause_of(c, failed_servers) is not None and (c, context) not in measured for c in configs)


def lost_after_boot(failed_servers: dict[str, str], never_booted: Collection[str]) -> dict[str, tuple[str, str]]:
    """The failed servers whose config booted (not in `never_booted`): each died or stopped
    answering during the run, with what became of it ("stopped mid-run", or "never served" where it
    died on its first request) and the first line of why, as its NOT RUN rows and failed tests say it."""
    out = {}
    for name, why in failed_servers.items():
        if name.partition("@")[0] in never_booted:
            continue
        checked, drift, _ = name.partition(":")  # "baseline:drift": the reference's drift re-check (measure.plan)
        if drift and checked in failed_servers:
            continue  # it failed because that server was already lost: one loss, said once
        first = why.splitlines()[0][:400] if why.strip() else ""
        out[name] = (_what_became_of(first), first)
    return out


# How the pool words a server that served and then died or stopped answering (server/pool.py).
_SERVED = re.compile(r"after serving ([0-9]+) request")


def _what_became_of(why: str) -> str:
    """"never served", unless the reason says the server served requests first (it stopped)."""
    served = _SERVED.search(why)
    return "stopped mid-run" if served and int(served.group(1)) > 0 else "never served"


def _servers_of(configs: Iterable[str], servers: Collection[str]) -> list[str]:
    """The servers among `servers` of `configs` (a config's own, or a replicate boot CONFIG@K)."""
    return [s for s in servers if any(s == c or s.startswith(c + "@") for c in configs)]


def _cause_of(config: str, failed_servers: dict[str, str]) -> tuple[str, str] | None:
    """The first failed server of `config` (itself or a replicate boot CONFIG@K), with the first
    line of why."""
    for name, why in failed_servers.items():
        if name == config or name.startswith(config + "@"):
            return name, why.splitlines()[0][:400]
    return None
