"""End to end: the gate suite, run as CI would run it, against the simulator.

A healthy simulator must give a green run; each injected fault must turn the one
gate it targets red with a message that says why; and no run, green or red, may
leave a server process behind (the `sim_deployment` fixture checks that).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from helpers import default_sigint, recorded_baselines, sim_deployment_dict, with_baselines

from specgate.equivalence.cases import FIRST_TOKEN_STOP_EDGE
from specgate.equivalence.context_edge import CONTEXT_EDGE, SIZE_TOLERANCE
from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.sim.tokenizer import encode

# The simulator paces its steps with sleep() against wall-clock deadlines, and the client times
# the stream on the same clock: on a busy 2-core CI machine, scheduling delays move the figures
# (a config's decode tok/s vs a baseline by up to ~15%, its speedup interval's edges by more), and
# the stored baseline the `healthy_baselines` fixture recorded minutes earlier saw whatever load
# there was then. A test about something other than speed (a green run, fingerprints, flags) gives
# its deployment this wide decode tolerance, so its regression gates still compare, the code path
# it tests, without deciding on the machine's load; a test about a speed change provokes one of 2x,
# far beyond what load does, and keeps the deployment's own tolerance on the config it expects to fail.
LOAD_TOLERANT = {"gates": {"tolerance": {"decode_tps": 0.5}}}


@pytest.fixture(scope="module")
def healthy_baselines(tmp_path_factory):
    """A stored baseline from a healthy run, copied into each test that needs one."""
    return recorded_baselines(tmp_path_factory.mktemp("healthy"), {})


def outcomes(result):
    return result.parseoutcomes()


def test_healthy_simulator_is_green_and_reports(sim_deployment, pytester, healthy_baselines):
    d = with_baselines(sim_deployment(LOAD_TOLERANT), healthy_baselines)
    result = d.run(pytester)
    assert result.ret == 0, result.stdout.str()[-4000:]
    o = outcomes(result)
    assert o.get("failed", 0) == 0 and o.get("skipped", 0) == 0 and o["passed"] >= 10
    report = d.report()
    assert report["overall"] == "PASS" and report["simulator"]
    assert {g["status"] for g in report["gates"]} == {"pass"}
    by_config = {r["config"]: r for r in report["speed"]}
    # the user's story, reproduced: prefill-mode verify loses, decode-mode verify wins. On the
    # medians (true 0.80x and 1.55x), not the edges of a six-request interval, which a busy machine
    # stretched past 1.0 for eagle3-prefill; the beats gate (passed above) holds eagle3-decode's interval.
    assert by_config["eagle3-prefill"]["ratio_to_reference"]["estimate"] < 1.0
    assert by_config["eagle3-decode"]["ratio_to_reference"]["estimate"] > 1.15
    assert by_config["eagle3-decode"]["accept_length"]["estimate"] > 1.5
    for name in ("report.md", "report.png", "report.json"):
        assert (d.report_dir / name).stat().st_size > 0
    assert "SIMULATOR run" in (d.report_dir / "report.md").read_text()
    assert "specgate report" in result.stdout.str()
    # the suite's decode figures agree with the server's own log (its "gen throughput" lines).
    # Client and server time the same stream at different moments, so a busy machine's scheduling
    # delays alone open gaps of ~10% over a 40-token request; what this end-to-end check is for is
    # that the witnesses are read and agree (a wrong unit, token count or time span is off by far
    # more). The exact comparison is tested on fixed logs in test_fidelity.py.
    fidelity = {f["config"]: f for f in report["fidelity"]}
    assert set(fidelity) == set(by_config)
    assert all(f["log_lines"] > 0 and abs(f["log_gap"]) < 0.25 for f in fidelity.values()), fidelity
    assert all(abs(f["meta_gap"]) < 0.25 for f in fidelity.values()), fidelity  # sim.toml has --enable-metrics
    assert {f["state"] for f in fidelity.values()} == {"agrees"}, fidelity  # so no speed gate failed on it


def test_baseline_update_writes_provenance(healthy_baselines):
    files = list((healthy_baselines / "sim").glob("*.json"))
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    assert {"date", "commit", "host", "command"} <= set(doc["provenance"])
    assert doc["fingerprint"]["gpu"] == "none (simulator)"
    assert set(doc["configs"]) == {"baseline", "eagle3-prefill", "eagle3-decode"}
    # recorded to max_repeats, so a later undecided run has stored requests left to pair with
    measured = {c: len(e["concurrency"]["1"]["samples"]["decode_tps"]) for c, e in doc["configs"].items()}
    assert min(measured.values()) >= 18, measured  # helpers.FAST: repeats 6, max_repeats 18


def test_without_baselines_regression_gates_are_not_compared_and_fail_closed(sim_deployment, pytester):
    d = sim_deployment()
    result = d.run(pytester, "-rs", "--strict-uncompared")
    assert result.ret == 1  # nothing was compared: that is no pass
    assert outcomes(result)["failed"] == 5
    result.stdout.fnmatch_lines(["*NOT COMPARED: no stored baseline for deployment 'sim'*specgate baseline update*"])
    report = d.report()
    assert report["overall"] == "PARTIAL"
    assert {g["status"] for g in report["gates"] if g["gate"].startswith("regression")} == {"not compared"}
    assert "Not judged" in (d.report_dir / "report.md").read_text()


def test_uncompared_gates_warn_only_when_allowed(sim_deployment, pytester):
    d = sim_deployment()
    result = d.run(pytester, "-rs", "--specgate-allow-uncompared")
    assert result.ret == 0
    assert outcomes(result)["skipped"] == 5
    result.stdout.fnmatch_lines(["*NOT COMPARED: no stored baseline*"])
    assert d.report()["overall"] == "PARTIAL"  # allowed is not the same as passed


@pytest.mark.parametrize(
    ("fault", "failing_test", "message", "failures"),
    [
        (
            "eagle3-decode:diverge-at=3",
            "test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]",
            "*decisive divergence at output token 3*",
            1,
        ),
        (
            "eagle3-prefill:stop-leak",
            "test_speculative_output_is_greedy_baseline[[]eagle3-prefill[]]",
            "*text runs past stop string*",
            1,
        ),
        (
            "eagle3-decode:stop-overshoot",
            "test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]",
            "*stop overshoot: the speculative answer has the baseline's text*",
            1,
        ),
        # overshooting also breaks the speed test's ignore_eos length check: two honest failures.
        # The edge case with every stop string comes first, so the overshoot shows past a stop.
        (
            "eagle3-decode:overshoot",
            "test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]",
            "*more token id(s) past the stop*",
            2,
        ),
    ],
)
def test_output_faults_fail_equivalence_with_a_reproducer(
    sim_deployment, pytester, fault, failing_test, message, failures
):
    d = sim_deployment()
    result = d.run(pytester, faults=fault)
    assert result.ret == 1
    o = outcomes(result)
    assert o["failed"] == failures, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([message, f"FAILED *{failing_test}*"])
    assert "curl -s http://127.0.0.1:" in result.stdout.str()
    # An equivalence failure is Hypothesis' to report (the example, shrunk), never taken for a server
    # error. ("Falsifying example", "Falsifying explicit example" or, since Hypothesis 6.16x,
    # "Failing explicit example": the words before the function's name vary by release.)
    assert "example: speculative_matches_baseline(" in result.stdout.str()
    report = d.report()
    assert report["overall"] == "FAIL"
    failed = [e for e in report["equivalence"] if e["decisive_failures"]]
    assert len(failed) == 1 and failed[0]["config"] == fault.split(":")[0]
    if "diverge-at" in fault:
        # A parting at a token says where the speculative token stood in the baseline's ranking,
        # with the words (the simulator, as SGLang, gives the tokens' text when asked).
        told = failed[0]["divergences"][0]
        assert told["position"] == 3 and told["baseline_choices"].count("'") >= 2, told
        result.stdout.fnmatch_lines(["*speculative token * is not among the baseline's top * below the baseline's token); tie margin *", "*the baseline's top * there: *"])
        assert "Where each decisive parting stood in the baseline's ranking" in (d.report_dir / "report.md").read_text()
        # Asked again with logprobs, the simulated server's own logits favour the baseline's token
        # while it emits another (the fault): the second opinion says so, not "a near tie".
        assert "its own logits rank" in told["second_opinion"] and "not a near tie" in told["second_opinion"], told


def _only_eagle3_decode_fails_live_and_golden(sim_deployment, pytester, fault: str, lines: list[str]):  # noqa: ANN001, ANN202
    """The gate, live and with the reference recorded first (golden), under `fault` on
    eagle3-decode: exactly its equivalence test fails, with `lines` in the output. The last
    deployment (golden mode) is returned for its golden file."""
    for mode in ({}, {"launch": {"coexist": False}}):
        d = sim_deployment(mode)
        result = d.run(pytester, "-k", "equivalence or golden", faults=f"eagle3-decode:{fault}")
        assert result.ret == 1, result.stdout.str()[-3000:]
        assert outcomes(result)["failed"] == 1, result.stdout.str()[-3000:]
        result.stdout.fnmatch_lines([*lines, "FAILED *test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]*"])
        failed = [e["config"] for e in d.report()["equivalence"] if e["decisive_failures"]]
        assert failed == ["eagle3-decode"]
    return d


def test_a_stop_string_the_first_token_holds_is_checked_live_and_from_a_golden_file(sim_deployment, pytester):
    """Issue 14: the edge whose stop string is the reference's first answer token, derived from
    its answer to the one-token edge, catches a server that looks for stop strings only after
    the prefill's token, live and where the reference answers first and is stopped (no other
    edge, nor the seed-0 cases, does: test_first_token_stop_edge.py and test_stored_reference.py)."""
    lines = ["*text runs past stop string *: found at char 0*", f"*(edge: {FIRST_TOKEN_STOP_EDGE})*"]
    d = _only_eagle3_decode_fails_live_and_golden(sim_deployment, pytester, "prefill-stop-miss", lines)
    # report.json keeps the failing answers with their baseline, and judged again from there (no
    # server: the fault's stop miss is in the kept text) they fail as the run judged them.
    row = next(e for e in d.report()["equivalence"] if e["config"] == "eagle3-decode")
    failing = [p for p in row["kept"] if p["kind"] != "near-tie-flip"]
    assert failing and all(p["kind"] == "invariant" and p["shape"] == "unclassified" for p in failing)
    assert failing[0]["baseline"]["top_ids"] and failing[0]["speculative"]["top_ids"] is None
    again = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "rejudge", str(d.report_dir / "report.json"), str(d.path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert "`specgate rejudge report.json` judges them again" in (d.report_dir / "report.md").read_text()
    assert again.returncode == 1, again.stdout + again.stderr
    assert "then invariant (unclassified); now invariant (unclassified): speculative server text runs past stop string" in again.stdout
    # Recorded with the other golden cases, its stop string the recorded one-token answer.
    entries = json.loads((d.report_dir / "sim-golden.json").read_text())["entries"]
    one = next(e for e in entries if e["case"]["label"].endswith("(edge: max_new_tokens 1)"))
    edge = next(e for e in entries if e["case"]["label"].endswith(f"(edge: {FIRST_TOKEN_STOP_EDGE})"))
    assert edge["case"]["stop"] == [one["baseline"]["text"]] and edge["baseline"]["text"] == ""


def test_a_prompt_at_the_context_length_is_checked_live_and_from_a_golden_file(sim_deployment, pytester):
    """Issue 14: the edge whose prompt is sized by the reference so that the answer ends on the
    server's last slot catches a speculative server that goes wrong only that far into a
    sequence (the fault diverge-past), live and where the reference answers first; nothing
    else the gate sends reaches there."""
    lines = [
        "*decisive divergence at output token 0*",
        f"*(edge: {CONTEXT_EDGE}: * prompt tokens, a whole answer reaches 4093 tokens, the most a request may hold*",
    ]
    d = _only_eagle3_decode_fails_live_and_golden(sim_deployment, pytester, "diverge-past=4000", lines)
    # Recorded with the other golden cases: a prompt the simulator's context holds with the answer.
    entries = json.loads((d.report_dir / "sim-golden.json").read_text())["entries"]
    edge = next(e for e in entries if f"(edge: {CONTEXT_EDGE}: " in e["case"]["label"])
    prompt_tokens = len(encode(edge["case"]["text"]))
    assert 4093 - 32 - SIZE_TOLERANCE <= prompt_tokens <= 4093 - 32  # 4096 less the chain's 3 draft slots


TREE_ARGS = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "specgate-sim/toy-drafter",
             "--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]


def test_the_context_edge_leaves_room_for_a_trees_reserved_draft_slots(sim_deployment, pytester):
    """The H200 run of 2026-12-02: a topk-4 tree refused the edge sized by the plain server's
    figures (SGLang counts max(topk x steps, draft tokens) slots for drafts with the prompt). The
    simulator refuses as SGLang does; sized for every server, the edge is checked on the tree."""
    for mode in ({}, {"launch": {"coexist": False}}):  # live, and with the reference booted alone first
        d = sim_deployment({"configs": {"eagle3-decode": {"args": TREE_ARGS}}, **mode})
        result = d.run(pytester, "-k", "equivalence or golden", "--strict-uncompared")
        assert result.ret == 0, result.stdout.str()[-3000:]
        edges = {e["config"]: e["edges"] for e in d.report()["equivalence"]}["eagle3-decode"]
        (edge,) = [e for e in edges if e.startswith(f"{CONTEXT_EDGE}: ")]
        assert "4084 tokens, the most a request may hold (context length 4096, less 12 slots reserved" in edge


def test_a_context_edge_a_speculative_server_refuses_is_not_checked_and_fails(sim_deployment, pytester):
    """The fault `reserve`: a server keeping more room than SGLang's rule refuses the edge the
    reference answered. Not a wrong answer and never a pass: its equivalence test fails NOT
    CHECKED, naming the refusal, live and from a golden file; its other cases are still compared."""
    for mode in ({}, {"launch": {"coexist": False}}):
        d = sim_deployment(mode)
        result = d.run(pytester, "-k", "equivalence or golden", "--strict-uncompared", faults="eagle3-decode:reserve=20")
        assert result.ret == 1, result.stdout.str()[-3000:]
        assert outcomes(result)["failed"] == 1, result.stdout.str()[-3000:]
        result.stdout.fnmatch_lines([
            f"*greedy equivalence NOT CHECKED: [[]eagle3-decode[]] {CONTEXT_EDGE}: * REFUSED by eagle3-decode although "
            "the reference answered it*Requested token count exceeds*",
            "FAILED *test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]*",
        ])
        report = d.report()
        row = {e["config"]: e for e in report["equivalence"]}["eagle3-decode"]
        assert row["decisive_failures"] == 0 and row["cases"] > 5
        assert any("REFUSED by eagle3-decode" in e for e in row["edges"]) and len(row["refused"]) == 1
        assert any("eagle3-decode NOT CHECKED on 1 edge(s) it refused" in r for r in report["overall_reasons"])
    # Allowed to leave it uncompared, the run is PARTIAL and says why: never a PASS.
    d = sim_deployment()
    result = d.run(pytester, "-k", "equivalence", faults="eagle3-decode:reserve=20")
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = d.report()
    assert report["overall"] == "PARTIAL"
    assert any("eagle3-decode NOT CHECKED on 1 edge(s) it refused" in r for r in report["overall_reasons"])


def test_a_declared_known_difference_is_counted_not_failed(sim_deployment, pytester):
    """A config's `tolerate` names one precise shape of difference; it is listed, and only it passes."""
    d = sim_deployment({"configs": {"eagle3-decode": {"tolerate": ["stop-overshoot"]}}})
    result = d.run(pytester, "-k", "equivalence", faults="eagle3-decode:stop-overshoot")
    assert result.ret == 0, result.stdout.str()[-3000:]
    row = {e["config"]: e for e in d.report()["equivalence"]}["eagle3-decode"]
    assert row["tolerated"] and row["decisive_failures"] == 0
    # Each listed answer names its case (the first line alone says what differed, not where), and
    # one case answered alike in several requests is one line with its count.
    assert all(line.startswith("`") and "`: stop overshoot" in line for line in row["tolerated"]), row["tolerated"]
    markdown = (d.report_dir / "report.md").read_text()
    assert "declared known differences" in markdown
    listed = [line for line in markdown.splitlines() if line.startswith("- eagle3-decode: `") and "stop overshoot" in line]
    assert len(listed) == len(set(row["tolerated"])), listed
    if len(row["tolerated"]) > len(set(row["tolerated"])):
        assert any("requests)" in line for line in listed)
    # anything else still fails under the same declaration
    result = d.run(pytester, "-k", "equivalence", faults="eagle3-decode:diverge-at=3")
    assert result.ret == 1


