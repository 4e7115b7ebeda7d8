"""The reference taken from the stored baseline (`launch.reference_from = "stored"`).

A baseline update boots the reference and stores its per-request figures and its golden
answers; a gate run then boots only the speculative configs. Every way the stored stand-in can
be wrong (no baseline, another machine or SGLang, other reference flags, no golden answers, no
between-boot spread for intervals that cross boots) fails the run closed and names it, and
never boots the reference to make up for it; each gate still fails for its own reason.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tomli_w
from helpers import SimDeployment, merge, recorded_baselines, sim_deployment_dict, with_baselines

from specgate.deployment import parse_deployment
from specgate.equivalence.cases import FIRST_TOKEN_STOP_EDGE
from specgate.errors import BaselineError, DeploymentError, ServerBootError
from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.server.pool import ServerPool
from specgate.verdicts.baselines import READABLE_FORMATS, load_baseline

SPREAD = {"decode_tps": 0.05, "speedup": 0.05, "source": "self-test: assumed 5%"}
# Sampling needs the reference booted to score every sample: the deployment turns it off (said in the
# report); without that, a run that skipped it would be PARTIAL (tests/self/test_sampling_in_turns.py).
STORED = {"launch": {"reference_from": "stored"}, "gates": {"between_boot": SPREAD}, "sampling": {"enabled": False}}
# As in test_e2e_gate.py: a test about something other than speed keeps its regression gates
# comparing without deciding on the machine's load since the baseline was recorded; a test about
# a speed change provokes one of 2x and keeps the deployment's own tolerance where it expects a FAIL.
LOAD_TOLERANT = {"gates": {"tolerance": {"decode_tps": 0.5}}}


@pytest.fixture(scope="module")
def stored_baselines(tmp_path_factory):
    """A baseline update of a stored-reference deployment: it boots the reference and stores its answers."""
    return recorded_baselines(tmp_path_factory.mktemp("stored"), STORED)


def stored_file(d):
    (path,) = (d.baselines_dir / "sim").glob("*.json")
    return path


def rewrite(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def never_booted(d, result):
    """The reference's server never started: no boot, no log, no boot line."""
    assert all(b["config"] != "baseline" for b in d.report()["boots"]), d.report()["boots"]
    assert not (d.report_dir / "logs" / "baseline.log").exists()
    assert "specgate: booting baseline" not in result.stdout.str()


def test_the_update_stores_the_references_golden_answers(stored_baselines):
    (path,) = (stored_baselines / "sim").glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == READABLE_FORMATS[-1]
    golden = doc["golden"]
    assert golden["reference"] == "baseline" and golden["top_logprobs"] == 2 and len(golden["cases"]) >= 5
    first = golden["cases"][0]["answer"]
    assert first["output_ids"] and all(len(pos) >= 2 for pos in first["top_logprobs"])
    assert doc["configs"]["baseline"]["boot_seconds"] > 0
    assert load_baseline(path).golden is not None
    # The edge derived from the reference's answers is stored with the rest: its stop string is
    # the stored one-token answer (a gate run, the reference not booted, could not derive it).
    one = next(c for c in golden["cases"] if c["case"]["label"].endswith("(edge: max_new_tokens 1)"))
    (edge,) = [c for c in golden["cases"] if c["case"]["label"].endswith(f"(edge: {FIRST_TOKEN_STOP_EDGE})")]
    assert edge["case"]["stop"] == [one["answer"]["text"]] and edge["answer"]["text"] == ""


