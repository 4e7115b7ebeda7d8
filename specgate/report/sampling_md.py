"""report.md's sampling equivalence section and its lines in the time to verdict."""

from __future__ import annotations

from specgate.report.model import Report, SamplingRow, SamplingSettingRow


def _rate(s: SamplingSettingRow) -> str:
    spec, ref = sum(s.violations.values()), sum(s.violations_reference.values())
    return f"{spec} / {ref}" if s.params.get("top_k", -1) > 0 or s.params.get("top_p", 1) < 1 or s.params.get("min_p", 0) > 0 else "—"


def sampling_section(report: Report) -> list[str]:
    if not report.sampling:
        return []
    out = ["\n## Sampling equivalence (temperature > 0: the same distribution as the reference)\n"]
    out.append(
        "Per setting, each side's continuations (prompts × samples × tokens, seeds drawn per request) are scored "
        "on the reference: their log-likelihood per token (rank test; the shift, speculative minus reference, "
        "with its interval), per-position token frequencies (G-test where dense), and tokens that break the "
        "setting as the reference's scoring pass ranks them, the speculative side's count against the reference's "
        "own (one-sided binomial test given their sum: bf16 scoring puts a few healthy tokens past a boundary on "
        "both sides). Stage 1 tests at alpha over the whole test (half to the likelihood tests over settings, the "
        "rest to the position tests, shared with the violation tests where a setting filters; Bonferroni); a "
        "setting it rejects is redrawn on both sides under fresh seeds and fails only if that confirmation rejects "
        "on the same statistic too, at confirm_alpha: a healthy config fails at most alpha × confirm_alpha of runs. The A/A compares the "
        "reference with itself under other seeds at stage 1's thresholds, and its spread gives the smallest shift "
        "stage 1 detects with 80% power."
    )
    for row in report.sampling:
        out.extend(_row(row))
    return out