def test_accept_collapse_fails_accept_length_and_beats(sim_deployment, pytester, healthy_baselines):
    d = with_baselines(sim_deployment(), healthy_baselines)
    result = d.run(pytester, faults="eagle3-decode:accept-collapse")
    assert result.ret == 1
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "FAILED *test_speculation_beats_reference[[]eagle3-decode-beats-baseline[]]*",
            "FAILED *test_no_regression_against_stored_baseline[[]eagle3-decode-c1-accept_length[]]*",
        ]
    )
    found = re.search(r"accept length (1\.0\d\d) vs stored (2\.\d+) over the same \d+ pinned requests: paired ratio (0\.4\d+)", text)
    assert found, text[-3000:]
    now, stored, ratio = (float(v) for v in found.groups())
    assert abs(now / stored - ratio) < 0.005, found.group(0)  # the headline's figures are the ratio's
    assert "REGRESSED" in text
    # equivalence still holds: every rejected draft still yields the baseline's tokens
    assert "test_speculative_output_is_greedy_baseline" not in " ".join(
        line for line in text.splitlines() if line.startswith("FAILED")
    )


def test_slowdown_of_speculation_is_a_regression_not_drift(sim_deployment, pytester, healthy_baselines):
    # Every eagle3-decode step twice as dear: its speedup halves, far past its 15% tolerance whatever
    # the load (at 1.3x it measured 0.79 under load against a bar of 0.85). The plain reference is
    # compared with a baseline recorded minutes earlier, perhaps under another load: the test is
    # about where the blame goes, so its tolerance is wide (LOAD_TOLERANT), eagle3-decode's is not.
    by_config = {"baseline": 0.5, "eagle3-prefill": 0.5}
    d = with_baselines(sim_deployment({"gates": {"tolerance": {"decode_tps_by_config": by_config}}}), healthy_baselines)
    result = d.run(pytester, faults="eagle3-decode:slowdown=1.0")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["FAILED *test_no_regression_against_stored_baseline[[]eagle3-decode-c1-decode_tps[]]*"]
    )
    failed = [line for line in result.stdout.str().splitlines() if line.startswith("FAILED")]
    assert not any("baseline-c1" in line for line in failed), failed
    assert "speculation itself lost ground" in result.stdout.str()
    # The regression is the fault's on purpose, and the report says so beside its SIMULATOR banner.
    assert "> **Faults injected** (SPECGATE_SIM_FAULTS): `eagle3-decode:slowdown=1.0`." in (d.report_dir / "report.md").read_text()
    assert d.report()["provenance"]["sim_faults"] == "eagle3-decode:slowdown=1.0"