def test_a_run_with_the_stored_reference_passes_without_booting_it(sim_deployment, pytester, stored_baselines):
    # A bar well under the simulator's 1.5x: the stored reference was measured minutes earlier,
    # perhaps under another load; this test is about the path, the slowdown test about the bar.
    gates = {"gates": {"beats": [{"config": "eagle3-decode", "ratio": 1.05}]}}
    d = with_baselines(sim_deployment(merge(merge(STORED, LOAD_TOLERANT), gates)), stored_baselines)
    result = d.run(pytester)
    assert result.ret == 0, result.stdout.str()[-4000:]
    report = d.report()
    assert report["overall"] == "PASS", report["overall_reasons"]
    never_booted(d, result)
    s = report["reference_from_stored"]
    assert s["problem"] is None and s["baseline_file"] == str(stored_file(d))
    assert s["fingerprint_from"] in ("eagle3-prefill", "eagle3-decode") and s["boots_saved"] == 1
    assert s["stored_boot_seconds"] > 0 and report["phase_seconds"]["equivalence"] > 0
    # equivalence checked exactly the stored cases, against the stored answers
    rows = {e["config"]: e for e in report["equivalence"]}
    assert set(rows) == {"eagle3-prefill", "eagle3-decode"}
    assert all(r["cases"] == s["golden_cases"] and r["tokens_compared"] > 0 for r in rows.values())
    gates = {g["gate"]: g for g in report["gates"]}
    assert not any(name.startswith("regression:baseline") for name in gates)  # nothing of it measured now
    beats = gates["beats:eagle3-decode-beats-baseline"]
    assert beats["status"] == "pass" and "plus between-boot spread 5.0%" in beats["noise"]
    assert any("the reference was not booted" in n for n in beats["notes"])
    spec = gates["regression:eagle3-decode:c1:decode_tps"]
    assert spec["status"] == "pass" and any("own decode tok/s now vs stored" in n for n in spec["notes"])
    text = (d.report_dir / "report.md").read_text()
    top = text.split("\n## ")[0]
    assert "REFERENCE NOT BOOTED" in top and stored_file(d).name in top and "Which noise each interval against it holds" in top
    assert "baseline (STORED, not booted)" in text and "Boots saved: baseline ×1" in text


def test_servers_one_at_a_time_boot_only_the_speculative_configs(sim_deployment, pytester, stored_baselines):
    """Where servers cannot coexist (the case this is for: one big model per GPU set), each
    speculative config boots once, in turn, and the reference not at all."""
    one_at_a_time = {"launch": {"coexist": False}}
    d = with_baselines(sim_deployment(merge(merge(STORED, LOAD_TOLERANT), one_at_a_time)), stored_baselines)
    result = d.run(pytester, "-k", "equivalence or speed")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert [b["config"] for b in d.report()["boots"]] == ["eagle3-prefill", "eagle3-decode"]
    never_booted(d, result)


def test_a_baseline_of_another_sglang_fails_closed_naming_it(sim_deployment, pytester, stored_baselines):
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    rewrite(stored_file(d), lambda doc: doc["fingerprint"].update(sglang="0.5.99"))
    result = d.run(pytester, "-rs", "--strict-uncompared")
    assert result.ret == 1
    text = result.stdout.str()
    assert "sglang: stored '0.5.99', now" in text and "the reference was not booted" in text
    result.stdout.fnmatch_lines(["*greedy equivalence NOT CHECKED: the reference was not booted*sglang: stored '0.5.99'*"])
    report = d.report()
    assert report["overall"] != "PASS" and "0.5.99" in report["reference_from_stored"]["problem"]
    never_booted(d, result)
    # allowed: a loud warning and PARTIAL, never a pass; the reference is still not booted
    result = d.run(pytester, "-rs", "--specgate-allow-uncompared")
    assert result.ret == 0
    assert d.report()["overall"] == "PARTIAL" and "NOT BOOTED" in (d.report_dir / "report.md").read_text()
    never_booted(d, result)
    # knowingly compared with another machine's baseline: used, and the report says so at the top
    result = d.run(pytester, "--specgate-allow-fingerprint-mismatch")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert "fingerprint differs (sglang: stored '0.5.99'" in d.report()["reference_from_stored"]["note"]
    assert "allowed by the user" in (d.report_dir / "report.md").read_text().split("\n## ")[0]
    never_booted(d, result)


def test_changed_reference_flags_fail_closed(sim_deployment, pytester, stored_baselines):
    changed = {"configs": {"baseline": {"env": {"SPECGATE_SELF_TEST_FLAG": "1"}}}}
    d = with_baselines(sim_deployment(merge(merge(STORED, LOAD_TOLERANT), changed)), stored_baselines)
    result = d.run(pytester, "-rs", "--strict-uncompared")
    assert result.ret == 1
    assert "its launch flags or environment changed since" in result.stdout.str()
    assert d.report()["overall"] != "PASS"
    never_booted(d, result)


