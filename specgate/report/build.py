"""Gather one run's measurements and verdicts into a single document, report.json.

The Markdown summary and the chart are both rendered from this document (a
specgate.report.model.Report), so what a human reads and what a machine reads cannot disagree.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from specgate.deployment import Deployment, bucket_label, bucket_of_test, bucket_view
from specgate.diagnosis.signals import pooled_histogram
from specgate.equivalence.check import EquivalenceStats, TokenDivergence
from specgate.equivalence.known import known_defects_for
from specgate.equivalence.partings import Parting, met_elsewhere
from specgate.gate_kinds import unbucketed_gates
from specgate.measure.speed import ConfigSpeed, Measurements
from specgate.measure.stats import IntervalFigure, median_interval
from specgate.measure.summary import accept_by_set, summarise_speed
from specgate.report.model import DIVERGENCES_KEPT, SCHEMA_VERSION, TOLERATED_KEPT, Report
from specgate.server.pool import BootRecord, unusable
from specgate.server_info import simulated
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.gates import NEXT_STEP, UNAVAILABLE, RunVerdict, Verdict, gate_tally, speed_row_of, tally_verdict
from specgate.verdicts.not_run import lost_after_boot, with_not_run
from specgate.verdicts.outcome import FailedTest, RunFacts, RunOutcome, Shortfall, TestTally, decide

# The failed tests that no gate verdict tells, said among the reasons (report.json's
# `failed_tests` holds them all): the first lines of "Why" stay readable.
FAILED_TESTS_SAID = 10
# Where a line that stands for many NOT RUN gates and failed tests sends the reader for each one.
# report.md lists no failed tests: those such a line stands for failed with the cause it says, so
# a list would repeat it per test; report.json keeps each (its test id, for a rerun, and cause).
WHERE_EACH_IS = "report.md's gate table lists each gate, report.json's failed_tests each test"


def _speed_rows(
    deployment: Deployment,
    meter: Measurements,
    verdicts: list[Verdict],
    stored_from: str | None = None,
    context: int = 0,
) -> list[dict]:
    """One row per measured config and concurrency; `stored_from` names the baseline file whose
    figures stand in for the unbooted reference (its rows are marked, and every × reference is over them).
    `context`: the rows of that context bucket (its meter; measure.context), judged by its gates."""
    conf = deployment.gates.confidence
    rows = []
    order = list(deployment.configs)
    for (config, concurrency), record in sorted(
        meter.results.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0]))
    ):
        if not record.samples:
            continue
        summary = summarise_speed(record, meter.results.get((deployment.reference_of(config), concurrency)), conf)
        warm = record.warmups[-1] if record.warmups else None
        # Every gate the row stands for (its config's at its concurrency), whatever became of it: one that did not run or compare
        # keeps the row from reading PASS (gates.tally_verdict), and the cell says how many.
        tally = gate_tally(v for v in verdicts if speed_row_of(v) == (config, concurrency, context))
        rows.append(
            {
                "config": config,
                "concurrency": concurrency,
                "speculative": record.speculative,
                "n": len(record.samples),
                "decode_tps": summary.decode_tps_median.as_dict(),
                "ratio_to_reference": summary.ratio_to_reference.as_dict() if summary.ratio_to_reference else None,
                "accept_length": summary.accept_length.as_dict() if summary.accept_length else None,
                "accept_length_by_set": accept_by_set(record, meter.label) if summary.accept_length else None,
                "ttft_ms": summary.ttft_s.scaled(1000).as_dict(),
                "warmup_requests": warm.requests if warm else 0,
                "warmup_settled": warm.settled if warm else None,
                # Calibration: how far the first cold figure was from the settled ones, and the
                # spread of the measured requests (what a tolerance has to live with).
                "warmup_first_tps": round(warm.decode_tps_per_request[0], 2) if warm and warm.decode_tps_per_request else None,
                "warmup_last_tps": round(warm.decode_tps_per_request[-1], 2) if warm and warm.decode_tps_per_request else None,
                "cv": round(_cv(record.decode_tps_per_request), 4),
                "boots": len(record.by_boot()),
                "verdict": tally_verdict(tally) or "—",
                "gates": tally,
                "stored": stored_from if stored_from and config == deployment.reference else None,
                "accept_histogram": list(hist) if (hist := pooled_histogram(record)) else None,
                "draft_accept_rate": _draft_accept_rate(record),
                "cycle_ms": _cycle_ms(record, conf),
                "degenerate": record.degenerate(),
                "context": context,
                "prompt_tokens": _median_int([s.prompt_tokens for s in record.samples if s.prompt_tokens]),
            }
        )
    return rows


def _median_int(values: list[int]) -> int | None:
    return int(statistics.median(values)) if values else None


def _cycle_ms(record: ConfigSpeed, confidence: float) -> IntervalFigure | None:
    """Median time per verify cycle, ms: a request's accept length over its decode speed."""
    cycles = record.cycle_ms_per_request
    return median_interval(cycles, confidence).as_dict() if len(cycles) >= 2 else None