def test_slowdown_of_everything_is_reported_as_machine_drift(sim_deployment, pytester, healthy_baselines):
    # A machine twice as slow: the reference drops to ~0.5x stored, far outside its ±15% whatever the
    # load (at 1.3x its interval's top reached 0.79 under load, against 0.85). The speculative configs'
    # speedups hold; their tolerance is 30% here, room for load, while a judge that compared their
    # absolute figures (~0.5x) would still fail them.
    by_config = {"eagle3-prefill": 0.3, "eagle3-decode": 0.3}
    d = with_baselines(sim_deployment({"gates": {"tolerance": {"decode_tps_by_config": by_config}}}), healthy_baselines)
    result = d.run(pytester, faults="*:slowdown=1.0")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAILED *test_no_regression_against_stored_baseline[[]baseline-c1-decode_tps[]]*"])
    assert "plain decode slower than stored" in result.stdout.str()
    # Speculative configs are judged on their speedup, which a slower machine leaves alone:
    # one failure (the reference's), pointing at the machine, not one per config.
    failed = [line for line in result.stdout.str().splitlines() if line.startswith("FAILED")]
    assert not any("eagle3" in line for line in failed), failed
    assert "the change follows plain decoding (machine or core); the speedup held" in result.stdout.str()
    # No calibration for this runner: the reference's absolute figure cannot tell a slower machine from
    # its own drift between runs, so the gate says it cannot tell (and how to calibrate), not REGRESSED.
    report = d.report()
    gate = next(g for g in report["gates"] if g["gate"] == "regression:baseline:c1:decode_tps")
    assert gate["status"] == "inconclusive" and "not a regression" in gate["summary"], gate
    assert "specgate calibrate" in gate["summary"] and report["overall"] == "INCONCLUSIVE"
    assert "absolute speed gate(s) cannot tell" in (d.report_dir / "report.md").read_text()


