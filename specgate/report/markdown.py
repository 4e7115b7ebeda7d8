"""The Markdown summary a person reads: terminal, $GITHUB_STEP_SUMMARY, report.md."""

from __future__ import annotations

import math
import re
from collections import Counter

from specgate.deployment import bucket_label
from specgate.equivalence.known import known_defects_for
from specgate.gate_kinds import UNBUCKETED_WHY
from specgate.measure.context import LENGTH_TOLERANCE
from specgate.measure.fidelity import FIDELITY_BOUND
from specgate.report.model import (
    LEFT_OUT,
    TOLERATED_KEPT,
    ContextPrompts,
    EquivalenceRow,
    Interval,
    Lever,
    Report,
    Settings,
    SpeedRow,
)
from specgate.report.sampling_md import sampling_section, sampling_times
from specgate.report.visible import visible
from specgate.verdicts.gates import LEADS, NEXT_STEP, UNAVAILABLE, RunVerdict, Status


def _load(row: SpeedRow, density: ContextPrompts | None = None) -> str:
    """A speed row's concurrency, and its context bucket with the prompt tokens the server counted
    (flagged where they are further from the bucket's target than measure.context allows) and the
    characters per token its prompts were built at (measure.density)."""
    said = _at(row.concurrency, row.context)
    if not row.context:
        return said
    built = f"built at {density.chars_per_token:.2f} chars/token" if density else ""
    if row.prompt_tokens is None:
        return said + f" (prompt tokens not told{', ' + built if built else ''})"
    off = row.prompt_tokens / row.context - 1
    flag = f", OFF TARGET by {off:+.0%}" if abs(off) > LENGTH_TOLERANCE else ""
    return f"{said} ({row.prompt_tokens:,} prompt tokens{', ' + built if built else ''}{flag})"


def _at(concurrency: int, context: int) -> str:
    """A row's load: its concurrency, and its context bucket where it has one ("1, 8K context")."""
    return f"{concurrency}, {bucket_label(context)} context" if context else str(concurrency)


def row_verdict(row: SpeedRow) -> str:
    """A speed row's verdict with every gate it stands for that did not pass, counted by status
    ("PARTIAL (1 NOT RUN of 3 gates)"): a row reads bare PASS only where all of them passed."""
    others = {status: n for status, n in row.gates.items() if status != Status.PASS}
    if not others:
        return str(row.verdict)
    said = ", ".join(f"{n} {status.upper()}" for status, n in others.items())
    total = sum(row.gates.values())
    return f"{row.verdict} ({said} of {total} gate{'' if total == 1 else 's'})"


def _density_line(density: ContextPrompts | None) -> list[str]:
    """How the context buckets' prompts were sized, and why not as measured where they were not."""
    if density is None:
        return []
    if density.fallback:
        return [f"\nThe context buckets' prompts were built at {density.chars_per_token:g} characters per token "
                f"(FALLBACK): {density.fallback}."]  # fmt: skip
    # No colon after "token": "token: NAME" has a credential field's shape, which secrets.redact masks.
    return [
        f"\nThe context buckets' prompts were built at {density.chars_per_token:.2f} characters per token, as "
        f"{density.config}'s server counted {density.prompt_tokens:,} tokens for a calibration prompt of "
        f"{density.chars:,} characters ({density.measured:.3f}), rounded so that one tokenizer gives the same "
        "prompts run after run."
    ]


def _expected_by_set(report: Report, config: str, key: str = "expected_tau_by_set") -> dict[str, float]:
    """Training's expected τ per prompt set for the drafter a config ran (averaged over positions,
    or `walked_tau_by_set`: walked as a server counts), where it applies to what this config
    measured (specgate.measure.drafters.expected_by_set decided, at the run)."""
    identity = (report.drafters or {}).get(config) or {}
    sets = identity.get(key)
    if not isinstance(sets, dict):
        return {}
    out = {}
    for name, value in sets.items():
        try:
            if not isinstance(value, bool) and math.isfinite(float(value)):
                out[str(name)] = float(value)
        except (TypeError, ValueError, OverflowError):
            continue
    return out


def _iv(d: Interval | None, fmt: str = "{:.1f}", n: int | None = None) -> str:
    """"est [low, high]"; where `n` (the requests behind it) is under 2, the estimate alone: one
    request's interval is the point itself, which would read as a figure known exactly (a run
    stopped one request into a context bucket)."""
    if not d:
        return "—"
    if n is not None and n < 2:
        return f"{fmt.format(d.estimate)} (one request: no interval)"
    return f"{fmt.format(d.estimate)} [{fmt.format(d.low)}, {fmt.format(d.high)}]"


def _next_steps(report: Report) -> list[str]:
    """What to do next where absolute gates have no calibration behind them: one sentence, one
    command (a missing baseline is the report's lead reason, model.LEADS)."""
    out = []
    # Only those still undecided: fidelity can turn one into a FAIL of its own.
    uncalibrated = [g for g in report.gates if g.figures.get("uncalibrated") and g.status == Status.INCONCLUSIVE]
    if uncalibrated:
        out.append(
            f"**{len(uncalibrated)} absolute speed gate(s) cannot tell**: this runner has no calibration, so a change "
            "since the stored run cannot be told from its own drift between runs. Measure that drift once: "
            f"`specgate calibrate {report.deployment_file}`"
        )
    return out


