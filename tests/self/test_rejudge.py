"""Failing and excused answers kept in report.json, judged again without a server (`specgate rejudge`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specgate.cli import main
from specgate.client import FinishReason, GenerateRequest, GenerateResult
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.check import EquivalenceStats, compare
from specgate.equivalence.evidence import KEPT_FAILED, KEPT_FLIPS, keep, kept_pair, rejudge
from specgate.equivalence.known import STOP_LIST_ORDER
from specgate.report.model import KeptPair

ROOT = Path(__file__).parents[2]
ROUND3 = ROOT / "results/2026-12-02-h200-round3/2-gate-update/smollm2-eagle3-h200-update/report/report.json"
DEPLOYMENT = ROOT / "fixtures/deployments/smollm2-eagle3-h200.toml"


def _answer(ids, text, finish, tops=None):
    return GenerateResult(
        request=GenerateRequest(max_new_tokens=40, text="hi"),
        text=text,
        output_ids=tuple(ids),
        prompt_tokens=1,
        completion_tokens=len(ids),
        finish_reason=finish,
        e2e_s=0.1,
        server_e2e_s=None,
        top_logprobs=tops,
    )


# The H200 case of results/2026-12-02-h200-round3 in miniature: the baseline stopped on '\n\n', one
# verify step accepted '\n\n', '1', '.', and the speculative server ended on '.', listed first.
CASE = GenerationCase("long_context/long_context-01 [system]", "Quarterly report ...", 40, (".", "\n\n"), 2)
BASE = _answer([11, 12, 13, 14], "Facts:", FinishReason("stop", "\n\n"), tops=(((11, -0.1), (9, -2.0)),) * 4)
SPEC = _answer([11, 12, 13, 14, 15, 16], "Facts:\n\n1", FinishReason("stop", "."))


def _kept(case=CASE, base=BASE, spec=SPEC, tolerate=(), tie_margin=0.3):
    outcome = compare(case, base, spec, tie_margin, "b", "s", tolerate, max_tokens_per_step=3)
    return outcome, KeptPair.model_validate(json.loads(json.dumps(kept_pair(case, outcome, base, spec))))


def test_a_kept_answer_judged_again_gets_todays_shape_and_the_deployments_tolerance():
    outcome, pair = _kept()
    assert outcome.shape == STOP_LIST_ORDER and not outcome.ok
    again = rejudge(pair, 0.3, (), 3)
    assert again.then == f"invariant ({STOP_LIST_ORDER})" and again.now.shape == STOP_LIST_ORDER and not again.now.ok
    excused = rejudge(pair, 0.3, (STOP_LIST_ORDER,), 3)
    assert excused.now.kind == "tolerated"
    # The step size comes from the deployment: unknown, the shape cannot be told and it fails.
    assert not rejudge(pair, 0.3, (STOP_LIST_ORDER,), None).now.ok


def test_a_parting_is_judged_again_from_the_baselines_kept_logprobs():
    """The margin where two answers part is read from the baseline's kept top logprobs, so the
    deployment's tie margin decides again: a gap of 0.25 nats is a flip under 0.3, decisive under 0.1."""
    tops = (((11, -0.1), (9, -2.0)), ((12, -0.5), (21, -0.75)), ((13, -0.1), (9, -3.0)))
    base = _answer([11, 12, 13], "a b c", FinishReason("length"), tops=tops)
    spec = _answer([11, 21, 13], "a x c", FinishReason("length"))
    case = GenerationCase("chat/chat-05", "Why?", 3, (), 1)
    outcome, pair = _kept(case, base, spec, tie_margin=0.1)
    assert outcome.kind == "divergence"
    assert pair.baseline.top_ids == [[11, 9], [12, 21], [13, 9]] and pair.speculative.top_ids is None
    assert rejudge(pair, 0.1, (), 3).now.kind == "divergence"
    assert rejudge(pair, 0.3, (), 3).now.kind == "near-tie-flip"