def _row(row: SamplingRow) -> list[str]:
    if row.not_checked:
        return [f"\n### {row.config}: **{row.status}**\n", f"{row.not_checked}."]  # NOT CHECKED or INTERRUPTED
    out = [
        f"\n### {row.config} against {row.reference}: **{row.status}**\n",
        f"{_false_alarm_rate(row)}. Stage 1: alpha {row.alpha:g} over {row.tests} tests: likelihood "
        f"p < {row.likelihood_threshold:.2g}, a position p < {row.position_threshold:.2g}"
        + (f", violations p < {row.violation_threshold:.2g}" if row.violation_threshold is not None else "")
        + ".\n",
        "| setting | verdict | compared | log-lik./token ref → spec | shift [interval] | z (p) | top-1 share ref / spec "
        "| violations spec / ref | positions rejected | A/A | detectable shift | time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in row.settings:
        ll = s.likelihood
        aa = f"{'pass' if s.aa_passed else '**flagged**'} ({ll_fmt(s.aa_shift)}, p {s.aa_p:.2g})"
        out.append(
            f"| {s.setting} ({s.described}) | {s.status} | {s.prompts} × {s.samples} × {s.tokens} | "
            f"{ll.reference:.3f} → {ll.speculative:.3f} | {ll_fmt(ll.shift)} [{ll_fmt(ll.low)}, {ll_fmt(ll.high)}] | "
            f"{ll.z:.2f} ({ll.p:.2g}) | {100 * s.top1_reference:.0f}% / {100 * s.top1_speculative:.0f}% | "
            f"{_rate(s)} of {s.checked_tokens} | {s.positions_rejected} of {s.positions_tested} | {aa} | "
            f"{s.detectable_shift:.3f} nats{_detectable_breaks(s)} | "
            f"{s.seconds:.1f} s (+ reference {s.reference_seconds:.1f} s) |"
        )
    for s in row.settings:
        if s.confirmation is not None:
            c = s.confirmation
            out.append(
                f"\n{s.setting}: stage 1 rejected (log-likelihood p {s.likelihood.p:.2g}, {s.positions_rejected} of "
                f"{s.positions_tested} positions"
                + (f", violations p {s.violation_p:.2g}" if s.violation_p is not None else "")
                + f"); confirmation on fresh draws, {c.seconds:.1f} s: shift "
                f"{ll_fmt(c.likelihood.shift)} [{ll_fmt(c.likelihood.low)}, {ll_fmt(c.likelihood.high)}], p "
                f"{c.likelihood.p:.2g} (bar {c.likelihood_threshold:.2g}), {c.positions_rejected} of {c.positions_tested} "
                f"positions below {c.position_threshold:.2g}"
                + (
                    f", violations {sum(c.violations.values())} / {sum(c.violations_reference.values())} (p {c.violation_p:.2g})"
                    if c.violation_p is not None
                    else ""
                )
                + f": **{'confirmed, FAIL' if c.rejected else 'not confirmed, PASS'}**."
            )
    for s in row.settings:
        ref_breaks = sum(s.violations_reference.values())
        if ref_breaks and s.violation_p is not None and (row.violation_threshold is None or s.violation_p >= row.violation_threshold):
            out.append(
                f"\n{s.setting}: {ref_breaks} of the reference's own tokens and {sum(s.violations.values())} speculative "
                f"ones fall outside the setting as the reference's scoring pass ranks them (p {s.violation_p:.2g}): "
                "within chance of each other, not a failure: bf16 scoring against the sampler's numbers at the boundary "
                "(or the reference's own sampler ignoring the filter, which this comparison cannot see)."
            )
    for s in row.settings:
        # A passing setting broken more often on the speculative side than the reference's none.
        if s.status == "PASS" and not sum(s.violations_reference.values()) and s.within_chance:
            out.append(f"\n{s.setting}: {s.within_chance}.")
    for s in row.settings:
        if s.status != "FAIL":
            continue
        seeded = (
            f"seed {s.seed}"
            if s.seed is not None
            else "no seed (`sampling.seed_param = \"\"`: the server drew its own, so the curl below draws anew)"
        )
        out.append(f"\n**{s.setting} ({s.described}) FAILED** on prompt `{s.prompt}`, {seeded}:\n")
        out.extend(f"- {e}" for e in s.evidence)
        if s.within_chance:
            out.append(f"- {s.within_chance}")
        if s.reproducer:
            out.append(f"\n```\n{s.reproducer}\n```")
    if any(not s.aa_passed for s in row.settings):
        out.append(
            "\nAn A/A flagged: the reference disagreed with itself under other seeds at these thresholds (by chance "
            "at most alpha of runs): read this config's verdicts at that setting with that in mind."
        )
    return out


def _false_alarm_rate(row: SamplingRow) -> str:
    if row.false_alarm_rate is None or row.confirm_alpha <= 0:
        return f"False-alarm rate: at most {100 * row.alpha:.3g}% of healthy runs (alpha {row.alpha:g}, no confirmation stage)"
    return (
        f"False-alarm rate: at most {100 * row.false_alarm_rate:.3g}% of healthy runs (alpha {row.alpha:g} × "
        f"confirm_alpha {row.confirm_alpha:g})"
    )


def ll_fmt(x: float) -> str:
    return f"{x:+.3f}"


def sampling_times(report: Report) -> list[str]:
    """The time each setting cost, per config and the reference's shared draws."""
    lines = []
    for row in report.sampling:
        if row.settings:
            each = ", ".join(f"{s.setting} {s.seconds + s.reference_seconds:.1f} s" for s in row.settings)
            lines.append(f"Sampling equivalence, {row.config} (its draws + the reference's): {each}.")
    return lines


def _detectable_breaks(s: SamplingSettingRow) -> str:
    """The violation rate the test fails with 80% power (none for a setting that filters nothing)."""
    if s.detectable_violation_rate >= 1.0:
        return ""
    return f"; violations ≥ {100 * s.detectable_violation_rate:.2f}% (80% power)"