def _failing_configs(report: Report) -> set[str]:
    """The configs with a gate that failed or could not tell."""
    return {g.config for g in report.gates if g.status in (Status.FAIL, Status.INCONCLUSIVE)}


def _first_levers(report: Report) -> list[tuple[str, Lever]]:
    """The first lever of each underperforming speculative config, for the first screen: not where
    the config's figures are contradicted by the server's own, nor one that points at a sibling
    config whose own gates failed (the evidence is then the diagnosis's to weigh, not the headline's)."""
    contradicted = {f.config for f in report.fidelity if f.state == "contradicted"}
    failing = _failing_configs(report)
    unproven = failing | {g.config for g in report.gates if g.status == Status.NOT_RUN}  # a sibling that never served proves nothing
    out = []
    for d in report.diagnosis or []:
        if d.underperforms and d.levers and d.config not in contradicted:
            lever = d.levers[0]
            if lever.sibling is not None and (lever.sibling in unproven or lever.sibling in contradicted):
                continue
            out.append((d.config, lever))
    # A config whose own gates failed first: a slow config that no gate holds (prefill mode where
    # only decode mode must win) is advice, not the answer to this run's failure.
    return sorted(out, key=lambda pair: pair[0] not in failing)


def _action(lever: Lever, bold: bool = False) -> str:
    """A lever's action as the report shows it: a flag as code, prose as prose."""
    if lever.action.startswith("-"):
        return f"**`{lever.action}`**" if bold else f"`{lever.action}`"
    return f"**{lever.action}**" if bold else lever.action


def _gain(lever: Lever) -> str:
    return f", {lever.gain:.2f}x as fast" if lever.gain else ""


def _levers_first(report: Report) -> list[str]:
    out = []
    for config, lever in _first_levers(report):
        evidence = f" ({lever.evidence[0]})" if lever.evidence else ""
        out.append(f"- **{config}**: try {_action(lever, bold=True)} ({lever.strength}{_gain(lever)}): {lever.why}{evidence}.")
    return out


def _split_lead(reasons: list[str]) -> tuple[str | None, list[str], list[str]]:
    """(the lead said under the title, the reasons for the verdict, next steps said after them):
    the build puts a next step after the reasons of a run that failed (build._lead_at)."""
    lead = reasons[0] if reasons and reasons[0].startswith(LEADS) else None
    rest = reasons[1:] if lead is not None else list(reasons)
    return lead, [r for r in rest if not r.startswith(NEXT_STEP)], [r for r in rest if r.startswith(NEXT_STEP)]


# The reasons' first line of a run that failed or could not tell: it counts, and names nothing.
_TALLY = re.compile(r"^\d+ test\(s\) failed, \d+ errored; gates: ")


def closing_words(report: Report) -> tuple[str, str | None]:
    """What the CLI's closing line says in brackets, and a next step said on the line above it (or
    None): the lead where one leads; else what failed first (past the tally line, which names
    nothing) with the diagnosed lever of the first slow config, so the one line a user reads
    names what failed and what to change."""
    lead, reasons, later = _split_lead(report.overall_reasons)
    if lead is not None:
        return lead + ("; …" if reasons else ""), None
    if len(reasons) > 1 and _TALLY.match(reasons[0]):
        reasons = reasons[1:]
    words = [reasons[0]] if reasons else []
    if report.overall not in (RunVerdict.PASS, RunVerdict.INTERRUPTED):  # a lever answers no interruption
        failing = _failing_configs(report)
        # Only a config whose speed or accept gate failed: a divergence or a crash is not answered
        # by a speed lever, least of all a sibling's.
        levers = [(c, lever) for c, lever in _first_levers(report) if c in failing]
        words += [f"{config}: try {_action(lever)} ({lever.strength}{_gain(lever)})" for config, lever in levers[:1]]
    more = "; …" if len(reasons) > 1 else ""
    return "; ".join(words) + more, (later[0] if later else None)


def _lead_paragraph(lead: str) -> str:
    head, _, said = lead.partition(": ")
    return f"\n**{head}:** {said}"