def _draft_accept_rate(record: ConfigSpeed) -> float | None:
    """Accepted drafts over proposed ones, pooled over the requests that count both (None where any does not)."""
    counted = [s for s in record.samples if s.verify_ct]
    if not counted or any(s.accepted_drafts is None or not s.proposed_drafts for s in counted):
        return None
    return round(sum(s.accepted_drafts or 0 for s in counted) / sum(s.proposed_drafts or 0 for s in counted), 4)


def _unmeasured_rows(
    deployment: Deployment,
    meter: Measurements,
    failed_servers: dict[str, str],
    unavailable: dict[str, str],
    buckets: Mapping[int, Measurements] | None = None,
) -> list[dict]:
    """A config whose server never booted (or died before a figure) keeps its row, with the cause;
    one attached by url that never answered says so first (UNAVAILABLE: it did not run). Each
    context bucket too (`buckets`: its meter, at the bucket's concurrency: deployment.bucket_view): a server lost before a
    bucket's figures keeps that bucket's row, so no bucket's row of the config vanishes."""
    loads: list[tuple[int, Measurements | None, int]] = [(0, meter, c) for c in deployment.workload.concurrency]
    loads += [
        (tokens, (buckets or {}).get(tokens), concurrency)
        for tokens in deployment.workload.context_buckets
        for concurrency in bucket_view(deployment, tokens).workload.concurrency
    ]
    rows = []
    for context, its_meter, concurrency in loads:
        for config in deployment.configs:
            record = its_meter.results.get((config, concurrency)) if its_meter is not None else None
            if record is not None and record.samples:
                continue
            name, cause = next(
                ((name, why) for name, why in failed_servers.items() if name == config or name.startswith(config + "@")),
                ("", None),
            )
            if cause is not None:
                said = (UNAVAILABLE if name in unavailable else "") + cause.splitlines()[0][:300]
                rows.append({"config": config, "concurrency": concurrency, "context": context, "error": said})
    return rows


def _shortfall(gap: Shortfall, facts: RunFacts) -> str:
    """A phase that ran fewer tests than asked: in an interrupted run, which one the signal stopped
    (its time is in the phase's), and that the rest never started; else the usual causes."""
    said = f"{gap.phase}: {gap.ran} of {gap.expected} test(s) ran"
    if not facts.interrupted:
        return f"{said} (a selection, a skip or a failed boot)"
    stopped = facts.cut_short.get(gap.phase)
    during = f"; the test of {stopped} was running when the signal came (its time so far is in the phase's)" if stopped else ""
    return f"{said}{during}; the rest did not start: the run was interrupted"


def _cause(v: Verdict) -> str:
    """A verdict's summary less the "CONFIG at 32K: " that a context bucket's gate opens with, where
    that gate is one of several sharing the cause: one stored baseline missing reads once, not once
    per bucket. Alone, a gate keeps its summary whole."""
    _, at, label = v.gate.rpartition("@")
    if not at:
        return v.summary
    return re.sub(rf"^\S+ at {re.escape(label)}: ", "", v.summary, count=1)


def _grouped(verdicts: Sequence[Verdict]) -> list[str]:
    """One line per distinct cause: "STATUS ×N (gate, gate, …): cause", in the order first seen."""
    by_cause: dict[tuple[str, str], list[str]] = {}
    for v in verdicts:
        by_cause.setdefault((v.status.upper(), _cause(v)), []).append(v.gate)
    lines = []
    whole = {v.gate: v.summary for v in verdicts}
    for (status, summary), gates in by_cause.items():
        if len(gates) == 1:
            lines.append(f"{gates[0]}: {status} — {whole[gates[0]]}")
        else:
            shown = _first_few(gates)
            lines.append(f"{status} ×{len(gates)} ({shown}): {summary}")
    return lines


