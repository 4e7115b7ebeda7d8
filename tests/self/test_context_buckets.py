"""Context buckets (`workload.context_buckets`, issue 48): the field, the long prompts built of the
shipped text, `check`'s refusal of a bucket a launch cannot hold, and the cost it states."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
import tomli_w

from specgate.context_fit import bound_tokens, refusals, unchecked
from specgate.deployment import bucket_view, load_deployment
from specgate.diagnosis.settings import read_settings
from specgate.diagnosis.slope import BucketPoint, context_slope, with_slopes
from specgate.errors import DeploymentError
from specgate.gate_kinds import kind_named, run_gates
from specgate.measure.context import corpus_of, long_prompt, passes_needed
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.prompts import load_prompt_set
from specgate.sweep.plan import plan_sweep, result_name
from specgate.sweep.state import PointResult, SweepState
from specgate.sweep.table import ranked, render_sweep, stops_paying
from specgate.verdicts.baselines import load_baseline, write_baseline
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.gates import FAIL, INCONCLUSIVE, NOT_COMPARED, PASS
from specgate.verdicts.judge import Judge, baseline_document
from tests.self.helpers import merge, sim_deployment_dict


def _dep(tmp_path, workload=None, launch=None, **top):
    data = merge(sim_deployment_dict(), {"workload": workload or {}, "launch": launch or {}, **top})
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return load_deployment(str(path))


# --- the field ---------------------------------------------------------------------------------


def test_buckets_are_token_counts_with_k_for_1024(tmp_path):
    dep = _dep(tmp_path, {"context_buckets": ["1K", 3000, "8k"], "context_repeats": 4})
    assert dep.workload.context_buckets == (1024, 3000, 8192)
    assert dep.workload.context_repeats == 4


def test_no_buckets_is_the_short_workload_as_before(tmp_path):
    dep = _dep(tmp_path)
    assert dep.workload.context_buckets == ()
    assert dep.workload.context_repeats == dep.workload.repeats  # derived: read only where buckets are


@pytest.mark.parametrize(
    ("value", "field", "expected"),
    [
        (["8K", "1K"], "workload.context_buckets", "distinct token counts in increasing order"),
        (["1K", 1024], "workload.context_buckets", "distinct token counts in increasing order"),
        ([128], "workload.context_buckets[0]", "from 256"),
        (["1K", "eight"], "workload.context_buckets[1]", 'like "8K"'),
        ("8K", "workload.context_buckets", "expected a list of token counts"),
        ([True], "workload.context_buckets[0]", "expected a list of token counts"),
    ],
)
def test_a_bad_bucket_is_named(tmp_path, value, field, expected):
    with pytest.raises(DeploymentError) as err:
        _dep(tmp_path, {"context_buckets": value})
    assert f"field '{field}'" in str(err.value) and expected in str(err.value)


def test_context_repeats_without_buckets_is_refused_by_name(tmp_path):
    with pytest.raises(DeploymentError) as err:
        _dep(tmp_path, {"context_repeats": 5})
    assert "field 'workload.context_repeats'" in str(err.value) and "workload.context_buckets is not" in str(err.value)


# --- the long prompts ------------------------------------------------------------------------------


def test_a_long_prompt_is_pinned_real_text_near_its_budget(tmp_path):
    workload = _dep(tmp_path).workload
    first = long_prompt(workload, 2048, 3)
    assert first == long_prompt(workload, 2048, 3)  # a pure function: two runs pair request by request
    assert 0.9 * 2048 * 4 <= len(first.text) <= 2048 * 4  # built to 4 characters a token
    assert first.text.startswith("<|im_start|>user\n") and first.text.endswith("<|im_start|>assistant\n")
    # Real text: sentences of the shipped sets, never random tokens.
    shipped = " ".join(m.content for p in load_prompt_set("long_context") for m in p.messages)
    sentences = [s for s in first.text.split(". ") if len(s) > 40]
    assert sentences and sum(s.strip() in shipped for s in sentences) / len(sentences) > 0.3


def test_each_request_differs_from_its_first_words_so_no_prefix_cache_serves_another(tmp_path):
    workload = _dep(tmp_path).workload
    texts = [long_prompt(workload, 1024, i).text for i in range(6)]
    body_start = len("<|im_start|>user\nDocument collection ")
    assert len({t[: body_start + 2] for t in texts}) == len(texts)
    # ... and the document each opens with rotates too.
    firsts = [t.split("\n\n")[1][:60] for t in texts]
    assert len(set(firsts)) == len(firsts)


def test_a_bucket_longer_than_the_shipped_text_repeats_it_in_another_order(tmp_path):
    workload = _dep(tmp_path).workload
    corpus = corpus_of(workload)
    tokens = 16 * 1024
    prompt = long_prompt(workload, tokens, 0, corpus)
    assert prompt.passes == passes_needed(workload, tokens) > 1
    docs = prompt.text.split("\n\n")
    first_pass = docs[1 : 1 + len(corpus.documents)]
    second_pass = docs[1 + len(corpus.documents) : 1 + 2 * len(corpus.documents)]
    assert sorted(first_pass) == sorted(second_pass) and first_pass != second_pass


def test_a_users_prompt_files_join_the_text(tmp_path):
    rows = [{"id": "mine", "messages": [{"role": "user", "content": "Zebra crossings glow at night in Lisbon."}]}]
    (tmp_path / "mine.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    workload = _dep(tmp_path, {"prompt_files": ["mine.jsonl"]}).workload
    assert "Zebra crossings glow at night in Lisbon." in corpus_of(workload).documents


# --- check: refusals and cost --------------------------------------------------------------------


def test_the_simulators_default_context_length_refuses_a_long_bucket(tmp_path):
    dep = _dep(tmp_path, {"context_buckets": ["1K", "8K"]})
    found = refusals(dep, "baseline", [], simulated=True, model=None)
    need = bound_tokens(8192) + dep.workload.max_new_tokens
    assert found == [
        f"workload.context_buckets 8K needs up to {need} tokens per request (8192 prompt tokens at 4 characters "
        f"each, up to {bound_tokens(8192)} at 3, + max_new_tokens 64), over --context-length 4096 (the simulator's "
        f"default): raise --context-length to at least {need}"
    ]
    assert refusals(dep, "baseline", ["--context-length", str(need)], simulated=True, model=None) == []


def test_a_sweep_bucket_is_held_to_the_sweeps_own_answer_length(tmp_path):
    """The sweep measures its buckets at sweep.max_new_tokens: a longer answer than the workload's
    must fit too, and a bucket only the sweep lists is dropped from the sweep's list."""
    dep = _dep(tmp_path, {"context_buckets": ["1K"]}, sweep={"base": "eagle3-decode", "num_steps": [2], "max_new_tokens": 2000, "context_buckets": ["1K", "2K"]})
    fits_workload = bound_tokens(2048) + dep.workload.max_new_tokens
    found = refusals(dep, "baseline", ["--context-length", str(fits_workload)], simulated=True, model=None)
    assert len(found) == 2, found  # 1K and 2K, each with the sweep's 2000-token answers
    assert all("+ sweep.max_new_tokens 2000" in f for f in found), found
    assert found[1].startswith("sweep.context_buckets 2K")
    enough = bound_tokens(2048) + 2000
    assert refusals(dep, "baseline", ["--context-length", str(enough)], simulated=True, model=None) == []


