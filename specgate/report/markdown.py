"""The Markdown summary a person reads: terminal, $GITHUB_STEP_SUMMARY, report.md."""

from __future__ import annotations

from collections import Counter


def _iv(d: dict | None, fmt: str = "{:.1f}") -> str:
    if not d:
        return "—"
    return f"{fmt.format(d['estimate'])} [{fmt.format(d['low'])}, {fmt.format(d['high'])}]"


def render_markdown(report: dict) -> str:
    out: list[str] = []
    title = f"# specgate — {report['deployment']}: **{report['overall']}**"
    out.append(title)
    if report["simulator"]:
        out.append(
            "\n> **SIMULATOR run.** These figures come from specgate's simulated engine, not SGLang; "
            "they prove the gates work, not how fast anything is."
        )
    t = report["tests"]
    out.append(f"\nTests: {t['passed']} passed, {t['failed']} failed, {t['errors']} errors, {t['skipped']} skipped.")
    fp = report.get("fingerprint")
    if fp:
        out.append(
            f"Machine: {fp['gpu']} ×{fp['gpu_count']}, driver {fp['driver']}, CUDA {fp['cuda']}; "
            f"SGLang {fp['sglang']}; model `{fp['model']}`."
        )

    if report["speed"]:
        out.append("\n## Decode speed (median per request, bootstrap interval)\n")
        out.append("| config | conc. | decode tok/s | × reference | accept length | TTFT ms | n | warmup | verdict |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in report["speed"]:
            warm = f"{r['warmup_requests']}" + ("" if r["warmup_settled"] in (True, None) else " (unsettled)")
            out.append(
                f"| {r['config']} | {r['concurrency']} | {_iv(r['decode_tps'])} | {_iv(r['ratio_to_reference'], '{:.3f}')} "
                f"| {_iv(r['accept_length'], '{:.2f}')} | {_iv(r['ttft_ms'], '{:.1f}')} | {r['n']} | {warm} | {r['verdict']} |"
            )

        why = _cycle_lines(report["speed"])
        if why:
            out.append(
                "\nWhere the time goes (from the figures above: a speculative cycle yields τ tokens; its cost in "
                "plain decode steps is τ ÷ speedup):\n"
            )
            out.extend(why)

    if report["gates"]:
        out.append("\n## Gates\n")
        out.append("| gate | verdict | detail |")
        out.append("|---|---|---|")
        for g in report["gates"]:
            out.append(f"| {g['gate']} | {g['status'].upper()} | {g['summary']} |")
        notes = [(g["gate"], n) for g in report["gates"] for n in g["notes"]]
        if notes:
            out.append("")
            out.extend(f"- *{gate}*: {note}" for gate, note in notes)

    if report["equivalence"]:
        out.append(f"\n## Greedy equivalence (tie margin {report['tie_margin']:g} nats)\n")
        out.append("| config | cases | requests | exact | near-tie flips | decisive failures | tokens compared |")
        out.append("|---|---|---|---|---|---|---|")
        for e in report["equivalence"]:
            out.append(
                f"| {e['config']} | {e['cases']} | {e['requests']} | {e['exact_matches']} | {e['near_tie_flips']} "
                f"| {e['decisive_failures']} | {e['tokens_compared']} |"
            )
        flips: dict[tuple, int] = {}
        for e in report["equivalence"]:
            for f in e["flips"]:
                key = (e["config"], f["prompt"], f["position"], f["baseline_token"], f["spec_token"], f["margin"])
                flips[key] = flips.get(key, 0) + 1
        if flips:
            out.append("\nEvery near-tie flip, explained (baseline top-1/top-2 margin below the tie margin):\n")
            for (config, prompt, pos, base, spec, margin), times in list(flips.items())[:30]:
                again = f" (in {times} requests)" if times > 1 else ""
                out.append(
                    f"- {config}: `{prompt}` token {pos}: baseline {base} → speculative {spec}, margin {margin:.4f}{again}"
                )
            if len(flips) > 30:
                out.append(f"- … and {len(flips) - 30} more in report.json")
        m = report.get("baseline_margins")
        if m:
            quantum = f"{m['quantum']:.4g}" if m["quantum"] is not None else "—"
            out.append(
                f"\nBaseline margins: {m['positions']} positions, {m['below_tie']} below the tie margin; "
                f"smallest non-zero margin (the logprobs' precision step here) {quantum} nats."
            )
            if m["warning"]:
                out.append(f"\n**Warning:** {m['warning']}.")
        tolerated = [(e["config"], t) for e in report["equivalence"] for t in e.get("tolerated", [])]
        if tolerated:
            out.append(
                f"\n{len(tolerated)} answer(s) differ in a way the deployment declares known "
                "(the config's `tolerate`); counted as declared known differences, not failures:\n"
            )
            out.extend(f"- {config}: {t}" for config, t in tolerated[:10])
        fails = [(e["config"], f) for e in report["equivalence"] for f in e["failures"]]
        for config, f in fails[:10]:
            out.append(f"- **{config} FAILED**: {f}")
    if report["baseline_problems"]:
        out.append("\n**The plain baseline itself broke an invariant:**\n")
        out.extend(f"- {p}" for p in report["baseline_problems"][:10])

    settings = report["server_settings"]
    if settings:
        out.append("\n## What ran (as each server reports itself)\n")
        names = list(settings)
        out.append("| setting | " + " | ".join(names) + " |")
        out.append("|---|" + "---|" * len(names))
        for key in sorted({k for s in settings.values() for k in s}):
            out.append(f"| {key} | " + " | ".join(str(settings[n].get(key, "—")) for n in names) + " |")

    out.extend(_calibration(report))
    out.extend(_fidelity(report))

    out.append("\n## Time to verdict\n")
    boots = ", ".join(
        f"{b['config']} {b['seconds']:.1f} s{'' if b['ok'] else ' (FAILED)'}{' (' + b['note'] + ')' if b.get('note') else ''}"
        for b in report["boots"]
    )
    out.append(f"Boots: {boots or 'none'}.")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report["phase_seconds"].items())
    out.append(f"Phases: {phases or 'none'}.")
    p = report["provenance"]
    out.append(f"\n<sub>{p['date']} · commit {p['commit']} · host {p['host']} · `{p['command']}`</sub>")
    return "\n".join(out) + "\n"