def overall_verdict(
    tally: TestTally,
    verdicts: list[Verdict],
    completeness: RunFacts | Mapping[str, Any] | None,
    failed_tests: Sequence[str | FailedTest] | None = None,
) -> tuple[RunVerdict, list[str]]:
    """The run's verdict (verdicts.outcome decides it) and its reasons; `completeness` is the run's
    facts, or their fields by name (an unknown name is refused, never read as absent)."""
    facts = completeness if isinstance(completeness, RunFacts) else RunFacts(**(completeness or {}))
    outcome = decide(tally, verdicts, facts, failed_tests or ())
    return outcome.verdict, reasons_of(outcome)


# The gate tests that judge outputs (greedy and sampling equivalence), by their pytest names.
_OUTPUT_TESTS = ("test_speculative_output_is_greedy_baseline", "test_speculative_sampling_matches_reference")


def reasons_of(
    outcome: RunOutcome, unbooted: Sequence[str] = (), lost: Mapping[str, tuple[str, str]] | None = None
) -> list[str]:
    """Why the run is not PASS, in words: what failed first (gate failures, then failed tests that
    are no gate verdict, such as equivalence), then what cannot tell, then what did not compare,
    repeated causes grouped into one line with their count. `unbooted`: the configs whose
    servers failed to boot (said first, by `boot_failures`): what failed for want of them is one
    line, not a bullet per test and gate, each repeating the boot's cause (and an equivalence test
    among them reading as wrong output). `lost`: the servers that booted and then died or stopped
    answering (not_run.lost_after_boot): each is one line naming the buckets it cost, not a line
    per bucket's test repeating the same death."""
    reasons: list[str] = []
    c, tally = outcome.facts, outcome.tests
    decided, undecided, not_run, unjudged = outcome.failed, outcome.undecided, outcome.not_run, outcome.unjudged
    if c.unavailable and not c.interrupted:
        # The run could not reach a server: said first, since nothing below judged the change.
        reasons += [f"{UNAVAILABLE}config {name!r}: {why.splitlines()[0][:400]}" for name, why in c.unavailable.items()]
    if tally.failed or tally.errors or decided or undecided or not_run:
        reasons.append(
            f"{tally.failed} test(s) failed, {tally.errors} errored; gates: {len(decided)} failed, "
            f"{len(undecided)} cannot tell, {len(unjudged)} not judged"
            + (f", {len(not_run)} not run" if not_run else "")
        )
    if c.interrupted:
        reasons.append(str(c.interrupted))
    tests_after, gates_after = _after_boot_failures(outcome, unbooted)
    if tests_after or gates_after:
        names = sorted({v.gate for v in gates_after})
        shown_names = _first_few(names)
        reasons.append(
            f"did not run, for want of the server(s) above: {len(gates_after)} gate(s)"
            + (f" ({shown_names})" if names else "")
            + f" and {len(tests_after)} test(s) ({WHERE_EACH_IS})"
        )
    deaths, tests_died, gates_died = _mid_run_deaths(outcome, lost or {})
    reasons += deaths
    tests_after += tests_died
    not_run = tuple(v for v in not_run if v not in gates_after and v not in gates_died)
    # Wrong outputs first: they are the graver failure, and they void that config's speed figures.
    shown = [f for f in outcome.failed_tests if f not in tests_after][:FAILED_TESTS_SAID]
    wrong = [f for f in shown if f.test.startswith(_OUTPUT_TESTS)]
    reasons += [f"failed: {f}" for f in wrong]
    reasons += _grouped(decided)
    reasons += _grouped(not_run)
    reasons += [f"failed: {f}" for f in shown if f not in wrong]
    reasons += _grouped(undecided)
    reasons += _grouped(unjudged)
    for gap in outcome.shortfalls:
        reasons.append(_shortfall(gap, c))
    if c.equivalence_declared_off:
        reasons.append("greedy equivalence NOT CHECKED (declared by the deployment)")
    if c.sampling_not_checked:
        reasons.append(
            f"sampling equivalence NOT CHECKED: {c.sampling_not_checked} (waive it with [sampling] enabled = false, "
            "or allow it with --allow-uncompared)"
        )
    if c.stand_in_problem:
        reasons.append(f"the reference was NOT BOOTED and the stored baseline cannot stand in for it: {c.stand_in_problem}")
    for config, n in c.equivalence_not_checked.items():
        reasons.append(f"equivalence: {n} case(s) of {config} NOT CHECKED (no stored answer of the reference)")
    for config, refused in c.equivalence_refused.items():
        reasons.append(f"equivalence: {config} NOT CHECKED on {len(refused)} edge(s) it refused: {refused[0][:240]}")
    if outcome.verdict == RunVerdict.FAIL and c.baseline_not_written:
        # A baseline update that stored nothing did not do what it was run for, whatever passed.
        reasons.insert(0, "the baseline update stored nothing (the first line says why)")
    if outcome.verdict == RunVerdict.PARTIAL and not outcome.gates:
        reasons.append("no gate ran: nothing was compared")
    return reasons