def test_a_baseline_without_golden_answers_fails_closed(sim_deployment, pytester, stored_baselines):
    """An old (format /1) baseline still loads; it holds no answers, so equivalence cannot run."""
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)

    def to_format_1(doc):
        doc.pop("golden")
        doc["format"] = READABLE_FORMATS[0]

    rewrite(stored_file(d), to_format_1)
    result = d.run(pytester, "-rs", "-k", "equivalence", "--strict-uncompared")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*NOT CHECKED*holds no golden answers of the reference 'baseline'*"])
    assert d.report()["overall"] == "FAIL"
    never_booted(d, result)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # a truncated list (or a recording with --examples 1) checks next to nothing
        (lambda doc: doc["golden"].update(cases=doc["golden"]["cases"][:1]), "*golden answers for 1 distinct case(s)*"),
        # answers drawn under other stop strings / lengths check nothing this deployment asks
        (lambda doc: doc["golden"].update(case_settings="0123456789abcdef"), "*drawn from other equivalence settings*"),
        (lambda doc: doc["golden"].pop("case_settings"), "*not recorded then*"),
    ],
)
def test_stored_answers_that_cannot_check_this_deployment_fail_closed(
    sim_deployment, pytester, stored_baselines, change, expected
):
    """Found by a hostile review: with these a diverging config passed on the stored reference."""
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    rewrite(stored_file(d), change)
    result = d.run(pytester, "-rs", "-k", "equivalence", "--strict-uncompared", faults="*:diverge-at=5")
    assert result.ret == 1
    result.stdout.fnmatch_lines([expected])
    assert d.report()["overall"] == "FAIL"
    never_booted(d, result)


def test_two_different_stored_answers_to_one_request_are_refused(tmp_path, stored_baselines):
    (source,) = (stored_baselines / "sim").glob("*.json")
    doc = json.loads(source.read_text())
    cases = doc["golden"]["cases"]
    first = next(i for i, c in enumerate(cases) if int(c["case"]["concurrency"]) > 1)
    twin = next(i for i, c in enumerate(cases) if i != first and c["case"]["text"] == cases[first]["case"]["text"]
                and c["case"]["max_new_tokens"] == cases[first]["case"]["max_new_tokens"]
                and c["case"]["stop"] == cases[first]["case"]["stop"])
    later = max(first, twin)
    cases[later]["answer"]["output_ids"][0] += 1
    path = tmp_path / source.name
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match=rf"golden.cases\[{later}\].answer.*differs from"):
        load_baseline(path)


def test_a_diverging_config_fails_equivalence_against_the_stored_answers(sim_deployment, pytester, stored_baselines):
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    result = d.run(pytester, "-k", "equivalence", faults="eagle3-decode:diverge-at=3")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*decisive divergence at output token 3*", "FAILED *test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]*"]
    )
    failed = [e["config"] for e in d.report()["equivalence"] if e["decisive_failures"]]
    assert failed == ["eagle3-decode"]
    never_booted(d, result)


def test_the_first_token_stop_edge_is_checked_from_the_stored_answers_and_a_baseline_before_it_still_passes(
    sim_deployment, pytester, stored_baselines
):
    """Issue 14's edge on a stored reference: the case and its answer come from the baseline. One
    recorded before the edge existed lacks it and still passes, then also with a server that
    misses a stop string in the first token: its other cases (the fixed edges, seed 0's draws)
    do not catch that fault; the stored edge does."""
    fault = "eagle3-decode:prefill-stop-miss"
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    result = d.run(pytester, "-k", "equivalence", faults=fault)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*decisive failure(s); first:*",
            "*text runs past stop string *: found at char 0*",
            f"*(edge: {FIRST_TOKEN_STOP_EDGE})*",
            "FAILED *test_speculative_output_is_greedy_baseline[[]eagle3-decode[]]*",
        ]
    )
    never_booted(d, result)

    def before_the_edge(doc):
        cases = doc["golden"]["cases"]
        doc["golden"]["cases"] = [c for c in cases if FIRST_TOKEN_STOP_EDGE not in c["case"]["label"]]
        assert len(doc["golden"]["cases"]) == len(cases) - 1

    old = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    rewrite(stored_file(old), before_the_edge)
    for faults in ("", fault):
        result = old.run(pytester, "-k", "equivalence", faults=faults)
        assert result.ret == 0, result.stdout.str()[-3000:]
        report = old.report()
        stored_cases = report["reference_from_stored"]["golden_cases"]
        assert all(e["cases"] == stored_cases and not e["not_checked"] for e in report["equivalence"])
        never_booted(old, result)