def test_a_launch_with_no_known_length_limit_is_said_unchecked_not_passed_silently(tmp_path):
    """A url server, or SGLang on a model id with no config.json here, names no limit: check
    cannot hold a bucket to one, and says so instead of passing it in silence."""
    dep = _dep(tmp_path, {"context_buckets": ["1K", "32K"]})
    said = unchecked(dep, [], simulated=False, model=str(tmp_path / "absent"))
    assert said is not None and said.startswith("context bucket 32K NOT checked against a length limit"), said
    assert unchecked(dep, ["--context-length", "65536"], simulated=False, model=None) is None
    assert unchecked(dep, [], simulated=True, model=None) is None  # the simulator's default length holds it
    assert unchecked(_dep(tmp_path), [], simulated=False, model=None) is None  # no buckets


def test_the_kv_pool_and_the_models_positions_refuse_too(tmp_path):
    dep = _dep(tmp_path, {"context_buckets": ["4K"]})
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    argv = ["--model-path", str(model), "--context-length", "65536", "--max-total-tokens", "5000"]
    found = refusals(dep, "eagle3-decode", argv, simulated=False, model=None)
    assert len(found) == 2
    assert "over --max-total-tokens 5000 (the KV pool): raise --max-total-tokens to at least" in found[0]
    assert f"the model's max_position_embeddings 4096 ({model}/config.json)" in found[1]
    assert "drop the bucket" in found[1]
    # A real SGLang launch without --context-length takes the model's own length: nothing else to hold.
    assert refusals(dep, "eagle3-decode", [], simulated=False, model=str(tmp_path / "absent")) == []


