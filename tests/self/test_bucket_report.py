"""What a run with context buckets says in its report (issue 48's review): a speed row's verdict
stands for every gate of its config at its bucket, and reads PASS only where each passed."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from specgate.deployment import parse_deployment
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.report.build import build_report
from specgate.report.markdown import render_markdown
from specgate.verdicts.gates import PASS, Verdict
from specgate.verdicts.outcome import FailedTest, TestTally
from tests.self.helpers import merge, sim_deployment_dict

PROVENANCE = {"host": "h", "date": "d", "commit": "c", "command": "specgate run"}
DIED = "the server died after serving 12 request(s) (POST http://127.0.0.1:1/generate failed)."


def _record(config: str, spec: bool, n: int = 4, prompt_tokens: int = 1000) -> ConfigSpeed:
    rng = np.random.default_rng(0)
    samples = [
        SpeedSample(
            decode_tps=(700.0 if spec else 500.0) * math.exp(rng.normal(0, 0.01)), ttft_s=0.02, e2e_s=1.0,
            completion_tokens=64, prompt_tokens=prompt_tokens, verify_ct=30 if spec else None, server_e2e_s=None, chunks=10, index=i,
        )  # fmt: skip
        for i in range(n)
    ]
    return ConfigSpeed(config, 1, samples=samples)


def _meter(*configs: str, prompt_tokens: int = 1000):
    results = {(c, 1): _record(c, c != "baseline", prompt_tokens=prompt_tokens) for c in configs}
    return SimpleNamespace(results=results, label=lambda s: "")


def _report(verdicts, failed_servers=None, buckets=None, failed_tests=None, workload=None, beats=None):
    data = merge(sim_deployment_dict(), {"workload": workload or {"context_buckets": ["1K"]}})
    if beats is not None:
        data["gates"]["beats"] = beats
    dep = parse_deployment(data, Path("sim.toml"))
    return build_report(
        dep, _meter("baseline", "eagle3-decode", prompt_tokens=40), verdicts, {}, [], None, PROVENANCE, TestTally(1, failed=1), {}, {}, [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []}, failed_servers=failed_servers,
        buckets=buckets if buckets is not None else {1024: _meter("baseline", "eagle3-decode")},
        failed_tests=failed_tests,
    )  # fmt: skip


def test_a_row_with_a_gate_not_run_reads_partial_with_the_count_in_report_md():
    """eagle3-decode's beats gate passed; its regression gates did not run (its server died): its
    row read PASS. It reads PARTIAL, and the cell counts what did not pass, in report.md and on the
    console alike (both render report.md's Markdown)."""
    beats = Verdict("beats:eagle3-decode-beats-baseline", "eagle3-decode", PASS, "1.5x")
    report = _report([beats], failed_servers={"eagle3-decode": DIED})
    rows = {(r.config, r.context): r for r in report.speed}
    short = rows[("eagle3-decode", 0)]
    assert short.verdict == "PARTIAL", short
    assert short.gates["pass"] == 1 and short.gates["not run"] >= 1
    # A bucket's NOT RUN gates are the bucket's row's, not the short workload's.
    bucket = rows[("eagle3-decode", 1024)]
    assert bucket.verdict == "PARTIAL" and set(bucket.gates) == {"not run"}, bucket
    assert short.gates["not run"] == sum(1 for g in report.gates if g.config == "eagle3-decode" and "@" not in g.gate and g.status == "not run")
    md = render_markdown(report)
    line = next(x for x in md.splitlines() if x.startswith("| eagle3-decode | 1 |"))
    assert line.endswith(f"| PARTIAL ({short.gates['not run']} NOT RUN of {sum(short.gates.values())} gates) |"), line
    assert "| PASS |" not in md.split("## Gates")[0]


def test_a_row_every_gate_of_which_passed_reads_bare_pass():
    report = _report([Verdict("beats:eagle3-decode-beats-baseline", "eagle3-decode", PASS, "1.5x")], workload={}, buckets={})
    (row,) = [r for r in report.speed if r.config == "eagle3-decode"]
    assert row.verdict == "PASS" and row.gates == {"pass": 1}
    assert "| PASS |" in render_markdown(report)


def test_a_server_dying_mid_run_is_said_once_naming_the_buckets_it_cost():
    """eagle3-decode's server died after serving requests: its speed, beats and accept tests of
    each bucket failed, each repeating the death, and its regression gates were NOT RUN. The first
    screen says the death once, with the buckets it cost."""
    from specgate.verdicts.outcome import FailedTest

    cause = f"specgate.errors.SpecgateError: config 'eagle3-decode' could not be measured (eagle3-decode): config 'eagle3-decode': {DIED}"
    failed = [
        FailedTest(f"{test}[eagle3-decode{suffix}-at-{label}]", cause)
        for label in ("1K", "2K")
        for test, suffix in (("test_decode_speed", "-c1"), ("test_speculation_beats_reference", "-beats-baseline"))
    ]
    beats = Verdict("beats:eagle3-decode-beats-baseline", "eagle3-decode", PASS, "1.5x")
    report = _report(
        [beats], failed_servers={"eagle3-decode": DIED + "\nits log"}, failed_tests=failed,
        workload={"context_buckets": ["1K", "2K"]},
        buckets={1024: _meter("baseline", "eagle3-decode"), 2048: _meter("baseline", "eagle3-decode")},
    )  # fmt: skip
    said = [r for r in report.overall_reasons if "died after serving 12" in r]
    assert len(said) == 1, report.overall_reasons
    (line,) = said
    assert line.startswith("the server of 'eagle3-decode' stopped mid-run: the server died after serving 12 request(s)")
    assert "It cost the short workload, 1K and 2K: " in line and "and 4 test(s) failed" in line, line
    md = render_markdown(report).split("## Decode speed")[0]
    assert md.count("died after serving 12") == 1, md
    assert len(report.failed_tests) == 4  # report.json still holds each test


def test_a_server_that_hung_is_said_once_though_its_tests_causes_are_cut_short():
    """A request of the 1K bucket outlived request_timeout_s: the reason is long, each failed test's
    cause is cut at 400 characters after a prefix of its own, so none held the whole reason and all
    ten tests repeated it under the server's line ("0 test(s) failed"). The first test's cause is
    the timeout itself, which the reason wraps."""
    from specgate.verdicts.outcome import FailedTest

    error = (
        "POST http://127.0.0.1:36932/generate: no complete answer within workload.request_timeout_s = 0.14 s (the "
        "deadline passed before the answer was complete); the server hangs, or that deadline is too short for one "
        "answer of the workload (it is under a second)"
    )
    hung = f"the server stopped answering after serving 13 request(s) (a request of the speed phase, at the 1K context bucket): {error}"
    unusable = f"config 'baseline' is unusable in this session: {hung}"
    failed = [
        FailedTest("test_decode_speed[baseline-c1-at-1K]",
                   f"specgate.errors.SpecgateError: config 'baseline' could not be measured (baseline): {error}"[:400]),
        FailedTest("test_decode_speed[baseline-c1-at-2K]",
                   f"specgate.errors.SpecgateError: config 'baseline' could not be measured (baseline): {unusable}"[:400]),
        FailedTest("test_speculative_output_is_greedy_baseline[eagle3-decode]",
                   f"specgate.errors.ServerBootError: {unusable}"[:400]),
        FailedTest("test_decode_speed[eagle3-decode-c1-at-2K]", "AssertionError: something of its own"),
    ]  # fmt: skip
    report = _report(
        [], failed_servers={"baseline": hung}, failed_tests=failed, workload={"context_buckets": ["1K", "2K"]},
        buckets={1024: _meter("baseline", "eagle3-decode"), 2048: _meter("baseline", "eagle3-decode")},
    )  # fmt: skip
    (line,) = [r for r in report.overall_reasons if r.startswith("the server of 'baseline'")]
    assert "and 3 test(s) failed" in line, line
    md = render_markdown(report).split("## Decode speed")[0]
    assert md.count("no complete answer within") == 1, md
    assert "failed: test_decode_speed[eagle3-decode-c1-at-2K]: AssertionError: something of its own" in md


def test_a_drift_recheck_that_failed_because_its_server_was_lost_is_not_a_second_loss():
    """The reference hung in the 2K bucket; its drift re-check then failed ("config 'baseline' is
    unusable in this session: …") and the first screen said a second lost server, 'baseline:drift'."""
    from specgate.verdicts.not_run import lost_after_boot

    hung = "the server stopped answering after serving 20 request(s) (a request of the speed phase): POST …"
    failed = {"baseline": hung, "baseline:drift": f"config 'baseline' is unusable in this session: {hung}"}
    assert list(lost_after_boot(failed, set())) == ["baseline"]
    # A drift re-check that failed on its own (its server not lost) is still said.
    assert list(lost_after_boot({"baseline:drift": "the reboot failed"}, set())) == ["baseline:drift"]
    report = _report([], failed_servers=failed, workload={"context_buckets": ["1K"]})
    assert not [r for r in report.overall_reasons if "baseline:drift" in r], report.overall_reasons


def test_the_gates_no_bucket_judges_are_named_in_report_json_and_report_md_as_check_names_them():
    """A beats gate declared at concurrency 4 has no bucket version: `check` named it; the report
    did not, so a reader of report.md took the 1K bucket for gated by it."""
    from specgate.gate_kinds import unbucketed_gates

    c4 = [{"config": "eagle3-decode", "over": "baseline", "ratio": 1.1, "concurrency": 4}]
    report = _report([], workload={"context_buckets": ["1K"], "concurrency": [1, 4]}, beats=c4)
    assert report.unbucketed_gates == ["beats:eagle3-decode-beats-baseline-c4"]
    assert report.unbucketed_gates == unbucketed_gates(parse_deployment(
        merge(sim_deployment_dict(), {"workload": {"context_buckets": ["1K"], "concurrency": [1, 4]}, "gates": {"beats": c4}}),
        Path("sim.toml"),
    ))  # fmt: skip
    md = render_markdown(report)
    assert "**NOT judged in any context bucket** (declared at another concurrency; buckets are single-stream): " \
        "beats:eagle3-decode-beats-baseline-c4" in md
    # Without a bucket nothing is said.
    assert "NOT judged in any context bucket" not in render_markdown(_report([], workload={}, buckets={}))


def test_context_png_puts_its_ticks_where_its_points_are_the_counted_tokens_naming_the_bucket():
    """The points sat at the prompt tokens the server counted (here 1,200 for the 8K bucket's
    neighbour 1K, 17% over) while the ticks sat at the targets: a reader read a point at 1,200 as
    measured at 1K's 1,024. Now each tick sits at its bucket's counted tokens and names both."""
    from specgate.report.context_chart import context_figure

    report = _report([], workload={"context_buckets": ["1K", "8K"]},
                     buckets={1024: _meter("baseline", "eagle3-decode", prompt_tokens=1200),
                              8192: _meter("baseline", "eagle3-decode", prompt_tokens=8000)})  # fmt: skip
    fig = context_figure(report)
    try:
        for ax in fig.axes:
            ticks = list(ax.get_xticks())
            labels = [t.get_text() for t in ax.get_xticklabels()]
            assert ticks == [40.0, 1200.0, 8000.0], ticks
            assert labels == ["40\nshort", "1,200\n1K", "8,000\n8K"], labels
            xs = {float(x) for line in ax.get_lines() for x in line.get_xdata() if line.get_linestyle() != "--"}
            assert xs <= set(ticks), xs  # every point sits on a tick
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_a_server_that_died_on_its_first_request_after_booting_is_said_once_too():
    """Booted, then died before answering anything: "never served" in its NOT RUN rows, but no
    boot failure either, so each bucket's failed test repeated it too."""
    died = "the server died after serving 0 request(s) (POST http://127.0.0.1:1/generate failed)."
    cause = f"specgate.errors.SpecgateError: config 'eagle3-decode': {died}"
    failed = [FailedTest(f"test_decode_speed[eagle3-decode-c1-at-{label}]", cause) for label in ("1K", "2K")]
    report = _report(
        [], failed_servers={"eagle3-decode": died}, failed_tests=failed, workload={"context_buckets": ["1K", "2K"]},
        buckets={1024: _meter("baseline", "eagle3-decode"), 2048: _meter("baseline", "eagle3-decode")},
    )  # fmt: skip
    (line,) = [r for r in report.overall_reasons if "died after serving 0" in r]
    assert line.startswith("the server of 'eagle3-decode' never served: ") and "It cost the short workload, 1K and 2K" in line


def test_a_row_of_one_request_shows_no_interval_rather_than_a_point_as_its_own_bounds():
    """A run stopped one request into its 2K bucket showed "505.9 [505.9, 505.9]" for that row:
    a figure read as known exactly. One request gives the estimate alone, said so."""
    one = SimpleNamespace(results={("baseline", 1): _record("baseline", False, n=1)}, label=lambda s: "")
    report = _report([], workload={"context_buckets": ["1K", "2K"]},
                     buckets={1024: _meter("baseline", "eagle3-decode"), 2048: one})  # fmt: skip
    md = render_markdown(report)
    speed_rows = [line for line in md.splitlines() if line.count("|") == 10]  # the speed table's 9 columns
    (row,) = [line for line in speed_rows if line.startswith("| baseline | 1, 2K context")]
    assert "(one request: no interval)" in row and "[" not in row.split("|")[3], row
    (short,) = [line for line in speed_rows if line.startswith("| baseline | 1, 1K context")]
    assert "(one request" not in short and "[" in short.split("|")[3]
    # Nor a per-request spread of 0.0% in the calibration table.
    (calibrated,) = [line for line in md.splitlines() if line.count("|") == 6 and "1, 2K context" in line]
    assert calibrated.endswith("| — (one request) |"), calibrated


def test_a_server_lost_before_a_buckets_figures_keeps_that_buckets_row_not_measured_with_why():
    """eagle3-decode's server died during the short workload (its figures are in) and gave none of
    the 1K or 2K buckets': those rows vanished from the speed table while the reasons said the death
    cost 1K and 2K. Each bucket keeps its row, NOT MEASURED, with the bucket and the cause."""
    report = _report(
        [], failed_servers={"eagle3-decode": DIED}, workload={"context_buckets": ["1K", "2K"]},
        buckets={1024: _meter("baseline"), 2048: _meter("baseline")},
    )  # fmt: skip
    assert [(u.config, u.concurrency, u.context) for u in report.unmeasured] == [
        ("eagle3-decode", 1, 1024), ("eagle3-decode", 1, 2048)
    ]  # fmt: skip
    assert all(u.error.startswith("the server died after serving 12") for u in report.unmeasured)
    md = render_markdown(report)
    for label in ("1K", "2K"):
        line = next((x for x in md.splitlines() if x.startswith(f"| eagle3-decode | 1, {label} context |")), None)
        assert line is not None and "| NOT MEASURED |" in line and "died after serving 12" in line, md


def test_a_speed_row_stands_for_its_own_concurrencys_gates_alone():
    """Verdicts carried no concurrency, so the concurrency-4 row of eagle3-decode counted its
    concurrency-1 gates too (and the c1 row the c4 gates). Each row counts the gates judged at its
    own concurrency (figures["concurrency"], stamped from the planned gate)."""
    data = merge(sim_deployment_dict(), {"workload": {"concurrency": [1, 4]}})
    data["gates"]["beats"] = [*data["gates"]["beats"], {"config": "eagle3-decode", "over": "baseline", "ratio": 1.0, "concurrency": 4}]
    dep = parse_deployment(data, Path("sim.toml"))
    meter = _meter("baseline", "eagle3-decode")
    meter.results.update({(c, 4): _record(c, c != "baseline") for c in ("baseline", "eagle3-decode")})
    report = build_report(
        dep, meter, [], {}, [], None, PROVENANCE, TestTally(1, failed=1), {}, {}, [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []}, failed_servers={"eagle3-decode": DIED},
    )  # fmt: skip
    at = {g.gate: g.figures.get("concurrency") for g in report.gates if g.config == "eagle3-decode"}
    assert at["beats:eagle3-decode-beats-baseline-c4"] == 4 and at["regression:eagle3-decode:c4:decode_tps"] == 4, at
    rows = {r.concurrency: r for r in report.speed if r.config == "eagle3-decode"}
    for concurrency, row in rows.items():
        its_own = sum(1 for n in at.values() if n == concurrency)
        assert row.gates == {"not run": its_own}, (concurrency, row.gates, at)
    assert rows[1].gates["not run"] + rows[4].gates["not run"] == len(at)