def _after_boot_failures(outcome: RunOutcome, unbooted: Sequence[str]) -> tuple[list[FailedTest], list[Verdict]]:
    """The failed tests and NOT RUN gates that failed only because a server in `unbooted` never
    served: a test refused by the pool's words for it (`unusable`), a gate whose NOT RUN row names it."""
    if not unbooted:
        return [], []
    refusals = [unusable(config) for config in unbooted]
    tests = [f for f in outcome.failed_tests if any(r in f.cause for r in refusals)]
    gates = [
        v for v in outcome.not_run
        if any(v.summary.startswith((f"the server of {c!r} never served", f"the server of '{c}@")) for c in unbooted)
    ]  # fmt: skip
    return tests, gates


# How much of a lost server's reason a failed test's cause must hold to be that server's: a cause
# is cut at 400 characters (plugin._cause) after a prefix of its own ("config 'x' could not be
# measured (x): config 'x' is unusable in this session: "), so the whole reason rarely survives.
_REASON_HEAD = 120


def _caused_by(cause: str, why: str) -> bool:
    """Whether a failed test's `cause` is the lost server's `why`: it holds the reason's head, or
    the head of the request error the reason wraps (a hang's reason, "the server stopped answering
    after serving N request(s) (…): <error>", wraps the error the first test failed with, which
    names the server's own address)."""
    if not why:
        return False
    _, wrapped_at, wrapped = why.partition("): ")
    return why[:_REASON_HEAD] in cause or bool(wrapped_at and wrapped and wrapped[:_REASON_HEAD] in cause)


def _mid_run_deaths(
    outcome: RunOutcome, lost: Mapping[str, tuple[str, str]]
) -> tuple[list[str], list[FailedTest], list[Verdict]]:
    """One line per server that booted and then died or stopped answering, naming the buckets it
    cost (the short workload's and each context bucket's gates and tests that failed for it), with
    the failed tests and NOT RUN gates it stands for: they are not said again one by one."""
    lines: list[str] = []
    tests: list[FailedTest] = []
    gates: list[Verdict] = []
    for server, (became, why) in lost.items():
        said = f"the server of {server!r} {became}"
        its_gates = [v for v in outcome.not_run if v.summary.startswith(said)]
        its_tests = [f for f in outcome.failed_tests if _caused_by(f.cause, why) and f not in tests]
        if not its_gates and not its_tests:
            continue
        contexts = {v.figures.get("context", 0) for v in its_gates} | {bucket_of_test(f.test) for f in its_tests}
        cost = [("the short workload" if c == 0 else bucket_label(c)) for c in sorted(contexts)]
        names = [v.gate for v in its_gates]
        shown = _first_few(names)
        lines.append(
            f"{said}: {why.rstrip('.')}. It cost {_and(cost)}: "
            f"{len(its_gates)} gate(s) NOT RUN" + (f" ({shown})" if names else "")
            + f" and {len(its_tests)} test(s) failed ({WHERE_EACH_IS})"
        )
        tests += its_tests
        gates += its_gates
    return lines, tests, gates