def render_markdown(report: Report) -> str:
    out: list[str] = []
    title = f"# specgate — {report.deployment}: **{report.overall}**" + (" (SIMULATOR run)" if report.simulator else "")
    out.append(title)
    lead, reasons, later = _split_lead(report.overall_reasons)
    if lead is not None:
        # The next step of a run that passed or could not compare (no stored baseline), or what a
        # baseline update stored: right under the title.
        out.append(_lead_paragraph(lead))
    if report.simulator:  # before any reason or advice: none of it is about SGLang
        out.append(
            "\n> **SIMULATOR run.** These figures come from specgate's simulated engine, not SGLang; "
            "they prove the gates work, not how fast anything is."
        )
        if faults := report.provenance.get("sim_faults"):
            # A failure below is the fault's, on purpose: read as a real regression, it misleads.
            out.append(f"> **Faults injected** (SPECGATE_SIM_FAULTS): `{faults}`.")
    # Where this run stands among the runner's earlier runs (specgate.history), and which of its
    # figures were kept out of that history (a server lost mid-run).
    ranked = [line for line in report.standing if LEFT_OUT not in line]
    left_out = [line for line in report.standing if LEFT_OUT in line]
    if ranked:
        out.append("\n**In its history:** " + "; ".join(ranked) + ". Their trend: `history.png` here; every series: `specgate history`.")
    if left_out:
        out.append("\n**Not in its history:** " + "; ".join(left_out) + ".")
    # The verdict, then why, then what to change: advice read before the reason it answers misleads
    # (an INTERRUPTED run's levers are no answer to the interruption).
    if report.overall != RunVerdict.PASS and reasons:
        out.append(f"\n**Why {report.overall}:**\n")
        out.extend(f"- {r}" for r in reasons[:15])
        if len(reasons) > 15:
            out.append(f"- … and {len(reasons) - 15} more in report.json")
    steps = _next_steps(report)
    if steps:
        out.append("")
        out.extend(steps)
    levers = _levers_first(report)
    if levers:
        out.append("\n**What to change** (the diagnosis below has the evidence):\n")
        out.extend(levers)
    # A next step that follows the failure: said once the failure and its lever are.
    out.extend(_lead_paragraph(step) for step in later)
    out.extend(_stand_in_banner(report))
    tally = report.tests
    out.append(
        # The gate's tests only: a project's own tests in the same pytest are pytest's to count.
        f"\nGate tests: {tally.passed} passed, {tally.failed} failed, {tally.errors} errors, {tally.skipped} skipped "
        "(a project's own tests in the same pytest run are not counted here)."
    )
    fp = report.fingerprint
    by_url = _by_url(report)
    if fp:
        out.append(
            ("Servers' machine (attached by url: this client's hardware is not theirs): " if by_url else "Machine: ")
            + f"{fp.gpu} ×{fp.gpu_count}, driver {fp.driver}, CUDA {fp.cuda}; "
            f"SGLang {fp.sglang}; model `{fp.model}`."
        )

    plan = report.plan
    if plan:
        how = (
            f"interleaved: {plan.rounds} rounds, each sending the next pinned request to every server in a fresh "
            "random order (drift over minutes hits every config alike)"
            if plan.interleaved
            else "one block per server (servers cannot coexist): the ratios also hold whatever drifted between blocks"
        )
        out.append(f"Measured {how}; {plan.boots} boot(s) per config.")
        out.extend(f"Booted again: {why}." for why in plan.reboots)
        for drift in plan.drift:
            change = (drift.ratio.estimate - 1) * 100
            out.append(
                f"Drift during the run: {drift.config}'s first {drift.requests} requests sent again after the speed "
                f"tests ({drift.where}) decoded at {_iv(drift.ratio, '{:.3f}')} of the first time ({change:+.1f}%"
                + ("; it moved" if drift.moved else "; no move shown") + ")."
                + (
                    f" Rounds {drift.after_round + 1}–{plan.rounds} came after it (later looks of other gates): "
                    "the figure does not cover them."
                    if 0 < drift.after_round < plan.rounds
                    else ""
                )
            )
    if not report.ignore_eos:
        out.append(
            "Speed requests stopped where each answer ended (workload.ignore_eos = false): τ and tok/s are over "
            "answers alone, not over max_new_tokens, and compare only with runs of that mode."
        )
    if report.calibration:
        out.append(f"Between-boot spread from this machine's calibration: `{report.calibration}`.")
    blind = [g for g in report.gates if g.covers_between_boot is False]
    if blind:
        out.append(
            f"**{len(blind)} timing gate(s) judged on intervals that do not hold the noise between boots** "
            "(no calibration for this machine): a PASS there can still be a difference of boots, not of the "
            "change. `specgate calibrate` measures it; "
            + (
                "restarting the servers by hand between runs (they were attached by url: one boot each a run) "
                "shows it over runs."
                if by_url
                else "`launch.boots` shows it in the run."
            )
        )
    out.extend(_boot_failures(report))
    if report.speed or report.unmeasured:
        out.append("\n## Decode speed (median per request, bootstrap interval)\n")
        out.append("| config | conc. | decode tok/s | × reference | accept length | TTFT ms | n | warmup | verdict |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in report.speed:
            warm = f"{r.warmup_requests}" + ("" if r.warmup_settled in (True, None) else " (unsettled)")
            name = f"{r.config} (STORED, not booted)" if r.stored else r.config
            out.append(
                f"| {name} | {_load(r, report.context_prompts)} | {_iv(r.decode_tps, n=r.n)} "
                f"| {_iv(r.ratio_to_reference, '{:.3f}', r.n)} | {_iv(r.accept_length, '{:.2f}', r.n)} "
                f"| {_iv(r.ttft_ms, '{:.1f}', r.n)} | {r.n} | {warm} | {row_verdict(r)} |"
            )
        for u in report.unmeasured:
            # A server attached by url that never answered did not run: no FAIL of the config's.
            verdict = "NOT RUN" if u.error.startswith(UNAVAILABLE) else "FAIL"
            out.append(f"| {u.config} | {_at(u.concurrency, u.context)} | NOT MEASURED | — | — | — | 0 | — | {verdict}: {u.error} |")
        by_set = [(r, r.accept_length_by_set) for r in report.speed if r.accept_length_by_set]
        if by_set:
            expected = {r.config: _expected_by_set(report, r.config) for r, _ in by_set}
            walked = {r.config: _expected_by_set(report, r.config, "walked_tau_by_set") for r, _ in by_set}
            out.append(
                "\nAccept length by prompt set (pooled tokens / verify steps; requests in brackets"
                + (
                    "; expected: training's figure for the same prompts' greedy answers, 2 steps, topk 1"
                    if any(expected.values())
                    else ""
                )
                + (
                    "; walked: the same answers walked cycle by cycle as a server counts τ (a request that "
                    "stops at its answer's end)"
                    if any(walked.values())
                    else ""
                )
                + "):\n"
            )
            for r, sets in by_set:
                parts = ", ".join(
                    f"{name} {f.accept_length:.2f} ({f.requests}"
                    + (f"; expected {expected[r.config][name]:.2f}" if name in expected[r.config] else "")
                    + (f"; walked {walked[r.config][name]:.2f}" if name in walked[r.config] else "")
                    + ")"
                    for name, f in sets.items()
                )
                out.append(f"- {r.config} (concurrency {_load(r, report.context_prompts)}): {parts}")
        out.extend(_density_line(report.context_prompts))
        out.extend(_accept_histograms(report))
        out.extend(_degenerate_lines(report))
        stored = next((r.stored for r in report.speed if r.stored), None)
        if stored:
            out.append(
                f"\nThe reference's row is the stored baseline's (`{stored}`), and every × reference above is over "
                "those stored figures: it also holds whatever differs between that run's boot and this one."
            )

    if report.gates:
        out.append("\n## Gates\n")
        out.append("| gate | verdict | detail |")
        out.append("|---|---|---|")
        for g in report.gates:
            out.append(f"| {g.gate} | {g.status.upper()} | {g.summary} |")
        notes = [(g.gate, n) for g in report.gates for n in g.notes]
        notes += [(g.gate, f"interval covers {g.noise}") for g in report.gates if g.noise]
        if notes:
            out.append("")
            out.extend(f"- *{gate}*: {note}" for gate, note in notes)
        unjudged = [g for g in report.gates if g.status in (Status.NOT_COMPARED, Status.VACUOUS)]
        if unjudged:
            out.append("\n### Not judged (NOT COMPARED or VACUOUS: never a pass)\n")
            out.extend(f"- **{g.gate}** {g.status.upper()}: {g.summary}" for g in unjudged)

    if report.unbucketed_gates:  # said where no gate table is too: a bucket is never believed gated by them
        out.append(
            f"\n**NOT judged in any context bucket** ({UNBUCKETED_WHY}): {', '.join(report.unbucketed_gates)}; "
            "their verdicts are the short workload's alone."
        )
    out.extend(_diagnosis(report))

    if report.equivalence_not_checked:
        out.append(
            "\n## Greedy equivalence: **NOT CHECKED**\n\nThis deployment declares its outputs uncomparable: "
            f"{report.equivalence_not_checked}. Nothing in this report says the speculative outputs are right."
        )
    if report.equivalence:
        out.append(f"\n## Greedy equivalence (tie margin {report.tie_margin:g} nats)\n")
        out.append("| config | cases | requests | exact | near-tie flips | decisive failures | tokens compared |")
        out.append("|---|---|---|---|---|---|---|")
        for e in report.equivalence:
            out.append(
                f"| {e.config} | {e.cases} | {e.requests} | {e.exact_matches} | {e.near_tie_flips} "
                f"| {e.decisive_failures} | {e.tokens_compared} |"
            )
        edges = {e.config: e.edges for e in report.equivalence}
        if any(edges.values()):
            if len({tuple(v) for v in edges.values()}) == 1:
                out.append(f"\nEdge cases on every config (checked unless LEFT OUT or REFUSED): {'; '.join(next(iter(edges.values())))}.")
            else:
                out.append("\nEdge cases (checked unless LEFT OUT or REFUSED):\n")
                out.extend(f"- {config}: {'; '.join(names) or 'none'}" for config, names in edges.items())
        flips = Counter(
            (e.config, f.prompt, f.position, f.baseline_token, f.spec_token, f.margin)
            for e in report.equivalence
            for f in e.flips
        )
        if flips:
            out.append("\nEvery near-tie flip, explained (baseline top-1/top-2 margin below the tie margin):\n")
            for (config, prompt, pos, base, spec, margin), times in list(flips.items())[:30]:
                again = f" (in {times} requests)" if times > 1 else ""
                out.append(
                    f"- {config}: `{prompt}` token {pos}: baseline {base} → speculative {spec}, margin {margin:.4f}{again}"
                )
            if len(flips) > 30:
                out.append(f"- … and {len(flips) - 30} more in report.json")
        m = report.baseline_margins
        if m:
            quantum = f"{m.quantum:.4g}" if m.quantum is not None else "—"
            out.append(
                f"\nBaseline margins: {m.positions} positions, {m.below_tie} below the tie margin; "
                f"smallest non-zero margin (the logprobs' precision step here) {quantum} nats."
            )
            if m.warning:
                out.append(f"\n**Warning:** {m.warning}.")
        tolerated = Counter((e.config, t) for e in report.equivalence for t in e.tolerated)
        if tolerated:
            capped = any(len(e.tolerated) >= TOLERATED_KEPT for e in report.equivalence)
            out.append(
                f"\n{'At least ' if capped else ''}{tolerated.total()} answer(s) differ in a way the deployment "
                "declares known (the config's `tolerate`); counted as declared known differences, not failures:\n"
            )
            for (config, line), times in list(tolerated.items())[:10]:
                out.append(f"- {config}: {line}" + (f" (in {times} requests)" if times > 1 else ""))
            if len(tolerated) > 10:
                out.append(f"- … and {len(tolerated) - 10} more in report.json")
        for e in report.equivalence:
            for t in e.unused_tolerances:
                out.append(
                    f"\n**{e.config}: the declared tolerance `{t}` matched nothing** in {e.requests} answers "
                    f"(SGLang {e.server_version or '?'}): the difference it covered did not occur here; "
                    "if the defect is fixed in this release, remove the declaration."
                )
            for known in e.known_defects:
                out.append(f"\n*{e.config}*: {_answers_of_the_shapes(e, known)} {known}.")
        for e in report.equivalence:
            if e.not_checked:
                out.append(
                    f"\n**{e.config}: {len(e.not_checked)} case(s) NOT CHECKED**: the stored reference has no "
                    "answer for them (cases that failed since the baseline was recorded; a baseline update stores "
                    "them): " + "; ".join(f"`{label}`" for label in e.not_checked[:5])
                )
        for e in report.equivalence:
            details = e.failure_details
            if not e.failures:
                continue
            out.append(f"\n### {e.config}: {len(e.failures)} decisive failure(s)\n")
            for d in details[:2]:
                out.append("```\n" + d + "\n```")
            rest = len(e.failures) - min(2, len(details))
            if rest > 0:
                out.append(f"… and {rest} more (first lines):\n")
                out.extend(f"- {f}" for f in e.failures[min(2, len(details)) : min(2, len(details)) + 8])
            out.extend(_divergences_told(e))
        kept = sum(len(e.kept) for e in report.equivalence)
        if kept:
            out.append(
                f"\nreport.json keeps {kept} of these answers with their baseline (failing, excused and near-tie, "
                "identical ones once): `specgate rejudge report.json` judges them again with a later check or "
                "another tie margin, no server needed."
            )
    if report.baseline_problems:
        out.append("\n**The plain reference itself broke an invariant:**\n")
        out.extend(f"- {p}" for p in report.baseline_problems[:10])
    out.extend(sampling_section(report))

    settings = report.server_settings
    if settings:
        out.append("\n## What ran (as each server reports itself)\n")
        names = list(settings)
        out.append("| setting | " + " | ".join(names) + " |")
        out.append("|---|" + "---|" * len(names))
        for setting in sorted({k for s in settings.values() for k in s}):
            out.append(f"| {setting} | " + " | ".join(str(settings[n].get(setting, "—")) for n in names) + " |")

    if report.drafters:
        from specgate.measure.drafters import describe

        out.append("\n## Drafters (the weights each speculative config ran, checksummed at this run)\n")
        out.extend(f"- {config}: {describe(identity)}" for config, identity in report.drafters.items())

    out.extend(_calibration(report))
    out.extend(_fidelity(report))

    out.append("\n## Time to verdict\n")
    boots = ", ".join(
        f"{b.config} {b.seconds:.1f} s{'' if b.ok else ' (FAILED)'}{' (' + b.note + ')' if b.note else ''}"
        for b in report.boots
    )
    out.append(f"Boots: {boots or 'none'}.")
    if report.reaped:
        out.append("Stopped at the start, left by killed earlier runs:")
        out.extend(f"- {killed}" for killed in report.reaped)
    stand_in = report.reference_from_stored
    if stand_in:
        then = stand_in.stored_boot_seconds
        took = f"; it booted in {then:.1f} s when the baseline was recorded" if then is not None else ""
        out.append(
            f"Boots saved: {stand_in.reference} ×{stand_in.boots_saved} (not booted: reference from the stored "
            f"baseline{took})."
        )
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_seconds.items())
    out.append(f"Phases: {phases or 'none'}.")
    for row in report.equivalence:
        if row.seconds_by_feature:
            spent = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(row.seconds_by_feature.items(), key=lambda kv: -kv[1]))
            out.append(f"Greedy equivalence, {row.config}, by request feature (a case with two counts in both): {spent}.")
    out.extend(sampling_times(report))
    p = report.provenance
    host = f"client host {p['host']} (the servers were attached by url)" if by_url else f"host {p['host']}"
    # A commit that does not hold the deployment's files as they ran is said with those files.
    dirty = f" (not in it as they ran: {', '.join(p['dirty_inputs'])})" if p.get("dirty_inputs") else ""
    out.append(f"\n<sub>{p['date']} · commit {p['commit']}{dirty} · {host} · `{p['command']}`</sub>")
    return visible("\n".join(out) + "\n")  # server text (answers, errors, settings) shown as what it is