def test_failing_excused_and_near_tie_answers_are_kept_copies_counted_distinct_ones_capped():
    stats = EquivalenceStats()
    match = compare(CASE, BASE, BASE, 0.3, "b", "s", max_tokens_per_step=3)
    keep(stats, CASE, match, BASE, BASE)
    assert stats.kept == []
    failed = compare(CASE, BASE, SPEC, 0.3, "b", "s", max_tokens_per_step=3)
    for _ in range(4):  # a batch of four alike is one pair standing for four answers
        keep(stats, CASE, failed, BASE, SPEC)
    assert len(stats.kept) == 1 and stats.kept[0]["copies"] == 4
    for k in range(KEPT_FAILED + 3):
        other = replace(CASE, label=f"long_context/{k}")
        keep(stats, other, failed, BASE, SPEC)
        keep(stats, other, compare(other, BASE, SPEC, 0.3, "b", "s", (STOP_LIST_ORDER,), max_tokens_per_step=3), BASE, SPEC)
    kinds = [p["kind"] for p in stats.kept]
    assert kinds.count("invariant") == KEPT_FAILED and kinds.count("tolerated") == KEPT_FAILED
    # Near-tie flips too (a smaller tie margin may call them decisive), capped alike.
    tops = (((11, -0.1), (9, -2.0)), ((12, -0.5), (21, -0.75)), ((13, -0.1), (9, -3.0)))
    base = _answer([11, 12, 13], "a b c", FinishReason("length"), tops=tops)
    spec = _answer([11, 21, 13], "a x c", FinishReason("length"))
    for k in range(KEPT_FLIPS + 2):
        case = GenerationCase(f"chat/{k}", "Why?", 3, (), 1)
        keep(stats, case, compare(case, base, spec, 0.3, "b", "s"), base, spec)
    assert [p["kind"] for p in stats.kept].count("near-tie-flip") == KEPT_FLIPS
    # A long prompt is kept in part, its length said.
    long_case = replace(CASE, label="long", text="x" * 100_000)
    keep(stats, long_case, failed, BASE, SPEC)
    assert all(len(p["case"]["text"]) <= 8000 for p in stats.kept)


def _report_with(tmp_path, pairs, version=5, only_decode_failed=False):
    """A real H200 report.json (schema 4: 2 failing answers on eagle3-decode, 2 on eagle3-tree)
    given `pairs` kept on its eagle3-decode row (and, if asked, one failure there and none on tree)."""
    data = json.loads(ROUND3.read_text())
    data["schema_version"] = version
    for row in data["equivalence"]:
        row["kept"] = pairs if row["config"] == "eagle3-decode" else []
        if only_decode_failed:
            row["decisive_failures"] = int(row["config"] == "eagle3-decode")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    return path


def test_rejudge_says_what_changed_and_exits_by_what_fails_now(tmp_path, capsys):
    _, pair = _kept()
    path = _report_with(tmp_path, [pair.model_dump()], only_decode_failed=True)
    # The shipped deployment declares the shape (its tie margin and step sizes apply): excused now.
    assert main(["rejudge", str(path), str(DEPLOYMENT)]) == 0
    out = capsys.readouterr().out
    assert f"then invariant ({STOP_LIST_ORDER}); now tolerated ({STOP_LIST_ORDER})" in out
    assert "1 kept answer(s) judged again: 0 fail now" in out and "eagle3-decode: kept 1 of 1 failing" in out
    # A deployment that does not declare it: it fails now as then.
    undeclared = tmp_path / "undeclared.toml"
    undeclared.write_text(DEPLOYMENT.read_text().replace(', "stop-list-order"]', "]"))
    assert main(["rejudge", str(path), str(undeclared)]) == 1
    assert f"now invariant ({STOP_LIST_ORDER})" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda tmp: ROUND3, "schema_version 4 keeps no answers (5 and later do): nothing to judge again"),
        (lambda tmp: _report_with(tmp, [{"case": {}}]), "not a specgate report.json of schema_version 5"),
        (lambda tmp: tmp / "absent.json", "absent.json"),
    ],
)
def test_rejudge_refuses_what_it_cannot_judge_naming_the_file(tmp_path, capsys, edit, words):
    assert main(["rejudge", str(edit(tmp_path)), str(DEPLOYMENT)]) == 2
    assert words in capsys.readouterr().err