def _first_few(names: Sequence[str]) -> str:
    """The first four names, and how many more: a line that stands for many gates stays one line."""
    return ", ".join(names[:4]) + (f", … {len(names) - 4} more" if len(names) > 4 else "")


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def never_served(boots: Sequence[BootRecord]) -> list[str]:
    """The configs none of whose boots served, in the order they were tried."""
    served = {b.config for b in boots if b.ok}
    return list(dict.fromkeys(b.config for b in boots if not b.ok and b.config not in served))


# A log line that says why a process died (Python's last exception line, a CUDA or NCCL error).
_TELLING = re.compile(r"(Error|Exception|error:|No module named|Killed|out of memory)", re.IGNORECASE)
_PID_URL = re.compile(r"\s*\(pid \d+[^)]*\)")


def boot_failures(boots: Sequence[BootRecord]) -> list[str]:
    """A reason per cause of configs that never served, first among the reasons: every test of such
    a config fails with the same 'exited with code 1', and the cause that answers it (a missing
    module, a refused flag) is in the server's log. Configs that failed alike are said once."""
    served = {b.config for b in boots if b.ok}
    groups: dict[str, tuple[str, list[str]]] = {}
    for b in boots:
        if b.ok or b.config in served:
            continue
        telling = next((line.strip() for line in reversed(b.log_tail) if _TELLING.search(line)), "")
        first = b.cause.strip().splitlines()[0] if b.cause.strip() else "it never served"
        # The same failure on every config: one line, without each server's pid, url and name.
        short = _PID_URL.sub("", first.replace(f"server for config '{b.config}'", "the server").replace(f"'{b.config}' ", ""))[:300]
        key = telling or short
        said, configs = groups.setdefault(key, (short + (f"; its log: {telling[:300]}" if telling else ""), []))
        if b.config not in configs:
            configs.append(b.config)
    return [
        f"did not boot: {', '.join(configs)} — {said} (report.md's Boot failures has each log's last lines)"
        for said, configs in groups.values()
    ]


# Verdicts whose reasons say what broke or failed: a missing stored baseline is no answer to those,
# so its next step is said after them (a PASS or PARTIAL run has nothing more pressing to say).
_NEXT_STEP_AFTER = (RunVerdict.FAIL, RunVerdict.INCONCLUSIVE, RunVerdict.ERROR, RunVerdict.INTERRUPTED)


def _lead_at(lead: str, overall: RunVerdict, reasons: list[str], unavailable: int) -> int:
    """Where the run's lead (model.LEADS) goes among its reasons. What a baseline update stored, or
    did not, leads: that is what it was run for. The next step (no stored baseline) leads a run
    that passed or could not compare, and follows the reasons of one that failed, could not tell,
    broke or was interrupted: report.md's head and the CLI's closing line say the failure first."""
    if not lead.startswith(NEXT_STEP):
        return 0
    if overall == RunVerdict.ERROR:
        return unavailable  # after the servers it could not reach: nothing was judged before them
    return len(reasons) if overall in _NEXT_STEP_AFTER else 0


def _cv(values: list[float]) -> float:
    """Coefficient of variation of one config's per-request figures."""
    return float(np.std(values, ddof=1) / np.mean(values)) if len(values) > 1 and np.mean(values) else 0.0


def _known(deployment: Deployment, config: str, s: EquivalenceStats, server_infos: dict[str, dict]) -> dict:
    """Known upstream defects that this config's failure shapes match (read against the version
    its server reports), and declared tolerances that matched nothing here."""
    version = (server_infos.get(config) or {}).get("version")
    defects = sorted({d.explain(version) for shape in s.shapes for d in known_defects_for(shape)})
    declared = deployment.configs[config].tolerate if config in deployment.configs else ()
    unused = [t for t in declared if s.requests and not s.shapes.get(t)]
    return {"known_defects": defects, "unused_tolerances": unused, "server_version": version}


def _distinct_divergences(s: EquivalenceStats) -> list[list[TokenDivergence]]:
    """The decisive partings at a token, those alike together (Hypothesis replays a failing case
    while shrinking, and a batch parts alike)."""
    grouped: dict[tuple, list[TokenDivergence]] = {}
    for d in s.divergences:
        grouped.setdefault((d.case_label, d.position, d.context, d.spec_token), []).append(d)
    return list(grouped.values())