def test_check_exits_2_naming_the_bucket_and_states_each_buckets_cost(tmp_path, capsys, monkeypatch):
    from specgate.cli import main

    monkeypatch.chdir(tmp_path)
    data = merge(sim_deployment_dict(), {"workload": {"context_buckets": ["1K", "32K"]}})
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    assert main(["check", "dep.toml"]) == 2
    err = capsys.readouterr().err
    assert "workload.context_buckets 32K" in err and "raise --context-length to at least" in err
    assert "workload.context_buckets 1K" not in err
    data["launch"]["args"] += ["--context-length", "65536"]
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    assert main(["check", "dep.toml"]) == 0
    out = capsys.readouterr().out
    assert "context buckets 1K, 32K beside the short workload" in out
    assert "each at a false-alarm share of 1.67%: the run's 5.0% split over 3 buckets" in out
    assert "32K: 27 measured request(s) (9 per server) and 3 to 12 warmup request(s) per server (workload.warmup), 36 to 63 " \
        "request(s) in all: about 1,179,648 to 2,064,384 prompt and 2,304 to 4,032 answer tokens" in out
    passes = passes_needed(load_deployment(str(tmp_path / "dep.toml")).workload, 32768)
    assert passes > 1 and f"the shipped text runs {passes} time(s) through each prompt" in out


def test_check_names_the_gates_no_bucket_judges(tmp_path, capsys, monkeypatch):
    """A gate declared at another concurrency has no bucket version (buckets are single-stream):
    `check` must not say every gate is judged per bucket, and names the ones that are not."""
    from specgate.cli import main

    monkeypatch.chdir(tmp_path)
    data = merge(sim_deployment_dict(), {"workload": {"context_buckets": ["1K"], "concurrency": [1, 4]}})
    data["gates"]["beats"] = [{"config": "eagle3-decode", "over": "baseline", "ratio": 1.1, "concurrency": 4}]
    (tmp_path / "dep.toml").write_text(tomli_w.dumps(data))
    assert main(["check", "dep.toml"]) == 0
    out = capsys.readouterr().out
    assert "every gate judged per bucket too" not in out
    assert "NOT judged in any bucket" in out and "beats:eagle3-decode-beats-baseline-c4" in out


def test_calibrate_says_the_buckets_are_not_measured_and_borrow_the_short_workloads_spread(tmp_path):
    from specgate.cli.calibrate import buckets_not_calibrated

    assert buckets_not_calibrated(_dep(tmp_path)) == []
    (note,) = buckets_not_calibrated(_dep(tmp_path, {"context_buckets": ["1K", "32K"]}))
    assert note.startswith("context buckets 1K, 32K NOT measured here") and "between-boot spread" in note


# --- the diagnosis reads the slope -------------------------------------------------------------------

_HYBRID = {"prefill_attention_backend": "flashinfer", "decode_attention_backend": "triton", "speculative_algorithm": "EAGLE3"}
PREFILL = read_settings({**_HYBRID, "speculative_attention_mode": "prefill"})
DECODE = read_settings({**_HYBRID, "speculative_attention_mode": "decode"})


def _points(steps_and_speedups):
    # reference at 100 tok/s: a plain step is 10 ms, so cycle_ms = 10 * steps
    return [BucketPoint(c, 10.0 * steps, 100.0, speedup) for c, steps, speedup in steps_and_speedups]


def test_a_prefill_mode_slope_names_the_lever_at_the_first_losing_bucket_with_the_decode_modes_ratios():
    prefill = _points([(1024, 1.4, 1.5), (8192, 2.2, 1.05), (32768, 3.9, 0.61)])
    decode = _points([(1024, 1.2, 1.7), (8192, 1.25, 1.6), (32768, 1.3, 1.55)])
    found = context_slope("eagle3-prefill", PREFILL, prefill, {"eagle3-decode": (DECODE, decode)})
    assert found is not None and found.loses_at == 32768
    assert found.evidence == (
        "verify costs 1.4x a decode step at 1K and 3.9x at 32K in prefill mode; decode mode (eagle3-decode): 1.2x and 1.3x"
    )
    assert found.lever is not None and found.lever.action == "--speculative-attention-mode decode"
    assert "from 32K on" in found.lever.why and found.lever.sibling == "eagle3-decode"
    # The decode-mode config's own cost barely grows: no slope to name.
    assert context_slope("eagle3-decode", DECODE, decode, {"eagle3-prefill": (PREFILL, prefill)}) is None