def _by_url(report: Report) -> bool:
    """The servers were attached by url (provenance says so): they are one boot each and ran on a
    machine whose hardware this client does not know."""
    return "servers" in report.provenance


def _stand_in_banner(report: Report) -> list[str]:
    """Said at the top, before any figure: the reference was not booted, where its figures and
    answers come from, and which noise the intervals against it hold."""
    s = report.reference_from_stored
    if not s:
        return []
    if s.problem:
        return [
            f"\n> **REFERENCE NOT BOOTED** (`launch.reference_from = \"stored\"`), and the stored baseline could "
            f"NOT stand in for `{s.reference}`: {s.problem}. Nothing was compared with the reference."
        ]
    golden = (
        f"its golden answers for {s.golden_cases} fixed cases"
        if s.golden_cases
        else "no golden answers (equivalence could not be checked against it)"
    )
    out = [
        f"\n> **REFERENCE NOT BOOTED** (`launch.reference_from = \"stored\"`). `{s.reference}`'s figures and "
        f"{golden} come from the stored baseline `{s.baseline_file}` (commit {s.commit}, recorded "
        f"{s.recorded} on {s.host}), not from this run. The fingerprint was matched through the booted "
        f"`{s.fingerprint_from}` (same install), and the reference's launch digest {s.args_digest} through "
        "the deployment. Not seen: how the reference drifted between that run and now; every speed ratio "
        "against it crosses boots."
    ]
    if s.note:
        out.append(f">\n> **{s.note}.**")
    if s.noise:
        out.append(">\n> Which noise each interval against it holds:\n>")
        out.extend(f"> - *{gate}*: {noise}" for gate, noise in s.noise.items())
    return out