def test_rejudge_names_a_config_the_deployment_lacks_and_refuses_another_deployment(tmp_path, capsys):
    _, pair = _kept()
    path = _report_with(tmp_path, [pair.model_dump()])
    other = ROOT / "fixtures/deployments/smollm2-eagle3-h200-answers.toml"
    assert main(["rejudge", str(path), str(other)]) == 2
    assert "deployment 'smollm2-eagle3-h200-answers', but" in capsys.readouterr().err
    kept_on_prefill = json.loads(path.read_text())
    kept_on_prefill["deployment"] = "smollm2-eagle3-h200-answers"
    for row in kept_on_prefill["equivalence"]:
        row["kept"] = [pair.model_dump()] if row["config"] == "eagle3-prefill" else []
    path.write_text(json.dumps(kept_on_prefill))
    assert main(["rejudge", str(path), str(other)]) == 2
    assert "has no config eagle3-prefill" in capsys.readouterr().err


def test_failures_the_report_did_not_keep_are_never_cleared(tmp_path, capsys):
    """The H200 run failed 2 answers on decode and 2 on tree; a report keeping only decode's
    cannot say the run is clear, whatever today's check says of them."""
    _, pair = _kept()
    assert main(["rejudge", str(_report_with(tmp_path, [])), str(DEPLOYMENT)]) == 2
    out = capsys.readouterr().out
    assert "eagle3-decode: kept 0 of 2 failing" in out and "4 failing answer(s) of the run were not kept" in out
    both = pair.model_copy(update={"copies": 2}).model_dump()
    assert main(["rejudge", str(_report_with(tmp_path, [both])), str(DEPLOYMENT)]) == 2
    assert "2 failing answer(s) of the run were not kept" in capsys.readouterr().out
    data = json.loads(_report_with(tmp_path, [both]).read_text())
    for row in data["equivalence"]:
        row["kept"] = [both] if row["config"] in ("eagle3-decode", "eagle3-tree") else []
    (tmp_path / "all.json").write_text(json.dumps(data))
    assert main(["rejudge", str(tmp_path / "all.json"), str(DEPLOYMENT)]) == 0
    assert "2 kept answer(s) judged again: 0 fail now" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda a: a.update(top_logprobs=[[-0.1, -2.0]] * 3), "differ in length"),
        (lambda a: a.update(top_logprobs=[[-2.0, -0.1]] * 4), "expected best first"),
        (lambda a: a.update(top_ids=[[11]] * 4), "top_ids[0] and top_logprobs[0] differ in length"),
        (lambda a: a.update(finish_reason="banana"), "finish_reason"),
        (lambda a: a.update(completion_tokens=-1), "completion_tokens"),
    ],
)
def test_kept_answers_that_would_judge_another_answer_are_refused(tmp_path, capsys, edit, words):
    _, pair = _kept()
    bad = pair.model_dump()
    edit(bad["baseline"])
    assert main(["rejudge", str(_report_with(tmp_path, [bad])), str(DEPLOYMENT)]) == 2
    err = capsys.readouterr().err
    assert words in err and "kept" in err, err


def test_the_h200_standalone_answer_a_run_called_past_stop_is_stop_list_order_judged_again():
    """Issue 32, item 5: kept as the run judged it (invariant, past-stop), the STANDALONE answer of
    code/code-00 (stop ['\\n\\n', '.'], plain stopped on '.' after 26 tokens, '.' 30 and '\\n\\n' 1004
    in one verify step) is stop-list-order now, excused where the config declares it, even where
    its args give no step size."""
    case = GenerationCase("code/code-00", "Write a Python function ...", 52, ("\n\n", "."), 1)
    text = "Here is a Python function that returns the n-th Fibonacci number using memoization"
    ids = [*range(200, 225), 30]
    base = _answer(ids, text, FinishReason("stop", "."))
    spec = _answer([*ids, 1004], text + ".", FinishReason("stop", "\n\n"))
    kept = kept_pair(case, compare(case, base, spec, 0.3, "b", "s"), base, spec)
    kept.update(kind="invariant", shape="past-stop")  # what the run (the old check) said
    pair = KeptPair.model_validate(json.loads(json.dumps(kept)))
    again = rejudge(pair, 0.3, (STOP_LIST_ORDER,), None)
    assert again.then == "invariant (past-stop)" and again.now.kind == "tolerated" and again.now.shape == STOP_LIST_ORDER
    assert rejudge(pair, 0.3, (), None).now.shape == STOP_LIST_ORDER and not rejudge(pair, 0.3, (), None).now.ok