def test_a_slope_under_the_threshold_or_on_one_bucket_is_not_named():
    assert context_slope("x", PREFILL, _points([(0, 1.4, 0.9), (8192, 2.0, 0.8)])) is None  # 1.43x < 1.5x
    assert context_slope("x", PREFILL, _points([(8192, 3.0, 0.5)])) is None


def test_a_slope_the_settings_do_not_explain_or_that_never_loses_is_a_note_not_a_lever():
    steep = [(0, 1.0, 1.8), (8192, 2.0, 1.2), (32768, 3.0, 0.9)]
    unexplained = context_slope("x", DECODE, _points(steep))
    assert unexplained is not None and unexplained.lever is None and unexplained.loses_at == 32768
    still_wins = context_slope("x", PREFILL, _points([(0, 1.0, 2.5), (32768, 2.0, 1.2)]))
    assert still_wins is not None and still_wins.lever is None
    diagnoses = [{"config": "x", "concurrency": 1, "levers": [], "underperforms": [], "notes": []}]
    with_slopes(diagnoses, [still_wins])
    assert diagnoses[0]["levers"] == [] and "short and 2.0x at 32K" in diagnoses[0]["notes"][0]
    found = context_slope("x", PREFILL, _points(steep))
    with_slopes(diagnoses, [found])
    assert diagnoses[0]["levers"][0]["action"] == "--speculative-attention-mode decode"
    assert diagnoses[0]["underperforms"] == [
        "slower than the reference at 32K: verify costs 1.0x a decode step at short and 3.0x at 32K in prefill mode"
    ]


# --- gates per bucket, each at its share of the false-alarm budget ----------------------------------


class _Plan:
    """What a judge asks of a sampling plan, over records drawn beforehand (no server)."""

    def __init__(self, records, digest, log_dir):
        self.records, self.configs = records, list(records)
        self.meter = SimpleNamespace(
            record=lambda c, n: records[c], workload_digest=digest, results={(c, 1): r for c, r in records.items()},
            built_at=None,
        )
        self.pool = SimpleNamespace(server_infos={}, model_infos={}, log_dir=log_dir, boots=[])
        self.interleaved, self.errors = True, {}

    def ensure(self, configs, concurrency, per_boot):
        pass

    def raise_for(self, config):
        pass

    def per_boot(self, configs, concurrency):
        return min(len(self.records[c].samples) for c in configs)

    def more(self, *args):
        return False

    def drift(self, *args):
        return None


def _record(config, level, n=12, spec=False):
    rng = np.random.default_rng(abs(hash((config, level))) % 2**32)
    samples = [
        SpeedSample(
            decode_tps=700.0 * level * math.exp(rng.normal(0, 0.01)), ttft_s=0.02, e2e_s=1.0, completion_tokens=64,
            prompt_tokens=40, verify_ct=30 if spec else None, server_e2e_s=None, chunks=10, index=i,
        )  # fmt: skip
        for i in range(n)
    ]
    return ConfigSpeed(config, 1, samples=samples)


FP = Fingerprint("NVIDIA H200", 1, "570.1", "13.0", "0.5.11", "m")


def _judges(tmp_path, dep, speedups):
    """A judge per bucket (0: the short workload) over fed records: eagle3-decode at `speedups[b]`
    of the baseline's speed."""
    out = {}
    for context, speedup in speedups.items():
        view = bucket_view(dep, context) if context else dep
        records = {"baseline": _record("baseline", 1.0), "eagle3-decode": _record("eagle3-decode", speedup, spec=True)}
        plan = _Plan(records, f"w{context}", tmp_path)
        judge = Judge(view, plan, tmp_path / "baselines", context=context, buckets=len(speedups))  # type: ignore[arg-type]
        judge._fingerprint = FP
        out[context] = judge
    return out