def _settings_line(st: Settings) -> str:
    def v(key: str) -> str:
        value = getattr(st, key)
        return "?" if value is None else str(value)

    graphs = (
        "CUDA graphs OFF"
        if st.cuda_graph_disabled
        else f"CUDA graphs on (up to batch {v('cuda_graph_max_bs')})"
        if st.cuda_graph_disabled is False
        else "CUDA graphs ?"
    )
    overlap_disabled = st.overlap_disabled
    overlap = (
        "overlap scheduler off" if overlap_disabled is True
        else "overlap scheduler on" if overlap_disabled is False
        else "overlap ?"
    )
    return (
        f"{v('algorithm')}, {v('num_steps')} steps, topk {v('topk')}, {v('draft_tokens')} draft tokens; "
        f"attention mode {v('attention_mode')} (prefill {v('prefill_backend')}, decode {v('decode_backend')}); "
        f"{graphs}; {overlap}; tp {v('tp_size')}"
    )


def _diagnosis(report: Report) -> list[str]:
    """The cycle model and the levers, per speculative config (specgate.diagnosis)."""
    found = report.diagnosis
    if not found:
        return []
    out = [
        "\n## Diagnosis: where a speculative cycle\u2019s time goes\n",
        "A cycle drafts, then verifies in one target pass, and yields τ tokens. With t_d the reference\u2019s time "
        "per token and t_c the time per cycle, speedup = τ·t_d/t_c; a cycle costs C = t_c/t_d plain decode steps, "
        "and speculation wins exactly when C < τ. This decomposes the paired speedup (t_c comes from the same "
        "timings, so τ·t_d/t_c matches it up to τ varying across prompts): it says whether drafts are rejected "
        "(τ) or the cycle is dear (C). The Fidelity section checks the timings against the server's own.\n",
        "| config | conc. | τ | t_d ms | t_c ms | C (plain steps) | τ·t_d/t_c | measured (paired) | efficiency |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in found:
        c = d.cycle
        out.append(
            f"| {d.config} | {d.concurrency} | {_iv(c.tau, '{:.2f}')} | {_iv(c.t_d_ms, '{:.2f}')} "
            f"| {_iv(c.t_c_ms, '{:.2f}')} | {c.cycle_cost:.2f} | {c.predicted_speedup:.3f} "
            f"| {_iv(c.measured_speedup, '{:.3f}')} | {c.efficiency:.0%} |"
        )
    for d in found:
        out.append(f"\n### {d.config} (concurrency {d.concurrency})\n")
        out.append(f"Runs as (from the server itself): {_settings_line(d.settings)}.")
        if not d.underperforms:
            out.append(f"\n**Healthy**: {d.cycle.efficiency:.0%} of its accept length becomes speed; no lever looked for.")
        else:
            out.append("\n**Underperforms**: " + "; ".join(d.underperforms) + ".")
            if d.levers:
                out.append("\nLevers, most supported first:\n")
                for i, lever in enumerate(d.levers, 1):
                    gain = f": {lever.gain:.2f}x as fast" if lever.gain else ""
                    out.append(f"{i}. {_action(lever, bold=True)} ({lever.strength}{gain}): {lever.why}.")
                    out.extend(f"   - {e}" for e in lever.evidence)
            else:
                out.append(
                    "\nNo lever is supported by this run\u2019s settings, log or counters. Measure the candidates "
                    "side by side: `specgate sweep` with this deployment."
                )
        out.extend(f"\n*Note*: {n}." for n in d.notes)
    return out


def _calibration(report: Report) -> list[str]:
    """What a tolerance, a tie margin or a warmup length has to be chosen from."""
    out: list[str] = []
    rows = report.speed
    if rows:
        out.append("\n## Calibration\n")
        out.append("| config | conc. | warmup requests | first cold → last warmup tok/s | per-request spread (CV) |")
        out.append("|---|---|---|---|---|")
        for r in rows:
            cold = (
                f"{r.warmup_first_tps:.1f} → {r.warmup_last_tps:.1f}"
                if r.warmup_first_tps is not None and r.warmup_last_tps is not None
                else "—"
            )
            cv = r.cv if r.cv is not None else 0  # absent from reports older than the field
            spread = "— (one request)" if r.n < 2 else f"{cv:.1%}"  # one request has no spread, not a 0% one
            out.append(f"| {r.config} | {_load(r)} | {r.warmup_requests} | {cold} | {spread} |")
    margins = Counter(m for e in report.equivalence for m in e.divergence_margins)
    if margins:
        tie = report.tie_margin
        seen = ", ".join(f"{m:g}: {n}" for m, n in sorted(margins.items()))
        above = sum(n for m, n in margins.items() if m >= tie)
        out.append(
            f"\nBaseline margins (nats) where a speculative output parted from the baseline, with counts: {seen}. "
            f"{above} at or above the tie margin {tie:g}."
        )
    gaps = Counter(round(f.spec_gap, 4) for e in report.equivalence for f in e.flips if f.spec_gap is not None)
    for e in report.equivalence:
        for d in e.divergences:
            if d.spec_gap is not None:
                gaps[round(d.spec_gap, 4)] += d.requests
    unlisted = sum(d.requests for e in report.equivalence for d in e.divergences if d.spec_rank is None)
    capped = any(e.distinct_divergences > len(e.divergences) for e in report.equivalence)
    if gaps or unlisted:
        # What a tie margin must cover: how far below the baseline's own token the speculative server's
        # token was, not only how close the baseline's top two were.
        seen = ", ".join(f"{g:g}: {n}" for g, n in sorted(gaps.items()))
        out.append(
            "\nHow far below the baseline's token the speculative token was (nats) where an output parted, with "
            f"counts: {seen or 'none listed'}"
            + (f"; {unlisted} not among the baseline's listed tokens" if unlisted else "")
            + (" (decisive partings: the distinct ones report.json keeps)" if capped else "")
            + f". The tie margin {report.tie_margin:g} excuses only those below it."
        )
    return out


def _boot_failures(report: Report) -> list[str]:
    """Each failed boot's cause and its server log's last lines: why a config never served, read
    in the report rather than only in the test error."""
    failed = [b for b in report.boots if not b.ok and (b.cause or b.log_tail)]
    if not failed:
        return []
    out = ["\n## Boot failures\n"]
    for b in failed:
        again = f" ({b.note})" if b.note else ""
        out.append(f"**{b.config}** after {b.seconds:.1f} s{again}: {b.cause or 'no cause recorded'}")
        if b.log_tail:
            out.append(f"\nThe last {len(b.log_tail)} lines of its log (`logs/{b.config}.log`):\n")
            out.append(_fenced("\n".join(b.log_tail)))
        out.append("")
    return out


def _fenced(text: str) -> str:
    """`text` as a code block whatever backtick fences it holds (a server's log lines)."""
    fence = "`" * max(3, max(map(len, re.findall("`+", text)), default=0) + 1)
    return f"{fence}text\n{text}\n{fence}"


def _code(text: str) -> str:
    """`text` as an inline code span whatever backticks it holds (a server's token text, a prompt label)."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _divergences_told(e: EquivalenceRow) -> list[str]:
    """Each distinct decisive parting at a token: where the speculative token stood in the
    baseline's ranking, how every answer that reached the same context chose there, and what the
    speculative server said asked again."""
    if not e.divergences:
        return []
    out = ["\nWhere each decisive parting stood in the baseline's ranking:\n"]
    for d in e.divergences:
        if d.spec_rank is None:
            standing = "not among the baseline's listed tokens"
        elif d.spec_rank == 1:
            standing = "the baseline's top choice"
        else:
            standing = f"the baseline's choice {d.spec_rank}, {d.spec_gap:.4g} below the baseline's token"
        again = f" (in {d.requests} requests)" if d.requests > 1 else ""
        line = (
            f"- {_code(d.prompt)} token {d.position}{again}: baseline {d.baseline_token}, speculative {d.spec_token}: "
            f"{standing}; the baseline's ranking there: {_code(d.baseline_choices)}"
        )
        if d.met_elsewhere:
            line += "; every answer that reached this context chose: " + "; ".join(d.met_elsewhere)
        if d.second_opinion:
            line += f"; second opinion: {_code(d.second_opinion)}"
        out.append(line)
    if e.distinct_divergences > len(e.divergences):
        out.append(f"- … the first {len(e.divergences)} of {e.distinct_divergences} distinct partings (report.json keeps these)")
    return out


def _fidelity(report: Report) -> list[str]:
    rows = report.fidelity
    if not rows:
        return []
    out = [
        "\n## Fidelity: the suite's figures against the server's own\n",
        "| config | suite decode tok/s | server meta_info decode (gap) | server log gen throughput (clean windows, gap) "
        "| client overhead per request | server e2e vs client e2e | suite's figure |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    # The gates that failed because the server contradicted a config's figure (judge._held_to_fidelity):
    # named here too, so this section and the gate rows say the same.
    failed_on: dict[str, list[str]] = {}
    for g in report.gates:
        held = g.figures.get("fidelity") if isinstance(g.figures, dict) else None
        for config, found in (held or {}).items():
            if isinstance(found, dict) and found.get("state") == "contradicted":
                failed_on.setdefault(str(config), []).append(g.gate)
    for f in rows:
        meta = f"{f.meta_decode_tps:.1f} ({f.meta_gap:+.1%})" if f.meta_decode_tps else "—"
        if f.log_decode_tps:
            log = f"{f.log_decode_tps:.1f} ({f.log_lines}, {f.log_gap:+.1%})"
        else:
            log = "—"
            if f.log_note:
                notes.append(f"- {f.config}: log not compared: {f.log_note}")
        overhead = f"{f.client_overhead_ms:.1f} ms" if f.client_overhead_ms is not None else "—"
        e2e = f"{f.e2e_gap:+.1%}" if f.e2e_gap is not None else "—"
        state = {"agrees": "agrees", "contradicted": "**CONTRADICTED**"}.get(f.state, "UNCHECKED")
        out.append(f"| {f.config} | {f.suite_decode_tps:.1f} | {meta} | {log} | {overhead} | {e2e} | {state} |")
        if f.state == "contradicted" or f.config in failed_on:
            gates = failed_on.get(f.config)
            notes.append(
                f"- **{f.config}: the server's own figure contradicts the suite's** ({f.check_note or 'see the gates'}; "
                f"bound {FIDELITY_BOUND:g}x either way): "
                + (f"FAILED on it: {', '.join(gates)}" if gates else "no speed gate rested on it")
                + ". A buffering proxy or a client-side timing fault is the likely cause."
            )
        elif f.state == "unchecked":
            notes.append(f"- {f.config}: the suite's decode tok/s is UNCHECKED: {f.check_note or 'not checked by this report'}")
    out.extend(["", *notes] if notes else [])
    out.append(
        "\nThe suite times decoding at the client, from the first streamed chunk to the last. meta_info's "
        "decode_throughput (SGLang with --enable-metrics) is the server's own per-request figure, rescaled to the "
        "same tokens; the log's is the scheduler's over its logging windows, leaving out windows in which a "
        "request began. Client overhead: the client's request-to-last-byte time minus meta_info.e2e_latency."
    )
    return out


def _answers_of_the_shapes(e: EquivalenceRow, known: str) -> str:
    """Which of a config's answers a known defect's line is about: the shapes that defect has, not
    every shape the config's answers took (a stop-list-order answer is not PR #23802's). A line
    of an older report that today's table words otherwise names the shapes as one of them."""
    own = [s for s in e.shapes if any(d.explain(e.server_version) == known for d in known_defects_for(s))]
    if own:
        return f"its {', '.join(own)} answers"
    return f"answers of one of its shapes ({', '.join(e.shapes)})"