def _divergences(
    distinct: list[list[TokenDivergence]], answers: list[tuple[str, str, tuple[int, ...]]], partings: list[Parting]
) -> list[dict]:
    """Each distinct decisive parting once, with how many requests parted so; the first
    DIVERGENCES_KEPT of them."""
    out = []
    for same in distinct[:DIVERGENCES_KEPT]:
        d = same[0]
        out.append(
            {
                "prompt": d.case_label,
                "position": d.position,
                "baseline_token": d.baseline_token,
                "spec_token": d.spec_token,
                "requests": len(same),
                "margin": None if d.margin is None else round(d.margin, 5),
                "spec_rank": d.spec_rank,
                "spec_gap": None if d.spec_gap is None else round(d.spec_gap, 5),
                "baseline_choices": d.baseline_choices,
                "met_elsewhere": met_elsewhere(d.prompt_digest, d.prefix, d.baseline_token, answers, partings, d.context),
                "second_opinion": next((x.second_opinion for x in same if x.second_opinion), ""),
            }
        )
    return out


def _equivalence_rows(
    stats: dict[str, EquivalenceStats], deployment: Deployment, server_infos: dict[str, dict]
) -> list[dict]:
    # Every config's answers and partings: a context one config passed or flipped at and another
    # failed at is told so.
    answers = [(config, digest, ids) for config, s in stats.items() for digest, ids in s.answers]
    partings = [p for s in stats.values() for p in s.partings()]
    distinct = {config: _distinct_divergences(s) for config, s in stats.items()}
    return [
        {
            **_known(deployment, config, s, server_infos),
            "shapes": dict(s.shapes),
            "config": config,
            "cases": s.cases,
            "requests": s.requests,
            "exact_matches": s.matches,
            "not_checked": list(s.not_checked),
            "edges": list(s.edges),
            "refused": list(s.refused),
            "seconds_by_feature": dict(s.seconds_by_feature),
            "near_tie_flips": len(s.flips),
            "decisive_failures": len(s.failures),
            "tolerated": s.tolerated[:TOLERATED_KEPT],
            "tokens_compared": s.tokens_compared,
            "flips": [
                {
                    "prompt": f.case_label,
                    "position": f.position,
                    "baseline_token": f.baseline_token,
                    "spec_token": f.spec_token,
                    "margin": round(f.margin, 5),
                    "spec_gap": None if f.spec_gap is None else round(f.spec_gap, 5),
                }
                for f in s.flips
            ],
            "failures": s.failures[:20],
            "failure_details": s.failure_details[:5],
            "divergence_margins": sorted(round(m, 5) for m in s.divergence_margins),
            "divergences": _divergences(distinct[config], answers, partings),
            "distinct_divergences": len(distinct[config]),
            "kept": s.kept,
        }
        for config, s in stats.items()
    ]