def test_the_beats_gate_fails_in_its_own_bucket_alone_at_its_share_of_the_budget(tmp_path):
    dep = _dep(tmp_path, {"context_buckets": ["1K", "32K"]})
    judges = _judges(tmp_path, dep, {0: 1.5, 1024: 1.45, 32768: 0.61})
    beats = [g for g in run_gates(kind_named("beats"), dep, set())]
    assert [g.name for g in beats] == [
        "beats:eagle3-decode-beats-baseline",
        "beats:eagle3-decode-beats-baseline@1K",
        "beats:eagle3-decode-beats-baseline@32K",
    ]
    assert [g.test_id for g in beats][1:] == [f"{beats[0].test_id}-at-1K", f"{beats[0].test_id}-at-32K"]
    verdicts = {g.context: judges[g.context].decide(g) for g in beats}
    assert [verdicts[c].status for c in (0, 1024, 32768)] == [PASS, PASS, FAIL]
    failed = verdicts[32768]
    assert failed.gate == "beats:eagle3-decode-beats-baseline@32K" and failed.summary.startswith("eagle3-decode at 32K: ")
    assert failed.figures["context"] == 32768 and "context" not in verdicts[0].figures
    for v in verdicts.values():
        assert v.figures["false_alarm_share"] == pytest.approx(0.05 / 3, abs=1e-6)
        assert "false-alarm share 1.67% of the run's 5.0% (split over 3 context buckets)" in v.notes
    assert judges[0].confidence == pytest.approx(1 - 0.05 / 3)


def test_a_bucket_verdict_whose_summary_opens_with_a_possessive_keeps_the_configs_name(tmp_path):
    """The A/B accept verdict says "X's accept length ...": at a bucket it must read
    "X at 8K: X's accept length", never "X at 8K: 's accept length"."""
    dep = _dep(tmp_path, {"context_buckets": ["8K"]}, gates={"ab": [{"config": "eagle3-prefill", "base": "eagle3-decode"}]})
    view = bucket_view(dep, 8192)
    records = {c: _record(c, 1.0, spec=True) for c in ("eagle3-prefill", "eagle3-decode")}
    judge = Judge(view, _Plan(records, "w8192", tmp_path), tmp_path / "baselines", context=8192, buckets=2)  # type: ignore[arg-type]
    judge._fingerprint = FP
    accept = next(g for g in run_gates(kind_named("ab"), dep, set()) if g.name.endswith(":accept@8K"))
    verdict = judge.decide(accept)
    assert verdict.summary.startswith("eagle3-prefill at 8K: eagle3-prefill's accept length"), verdict.summary


def test_without_buckets_the_gates_and_their_budget_are_as_before(tmp_path):
    dep = _dep(tmp_path)
    judge = _judges(tmp_path, dep, {0: 1.5})[0]
    (gate,) = run_gates(kind_named("beats"), dep, set())
    verdict = judge.decide(gate)
    assert judge.confidence == dep.gates.confidence
    assert "false_alarm_share" not in verdict.figures and not any("false-alarm share" in n for n in verdict.notes)


def test_a_stored_baseline_holds_each_buckets_figures_and_a_bucket_it_lacks_is_not_compared(tmp_path):
    dep = _dep(tmp_path, {"context_buckets": ["1K", "32K"]})
    judges = _judges(tmp_path, dep, {0: 1.5, 1024: 1.45, 32768: 1.4})
    # Recorded by a run that measured the short workload and 1K only (32K added since).
    document = baseline_document(judges[0], {"date": "2026-12-01T00:00:00+00:00"}, buckets=(judges[1024],))
    assert set(document["contexts"]) == {"1024"} and document["contexts"]["1024"]["workload_digest"] == "w1024"
    write_baseline(dep.name, FP, document, tmp_path / "baselines")
    stored = load_baseline(next((tmp_path / "baselines" / dep.name).glob("*.json")), dep.name)
    assert set(stored.contexts) == {1024} and stored.at_context(1024).figures.keys() == stored.figures.keys()
    later = _judges(tmp_path, dep, {0: 1.5, 1024: 1.45, 32768: 1.4})
    regressions = {g.name: g for g in run_gates(kind_named("regression"), dep, set())}
    at_1k = later[1024].decide(regressions["regression:eagle3-decode:c1:decode_tps@1K"])
    at_32k = later[32768].decide(regressions["regression:eagle3-decode:c1:decode_tps@32K"])
    assert at_1k.status in (PASS, INCONCLUSIVE), at_1k.summary  # compared: its own bucket's stored figures
    # Said as the bucket the baseline lacks (its short workload's figures are there), with the update.
    assert at_32k.status == NOT_COMPARED and "has no figures" not in at_32k.summary, at_32k.summary
    assert "recorded without the 32K context bucket (buckets it stores: 1K)" in at_32k.summary
    assert "specgate baseline update" in at_32k.summary
    # A bucket's pinned requests change with its context_repeats too: the refusal names it.
    changed = _judges(tmp_path, dep, {0: 1.5, 1024: 1.45})
    changed[1024].meter.workload_digest = "w1024-more-repeats"
    moved = changed[1024].decide(regressions["regression:eagle3-decode:c1:decode_tps@1K"])
    assert moved.status == NOT_COMPARED and "workload.context_repeats, or the characters per token" in moved.summary
    # A baseline of before buckets is read as before: no contexts.
    del document["contexts"]
    (tmp_path / "old").mkdir()
    write_baseline(dep.name, FP, document, tmp_path / "old")
    assert load_baseline(next((tmp_path / "old" / dep.name).glob("*.json")), dep.name).contexts == {}