def _degenerate_lines(report: Report) -> list[str]:
    """Rows whose measured answers loop: their speed and accept length are no evidence."""
    from specgate.measure.speed import LOOP_FLOOR, LOOP_NGRAM

    return [
        f"\n**UNTRUSTED: {r.config} (concurrency {_load(r)})**: {r.degenerate} of {r.n} measured answers loop "
        f"(distinct {LOOP_NGRAM}-grams of their tokens under {LOOP_FLOOR:.0%}): its speed and accept length are "
        "computed partly from degenerate output, which a drafter predicts well."
        for r in report.speed
        if r.degenerate
    ]


def _accept_histograms(report: Report) -> list[str]:
    """Each speculative config's verify cycles by drafts accepted, from the server's own per-request
    counters (SGLang 0.5.19 on reports them in meta_info; the simulator too)."""
    rows = [r for r in report.speed if r.accept_histogram and sum(r.accept_histogram)]
    if not rows:
        return []
    out = ["\nVerify cycles by drafts accepted (the server's own counters, pooled over the measured requests):\n"]
    for r in rows:
        hist = r.accept_histogram or []
        cycles = sum(hist)
        shares = " · ".join(f"{k}: {n / cycles:.0%}" for k, n in enumerate(hist))
        rate = f"; {r.draft_accept_rate:.0%} of proposed drafts accepted" if r.draft_accept_rate is not None else ""
        cycle = f"; a verify cycle takes {_iv(r.cycle_ms, '{:.2f}')} ms" if r.cycle_ms is not None else ""
        out.append(f"- {r.config} (concurrency {_load(r, report.context_prompts)}): {shares} of {cycles} cycles{rate}{cycle}")
    return out