def test_a_slower_speculative_config_fails_beats_and_regression(sim_deployment, pytester, stored_baselines):
    # Every eagle3-decode step twice as dear: 0.75x the stored reference against a bar of 1.15x, and
    # half its stored speed against a 15% tolerance. eagle3-prefill is not what this is about.
    tolerant = {"gates": {"tolerance": {"decode_tps_by_config": {"eagle3-prefill": 0.5}}}}
    d = with_baselines(sim_deployment(merge(STORED, tolerant)), stored_baselines)
    result = d.run(pytester, "-k", "beats or regression", faults="eagle3-decode:slowdown=1.0")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "FAILED *test_speculation_beats_reference[[]eagle3-decode-beats-baseline[]]*",
            "FAILED *test_no_regression_against_stored_baseline[[]eagle3-decode-c1-decode_tps[]]*",
        ]
    )
    failed = [line for line in result.stdout.str().splitlines() if line.startswith("FAILED")]
    assert len(failed) == 2, failed
    never_booted(d, result)


def test_a_drafter_gone_bad_fails_the_accept_length_gates(sim_deployment, pytester, stored_baselines):
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    result = d.run(pytester, "-k", "accept", faults="eagle3-decode:accept-collapse")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "FAILED *test_accept_length_floor[[]eagle3-decode-accepts-1.8[]]*",
            "FAILED *test_no_regression_against_stored_baseline[[]eagle3-decode-c1-accept_length[]]*",
        ]
    )
    never_booted(d, result)


def test_without_a_between_boot_spread_timing_gates_are_not_compared(sim_deployment, pytester, stored_baselines):
    d = with_baselines(sim_deployment({"launch": {"reference_from": "stored"}, **LOAD_TOLERANT}), stored_baselines)
    result = d.run(pytester, "-rs", "-k", "beats or regression", "--strict-uncompared")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*NOT COMPARED*no between-boot spread is known for this machine*"])
    statuses = {g["gate"]: g["status"] for g in d.report()["gates"]}
    assert statuses["beats:eagle3-decode-beats-baseline"] == "not compared"
    assert statuses["regression:eagle3-decode:c1:accept_length"] == "pass"  # not a timing figure


def test_a_replay_case_without_a_stored_answer_is_not_checked(sim_deployment, pytester, stored_baselines):
    d = with_baselines(sim_deployment(merge(STORED, LOAD_TOLERANT)), stored_baselines)
    case = {"label": "added since the baseline", "text": "Say hello.", "max_new_tokens": 5, "stop": [], "concurrency": 1}
    replay = d.baselines_dir / "sim" / "equivalence" / "replay.json"
    replay.parent.mkdir(parents=True, exist_ok=True)
    replay.write_text(json.dumps({"deployment": "sim", "cases": [{"case": case, "config": "eagle3-decode", "why": "x"}]}))
    result = d.run(pytester, "-rs", "-k", "equivalence", "--strict-uncompared")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*NOT CHECKED*1 case(s) have no stored answer*added since the baseline*"])
    report = d.report()
    assert all(e["not_checked"] == ["added since the baseline"] for e in report["equivalence"])
    assert report["overall"] != "PASS"


# --- the deployment field ----------------------------------------------------------------
def _no_speculation() -> dict:
    data = sim_deployment_dict()
    data["configs"] = {"baseline": {"args": []}}
    data["gates"] = {}
    data.pop("sweep")
    return data


@pytest.mark.parametrize(
    ("data", "field", "expected"),
    [
        (merge(sim_deployment_dict(), {"launch": {"reference_from": "disk"}}), "launch.reference_from", "one of boot, stored"),
        (
            merge(sim_deployment_dict(), {"launch": {"reference_from": "stored", "launcher": "url"}}),
            "launch.reference_from",
            'applies to launch.launcher = "local" or "ssh"',
        ),
        (
            merge(sim_deployment_dict(), {**STORED, "configs": {"eagle3-decode": {"command": ["/opt/py", "-m", "x"]}}}),
            "configs.eagle3-decode.command",
            "must be the reference's install",
        ),
        (
            merge(
                sim_deployment_dict(),
                {**STORED, "configs": {"plain2": {"args": []}, "eagle3-decode": {"reference": "plain2"}}},
            ),
            "configs.eagle3-decode.reference",
            "holds the figures and golden answers of the deployment's reference 'baseline' only",
        ),
        (merge(_no_speculation(), STORED), "launch.reference_from", "no config under [configs] speculates"),
    ],
)
def test_a_stored_reference_that_cannot_work_is_refused_naming_the_field(tmp_path, data, field, expected):
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    with pytest.raises(DeploymentError) as err:
        parse_deployment(data, path)
    message = str(err.value)
    assert str(path) in message and f"field '{field}'" in message and expected in message, message