def test_a_bucket_built_at_another_ratio_than_its_baseline_is_said_as_such_not_as_an_edited_workload(tmp_path):
    """`baseline update` then `run` where the reference's server counted the calibration prompt
    otherwise (another tokenizer, or a FALLBACK to 4.0): the bucket's prompts differ, so its gates
    say NOT COMPARED, and the reason names both ratios instead of workload fields nobody edited."""
    dep = _dep(tmp_path, {"context_buckets": ["1K"]})
    judges = _judges(tmp_path, dep, {0: 1.5, 1024: 1.45})
    judges[1024].meter.built_at = 3.85
    document = baseline_document(judges[0], {"date": "2026-12-01T00:00:00+00:00"}, buckets=(judges[1024],))
    assert document["contexts"]["1024"]["chars_per_token"] == 3.85
    write_baseline(dep.name, FP, document, tmp_path / "baselines")
    stored = load_baseline(next((tmp_path / "baselines" / dep.name).glob("*.json")), dep.name)
    assert stored.at_context(1024).chars_per_token == 3.85 and stored.chars_per_token is None
    later = _judges(tmp_path, dep, {0: 1.5, 1024: 1.45})
    later[1024].meter.workload_digest, later[1024].meter.built_at = "w1024-at-4", 4.0
    regressions = {g.name: g for g in run_gates(kind_named("regression"), dep, set())}
    verdict = later[1024].decide(regressions["regression:eagle3-decode:c1:decode_tps@1K"])
    assert verdict.status == NOT_COMPARED, verdict.summary
    assert "built at 3.85 characters per token" in verdict.summary and "at 4 now" in verdict.summary, verdict.summary


# --- end to end, on the simulator ------------------------------------------------------------------