def _cycle_lines(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        ratio, tau = r["ratio_to_reference"], r["accept_length"]
        if not ratio or not tau or ratio["estimate"] <= 0:
            continue
        cost = tau["estimate"] / ratio["estimate"]
        verdict = (
            "**slower than the reference**: each cycle costs more plain steps than it yields tokens"
            if ratio["high"] < 1.0
            else ("faster than the reference" if ratio["low"] > 1.0 else "not distinguishable from the reference")
        )
        lines.append(
            f"- {r['config']} (c{r['concurrency']}): τ {tau['estimate']:.2f} tokens per cycle, a cycle costs "
            f"{cost:.2f} plain decode steps → {ratio['estimate']:.2f}x, {verdict}"
        )
    return lines


def _calibration(report: dict) -> list[str]:
    """What a tolerance, a tie margin or a warmup length has to be chosen from."""
    out: list[str] = []
    rows = report["speed"]
    if rows:
        out.append("\n## Calibration\n")
        out.append("| config | conc. | warmup requests | first cold → last warmup tok/s | per-request spread (CV) |")
        out.append("|---|---|---|---|---|")
        for r in rows:
            cold = (
                f"{r['warmup_first_tps']:.1f} → {r['warmup_last_tps']:.1f}"
                if r.get("warmup_first_tps") is not None
                else "—"
            )
            out.append(
                f"| {r['config']} | {r['concurrency']} | {r['warmup_requests']} | {cold} | {r.get('cv', 0):.1%} |"
            )
    margins = Counter(m for e in report["equivalence"] for m in e.get("divergence_margins", []))
    if margins:
        tie = report["tie_margin"]
        seen = ", ".join(f"{m:g}: {n}" for m, n in sorted(margins.items()))
        above = sum(n for m, n in margins.items() if m >= tie)
        out.append(
            f"\nBaseline margins (nats) where a speculative output parted from the baseline, with counts: {seen}. "
            f"{above} at or above the tie margin {tie:g}."
        )
    return out


def _fidelity(report: dict) -> list[str]:
    rows = report.get("fidelity") or []
    if not rows:
        return []
    out = [
        "\n## Fidelity: the suite's figures against the server's own\n",
        "| config | suite decode tok/s | server meta_info decode (gap) | server log gen throughput (clean windows, gap) "
        "| client overhead per request | server e2e vs client e2e |",
        "|---|---|---|---|---|---|",
    ]
    notes = []
    for f in rows:
        meta = f"{f['meta_decode_tps']:.1f} ({f['meta_gap']:+.1%})" if f.get("meta_decode_tps") else "—"
        if f["log_decode_tps"]:
            log = f"{f['log_decode_tps']:.1f} ({f['log_lines']}, {f['log_gap']:+.1%})"
        else:
            log = "—"
            if f.get("log_note"):
                notes.append(f"- {f['config']}: log not compared: {f['log_note']}")
        overhead = f"{f['client_overhead_ms']:.1f} ms" if f["client_overhead_ms"] is not None else "—"
        e2e = f"{f['e2e_gap']:+.1%}" if f["e2e_gap"] is not None else "—"
        out.append(f"| {f['config']} | {f['suite_decode_tps']:.1f} | {meta} | {log} | {overhead} | {e2e} |")
    out.extend(["", *notes] if notes else [])
    out.append(
        "\nThe suite times decoding at the client, from the first streamed chunk to the last. meta_info's "
        "decode_throughput (SGLang with --enable-metrics) is the server's own per-request figure, rescaled to the "
        "same tokens; the log's is the scheduler's over its logging windows, leaving out windows in which a "
        "request began. Client overhead: the client's request-to-last-byte time minus meta_info.e2e_latency."
    )
    return out