def test_slowdown_of_everything_on_a_calibrated_runner_is_plain_decode_drifting(
    sim_deployment, pytester, healthy_baselines
):
    # The same machine twice as slow, where a between-boot spread is known (declared here, as a
    # calibration would record it): then the reference's gate decides, and it points at the machine.
    spread = {"decode_tps": 0.03, "speedup": 0.03, "source": "self-test: a runner measured at 3%"}
    by_config = {"eagle3-prefill": 0.3, "eagle3-decode": 0.3}
    overrides = {"gates": {"tolerance": {"decode_tps_by_config": by_config}, "between_boot": spread}}
    d = with_baselines(sim_deployment(overrides), healthy_baselines)
    result = d.run(pytester, "-k", "regression", faults="*:slowdown=1.0")
    assert result.ret == 1
    gate = next(g for g in d.report()["gates"] if g["gate"] == "regression:baseline:c1:decode_tps")
    assert gate["status"] == "fail" and "plain decode slower than stored" in gate["summary"], gate


def test_prefill_mode_fails_a_beats_gate_with_the_numbers(sim_deployment, pytester):
    # The bar eagle3-decode clears (1.15x), not 1.0x: prefill mode's ~0.8x then sits far under it. At
    # 1.0x a busy machine, whose scheduling delays fall more on the reference's 40 chunks than on
    # speculation's ~18, pushed the interval's top to 0.97 (an undecided gate says INCONCLUSIVE, not FAILS).
    gates = {
        "gates": {"beats": [{"config": "eagle3-decode", "ratio": 1.15}, {"config": "eagle3-prefill", "ratio": 1.15}]}
    }
    d = sim_deployment(gates)
    result = d.run(pytester, "-k", "beats")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*eagle3-prefill decodes at 0.*x baseline [[]0.*, *[]]*required >= 1.15x*FAILS*"])
    assert outcomes(result)["passed"] == 1  # eagle3-decode's gate still passes