def test_a_run_measures_gates_charts_and_stores_each_bucket(tmp_path):
    """One baseline update of the simulator with two buckets: rows, gates, chart and stored
    figures per bucket. (The simulator's decode step does not depend on the context yet: this
    proves the plumbing, not a slope.)"""
    from tests.self.helpers import SimDeployment

    d = SimDeployment(
        tmp_path,
        {
            "workload": {"context_buckets": ["1K", 2048], "context_repeats": 3, "repeats": 4, "max_repeats": 4},
            "equivalence": {"enabled": False, "skip_reason": "this test is about speed across context length"},
        },
    )
    result = d.run(None, "--specgate-update-baselines")
    assert not d.leftovers()
    out = "\n".join(result.outlines[-60:])
    assert result.ret == 0, out
    report = d.report()
    rows = {(r["config"], r["context"]): r for r in report["speed"]}
    for config in ("baseline", "eagle3-prefill", "eagle3-decode"):
        for context in (0, 1024, 2048):
            assert (config, context) in rows, out
        for context in (1024, 2048):
            row = rows[(config, context)]
            assert row["n"] == 3 and row["concurrency"] == 1
            # The server's own count, more than the short workload's and growing with the bucket.
            assert row["prompt_tokens"] > rows[(config, 0)]["prompt_tokens"]
        assert rows[(config, 2048)]["prompt_tokens"] > rows[(config, 1024)]["prompt_tokens"]
        # Built at the characters per token the reference's server counted (measure.density): on
        # target within 5% (at a fixed 4.0 the simulator's tokenizer counted ~21% under).
        for context in (1024, 2048):
            assert rows[(config, context)]["prompt_tokens"] == pytest.approx(context, rel=0.05)
    density = report["context_prompts"]
    assert density["config"] == "baseline" and density["fallback"] is None
    assert density["chars_per_token"] == round(round(density["measured"] / 0.05) * 0.05, 2) > 4.5
    gates = {g["gate"]: g for g in report["gates"]}
    for label in ("1K", "2K"):
        beats = gates[f"beats:eagle3-decode-beats-baseline@{label}"]
        assert beats["status"] == "pass" and beats["summary"].startswith(f"eagle3-decode at {label}: ")
        assert beats["figures"]["false_alarm_share"] == pytest.approx(0.05 / 3, abs=1e-6)
    assert (d.report_dir / "context.png").stat().st_size > 0
    md = (d.report_dir / "report.md").read_text()
    assert f"1K context ({rows[('baseline', 1024)]['prompt_tokens']:,} prompt tokens, built at " in md
    assert f"built at {density['chars_per_token']:.2f} characters per token, as baseline's server counted " in md
    (stored,) = (d.baselines_dir / d.data["name"]).glob("*.json")
    contexts = json.loads(stored.read_text())["contexts"]
    assert set(contexts) == {"1024", "2048"}
    assert set(contexts["1024"]["configs"]) == {"baseline", "eagle3-prefill", "eagle3-decode"}


# --- the sweep's context axis -------------------------------------------------------------------------


def _sweep_dep(tmp_path, sweep=None, workload=None):
    return _dep(tmp_path, workload, sweep={"base": "eagle3-decode", "num_steps": [2], **(sweep or {})})


def test_the_sweep_axis_defaults_to_the_workloads_buckets_and_names_each_result(tmp_path):
    plain = plan_sweep(_sweep_dep(tmp_path))
    assert plain.contexts == (0,) and [plain.results_of(p) for p in plain.points] == [[p.name] for p in plain.points]
    swept = plan_sweep(_sweep_dep(tmp_path, workload={"context_buckets": ["1K", "8K"]}))
    assert swept.contexts == (0, 1024, 8192)
    assert swept.results_of(swept.points[0]) == [swept.points[0].name + s for s in ("", "@1K", "@8K")]
    assert swept.digest != plain.digest  # a state of the sweep without the axis is not resumed as one with it
    own = plan_sweep(_sweep_dep(tmp_path, sweep={"context_buckets": ["2K"]}, workload={"context_buckets": ["1K"]}))
    assert own.contexts == (0, 2048)


def test_the_sweep_table_says_where_each_point_stops_paying(tmp_path):
    plan = plan_sweep(_sweep_dep(tmp_path, sweep={"context_buckets": ["1K", "8K"]}))
    prefill, decode = (next(p for p in plan.points if p.attention_mode == m) for m in ("prefill", "decode"))
    state = SweepState(tmp_path / "s.json", "sim", plan.digest)

    def put(point, context, low, est, high):
        name = result_name(point, context)
        axes = {**point.axes(), **({"context": context} if context else {})}
        ratio = {"estimate": est, "low": low, "high": high, "confidence": 0.95}
        state.points[name] = PointResult(name, axes, "measured", "s1", "", decode_tps=[100.0], ratio=ratio)

    for context, iv in zip((0, 1024, 8192), [(1.2, 1.3, 1.4), (1.0, 1.1, 1.2), (0.7, 0.8, 0.9)], strict=True):
        put(decode, context, *iv)
    for context in (0, 1024, 8192):
        put(prefill, context, 0.6, 0.7, 0.8)
    assert stops_paying(plan, decode, state) == "8K"
    assert stops_paying(plan, prefill, state) == "never pays (loses at short)"
    # Undecided at 8K with its estimate below 1: it may lose there, so it is not said to pay.
    put(decode, 8192, 0.85, 0.95, 1.05)
    assert stops_paying(plan, decode, state) == "undecided from 8K (estimate below 1)"
    put(decode, 8192, 0.95, 1.05, 1.15)
    assert stops_paying(plan, decode, state) == "not within the axis"
    put(decode, 8192, 0.7, 0.8, 0.9)
    table = render_sweep(plan, state, complete=True)
    assert "| point | short | 1K | 8K | stops paying at |" in table
    assert "SIMULATOR" not in table
    simulated = render_sweep(plan, state, complete=True, simulator=True)
    assert simulated.startswith("# specgate sweep — sim (SIMULATOR run)") and "not SGLang" in simulated
    assert f"| {decode.name} | 1.30 ✓ | 1.10 ~ | 0.80 ✗ | 8K |" in table
    # The ranked table ranks the short workload's results; the buckets' are in their own section.
    ranked_names = [r.name for r in ranked(state)]
    assert ranked_names == [decode.name, prefill.name]