def test_check_describes_the_stored_reference_deployment():
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "check", "sim-stored-reference"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert "[SIMULATOR]" in run.stdout and "reference 'baseline' NOT BOOTED by a gate run" in run.stdout
    assert "not seen: how the reference drifted" in run.stdout


def test_the_pool_refuses_to_boot_a_reference_taken_from_the_stored_baseline(tmp_path):
    data = merge(sim_deployment_dict(), STORED)
    pool = ServerPool(parse_deployment(data, tmp_path / "dep.toml"), tmp_path)
    pool.never_boot("baseline", "taken from the stored baseline")
    try:
        for ask in (lambda: pool.acquire("baseline"), lambda: pool.boot(["baseline@2"])):
            with pytest.raises(ServerBootError, match="not booting 'baseline.*': taken from the stored baseline"):
                ask()
        assert not pool.live and not pool.boots
    finally:
        pool.close()


# --- the stored format --------------------------------------------------------------------
def test_every_committed_baseline_still_loads():
    paths = sorted((REPO_ROOT / "baselines").glob("*/*.json"))
    assert paths
    for path in paths:
        assert load_baseline(path).format in READABLE_FORMATS


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda g: g["cases"][0]["answer"].update(output_ids="12"), "golden.cases[0].answer.output_ids"),
        (lambda g: g["cases"][0]["answer"]["top_logprobs"].__setitem__(0, [[5, -0.1]]), "golden.cases[0].answer.top_logprobs[0]"),
        (lambda g: g["cases"][1]["case"].update(max_new_tokens=0), "golden.cases[1].case.max_new_tokens"),
        (lambda g: g.update(top_logprobs=1), "golden.top_logprobs"),
        (lambda g: g.update(cases=[]), "golden.cases"),
    ],
)
def test_broken_golden_answers_are_refused_naming_the_field(tmp_path, stored_baselines, change, field):
    (source,) = (stored_baselines / "sim").glob("*.json")
    path = tmp_path / source.name
    doc = json.loads(source.read_text())
    change(doc["golden"])
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError) as err:
        load_baseline(path)
    assert str(path) in str(err.value) and f"field '{field}'" in str(err.value), str(err.value)


def test_a_format_1_file_with_golden_answers_is_refused(tmp_path, stored_baselines):
    (source,) = (stored_baselines / "sim").glob("*.json")
    path = tmp_path / source.name
    rewrite_to = json.loads(source.read_text())
    rewrite_to["format"] = READABLE_FORMATS[0]
    path.write_text(json.dumps(rewrite_to))
    with pytest.raises(BaselineError, match="format specgate-baseline/1 holds none"):
        load_baseline(path)


def test_the_update_refuses_to_store_a_baseline_without_golden_answers(tmp_path):
    """A stored-reference baseline without answers would fail every later run: it is not written."""
    d = SimDeployment(tmp_path / "d", STORED)
    result = d.run(None, "-k", "not golden", "--specgate-update-baselines")
    assert result.ret == 1
    out = "\n".join(result.outlines)
    # Its equivalence tests fail without the answers, and a baseline update with a failed test
    # stores nothing (whichever of the two reasons it names first).
    assert "BASELINE NOT RECORDED" in out and "golden" in out and "nothing stored changed" in out, out[-1500:]
    assert not list(d.baselines_dir.glob("*/*.json"))
    assert not d.leftovers()


def test_stored_reference_records_of_another_workload_are_not_paired_into_the_report(monkeypatch):
    """A stored reference whose requests sent other prompts (an older request order, another
    workload) must not stand beside ours in the report's ratios: pairing by index would divide
    different traffic. The gates already say NOT COMPARED; the report must not say more."""
    from types import SimpleNamespace

    from specgate import plugin
    from specgate.measure.speed import ConfigSpeed

    ours = {("eagle3", 1): ConfigSpeed("eagle3", 1)}
    meter = SimpleNamespace(results=ours, labels=["chat/0"], workload_digest="new-order")
    stored = SimpleNamespace(
        baseline=SimpleNamespace(workload_digest="old-order"), records=lambda: {("baseline", 1): ConfigSpeed("baseline", 1)}
    )
    gate = SimpleNamespace(meter=meter)
    monkeypatch.setattr(plugin, "_stored_reference", lambda g: stored)
    assert plugin._measured(gate).results is ours  # the stored records left out
    stored.baseline.workload_digest = "new-order"
    assert set(plugin._measured(gate).results) == {("eagle3", 1), ("baseline", 1)}