def test_crash_mid_run_fails_that_config_fast_and_leaves_nothing(sim_deployment, pytester):
    d = sim_deployment()
    result = d.run(pytester, faults="eagle3-decode:crash-after=5")
    assert result.ret == 1
    text = result.stdout.str()
    # How many were served depends on the drawn cases (a case may send several copies at once).
    assert re.search(r"died after serving [1-5] request\(s\)", text) and "exited with code 3" in text
    failed = [line for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert failed and all("eagle3-decode" in line for line in failed), failed


def test_server_that_never_becomes_ready_times_out_with_its_log(sim_deployment, pytester):
    # 5 s: the healthy servers must boot within it too, and a simulator's boot (0.2 s when quiet)
    # took 1.2 s on a busy machine; the never-ready one waits it out, so it is no longer than that.
    d = sim_deployment({"launch": {"boot_timeout_s": 5}})
    result = d.run(pytester, faults="eagle3-prefill:never-ready")
    assert result.ret == 1
    text = result.stdout.str()
    assert "was not ready after launch.boot_timeout_s = 5 s" in text
    assert "never-ready fault: not ready" in text  # the log's tail is in the error
    errored = [line for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert errored and all("eagle3-prefill" in line for line in errored), errored
    # It timed out: not retried (a second wait would double the timeout).
    boots = [(b["config"], b["ok"]) for b in d.report()["boots"] if b["config"] == "eagle3-prefill"]
    assert boots == [("eagle3-prefill", False)]


def test_a_server_dying_in_an_overlapped_boot_is_booted_again_alone(sim_deployment, pytester, tmp_path):
    """SGLang's KV sizing races between servers booting side by side ("Not enough memory" on the
    H200): the config that died gets one boot alone, and the run goes on."""
    d = sim_deployment()
    result = d.run(pytester, "-k", "speed", faults=f"eagle3-decode:boot-crash-once={tmp_path / 'marker'}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    boots = [(b["config"], b["ok"], b["note"]) for b in d.report()["boots"] if b["config"] == "eagle3-decode"]
    assert boots == [
        ("eagle3-decode", False, ""),
        ("eagle3-decode", True, "retried alone after failing in an overlapped boot"),
    ]
    assert "Not enough memory" in (d.report_dir / "logs" / "eagle3-decode.log").read_text()  # first attempt kept


def test_servers_one_at_a_time_use_a_golden_file(sim_deployment, pytester):
    d = sim_deployment({"launch": {"coexist": False}})
    result = d.run(pytester, "-k", "equivalence or golden", faults="eagle3-decode:diverge-at=2")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*decisive failure(s); first:*", "*decisive divergence at output token 2*"])
    golden = json.loads((d.report_dir / "sim-golden.json").read_text())
    assert len(golden["entries"]) >= 5 and "top_logprobs" in golden["entries"][0]["baseline"]
    assert golden["entries"][0]["baseline"]["token_texts"]  # the words, for a failure told from the file
    boots = [b["config"] for b in d.report()["boots"]]
    assert boots == ["baseline", "eagle3-prefill", "eagle3-decode"]  # each booted once, in turn


def test_fingerprint_mismatch_is_not_compared_unless_overridden(sim_deployment, pytester, healthy_baselines):
    # About whether the gates compare, not about this machine's speed since the fixture ran.
    d = with_baselines(sim_deployment(LOAD_TOLERANT), healthy_baselines)
    stored = next((d.baselines_dir / "sim").glob("*.json"))
    doc = json.loads(stored.read_text())
    doc["fingerprint"]["gpu"] = "NVIDIA H200"
    stored.write_text(json.dumps(doc))
    result = d.run(pytester, "-rs", "-k", "regression")
    assert result.ret == 1 and outcomes(result)["failed"] == 5  # fail closed: nothing was compared
    result.stdout.fnmatch_lines(["*NOT COMPARED*gpu: stored 'NVIDIA H200', now 'none (simulator)'*"])
    result = d.run(pytester, "-rs", "-k", "regression", "--specgate-allow-uncompared")
    assert result.ret == 0 and outcomes(result)["skipped"] == 5
    result = d.run(pytester, "-k", "regression", "--specgate-allow-fingerprint-mismatch")
    assert result.ret == 0 and outcomes(result)["passed"] == 5


def test_corrupt_baseline_is_an_error_naming_the_file(sim_deployment, pytester, healthy_baselines):
    d = with_baselines(sim_deployment(), healthy_baselines)
    stored = next((d.baselines_dir / "sim").glob("*.json"))
    stored.write_text("{truncated")
    result = d.run(pytester, "-k", "regression", "--specgate-update-baselines")
    # Refused before anything boots (verdicts.stored_files), naming the file; nothing overwritten.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{stored}*"])
    assert stored.read_text() == "{truncated"


def test_bad_deployment_field_is_a_usage_error(sim_deployment, pytester):
    d = sim_deployment({"workload": {"repeats": "nine"}})
    result = d.run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*specgate: {d.path}: field 'workload.repeats': expected an integer*"])


def test_cli_reports_bad_deployment_and_checks_good_one(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[configs.baseline]\nargs = "--oops"\n')
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(bad)], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 2
    assert f"specgate: error: {bad}: field 'configs.baseline.args': expected a list of strings" in run.stderr
    ok = subprocess.run([sys.executable, "-m", "specgate.cli", "check"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert ok.returncode == 0 and "[SIMULATOR]" in ok.stdout and "eagle3-decode" in ok.stdout


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_interrupt_mid_run_stops_the_run_and_leaves_no_server(sim_deployment, signame):
    """Ctrl-C (SIGINT) or a CI runner cancelling the job (SIGTERM) while the gate runs:
    pytest ends the session at once, and every server goes with it; none boots after."""
    import os
    import signal
    import time

    d = sim_deployment({"launch": {"coexist": False}})
    env = {**os.environ, "SPECGATE_TEST_TAG": d.tag}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *d.args()],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 60
    while not [p for p in d.leftovers() if "specgate.sim" in p] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in d.leftovers() if "specgate.sim" in p], "no server came up"
    time.sleep(1.0)  # let the run get into its tests
    proc.send_signal(getattr(signal, signame))
    out, _ = proc.communicate(timeout=60)
    text = out.decode()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text[-2000:]
    if signame == "SIGTERM":
        assert "specgate: stopped by SIGTERM" in text
    if (d.report_dir / "report.json").exists():  # an interrupted run never says PASS
        assert d.report()["overall"] == "INTERRUPTED"
    deadline = time.monotonic() + 10
    while d.leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not d.leftovers()
    boots = [line for line in text.splitlines() if "specgate: booting" in line]
    assert len(boots) <= 3, boots  # nothing booted again after the signal


def test_a_signal_whose_interrupt_was_lost_still_stops_the_run(tmp_path):
    """Python runs a signal handler wherever the main thread is; inside a gc callback (Hypothesis
    installs one) its KeyboardInterrupt is printed and dropped, and the run went on, failing
    every later test ("not booting: the run is over") with exit 1 instead of INTERRUPTED
    (reproduced by sending SIGTERM 0.5 s after the first server came up). A cancelled pool
    raises the interrupt again at the next boot, and the plugin before the next test."""
    from specgate.deployment import load_deployment
    from specgate.server.pool import ServerPool

    pool = ServerPool(load_deployment(None), tmp_path / "logs")
    try:
        pool.cancelled = True  # what the handler sets before its interrupt was lost
        with pytest.raises(KeyboardInterrupt, match="a signal stopped the run"):
            pool.acquire("baseline")
        assert not pool.live
    finally:
        pool.close()


def test_baseline_is_refused_when_equivalence_did_not_run(sim_deployment, pytester):
    d = sim_deployment()
    result = d.run(pytester, "-k", "speed", "--specgate-update-baselines")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*baseline NOT written: no speculative config passed greedy equivalence*"])
    assert not d.baselines_dir.exists() or not list(d.baselines_dir.glob("*/*.json"))


def test_a_failed_baseline_update_writes_nothing(sim_deployment, pytester):
    """A config diverging in the recording run fails the update, and nothing stored changes: the
    file would replace the stored one whole, dropping that config's figures with it."""
    d = sim_deployment()
    shutil.copytree(REPO_ROOT / "baselines", d.baselines_dir)
    # The stored baselines (a failing case still joins the replay file, as in any run).
    before = {p: p.read_bytes() for p in d.baselines_dir.glob("*/*.json")}
    recorded = d.run(pytester, "--specgate-update-baselines", faults="eagle3-decode:diverge-at=5")
    assert recorded.ret == 1
    recorded.stdout.fnmatch_lines(["*baseline NOT written: a gate test failed in the recording run: *eagle3-decode*"])
    assert {p: p.read_bytes() for p in d.baselines_dir.glob("*/*.json")} == before
    report = d.report()
    assert report["overall"] == "FAIL" and report["overall_reasons"][0].startswith("BASELINE NOT RECORDED: ")
    # What did change is said (a tracked file the next update would find dirty), not "nothing".
    lead = report["overall_reasons"][0]
    assert "the stored baseline is unchanged; 1 failing case(s) joined " in lead and "replay.json" in lead, lead


def test_a_config_not_verified_is_left_out_of_the_baseline(sim_deployment, pytester):
    """A config whose equivalence did not run has figures of an unverified build: the configs
    that were verified are stored, and its gates later fail closed instead of vanishing."""
    d = sim_deployment()
    recorded = d.run(pytester, "--specgate-update-baselines", "-k", "not (greedy_baseline and eagle3-decode)")
    assert recorded.ret == 0, recorded.stdout.str()[-3000:]
    recorded.stdout.fnmatch_lines(["*baseline written:*", "*baseline holds no figures for eagle3-decode: greedy*"])
    (stored,) = d.baselines_dir.glob("*/*.json")
    document = json.loads(stored.read_text())
    assert set(document["configs"]) == {"baseline", "eagle3-prefill"}
    assert document["excluded"] == {"eagle3-decode": "greedy equivalence was not verified in the recording run"}
    later = d.run(pytester, "-k", "regression", "-rs")
    assert later.ret == 1 and outcomes(later)["failed"] == 2
    later.stdout.fnmatch_lines(
        ["*NOT COMPARED*has no figures for eagle3-decode at concurrency 1 (greedy equivalence was not verified*"]
    )


def test_report_goes_to_the_github_step_summary(sim_deployment, pytester, tmp_path):
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    d = sim_deployment()
    result = d.run(pytester, "-k", "beats", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.ret == 0
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, never overwritten
    assert "beats:eagle3-decode-beats-baseline" in text
    # -k beats ran one gate of many: that is never a PASS
    assert "# specgate — sim: **PARTIAL**" in text and "gates: 1 of 7 test(s) ran" in text


def test_much_faster_than_stored_is_reported(sim_deployment, pytester):
    """A stored baseline recorded while eagle3-decode was twice as slow: today's healthy run
    passes, and the report says the config is faster than stored."""
    # 2x, not 1.5x: the note needs the interval's low above 1 + faster_note (1.2), and under load
    # 1.5x measured [1.28, 1.53]. The other configs are not what this is about: LOAD_TOLERANT.
    d = sim_deployment(LOAD_TOLERANT)
    # slowed down, eagle3-decode misses its beats gate, which would fail the update (and store
    # nothing): recording slower figures deliberately leaves that gate out
    recorded = d.run(pytester, "--specgate-update-baselines", "-k", "not beats", faults="eagle3-decode:slowdown=1.0")
    assert "specgate: baseline written:" in recorded.stdout.str(), recorded.stdout.str()[-2000:]
    result = d.run(pytester, "-k", "regression")
    assert result.ret == 0
    assert "eagle3-decode's speedup is +" in result.stdout.str()
    assert "above stored: consider updating the baseline" in result.stdout.str()


def test_changed_reference_flags_fall_back_to_absolute_speed(sim_deployment, pytester, healthy_baselines):
    """A speedup over a reference booted with other flags says nothing: the speculative configs
    are then judged on their own absolute figures, and the report says why."""
    # About the fallback and its note; the absolute figures vs a baseline recorded minutes earlier
    # decide on the load (eagle3-decode's interval reached 0.86 against 0.85): LOAD_TOLERANT.
    flags = {"configs": {"baseline": {"args": ["--sim-step-ms", "2.0"]}}}
    d = with_baselines(sim_deployment({**flags, **LOAD_TOLERANT}), healthy_baselines)
    result = d.run(pytester, "-k", "regression", "-rs")
    # the reference itself cannot be compared (its flags changed): that fails closed, alone
    assert result.ret == 1 and outcomes(result)["failed"] == 1, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*NOT COMPARED: baseline's launch flags changed since*not comparable*"])
    gates = {g["gate"]: g for g in d.report()["gates"]}
    spec = gates["regression:eagle3-decode:c1:decode_tps"]
    assert spec["status"] == "pass" and "ratio_to_stored" in spec["figures"]
    assert any("judged on absolute decode tok/s" in n for n in spec["notes"])


def test_equivalence_declared_not_checkable_says_so_everywhere(sim_deployment, pytester):
    """A deployment whose outputs are not a model's (dummy weights, simulated accepts) may turn
    equivalence off, with its reason: the tests skip saying so, the report and the stored
    baseline carry NOT CHECKED, and the speed gates still run."""
    reason = "dummy weights in this test"
    d = sim_deployment({"equivalence": {"enabled": False, "skip_reason": reason}})
    result = d.run(pytester, "--specgate-update-baselines", "-rs")
    assert result.ret == 0, "\n".join(result.outlines[-30:])
    result.stdout.fnmatch_lines([f"*greedy equivalence NOT CHECKED (the deployment says: {reason})*"])
    report = d.report()
    assert report["equivalence_not_checked"] == reason and report["equivalence"] == []
    assert "**NOT CHECKED**" in (d.report_dir / "report.md").read_text()
    stored = json.loads(next(d.baselines_dir.rglob("*.json")).read_text())
    assert stored["equivalence"].startswith("NOT CHECKED") and stored["excluded"] == {}
    assert set(stored["configs"]) == {"baseline", "eagle3-prefill", "eagle3-decode"}


def test_turning_equivalence_off_needs_a_reason(sim_deployment, pytester):
    d = sim_deployment({"equivalence": {"enabled": False}})
    result = d.run(pytester)
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*field 'equivalence.skip_reason'*required when enabled = false*"])


def test_a_regression_hidden_behind_a_harmless_flag_fails_closed(sim_deployment, pytester, healthy_baselines):
    """The issue's case: eagle3-decode 20% slower, and the same change adds a harmless flag to
    it. Its stored figures no longer pair, so nothing is compared: that must not be green."""
    decode = {"args": [*sim_deployment_dict()["configs"]["eagle3-decode"]["args"], "--sim-meta-names", "new"]}
    d = with_baselines(sim_deployment({"configs": {"eagle3-decode": decode}}), healthy_baselines)
    result = d.run(pytester, "-k", "regression", "-rs", faults="eagle3-decode:slowdown=0.2")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*NOT COMPARED: eagle3-decode's launch flags changed*"])
    assert d.report()["overall"] != "PASS"


def test_a_server_that_dies_answering_the_second_opinion_leaves_the_wrong_answer_as_the_headline(sim_deployment, pytester):
    """Spec v2 EAGLE servers crashed on logprob requests in some SGLang releases (#17349): the
    request asking about a parting may kill the server. The verdict still leads with the wrong
    answer found first, and says what happened after it."""
    d = sim_deployment()
    result = d.run(pytester, "-k", "equivalence", faults="eagle3-decode:diverge-at=3;eagle3-decode:crash-after=2")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*EquivalenceFailure: [[]eagle3-decode[]] decisive divergence at output token 3*", "*afterwards the server failed*"]
    )
    told = next(e for e in d.report()["equivalence"] if e["config"] == "eagle3-decode")["divergences"][0]
    assert told["second_opinion"].startswith("asked again with logprobs, no reading (ServerDiedError"), told


def test_second_opinions_can_be_turned_off(sim_deployment, pytester):
    d = sim_deployment({"equivalence": {"second_opinions": 0}})
    result = d.run(pytester, "-k", "equivalence", faults="eagle3-decode:diverge-at=3")
    assert result.ret == 1
    told = next(e for e in d.report()["equivalence"] if e["config"] == "eagle3-decode")["divergences"]
    assert told and all(t["second_opinion"] == "" for t in told)
    assert "second opinion" not in result.stdout.str()