def test_buckets_with_a_stored_reference_are_refused_by_name(tmp_path):
    # The stand-in for an unbooted reference holds the short workload's figures alone.
    with pytest.raises(DeploymentError) as err:
        _dep(tmp_path, {"context_buckets": ["1K"]}, {"reference_from": "stored"})
    assert "field 'workload.context_buckets'" in str(err.value) and 'reference_from = "stored"' in str(err.value)


# --- the proof on the simulator: a penalty past 8K caught at its own bucket ------------------


def test_a_prefill_penalty_past_8k_passes_the_short_bucket_fails_32k_and_names_the_lever_with_the_slope(tmp_path):
    """Prefill-mode verify that degrades only past 8K tokens (simulator fault prefill-verify-past):
    the beats gate passes the short workload and the 1K bucket, fails the 32K bucket alone, and the
    report's first screen names that bucket and --speculative-attention-mode decode with the measured
    slope. A gate measured at short context alone would have passed this build."""
    from tests.self.helpers import SimDeployment

    sim = sim_deployment_dict()
    d = SimDeployment(
        tmp_path,
        {
            "launch": {"args": [*sim["launch"]["args"], "--context-length", "45000"]},
            "workload": {"context_buckets": ["1K", "32K"], "context_repeats": 3},
            "equivalence": {"enabled": False, "skip_reason": "this test is about speed across context length"},
            "gates": {"beats": [*sim["gates"]["beats"], {"config": "eagle3-prefill", "over": "baseline", "ratio": 1.0}]},
        },
    )
    result = d.run(None, faults="*:prefill-verify-past=8192")
    assert not d.leftovers()
    out = "\n".join(result.outlines[-80:])
    assert result.ret == 1, out
    gates = {g["gate"]: g for g in d.report()["gates"]}
    prefill = "beats:eagle3-prefill-beats-baseline"
    statuses = {label: gates[f"{prefill}{label}"]["status"] for label in ("", "@1K", "@32K")}
    assert statuses == {"": "pass", "@1K": "pass", "@32K": "fail"}, (statuses, out)
    # Decode mode is untouched by the fault: it passes at every length.
    assert {gates[f"beats:eagle3-decode-beats-baseline{label}"]["status"] for label in ("", "@1K", "@32K")} == {"pass"}
    report_md = (d.report_dir / "report.md").read_text()
    first_screen = "\n".join(report_md.splitlines()[:40])
    assert "eagle3-prefill at 32K" in first_screen, first_screen
    assert "--speculative-attention-mode decode" in first_screen, first_screen
    # The slope as evidence: the cycle's cost in plain steps at the shortest length and at 32K.
    assert re.search(r"verify costs [0-9.]+x a decode step at short and [0-9.]+x at 32K in prefill mode", first_screen), first_screen


def test_one_cause_shared_by_the_buckets_gates_reads_once_on_the_first_screen():
    from specgate.report.build import _grouped

    def verdict(gate, status, summary):
        return SimpleNamespace(gate=gate, status=status, summary=summary)

    lines = _grouped([
        verdict("regression:a:c1:decode_tps", "not_compared", "no stored baseline for X"),
        verdict("regression:a:c1:decode_tps@1K", "not_compared", "a at 1K: no stored baseline for X"),
        verdict("regression:b:c1:decode_tps@32K", "not_compared", "b at 32K: no stored baseline for X"),
        verdict("beats:a@32K", "fail", "a at 32K: decodes at 0.7x"),
    ])
    assert lines == [
        "NOT_COMPARED ×3 (regression:a:c1:decode_tps, regression:a:c1:decode_tps@1K, regression:b:c1:decode_tps@32K): "
        "no stored baseline for X",
        "beats:a@32K: FAIL — a at 32K: decodes at 0.7x",
    ]