def build_report(
    deployment: Deployment,
    meter: Measurements,
    verdicts: list[Verdict],
    equivalence: dict[str, EquivalenceStats],
    boots: list[BootRecord],
    fingerprint: Fingerprint | None,
    provenance: dict,
    tally: TestTally,
    phase_seconds: dict[str, float],
    server_infos: dict[str, dict],
    baseline_problems: list[str],
    margins: dict | None = None,
    fidelity: list[dict] | None = None,
    diagnoses: list[dict] | None = None,
    facts: RunFacts | None = None,
    failed_servers: dict[str, str] | None = None,
    plan: dict | None = None,
    calibration: str | None = None,
    failed_tests: Sequence[FailedTest] | None = None,
    stand_in: dict | None = None,
    interrupted: str | None = None,
    drafters: dict[str, dict] | None = None,
    lead: str | None = None,
    sampling: list[dict] | None = None,
    unavailable: dict[str, str] | None = None,
    reaped: list[str] | None = None,
    buckets: Mapping[int, Measurements] | None = None,
    context_prompts: dict | None = None,
    measured: Collection[tuple[str, int]] = (),
    lost_before: Mapping[str, Collection[str]] | None = None,
) -> Report:
    # Every failed test with its cause, so failures that are no gate verdict (an unreadable file, a
    # dead server) are named in the report too, not only in pytest's traceback.
    # A gate whose server never served keeps its row, NOT RUN, with why (it raised before judging).
    unbooted = {deployment.reference} if stand_in else set()
    verdicts = with_not_run(deployment, verdicts, failed_servers or {}, unbooted, measured, lost_before or {})
    outcome = decide(tally, verdicts, replace(facts or RunFacts(), unavailable=unavailable or {}), failed_tests or ())
    unserved = never_served(boots)
    # Those that booted and were lost during the run; a stand-in reference was never meant to boot.
    booted_then_lost = {n: w for n, w in (failed_servers or {}).items() if n not in (unavailable or {})}
    lost = lost_after_boot(booted_then_lost, [*unserved, *unbooted])
    overall, reasons = outcome.verdict, reasons_of(outcome, unserved, lost)
    at = len(unavailable or {}) if not outcome.facts.interrupted else 0
    reasons[at:at] = boot_failures(boots)
    if lead is not None:
        reasons.insert(_lead_at(lead, overall, reasons, len(unavailable or {})), lead)
    document = {
        "schema_version": SCHEMA_VERSION,
        "deployment": deployment.name,
        "deployment_file": str(deployment.path),
        "description": deployment.description,
        # Labelled from what the servers say too: the simulator reached by a --launch of its command
        # or by url is no less the simulator for a deployment that does not declare it.
        "simulator": deployment.simulator or bool(simulated(server_infos)),
        "overall": overall,
        "overall_reasons": reasons,
        "standing": [],  # said once the run's figures are in its results history (plugin._keep_results)
        "tests": tally.__dict__,
        # A PlanLog always says how far the host drifted and why it rebooted (a hand-made plan may not).
        "plan": {"drift": [], "reboots": [], **plan} if plan else {},
        "calibration": calibration,
        "fingerprint": fingerprint.as_dict() if fingerprint else None,
        # Set where the reference was not booted (launch.reference_from = "stored"): which stored
        # baseline stood in for it, what that saved, and what it could not show.
        "reference_from_stored": stand_in,
        "provenance": provenance,
        "tie_margin": deployment.equivalence.tie_margin,
        "speed": _speed_rows(deployment, meter, verdicts, (stand_in or {}).get("baseline_file"))
        + [
            row
            for tokens, its_meter in sorted((buckets or {}).items())
            for row in _speed_rows(deployment, its_meter, verdicts, None, tokens)
        ],
        "unmeasured": _unmeasured_rows(deployment, meter, failed_servers or {}, unavailable or {}, buckets),
        "gates": [
            {
                "gate": v.gate,
                "config": v.config,
                "status": v.status,
                "summary": v.summary,
                "notes": v.notes,
                "figures": v.figures,
                "noise": v.noise,
                "covers_between_boot": v.covers_between_boot,
            }
            for v in verdicts
        ],
        "equivalence": _equivalence_rows(equivalence, deployment, server_infos),
        "equivalence_not_checked": None if deployment.equivalence.enabled else deployment.equivalence.skip_reason,
        "baseline_problems": baseline_problems,
        "baseline_margins": margins,
        "boots": [
            {"config": b.config, "seconds": round(b.seconds, 2), "ok": b.ok, "note": b.note, "cause": b.cause,
             "log_tail": b.log_tail}
            for b in boots
        ],  # fmt: skip
        "phase_seconds": {k: round(v, 2) for k, v in phase_seconds.items()},
        "fidelity": fidelity or [],
        "diagnosis": diagnoses or [],
        "server_settings": {
            name: {k: info.get(k) for k in SETTINGS_SHOWN if k in info} for name, info in server_infos.items()
        },
        # What ran may all have passed; a run that was interrupted as a whole did not.
        "interrupted": interrupted,
        "ignore_eos": deployment.workload.ignore_eos,
        "drafters": drafters,
        "sampling": sampling or [],
        "reaped": reaped or [],
        "failed_tests": [{"test": f.test, "cause": f.cause} for f in outcome.failed_tests],
        "context_prompts": context_prompts,
        "unbucketed_gates": unbucketed_gates(deployment),
    }
    # Checked as a reader checks it (every field present): a report no reader accepts is never written.
    return Report.model_validate(document, context={"complete": True, "version": SCHEMA_VERSION})


# The server settings worth showing next to a figure: what actually ran, per SGLang itself.
SETTINGS_SHOWN = (
    "version",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_attention_mode",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "disable_cuda_graph",
    "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode",  # SGLang 0.5.14 on: the option's new name
    "disable_overlap_schedule",
    "tp_size",
)
