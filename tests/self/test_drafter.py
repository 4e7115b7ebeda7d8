"""The trained drafter's CPU side: training prompts that never leak the held-out sets, and the
identity (checksum, provenance) every report and baseline gives the weights a config ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specgate.measure.drafters import describe, drafter_identity
from specgate_lab.drafter import prompts as training_prompts
from tests.self.test_side_by_side import _dep


def test_training_prompts_are_many_varied_reproducible_and_not_the_held_out_ones():
    made = training_prompts.generate(600)
    assert len({p.text for p in made}) == 600
    assert {p.kind for p in made} == {"chat", "code", "math", "summarisation", "translation", "long_context"}
    assert training_prompts.digest(made) == training_prompts.digest(training_prompts.generate(600))
    assert training_prompts.leaks(made) == []


def test_a_leak_is_found():
    from specgate.prompts import KNOWN_SETS, load_prompts

    held = load_prompts(KNOWN_SETS)[0]
    leaked = training_prompts.TrainingPrompt("chat", held.messages)
    assert training_prompts.leaks([leaked]) == [leaked.text[:80]]


def _drafter(tmp_path: Path, weights: bytes, recorded: bytes | None) -> Path:
    import hashlib

    d = tmp_path / "drafter"
    d.mkdir()
    (d / "model.safetensors").write_bytes(weights)
    record = {
        "made_by": "specgate assets smollm2-eagle3",
        "date": "2026-11-30T21:00:00+00:00",
        "role": "final",
        "checkpoint": {"step": 900, "sha256": hashlib.sha256(recorded or weights).hexdigest(),
                       "held_out": {"expected_tau_topk1_2steps": 2.3, "expected_tau_all_tokens": 2.21}},
        "distillation": {"samples": 4000, "answer_tokens": 700000},
        "training": {"steps_done": 900, "train_s": 230.0, "vocab_coverage": {"taught": 0.999, "held_out": 0.9912}},
    }
    (d / "drafter.json").write_text(json.dumps(record))
    return d


def _with_drafter(path: Path, extra: tuple[str, ...] = ()):
    args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(path), *extra]
    return _dep({"configs": {"eagle3-decode": {"args": args}}})


def test_the_identity_checksums_the_weights_and_names_a_swapped_file(tmp_path):
    good = _drafter(tmp_path, b"weights", None)
    found = drafter_identity(_with_drafter(good), "eagle3-decode")
    assert found["matches_record"] is True and found["made"]["step"] == 900
    assert "final checkpoint" in describe(found) and "4000 distilled answers" in describe(found)
    # what training expected, beside what the gate measures: the all-token figure, not the flattering one
    assert "training expected τ 2.21 at 2 steps, topk 1, on its held-out answers" in describe(found)
    assert "holds 99.1% of their tokens" in describe(found) and "2.3" not in describe(found)
    (good / "model.safetensors").write_bytes(b"other weights")
    swapped = drafter_identity(_with_drafter(good), "eagle3-decode")
    assert swapped["matches_record"] is False and "WEIGHTS DIFFER" in describe(swapped)


def test_the_identity_counts_every_round_of_data_the_drafter_learned_from(tmp_path):
    d = _drafter(tmp_path, b"weights", None)
    record = json.loads((d / "drafter.json").read_text())
    record["rounds"] = [{"round": 2, "distillation": {"samples": 3000, "answer_tokens": 500000}}]
    record["checkpoint"]["held_out"]["expected_tau_by_round"] = [2.25, None]
    (d / "drafter.json").write_text(json.dumps(record))
    found = drafter_identity(_with_drafter(d), "eagle3-decode")
    assert (found["made"]["samples"], found["made"]["answer_tokens"], found["made"]["data_rounds"]) == (7000, 1200000, 2)
    assert "7000 distilled answers, 1200000 answer tokens (2 rounds of data)" in describe(found)
    assert "on its held-out answers (by round of data: 2.25, none held out)" in describe(found)
    record["rounds"].append({"round": 3, "distillation": {}})  # a round that gives no count: no partial sum
    (d / "drafter.json").write_text(json.dumps(record))
    assert drafter_identity(_with_drafter(d), "eagle3-decode")["made"]["samples"] is None


def test_a_draft_path_given_twice_is_read_as_sglang_keeps_it_the_last(tmp_path):
    """A config's own args come after [launch] args, and SGLang's parser keeps the last value: the
    checksum must be of the weights the server loads, not of the first path named."""
    first, last = _drafter(tmp_path, b"first", None), tmp_path / "last"
    last.mkdir()
    (last / "model.safetensors").write_bytes(b"last")
    dep = _with_drafter(first, ("--speculative-draft-model-path", str(last)))
    found = drafter_identity(dep, "eagle3-decode")
    assert found["path"] == str(last) and found["sha256"] != drafter_identity(_with_drafter(first), "eagle3-decode")["sha256"]


def test_random_and_remote_drafters_are_said_to_be_so(tmp_path):
    dep = _with_drafter(tmp_path / "nowhere", ("--speculative-draft-load-format", "dummy"))
    assert "random" in drafter_identity(dep, "eagle3-decode")["weights"]
    assert "not checksummed" in drafter_identity(_with_drafter(tmp_path / "nowhere"), "eagle3-decode")["weights"]
    assert drafter_identity(dep, "baseline") is None


def test_an_unreadable_drafter_record_or_weights_never_break_the_report(tmp_path):
    d = _drafter(tmp_path, b"w", None)
    (d / "drafter.json").write_text("[" * 200000 + "]" * 200000)
    found = drafter_identity(_with_drafter(d), "eagle3-decode")
    assert "unreadable" in found["made"] and "unreadable" in describe(found)
    (d / "drafter.json").write_text("[1, 2]")
    assert "expected a JSON object" in drafter_identity(_with_drafter(d), "eagle3-decode")["made"]["unreadable"]
    (d / "model.safetensors").unlink()
    (d / "model.safetensors").mkdir()
    broken = drafter_identity(_with_drafter(d), "eagle3-decode")
    assert broken["sha256"] is None and "unreadable" in broken["weights"]


def test_prompts_the_target_writes_are_cleaned_deduplicated_and_kept_off_the_held_out_set():
    from specgate.prompts import KNOWN_SETS, load_prompts

    seeds = training_prompts.self_prompt_seeds(50)
    assert len(seeds) == 50 and all("Only write the question." in s.text for s in seeds)
    # Subjects come mostly from the target's vocabulary: whole lowercase words of 5-14 letters.
    vocab = {"\u0120harbour": 1, "\u0120lantern": 2, "harbour": 3, "\u0120Paris": 4, "\u0120abc": 5, "\u0120x1234": 6}
    words = training_prompts.vocabulary_words(vocab)
    assert words == ["harbour", "lantern"]
    worded = training_prompts.self_prompt_seeds(200, words)
    assert worded == training_prompts.self_prompt_seeds(200, words)
    assert 100 < sum(("harbour" in s.text or "lantern" in s.text) for s in worded) < 200
    held = load_prompts(KNOWN_SETS)[0].messages[-1].content
    kept, dropped = training_prompts.from_self_written(
        ['"Question: How do tides work near the equator?"', "ok", "How do tides work near the equator?", held,
         "Explain photosynthesis simply for kids.\n\nSure! Here is more text."]
    )  # fmt: skip
    assert [p.text for p in kept] == ["How do tides work near the equator?", "Explain photosynthesis simply for kids."]
    assert dropped == {"length": 1, "duplicate": 1, "held-out": 1}


def test_passages_the_target_writes_become_summaries_and_long_inputs_off_the_held_out_set():
    from specgate.prompts import KNOWN_SETS, load_prompts

    seeds = training_prompts.self_passage_seeds(40, ["harbour", "lantern"])
    assert len(seeds) == 40 and seeds == training_prompts.self_passage_seeds(40, ["harbour", "lantern"])
    prose = [f"Passage {i}: " + " ".join(["the ferry waited in the harbour"] * 8) + f" until day {i}." for i in range(9)]
    held = " ".join(load_prompts(["long_context"])[0].messages[-1].content.split()[:60])  # a held-out prompt's start
    texts = [*prose, prose[0], "too short to summarise", " ".join(["word"] * 401), held]
    made, dropped = training_prompts.from_self_passages(texts)
    assert dropped == {"length": 2, "duplicate": 1, "held-out": 1}
    kinds = [p.kind for p in made]
    assert kinds == ["summarisation"] * 9 + ["long_context"] * 2  # each passage once; 9 // 4 long inputs
    assert all(p.text.split("\n\n", 1)[1] in prose for p in made[:9])
    assert all(3 <= sum(x in p.text for x in prose) <= 5 for p in made[9:])
    assert training_prompts.leaks(made) == []
    assert made == training_prompts.from_self_passages(texts)[0]  # the same texts, the same prompts
    assert KNOWN_SETS  # the leak check reads every held-out set


def test_the_train_stage_needs_what_a_distil_stage_left_and_names_it(tmp_path):
    """A device call is 10 minutes: data made in one call, training in the next, from what the
    distil stage wrote (or a carried copy); anything missing or garbled is named."""
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.make import DATA_FILE, DATA_RECORD, _recorded_data

    with pytest.raises(SpecgateError, match="run --stage distil first"):
        _recorded_data(tmp_path)
    (tmp_path / DATA_FILE).write_text('{"kind": "chat", "prompt_ids": [1], "output_ids": [2, 3]}\n')
    (tmp_path / DATA_RECORD).write_text("{not json")
    with pytest.raises(SpecgateError, match=f"{DATA_RECORD}: not the record"):
        _recorded_data(tmp_path)
    (tmp_path / DATA_RECORD).write_text('{"prompts": {}}')
    with pytest.raises(SpecgateError, match="'distillation'"):
        _recorded_data(tmp_path)
    (tmp_path / DATA_RECORD).write_text('{"prompts": {"n": 1}, "distillation": {"samples": 1}}')
    assert _recorded_data(tmp_path)["distillation"] == {"samples": 1}


def test_the_held_out_split_is_reproducible_disjoint_and_sized_for_what_it_judges():
    import random

    import pytest

    from specgate.errors import SpecgateError
    from specgate_lab.drafter.train import expected_accept_length, split_held_out

    taught, held = split_held_out(20447, 0.03, random.Random(0))
    assert len(held) == 613 and not set(taught) & set(held) and len(taught) + len(held) == 20447
    assert (taught, held) == split_held_out(20447, 0.03, random.Random(0))
    assert len(split_held_out(400, 0.03, random.Random(0))[1]) == 32  # at least 32 where there are 320+
    assert len(split_held_out(200, 0.03, random.Random(0))[1]) == 20  # a tenth below that
    assert split_held_out(4, 0.03, random.Random(0))[1] == []  # too few to judge anything
    assert split_held_out(1000, 0.0, random.Random(0))[1] == []
    with pytest.raises(SpecgateError, match="held-out share"):
        split_held_out(100, 1.5, random.Random(0))
    # tau at 2 steps / topk 1 from the per-step accuracies: 1 + a1 + a1*a2
    assert expected_accept_length([0.7212, 0.6948, 0.6784, 0.6602]) == 2.222
    assert expected_accept_length([]) == 1.0


def test_the_share_of_answer_tokens_the_draft_vocabulary_holds_discounts_specforges_accuracy():
    """SpecForge scores only positions whose target token the drafter can propose; a token outside
    its vocabulary is never accepted, so the expected accept length counts it as a rejection."""
    from specgate_lab.drafter.train import expected_accept_length, vocab_coverage

    in_vocab = [True, True, False, True, False]
    samples = [([0, 1, 2, 3], [0, 1, 1, 1]), ([4, 4, 3], [0, 1, 1])]  # prompt tokens (mask 0) never count
    assert vocab_coverage(samples, in_vocab) == 3 / 5  # answers 1, 2, 3 | 4, 3: tokens 2 and 4 are out
    assert vocab_coverage([([4], [0])], in_vocab) == 1.0  # no answer tokens: nothing left out
    acc = [0.72, 0.69]
    assert expected_accept_length([a * 1.0 for a in acc]) == expected_accept_length(acc)
    assert expected_accept_length([a * 0.95 for a in acc]) == 2.132 < expected_accept_length(acc) == 2.217


def test_the_learning_rate_warms_up_then_anneals_over_the_steps_that_fit():
    """A cosine laid over every planned epoch never anneals when the time budget stops it first
    (3263 of 5200 planned steps once ended at a third of the peak): the schedule's length is
    fitted to the time left and refitted as the rate is known better, without a jump."""
    from specgate_lab.drafter.train import Schedule, fitted_steps

    plan = Schedule(3e-4, 100, 1000)
    assert plan.rate(0) == 0 and plan.rate(50) == pytest.approx(1.5e-4) and plan.rate(100) == pytest.approx(3e-4)
    rates = [plan.rate(s) for s in range(100, 1001)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    assert 0 < plan.rate(1000) < 3e-6  # the last step still learns, a little
    # Refitted while warming up, long enough: the warm-up goes on, the cosine spans the new length.
    plan = Schedule(3e-4, 100, 5000)
    plan.refit(50, 3000)
    assert plan.rate(50) == pytest.approx(1.5e-4) and plan.rate(100) == pytest.approx(3e-4)
    assert 0 < plan.rate(3000) < 1e-6
    # Refitted mid-cosine, shorter then longer: continuous at each refit, never rising, ending at the new length.
    plan = Schedule(3e-4, 100, 5000)
    seen = [plan.rate(s) for s in range(1, 1001)]
    for at, total in ((1000, 2500), (1500, 2600)):
        before = plan.rate(at)
        plan.refit(at, total)
        assert plan.rate(at) == pytest.approx(before)
        seen += [plan.rate(s) for s in range(at + 1, at + 501)]
    tail = seen[100:]
    assert all(a >= b - 1e-15 for a, b in zip(tail, tail[1:], strict=False))
    assert 0 < plan.rate(2600) < 1e-6
    # Too short to finish warming up: it anneals from the rate it reached, and ends at the new length.
    plan = Schedule(3e-4, 100, 5000)
    plan.refit(50, 120)
    assert plan.rate(50) == pytest.approx(1.5e-4) and plan.rate(51) < 1.5e-4 and 0 < plan.rate(120) < 1e-6
    assert Schedule(3e-4, 100, 60).warmup == 30  # a run shorter than two warm-ups warms up over half of it
    assert fitted_steps(5200, 50, 0.125, 400.0) == 3250  # 400 s at 8 steps/s after the first 50
    assert fitted_steps(1000, 50, 0.125, 400.0) == 1000  # never past the planned epochs
    assert fitted_steps(5200, 50, 0.125, -3.0) == 50  # no time left: stop where it is
    assert fitted_steps(5200, 50, 0.0, 400.0) == 5200  # an untimed rate fits nothing: keep the plan
    assert fitted_steps(5200, 50, 0.125, float("inf")) == 5200


def _refine_setup(tmp_path):
    """A DIR as a train stage leaves it: data record, a final checkpoint with its record, a weak one."""
    import hashlib

    from specgate_lab.drafter.make import FINAL_DIR, WEAK_DIR

    work = tmp_path / "smollm2-eagle3-work"
    work.mkdir()
    record = {"prompts": {"digest": "abc"}, "distillation": {"samples": 20447}}
    settings = {"seed": 0, "held_out": 0.03, "max_length": 2048, "draft_vocab_size": 32000}
    for name, role, weights in ((FINAL_DIR, "final", b"parent weights"), (WEAK_DIR, "weak", b"weak weights")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(weights)
        ckpt = {"dir": str(tmp_path / name), "step": 3263, "sha256": hashlib.sha256(weights).hexdigest()}
        doc = {**record, "role": role, "training": {"settings": settings}, "checkpoint": ckpt}
        (tmp_path / name / "drafter.json").write_text(json.dumps(doc))
    return work, record


def _refine(tmp_path, record, train=None, monkeypatch=None):
    import time

    from specgate_lab.drafter import make
    from specgate_lab.drafter.train import TrainSettings

    if train is not None:
        monkeypatch.setattr(make, "train", train)
        monkeypatch.setattr(make, "_gpu", lambda: "none (a test)")  # no torch on CPU
    work = tmp_path / "smollm2-eagle3-work"
    return make._refine(tmp_path, tmp_path / "target", work / make.DATA_FILE, record, TrainSettings(), print, time.monotonic())


def test_refining_refuses_a_parent_that_is_not_the_one_it_says_or_of_other_data(tmp_path):
    """Refining judges on the held-out answers of the first training: on other data, another
    split or other weights than the record names, the 'better than the parent' verdict would
    flatter or credit the wrong weights. Every refusal comes before any training."""
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.make import FINAL_DIR, WEAK_DIR

    with pytest.raises(SpecgateError, match=f"{FINAL_DIR}/drafter.json: not found; run --stage train first"):
        _refine(tmp_path, {})
    work, record = _refine_setup(tmp_path)
    parent_doc = json.loads((tmp_path / FINAL_DIR / "drafter.json").read_text())

    def with_parent(**change):
        (tmp_path / FINAL_DIR / "drafter.json").write_text(json.dumps({**parent_doc, **change}))

    with_parent(role="weak")
    with pytest.raises(SpecgateError, match="expected the record of a final checkpoint"):
        _refine(tmp_path, record)
    with_parent(checkpoint={**parent_doc["checkpoint"], "sha256": "0" * 64})
    with pytest.raises(SpecgateError, match="records weights 0000000000000000, but .* holds"):
        _refine(tmp_path, record)
    with_parent(prompts={"digest": "other"})
    with pytest.raises(SpecgateError, match="trained on other data"):
        _refine(tmp_path, record)
    with_parent(training={"settings": {"seed": 1, "held_out": 0.03, "max_length": 2048, "draft_vocab_size": 32000}})
    with pytest.raises(SpecgateError, match=r"trained with seed 1 \(this run: 0\)"):
        _refine(tmp_path, record)
    # a drafter of the old, smaller vocabulary: its weights would not load into this one
    with_parent(training={"settings": {"seed": 0, "held_out": 0.03, "max_length": 2048, "draft_vocab_size": 16000}})
    with pytest.raises(SpecgateError, match=r"draft_vocab_size 16000 \(this run: 32000\).*or its shape"):
        _refine(tmp_path, record)
    with_parent(training={"settings": {"seed": 0}})  # a record without the split's keys proves nothing
    with pytest.raises(SpecgateError, match="held_out None"):
        _refine(tmp_path, record)
    with_parent()
    (tmp_path / WEAK_DIR / "drafter.json").unlink()
    with pytest.raises(SpecgateError, match=f"{WEAK_DIR}/drafter.json: not found; .*DRAFTERS_IN"):
        _refine(tmp_path, record)
    assert sorted(p.name for p in work.iterdir()) == []  # nothing trained, nothing moved


def _fake_train(beats: bool):
    """Stands in for SpecForge training: writes a checkpoint only where an epoch beat the parent."""
    import dataclasses
    import hashlib

    def train(target, data, out_dirs, settings, log):
        assert settings.init_from and "weak" not in out_dirs
        checkpoints = {}
        if beats:
            out_dirs["final"].mkdir(parents=True, exist_ok=True)
            (out_dirs["final"] / "model.safetensors").write_bytes(b"refined weights")
            checkpoints["final"] = {"dir": str(out_dirs["final"]), "step": 2219,
                                    "sha256": hashlib.sha256(b"refined weights").hexdigest()}  # fmt: skip
        return {"settings": dataclasses.asdict(settings), "steps_done": 2605, "checkpoints": checkpoints}

    return train


def test_a_refine_that_beats_its_parent_replaces_it_and_keeps_it_aside(tmp_path, monkeypatch):
    from specgate_lab.drafter.make import FINAL_DIR, LINK, STAGING, WEAK_DIR

    work, record = _refine_setup(tmp_path)
    (work / STAGING).mkdir()
    (work / STAGING / "model-00002-of-00002.safetensors").write_bytes(b"left by an interrupted run")
    parent = json.loads((tmp_path / FINAL_DIR / "drafter.json").read_text())
    made = _refine(tmp_path, record, _fake_train(beats=True), monkeypatch)
    kept = work / f"parent-{parent['checkpoint']['sha256'][:16]}"
    assert (kept / "model.safetensors").read_bytes() == b"parent weights"
    assert sorted(p.name for p in (tmp_path / FINAL_DIR).iterdir()) == ["drafter.json", "model.safetensors"]
    doc = json.loads((tmp_path / FINAL_DIR / "drafter.json").read_text())
    assert doc["checkpoint"]["step"] == 3263 + 2219 and doc["checkpoint"]["refined_from"] == parent["checkpoint"]["sha256"]
    assert doc["parent"]["checkpoint"] == parent["checkpoint"] and doc["training"]["settings"]["init_from"] == str(kept)
    assert made["checkpoints"]["weak"]["step"] == 3263 and (tmp_path / WEAK_DIR / "model.safetensors").exists()
    assert (tmp_path / LINK).resolve() == (tmp_path / FINAL_DIR).resolve()
    # Refined again: the first parent stays where it was kept, the second is kept beside it; a
    # parent whose weights are already kept (the same sha256) is not kept twice, nor overwritten.
    _refine(tmp_path, record, _fake_train(beats=True), monkeypatch)
    assert len(list(work.glob("parent-*"))) == 2
    _refine(tmp_path, record, _fake_train(beats=True), monkeypatch)
    assert len(list(work.glob("parent-*"))) == 2
    assert (kept / "model.safetensors").read_bytes() == b"parent weights"


def test_a_refine_that_does_not_beat_its_parent_moves_nothing(tmp_path, monkeypatch):
    from specgate_lab.drafter.make import FINAL_DIR

    work, record = _refine_setup(tmp_path)
    made = _refine(tmp_path, record, _fake_train(beats=False), monkeypatch)
    assert (tmp_path / FINAL_DIR / "model.safetensors").read_bytes() == b"parent weights"
    assert "the parent stays" in made["outcome"] and not list(work.glob("parent-*"))


def test_an_interrupted_swap_is_named_with_where_each_checkpoint_is(tmp_path, monkeypatch):
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.make import FINAL_DIR, STAGING

    work, record = _refine_setup(tmp_path)
    parent = json.loads((tmp_path / FINAL_DIR / "drafter.json").read_text())
    (tmp_path / FINAL_DIR).rename(work / f"parent-{parent['checkpoint']['sha256'][:16]}")
    (work / STAGING).mkdir()
    (work / STAGING / "drafter.json").write_text("{}")
    with pytest.raises(SpecgateError, match=rf"refine stopped between moving the parent aside \(parent-\w+ in .*move .*{STAGING}"):
        _refine(tmp_path, record, _fake_train(beats=True), monkeypatch)


def test_a_distillation_cut_at_its_deadline_sends_no_more_and_keeps_what_was_answered(monkeypatch):
    from specgate_lab.drafter import distil

    clock = iter([0.0, 0.0, 100.0, 100.0])  # two batches start before the deadline, two after it
    monkeypatch.setattr(distil.time, "time", lambda: next(clock))
    sent: list[list[str]] = []

    def ask(chunk: list[str]) -> list[dict]:
        sent.append(chunk)
        return [{"text": t.upper()} for t in chunk]

    texts = [f"p{i}" for i in range(8)]
    got = distil.answer_in_batches(ask, texts, batch=2, parallel=1, until=50.0)
    assert sent == [["p0", "p1"], ["p2", "p3"]]
    assert got == [{"text": "P0"}, {"text": "P1"}, {"text": "P2"}, {"text": "P3"}, None, None, None, None]
    assert distil.answer_in_batches(ask, texts[:2], batch=2, parallel=1, until=None) == [{"text": "P0"}, {"text": "P1"}]


def test_a_batch_answered_short_is_an_error_not_a_misaligned_sample():
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.distil import answer_in_batches

    with pytest.raises(SpecgateError, match="2 prompts sent in one call, 1 answers came back"):
        answer_in_batches(lambda chunk: [{"text": ""}], ["a", "b"], batch=2, parallel=1, until=None)


def test_the_distillation_leaves_the_training_its_time_and_the_call_its_reserve():
    from specgate_lab.drafter.make import DISTIL_RESERVE_S, _answer_until
    from specgate_lab.drafter.train import TrainSettings

    settings = TrainSettings(time_budget_s=200.0, deadline=1000.0)
    # room for the batches in flight when it stops sending (up to ~40 s each on the H200) and for
    # writing and packing the data before the call's end
    assert _answer_until("distil", settings) == 1000.0 - DISTIL_RESERVE_S <= 1000.0 - 60
    assert _answer_until("all", settings) == 1000.0 - DISTIL_RESERVE_S - 200.0
    assert _answer_until("distil", TrainSettings()) is None


_REAL_CLIENT = __import__("httpx").Client


class _Tokenizer:
    """Stands in for the target's tokenizer: a few vocabulary words, one id per character."""

    def get_vocab(self) -> dict[str, int]:
        return {"\u0120garden": 1, "\u0120river": 2}

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) % 100 for c in text[:5]]}


class _UniqueTokenizer(_Tokenizer):
    """As _Tokenizer, but each text's ids end with its checksum's digits: no two prompts alike."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        import zlib

        return {"input_ids": [ord(c) % 100 for c in text[:5]] + [int(d) for d in str(zlib.crc32(text.encode()))]}


def _fake_sglang(monkeypatch, cut_after_batches: int | None) -> list[dict]:
    """Patches the distillation's server and clock: /generate answers each text with token ids,
    and the deadline passes once `cut_after_batches` batches of answers have been asked."""
    import httpx

    from specgate_lab.drafter import distil

    asked: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        asked.append(body)
        return httpx.Response(200, json=[{"text": f"Some words about {t[-12:]} written here.", "output_ids": [7, 8, 9]}
                                         for t in body["text"]])

    monkeypatch.setattr(distil.httpx, "Client", lambda **kw: _REAL_CLIENT(transport=httpx.MockTransport(handler), **kw))
    monkeypatch.setattr(distil, "boot_server", lambda *a, **k: (None, "http://sglang"))
    monkeypatch.setattr(distil, "stop_server", lambda proc: None)
    greedy = lambda: sum(b["sampling_params"]["temperature"] == 0.0 for b in asked)  # noqa: E731
    monkeypatch.setattr(distil.time, "time", lambda: 100.0 if cut_after_batches is not None and greedy() >= cut_after_batches else 0.0)
    return asked


def test_a_cut_distillation_goes_on_with_the_same_plan_and_answers_each_prompt_once(tmp_path, monkeypatch):
    from specgate_lab.drafter import distil

    prompts = training_prompts.generate(30)
    settings = distil.DistilSettings(batch=4, parallel_calls=1, self_prompts=6, answer_until=50.0)
    data = tmp_path / "distilled.jsonl"
    _fake_sglang(monkeypatch, cut_after_batches=2)
    first = distil._distil(Path("m"), prompts, _Tokenizer(), data, settings, [], 0.0, False)
    plan = distil.load_plan(tmp_path / distil.PLAN_FILE)
    assert first["samples"] == 8 and first["prompts_not_answered_by_the_deadline"] == len(plan.prompts) - 8
    assert first["self_written_prompts"]["asked"] == 6 and len(plan.prompts) == 30 + first["self_written_prompts"]["kept"]

    asked = _fake_sglang(monkeypatch, cut_after_batches=None)
    second = distil._distil(Path("m"), prompts, _Tokenizer(), data, settings, [], 0.0, True)
    assert all(b["sampling_params"]["temperature"] == 0.0 for b in asked)  # the plan is not written again
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert sorted(r["i"] for r in rows) == list(range(len(plan.prompts)))
    assert second["samples"] == len(plan.prompts) and second["prompts_not_answered_by_the_deadline"] == 0
    assert second["answer_tokens"] == 3 * len(plan.prompts) and sum(second["samples_by_kind"].values()) == len(plan.prompts)
    assert distil.load_plan(tmp_path / distil.PLAN_FILE) == plan


def test_a_broken_plan_or_data_file_is_named(tmp_path):
    from specgate.errors import SpecgateError
    from specgate_lab.drafter import distil

    bad = tmp_path / distil.PLAN_FILE
    bad.write_text('{"made": {}, "prompts": 2}\n{"kind": "chat", "messages": [["user", "hi"]]}\n')
    with pytest.raises(SpecgateError, match="header says 2 prompts, the file holds 1"):
        distil.load_plan(bad)
    data = tmp_path / "distilled.jsonl"
    data.write_text('{"kind": "chat", "prompt_ids": [1], "output_ids": [2]}\n')
    with pytest.raises(SpecgateError, match=r"distilled.jsonl, line 1: not a distilled sample with its plan index"):
        distil.answered_so_far(data)


def _stage_runner(tmp_path, monkeypatch, cut_after_batches: int | None):
    """make's distil stage on real files, the fake SGLang answering (41 gate prompts first, then
    the templated ones in batches of 8); returns a function running it once."""
    from dataclasses import replace

    from specgate_lab.drafter import distil, make

    calls: list[bool] = []
    real_settings = make.DistilSettings

    def distil_here(target, prompts, data, settings, args, resume=False):  # noqa: ANN001
        calls.append(resume)
        settings = replace(settings, batch=8, parallel_calls=1, answer_until=50.0)
        return distil._distil(target, prompts, _Tokenizer(), data, settings, args, 0.0, resume)

    monkeypatch.setattr(make, "distil", distil_here)
    monkeypatch.setattr(make, "DistilSettings", real_settings)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    data = work / make.DATA_FILE
    said: list[str] = []

    def stage(n: int = 20, cut: int | None = cut_after_batches, fresh: bool = False) -> dict:
        _fake_sglang(monkeypatch, cut_after_batches=cut)
        record = make._distil_stage(Path("t"), data, n, 256, 0, 0, said.append, fresh=fresh)
        (work / make.DATA_RECORD).write_text(json.dumps(record))
        return record

    return stage, calls, said, data


def test_the_distil_stage_goes_on_only_with_an_unfinished_plan_of_the_same_request(tmp_path, monkeypatch):
    stage, calls, said, data = _stage_runner(tmp_path, monkeypatch, cut_after_batches=7)
    first = stage()["distillation"]  # 41 gate prompts + 20 templated; the cut leaves some
    assert 0 < first["prompts_not_answered_by_the_deadline"] < 20 and calls == [False]
    assert any("run the distil stage again" in m for m in said)
    done = stage(cut=None)["distillation"]
    assert calls == [False, True] and len(done["calls"]) == 2 and done["prompts_not_answered_by_the_deadline"] == 0
    assert done["samples"] == 61 and sorted(json.loads(line)["i"] for line in data.read_text().splitlines()) == list(range(61))
    assert stage()["distillation"]["samples"] == 61 and calls == [False, True]  # finished: nothing sent
    assert any("every prompt of the plan answered" in m for m in said)
    stage(n=21, cut=None)  # another request: anew, and says which field differs; the old files kept
    assert calls == [False, True, False]
    assert any("prompts.n was 20, this request's is 21" in m and "moved aside" in m for m in said)
    assert (data.parent / (data.name + ".replaced")).is_file()
    stage(n=21, cut=None, fresh=True)
    assert calls[-1] is False and any("--fresh asked for new data" in m for m in said)


def test_finished_means_what_the_data_holds_not_what_the_record_says(tmp_path, monkeypatch):
    stage, calls, said, data = _stage_runner(tmp_path, monkeypatch, cut_after_batches=None)
    assert stage()["distillation"]["prompts_not_answered_by_the_deadline"] == 0
    lines = data.read_text().splitlines(keepends=True)
    data.write_text("".join(lines[:3]) + lines[3][:10])  # three whole samples, and one cut mid-line
    again = stage()["distillation"]
    assert calls == [False, True] and again["samples"] == 61  # the lost ones answered again, once each
    assert sorted(json.loads(line)["i"] for line in data.read_text().splitlines()) == list(range(61))


def test_data_that_is_not_the_plans_is_named_with_its_line(tmp_path):
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.distil import answered_so_far

    data = tmp_path / "distilled.jsonl"
    row = {"i": 0, "kind": "chat", "prompt_ids": [1], "output_ids": [2]}
    data.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(SpecgateError, match=r"line 2: plan index 0 answered twice"):
        answered_so_far(data, 5)
    data.write_text(json.dumps({**row, "i": 9}) + "\n")
    with pytest.raises(SpecgateError, match=r"line 1: plan index 9 outside the plan's 5 prompts"):
        answered_so_far(data, 5)


def test_an_interrupt_sends_no_queued_batch_and_keeps_the_answered_ones():
    import _thread
    import threading
    import time

    from specgate_lab.drafter.distil import answer_in_batches

    kept: list[int] = []
    sent: list[list[str]] = []
    release = threading.Event()

    def ask(chunk: list[str]) -> list[dict]:
        sent.append(chunk)
        if len(sent) == 2:
            _thread.interrupt_main()  # Ctrl-C (or SIGTERM made one) in the main thread, this batch out
            release.wait(5)  # in flight until the server is stopped; here, released after
        return [{"text": t} for t in chunk]

    # interrupt_main does nothing where SIGINT is ignored, as it is in an xdist worker until some
    # earlier test there installs a handler: the test installs Python's own for itself (this made
    # it pass or fail by test order under `pytest -n 2`).
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            answer_in_batches(ask, [f"p{i}" for i in range(10)], 2, 1, None, lambda start, answers: kept.append(start))
    finally:
        signal.signal(signal.SIGINT, before)
    release.set()
    time.sleep(0.2)
    assert len(sent) == 2 and kept[0] == 0 and set(kept) <= {0, 2}  # nothing queued was sent after it


def test_the_gate_prompts_are_answered_first_judged_on_and_never_taught(tmp_path, monkeypatch):
    from specgate_lab.drafter import distil
    from specgate_lab.drafter.train import load_samples

    gate = training_prompts.gate_prompts()
    assert len(gate) == 41 and all(p.kind.startswith(training_prompts.GATE_KIND) for p in gate)
    prompts = [*training_prompts.generate(30), *gate]  # a deadline must not cut the gate's, wherever given
    settings = distil.DistilSettings(batch=41, parallel_calls=1, answer_until=50.0)
    data = tmp_path / "distilled.jsonl"
    _fake_sglang(monkeypatch, cut_after_batches=1)
    got = distil._distil(Path("m"), prompts, _UniqueTokenizer(), data, settings, [], 0.0, False)
    assert got["samples"] == 41 and set(got["samples_by_kind"]) == {f"gate:{s}" for s in
                                                                      ("chat", "code", "math", "summarisation", "translation", "long_context")}
    with data.open("a") as f:  # one taught sample more, as a later batch would add
        f.write(json.dumps({"i": 99, "kind": "chat", "prompt_ids": [1, 2], "output_ids": [3, 4]}) + "\n")
    taught, judged = load_samples(data, 2048)
    assert taught == [([1, 2, 3, 4], [0, 0, 1, 1])] and sum(len(rows) for rows in judged.values()) == 41
    # by the gate's prompt sets, as its report gives τ
    assert {name: len(rows) for name, rows in judged.items()} == {
        "chat": 8, "code": 8, "math": 8, "summarisation": 6, "translation": 7, "long_context": 4
    }
    # and each by the prompt it answered (the entry `i` names in the plan the distillation saved,
    # matched to the built-in prompts by text)
    from specgate_lab.drafter.train import gate_prompt_labels, walk_counts_by_prompt

    index: dict = {}
    load_samples(data, 2048, index)
    labels = gate_prompt_labels(index, tmp_path / distil.PLAN_FILE)
    from specgate.prompts import KNOWN_SETS, load_prompts

    sent = {p.label for p in load_prompts(KNOWN_SETS)}
    assert len(labels) == 41 and set(labels.values()) == sent
    for name, rows in judged.items():
        assert all(labels[tuple(ids[: mask.index(1)])].startswith(f"{name}/") for ids, mask in rows)
    assert gate_prompt_labels(index, tmp_path / "no-plan.jsonl") == {}  # per set only, then
    twins: dict = {}
    (tmp_path / "twins.jsonl").write_text(
        "".join(json.dumps({"i": i, "kind": "gate:chat", "prompt_ids": [1, 2], "output_ids": [3, 4]}) + "\n" for i in (0, 1))
        + json.dumps({"i": 5, "kind": "chat", "prompt_ids": [9], "output_ids": [3, 4]}) + "\n"
    )
    load_samples(tmp_path / "twins.jsonl", 2048, twins)
    assert twins == {(1, 2): -1}  # two gate prompts of the same tokens: neither named
    rows = [row for rows in judged.values() for row in rows]
    flags = [[(False, False)] + [(True, True)] * (sum(mask) - 1) for _, mask in rows]  # every draft right
    walked = walk_counts_by_prompt(rows, flags, labels)
    assert len(walked) == 41
    for ids, mask in rows:  # every draft right: 3 tokens a cycle after the first (from prefill)
        tokens, cycles = walked[labels[tuple(ids[: mask.index(1)])]]
        assert tokens == sum(mask) and cycles == -(-(tokens - 1) // 3)
    # and which answer each walked, by its token ids: the answer's, as the server sent them
    from specgate.measure.answer_end import answer_digest
    from specgate_lab.drafter.train import answer_digests_by_prompt, first_answer_tokens

    heads = first_answer_tokens(rows, 3)
    digests = answer_digests_by_prompt(heads, labels)
    assert len(digests) == 41
    for ids, mask in heads:
        start = mask.index(1)
        assert digests[labels[tuple(ids[:start])]] == answer_digest(ids[start : start + 3])
    assert answer_digests_by_prompt([*heads, heads[0]], labels).keys() == set(digests) - {labels[tuple(heads[0][0][: heads[0][1].index(1)])]}


def test_the_report_puts_the_gate_prompts_expectation_beside_the_held_out_one(tmp_path):
    d = _drafter(tmp_path, b"weights", None)
    record = json.loads((d / "drafter.json").read_text())
    record["checkpoint"]["held_out"]["expected_tau_gate_prompts"] = 1.41
    (d / "drafter.json").write_text(json.dumps(record))
    line = describe(drafter_identity(_with_drafter(d), "eagle3-decode"))
    assert "training expected τ 2.21" in line and "1.41 on the gate's own prompts" in line
    assert "first" not in line  # a record before the head figure names none
    record["checkpoint"]["held_out"].update(expected_tau_gate_prompts_head=1.33, gate_answer_tokens=128)
    (d / "drafter.json").write_text(json.dumps(record))
    line = describe(drafter_identity(_with_drafter(d), "eagle3-decode"))
    assert "1.41 on the gate's own prompts (answers judged on, never trained on; 1.33 over their first 128 answer tokens)" in line


def test_the_gate_prompts_head_keeps_only_the_first_answer_tokens_learned():
    from specgate_lab.drafter.train import first_answer_tokens

    samples = [([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 1, 1]), ([7, 8], [0, 1])]
    assert first_answer_tokens(samples, 2) == [([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 0]), ([7, 8], [0, 1])]
    assert first_answer_tokens(samples, 0) == [([1, 2, 3, 4, 5, 6], [0] * 6), ([7, 8], [0, 0])]
    assert first_answer_tokens(samples, 99) == samples


def test_a_deadline_already_past_boots_nothing(tmp_path, monkeypatch):
    from specgate.errors import SpecgateError
    from specgate_lab.drafter import distil

    monkeypatch.setattr(distil.time, "time", lambda: 100.0)
    monkeypatch.setattr(distil, "boot_server", lambda *a, **k: pytest.fail("booted past the deadline"))
    settings = distil.DistilSettings(answer_until=50.0)
    with pytest.raises(SpecgateError, match="deadline has passed before the server booted"):
        distil._distil(Path("m"), [], _Tokenizer(), tmp_path / "d.jsonl", settings, [], 0.0, False)


def test_a_gate_answer_length_below_one_token_is_refused():
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.train import TrainSettings

    with pytest.raises(SpecgateError, match=r"gate_answer_tokens 0: expected a whole number of tokens >= 1"):
        TrainSettings(gate_answer_tokens=0)


def test_the_report_puts_training_expectation_per_prompt_set_beside_the_measured_one(tmp_path):
    """The H200 report of 92ace6f, its drafter given a per-set expectation (as training now
    writes it): each set's measured τ is shown with what training expected of the same prompts,
    only for a config whose measurement that figure models, and garbage never breaks the report."""
    from specgate.deployment import load_deployment
    from specgate.measure.drafters import expected_by_set
    from specgate.report.markdown import render_markdown
    from specgate.report.model import read_report
    from specgate_lab.drafter.prompts import digest, gate_prompts

    dep = load_deployment("smollm2-eagle3-h200")
    made = {"gate_head_tau_by_set": {"chat": 1.8, "code": 2.04, "math": True, "translation": float("nan"),
                                     "summarisation": 10**400, "long_context": 7.0, "poetry": 1.5},
            "gate_answer_tokens": 128, "gate_prompts_digest": digest(gate_prompts()), "target": dep.model}
    assert expected_by_set(made, dep, "eagle3-decode") == {"chat": 1.8, "code": 2.04}
    assert expected_by_set(made, dep, "eagle3-tree") == {}  # 3 steps, topk 4: not what training models
    assert expected_by_set({**made, "gate_answer_tokens": 256}, dep, "eagle3-decode") == {}
    assert expected_by_set({**made, "gate_prompts_digest": "other"}, dep, "eagle3-decode") == {}
    assert expected_by_set({**made, "target": "/models/another"}, dep, "eagle3-decode") == {}  # others' answers
    assert expected_by_set({**made, "gate_head_tau_by_set": ["chat", 1.8]}, dep, "eagle3-decode") == {}

    path = Path(__file__).parents[2] / "results/2026-12-02-h200-refine/3-gate-update/smollm2-eagle3-h200-update/report/report.json"
    report = read_report(path)
    assert "expected" not in render_markdown(report).split("Accept length by prompt set")[1].splitlines()[0]
    report.drafters["eagle3-decode"]["expected_tau_by_set"] = {"chat": 1.8, "code": 2.04, "math": 10**400, "x": "y"}
    text = render_markdown(report)
    line = next(line for line in text.splitlines() if line.startswith("- eagle3-decode (concurrency 1): chat"))
    assert "chat 1.67 (6; expected 1.80)" in line and "code 1.92 (5; expected 2.04)" in line
    assert "math 1.98 (5)," in line  # not a number it can show: not shown
    assert "expected: training's figure for the same prompts' greedy answers, 2 steps, topk 1" in text
    prefill = next(line for line in text.splitlines() if line.startswith("- eagle3-prefill (concurrency 1)"))
    assert "expected" not in prefill  # another config's identity gives none


def test_a_server_walks_an_answer_in_cycles_and_weighs_the_hard_stretches_more():
    """The position average says 2.0 for an answer half easy (both drafts right) and half hard
    (none right); a server, stepping three tokens a cycle over the easy half and one over the hard,
    counts 13 tokens in 8 cycles. The first token is prefill's; no cycle accepts past the end."""
    from specgate_lab.drafter.train import expected_accept_length
    from specgate_lab.drafter.walk import walked_accept_length

    answer = [(True, True)] * 7 + [(False, False)] * 6  # position 0 is prefill's
    assert expected_accept_length([0.5, 1.0]) == 2.0  # step 1 right at half the positions, step 2 with it
    assert walked_accept_length([answer]) == round(13 / 8, 3) == 1.625
    assert walked_accept_length([[(True, True)] * 3]) == 3.0  # one cycle: one draft accepted, then the end
    assert walked_accept_length([[(True, True)] * 7]) == 3.5  # prefill's token needs no cycle
    assert walked_accept_length([[(False, False)] * 5]) == 1.25  # 5 tokens, 4 cycles of one
    assert walked_accept_length([[(True, False)] * 5], steps=1) == walked_accept_length([[(True, True)] * 5], steps=1)
    assert walked_accept_length([[(True, True)], []]) is None  # no answer of two tokens: nothing to walk
    # pooled as the gate pools: tokens over cycles, not a mean of per-answer figures
    assert walked_accept_length([answer, [(False, False)] * 5]) == round(18 / 12, 3)


def test_each_answer_token_is_walked_with_the_chain_that_first_drafts_it():
    """SpecForge's chain at position j drafts tokens j+2, j+3 (train.py shifts inputs and teacher
    by one, not the mask): the answer token at P is first drafted by the chain at P-2, for the
    second answer token a prompt position whose loss is masked but whose drafts are computed."""
    from specgate_lab.drafter.walk import sample_flags, walked_accept_length

    # one row: prompt at 0-2, answer at 3-6; step 0 right for the chains at 2 and 3, step 1 at 2
    correct = [[[0, 0, 1, 1, 0, 0, 0]], [[0, 0, 1, 0, 0, 0, 0]]]
    answer = [0, 0, 0, 1, 1, 1, 1]
    flags = sample_flags(correct, answer, 0)
    assert flags == [(False, False), (True, True), (True, False), (False, False)]
    # token 0 from prefill; one cycle accepts tokens 1 and 2 and adds 3: 4 tokens in 1 cycle
    assert walked_accept_length([flags]) == 4.0
    perfect = sample_flags([[[1] * 9], [[1] * 9]], [0, 0] + [1] * 7, 0)
    assert walked_accept_length([perfect]) == round(7 / 2, 3)  # a perfect drafter: 3 tokens a cycle after prefill
    assert sample_flags([], [0, 1, 1], 0) == [(), ()]


def test_the_report_shows_the_walked_expectation_beside_the_averaged_one():
    from specgate.deployment import load_deployment
    from specgate.measure.drafters import _is_tau, expected_by_set
    from specgate.report.markdown import render_markdown
    from specgate.report.model import read_report
    from specgate_lab.drafter.prompts import digest, gate_prompts

    dep = load_deployment("smollm2-eagle3-h200-answers")
    made = {"gate_head_walked_tau_by_set": {"chat": 1.71, "code": 3.2, "math": 4.5},
            "gate_answer_tokens": 128, "gate_prompts_digest": digest(gate_prompts()), "target": dep.model}
    assert expected_by_set(made, dep, "eagle3-decode", "gate_head_walked_tau_by_set") == {"chat": 1.71, "code": 3.2}
    runs_past_the_end = load_deployment("smollm2-eagle3-h200")  # ignore_eos = true: not what the walk models
    assert expected_by_set(made, runs_past_the_end, "eagle3-decode", "gate_head_walked_tau_by_set") == {}
    assert expected_by_set({**made, "gate_head_tau_by_set": {"code": 3.2}}, dep, "eagle3-decode") == {}  # averaged: <= 3
    assert _is_tau(2.5) and not _is_tau(True) and not _is_tau(float("nan")) and not _is_tau("2.5")

    path = Path(__file__).parents[2] / "results/2026-12-02-h200-refine/3-gate-update/smollm2-eagle3-h200-update/report/report.json"
    report = read_report(path)
    report.drafters["eagle3-decode"]["expected_tau_by_set"] = {"chat": 1.8}
    report.drafters["eagle3-decode"]["walked_tau_by_set"] = {"chat": 1.7, "code": "x"}
    text = render_markdown(report)
    line = next(line for line in text.splitlines() if line.startswith("- eagle3-decode (concurrency 1): chat"))
    assert "chat 1.67 (6; expected 1.80; walked 1.70)" in line and "code 1.92 (5)," in line
    assert "walked: the same answers walked cycle by cycle as a server counts τ" in text


def test_the_walk_predicts_a_runs_pooled_accept_length_and_says_whose_shortfall_it_is():
    from specgate.measure.drafters import WalkComparison, walk_comparison, walk_note
    from specgate.measure.stats import Interval

    walked = {"chat": 1.5, "code": 3.0}
    # pooled as tokens over verify steps: 30 tokens at 1.5 take 20 steps, 30 at 3.0 take 10 → 60 / 30
    compared = walk_comparison([("chat/a", 30, 20), ("code/b", 30, 10)], walked, 0.95)
    assert compared is not None and compared.predicted == 2.0 and compared.ratio.estimate == 1.0
    assert compared.basis.startswith("per prompt set") and compared.parted == 0 and compared.kept_ratio is None
    # the server took twice the steps the walk expects on every request: it accepts half as much
    halved = walk_comparison([("chat/a", 30, 40), ("code/b", 30, 20), ("chat/c", 15, 20)], walked, 0.95)
    assert halved is not None and halved.ratio.estimate == 0.5 and halved.ratio.high == 0.5
    # walked per prompt: each request against its own prompt's walk, where every prompt sent has one
    by_prompt = {"chat/a": (30, 10), "code/b": (30, 30), "chat/c": (10, 10)}
    compared = walk_comparison([("chat/a", 30, 10), ("code/b", 30, 30)], walked, 0.95, by_prompt)
    assert compared is not None and compared.predicted == 1.5 and compared.ratio.estimate == 1.0
    assert compared.basis == "per prompt sent" and compared.parted == 0
    compared = walk_comparison([("chat/a", 30, 10), ("code/z", 30, 10)], walked, 0.95, by_prompt)
    assert compared is not None and compared.basis.startswith("per prompt set")  # one prompt not walked alone: all by set
    assert compared.parted == 0  # by set, no answer of its own to part from
    assert walk_comparison([("chat/a", 30, 20), ("math/m", 30, 10)], walked, 0.95) is None  # a set it never walked
    assert walk_comparison([("chat/a", 30, 20)], walked, 0.95) is None  # one request: no interval
    assert walk_comparison([("chat/a", 30, 20), ("code/b", 3, 0)], walked, 0.95) is None
    for garbage in (0, -1.0, float("nan"), True, "2"):
        assert walk_comparison([("chat/a", 30, 20), ("code/b", 30, 10)], {"chat": 1.5, "code": garbage}, 0.95) is None

    def note(walked_tau: float, ratio: Interval, floor: float = 2.0, basis: str = "b") -> str:
        return walk_note(WalkComparison(walked_tau, ratio, basis), floor)

    serving = note(2.3, Interval(0.85, 0.8, 0.9, 0.95), basis="per prompt sent")
    assert "as a server counts; per prompt sent) predicts τ 2.300" in serving
    assert "served over walked 0.850 [0.800, 0.900]" in serving and "accepts 15.0% less" in serving
    assert "look at the serving" in serving and "the walk clears the floor 2: served as it walks" in serving
    assert "parted" not in serving
    both = note(1.9, Interval(0.9, 0.85, 0.95, 0.95))
    assert "look at the serving" in both and "the walk itself is below the floor 2" in both
    consistent = note(1.8, Interval(1.0, 0.96, 1.03, 0.95))
    assert "consistent with the walk (a serving loss of up to 4.0% is not excluded)" in consistent
    assert "the drafter falls short whatever the serving" in consistent
    assert "at the floor 2 (within 1%)" in note(1.989, Interval(0.98, 0.94, 1.01, 0.95))
    assert "accepts more than the walk predicts" in note(1.7, Interval(1.1, 1.05, 1.2, 0.95))


def test_answers_that_parted_from_the_walked_ones_are_counted_apart_and_the_serving_judged_on_the_rest():
    from specgate.measure.drafters import WalkComparison, walk_comparison, walk_note
    from specgate.measure.stats import Interval

    by_prompt = {f"chat/{i}": (30, 10) for i in range(12)} | {f"code/{i}": (12, 4) for i in range(8)}
    walked = {"chat": 3.0, "code": 3.0}
    # the chat prompts served as walked (the walked length, the walked steps); 4 code ones came back
    # with another length (40 tokens, not 12): other texts, which took far more steps than the walk's
    answers = [(f"chat/{i}", 30, 10) for i in range(12)] + [(f"code/{i}", 40, 40) for i in range(4)]
    compared = walk_comparison(answers, walked, 0.95, by_prompt, limit=30)
    assert compared is not None and (compared.parted, compared.sent, compared.at_limit) == (4, 16, 12)
    assert compared.ratio.high < 1.0 and compared.kept_ratio is not None and compared.kept_ratio.estimate == 1.0
    text = walk_note(compared, 2.0)
    assert "4 of the 16 served answers parted from the ones training walked (another length" in text
    assert ("over the other 12 (of the walked length, no proof of the same text; 12 of them at the 30-token limit, "
            "which the length cannot tell apart) served over walked 1.000 [1.000, 1.000]") in text  # fmt: skip
    assert "consistent with the walk on the answers kept" in text
    assert "the shortfall over all requests lies mostly in the answers that parted from the walked ones" in text
    assert "look at the serving" not in text and "more than half" not in text
    # the answers kept fall short too: the serving is named, on them
    answers = [(f"chat/{i}", 30, 20) for i in range(12)] + [(f"code/{i}", 40, 40) for i in range(4)]
    short = walk_note(walk_comparison(answers, walked, 0.95, by_prompt), 2.0)  # type: ignore[arg-type]
    assert "accepts 50.0% less than the same drafter walks on the answers kept; look at the serving" in short
    # kept answers as short of the walk as the parted (only noisier): consistent, but no blame moved
    long_code = {f"code/{i}": (120, 40) for i in range(12)}
    answers = [(f"chat/{i}", 30, 9 if i % 2 else 12) for i in range(12)] + [(f"code/{i}", 120, 44) for i in range(12)]
    served = [(None, None)] * 12 + [(119, None)] * 12  # the code answers ended one token earlier
    compared = walk_comparison(answers, walked, 0.95, by_prompt | long_code, served)
    assert compared is not None and compared.parted == 12 and compared.kept_ratio is not None
    assert compared.ratio.high < 1 <= compared.kept_ratio.high and compared.kept_ratio.low <= compared.ratio.estimate
    text = walk_note(compared, 2.0)
    assert "consistent with the walk on the answers kept" in text and "lies mostly in" not in text
    # too few kept (under MIN_KEPT, or under half): no serving verdict at all, and more than half parted is said
    answers = [(f"chat/{i}", 31, 10) for i in range(6)] + [("code/0", 12, 8)]
    compared = walk_comparison(answers, walked, 0.95, by_prompt)
    assert compared is not None and compared.parted == 6 and compared.kept_ratio is None
    text = walk_note(compared, 2.0)
    assert "6 of the 7 served answers parted" in text and "over the other" not in text
    assert "too few served answers are the walked ones (1 of 7; at least 10 and half are needed)" in text
    assert "that more than half parted is itself a finding" in text and "look at the serving" not in text
    answers = [(f"chat/{i}", 31, 10) for i in range(11)] + [(f"code/{i}", 12, 4) for i in range(8)]
    compared = walk_comparison(answers, walked, 0.95, by_prompt)
    assert compared is not None and compared.parted == 11 and compared.kept_ratio is None  # 8 kept < 10
    # an answer that ends at its end of turn, with tokens accepted past it at the limit, is the same answer
    answers = [(f"chat/{i}", 30, 10) for i in range(12)] + [("code/0", 14, 5)]
    compared = walk_comparison(answers, walked, 0.95, by_prompt, [(None, None)] * 12 + [(12, None)])
    assert compared is not None and compared.parted == 0
    # the same length is no proof of the same text: such an answer stays among the walked ones
    assert walk_note(WalkComparison(1.8, Interval(1.0, 0.9, 1.1, 0.95), "b", 0, 4), 2.0).count("parted") == 0

    # known by their token ids, the ids decide: code/0 has the walked length but another text
    answers = [(f"chat/{i}", 30, 10) for i in range(12)] + [(f"code/{i}", 12, 4) for i in range(4)]
    walked_ids = {label: f"{n:016x}" for n, label in enumerate(by_prompt)}
    served = [(None, walked_ids[label]) for label, _, _ in answers]
    served[12] = (None, "f" * 16)
    compared = walk_comparison(answers, walked, 0.95, by_prompt, served, walked_ids)
    assert compared is not None and (compared.parted, compared.by_ids, compared.proven, compared.compared_by_ids) == (1, 1, 15, 16)
    text = walk_note(compared, 2.0)
    assert "1 of the 16 served answers parted from the ones training walked (their token ids differ" in text
    assert "over the other 15 (the very answers walked, by their token ids)" in text
    # every one the walked answer: said so
    compared = walk_comparison(answers, walked, 0.95, by_prompt, [(None, walked_ids[a[0]]) for a in answers], walked_ids)
    assert compared is not None and (compared.parted, compared.proven) == (0, 16)
    assert "every served answer is the one training walked (by its token ids)" in walk_note(compared, 2.0)
    # ids for some only: the others by length, and the note says which was which
    served = [(None, walked_ids[label]) for label, _, _ in answers]
    served[0], served[13] = (None, None), (None, "e" * 16)  # chat/0 no ids (walked length), code/1 another text
    answers[14] = ("code/2", 40, 40)
    served[14] = (None, None)  # code/2: no ids, another length
    compared = walk_comparison(answers, walked, 0.95, by_prompt, served, walked_ids)
    assert compared is not None and (compared.parted, compared.by_ids, compared.proven) == (2, 1, 13)
    text = walk_note(compared, 2.0)
    assert "2 of the 16 served answers parted from the ones training walked (1 by their token ids, 1 by another length" in text
    assert "over the other 14 (13 the very answers walked by their token ids, 1 of the walked length)" in text
    # what is known of the served answers must line up with the requests, or it is not used (lengths decide)
    compared = walk_comparison(answers, walked, 0.95, by_prompt, served[:3], walked_ids)
    assert compared is not None and compared.compared_by_ids == 0 and compared.parted == 1


def test_the_walk_per_prompt_is_read_only_as_counts_of_a_walk_of_sets_that_apply():
    from specgate.measure.drafters import recorded_prompt_walks

    made = {"gate_head_walked_by_prompt": {
        "chat/chat-00": [120, 70], "code/code-01": [128, 60], "math/math-00": [128, 64],  # math: not applicable here
        "chat/chat-01": [10, 0], "chat/chat-02": [10, 11], "chat/chat-03": [100, 20], "chat/chat-04": [True, 1],
        "chat/chat-05": "x", "chat/chat-06": [1.5, 1], 7: [10, 5],
    }}
    assert recorded_prompt_walks(made, {"chat": 1.7, "code": 2.0}) == {"chat/chat-00": (120, 70), "code/code-01": (128, 60)}
    assert recorded_prompt_walks({"gate_head_walked_by_prompt": ["chat/chat-00"]}, {"chat": 1.7}) == {}
    assert recorded_prompt_walks({}, {"chat": 1.7}) == {}

    from specgate.measure.drafters import recorded_prompt_digests

    walks = {"chat/chat-00": (120, 70), "code/code-01": (128, 60)}
    from specgate.measure.answer_end import ANSWER_DIGEST_SCHEME

    made = {"gate_head_digest_by_prompt": {"chat/chat-00": "0123456789abcdef", "code/code-01": "0123456789ABCDEF",
                                           "math/math-00": "0123456789abcdef", 7: "x"},
            "gate_head_digest_scheme": ANSWER_DIGEST_SCHEME}  # fmt: skip
    assert recorded_prompt_digests(made, walks) == {"chat/chat-00": "0123456789abcdef"}
    for garbage in (None, [], "x", {"chat/chat-00": 5}, {"chat/chat-00": "0123"}):
        assert recorded_prompt_digests({**made, "gate_head_digest_by_prompt": garbage}, walks) == {}
    for scheme in (None, "md5 of the ids", 1):  # digests made another way would all differ: not read
        assert recorded_prompt_digests({**made, "gate_head_digest_scheme": scheme}, walks) == {}


def _judge_replaying(run: str):
    """A judge of the answers deployment whose eagle3-decode requests are those of an H200 run
    (their prompts, tokens and verify steps from its benchmark.json), and that config's floor."""
    import json
    from types import SimpleNamespace

    from specgate.deployment import load_deployment
    from specgate.measure.speed import ConfigSpeed, SpeedSample
    from specgate.verdicts.judge import Judge

    dep = load_deployment("smollm2-eagle3-h200-answers")
    info = next(
        b["extra_info"] for b in json.loads((Path(__file__).parents[2] / run / "report/benchmark.json").read_text())["benchmarks"]
        if b["extra_info"]["config"] == "eagle3-decode"
    )
    record = ConfigSpeed("eagle3-decode", 1)
    labels = info["prompt"]
    for i, (tokens, steps) in enumerate(zip(info["completion_tokens"], info["verify_ct"], strict=True)):
        record.samples.append(SpeedSample(500.0, 0.03, 0.3, tokens, 50, steps, None, tokens, index=i))
    meter = SimpleNamespace(record=lambda c, n: record, label=lambda s: labels[s.index])
    plan = SimpleNamespace(
        meter=meter, ensure=lambda *a: None, raise_for=lambda c: None, per_boot=lambda *a: len(labels),
        more=lambda *a: False,
    )
    judge = Judge(dep, plan, Path("."))  # type: ignore[arg-type]
    return judge, next(g for g in dep.gates.accept_length if g.config == "eagle3-decode")


def test_a_failing_floor_sets_the_served_tau_against_the_walk_on_the_h200_run():
    """Seen on the H200 (results/2026-12-02-h200-round2-gate/, answers alone, eagle3-decode): the
    accept floor's verdict judged again on that run's 30 requests (their prompts, tokens and verify
    steps from its benchmark.json), with the drafter's walk by set as its record gave it. The walk
    predicts 1.989 against the served 1.943 [1.864, 2.019], a floor of 2: at the floor, and the
    server consistent with it."""
    judge, gate = _judge_replaying("results/2026-12-02-h200-round2-gate/2-gate-update/smollm2-eagle3-h200-answers-update")
    walked = {"chat": 1.746, "code": 2.029, "long_context": 2.114, "math": 2.14, "summarisation": 1.993, "translation": 2.143}
    drafter = {"path": "/tmp/assets/smollm2-eagle3", "matches_record": True, "walked_tau_by_set": walked}
    judge._drafters = {"eagle3-decode": drafter}
    verdict = judge.accept_floor(gate)
    assert verdict.failed and "accepts 1.943 tokens per verify step [1.864, 2.019]" in verdict.summary
    assert verdict.figures["walked_tau"] == 1.989
    ratio = verdict.figures["served_over_walked"]
    assert ratio["low"] < 1 < ratio["high"] and ratio["high"] - ratio["low"] < 0.1  # narrower than the τ interval's 0.155
    note = next(n for n in verdict.notes if n.startswith("training's walk"))
    assert "consistent with the walk" in note and "at the floor 2 (within 1%)" in note
    # weights other than the walked ones, no walk recorded, a set it never walked: no comparison
    judge._drafters = {"eagle3-decode": {**drafter, "matches_record": False}}
    assert "walked_tau" not in judge.accept_floor(gate).figures
    judge._drafters = {"eagle3-decode": {"path": "/d", "matches_record": True}}
    assert "walked_tau" not in judge.accept_floor(gate).figures
    judge._drafters = {"eagle3-decode": {**drafter, "walked_tau_by_set": {"chat": 1.746}}}
    unwalked = judge.accept_floor(gate)
    assert "walked_tau" not in unwalked.figures
    assert any("no figure for code, long_context, math, summarisation, translation" in n for n in unwalked.notes)


def test_on_the_h200_the_shortfall_against_the_walk_lay_in_answers_that_parted_from_the_walked_ones():
    """Seen on the H200 (results/2026-12-03-h200-from-scratch/, answers alone, eagle3-decode, drafter
    886a9891): served over walked 0.960 over the 30 requests, which read as a 4% serving loss. But 8
    of the 30 answers came back with another length than the walked ones (translation-04: 15 tokens
    walked, 94 served by the plain server, 128 by EAGLE-3): other texts. Over the other 22 the server
    is consistent with the walk, and the verdict now says where the shortfall lies."""
    import json

    from specgate.measure.drafters import recorded_prompt_walks

    run = "results/2026-12-03-h200-from-scratch"
    judge, gate = _judge_replaying(f"{run}/4-answers-update/smollm2-eagle3-h200-answers-update")
    made = json.loads((Path(__file__).parents[2] / run / "2-train/drafter-train/smollm2-eagle3.json").read_text())
    held = made["checkpoints"]["final"]["held_out"]
    walked = held["walked_tau_gate_prompts_head_by_set"]
    by_prompt = recorded_prompt_walks({"gate_head_walked_by_prompt": held["walked_gate_prompts_head_by_prompt"]}, walked)
    assert len(by_prompt) == 41
    judge._drafters = {"eagle3-decode": {"path": "/tmp/assets/smollm2-eagle3", "matches_record": True,
                                         "walked_tau_by_set": walked, "walked_by_prompt": by_prompt}}
    verdict = judge.accept_floor(gate)
    assert verdict.failed and "accepts 1.527 tokens per verify step" in verdict.summary
    assert verdict.figures["walked_tau"] == 1.59 and verdict.figures["served_over_walked"]["high"] < 1
    assert verdict.figures["answers_parted_from_walk"] == 8
    unparted = verdict.figures["served_over_walked_unparted"]
    assert unparted["low"] < 1 < unparted["high"] and round(unparted["estimate"], 3) == 0.987
    note = next(n for n in verdict.notes if n.startswith("training's walk"))
    assert "8 of the 30 served answers parted from the ones training walked" in note
    assert "over the other 22 (of the walked length, no proof of the same text; 18 of them at the 128-token limit" in note
    assert "consistent with the walk on the answers kept" in note and "look at the serving" not in note
    assert "the shortfall over all requests lies mostly in the answers that parted" in note
    assert "answers_compared_by_token_ids" not in verdict.figures  # no ids in that run: none claimed
    assert "the walk itself is below the floor 2" in note
    # a record and a run that know their answers by token ids: the ids decide (here chat-05 came back
    # with the walked length but another text), and the figures say how many each way
    import dataclasses

    record = judge.plan.meter.record("eagle3-decode", 1)
    digests = {label: f"{n:016x}" for n, label in enumerate(by_prompt)}
    labels = [judge.meter.label(s) for s in record.samples]
    record.samples[:] = [
        dataclasses.replace(s, answer_digest=digests[label] if s.completion_tokens == by_prompt[label][0] and label != "chat/chat-05" else "f" * 16)
        for s, label in zip(record.samples, labels, strict=True)
    ]  # fmt: skip
    judge._drafters["eagle3-decode"]["walked_digest_by_prompt"] = digests
    verdict = judge.accept_floor(gate)
    assert verdict.figures["answers_parted_from_walk"] == 9 and verdict.figures["answers_parted_by_token_ids"] == 9
    assert verdict.figures["answers_walked_by_token_ids"] == 21 and verdict.figures["answers_compared_by_token_ids"] == 30
    note = next(n for n in verdict.notes if n.startswith("training's walk"))
    assert "9 of the 30 served answers parted from the ones training walked (their token ids differ" in note
    assert "over the other 21 (the very answers walked, by their token ids)" in note


def test_the_drafter_line_names_the_walked_figure_only_when_it_is_an_accept_length():
    from specgate.measure.drafters import describe

    made = {"role": "final", "by": "specgate assets smollm2-eagle3", "held_out_tau": 2.342, "gate_prompts_tau": 2.076,
            "gate_head_tau": 1.986, "gate_answer_tokens": 128, "gate_head_walked_tau": 1.912}
    line = describe({"path": "/d", "sha256": "ab" * 32, "made": made})
    assert "1.986 over their first 128 answer tokens, 1.912 walked cycle by cycle as a server counts answers that stop at their end)" in line
    assert "walked" not in describe({"path": "/d", "made": {**made, "gate_head_walked_tau": None}})
    assert "walked" not in describe({"path": "/d", "made": {**made, "gate_head_walked_tau": "1.9"}})


def _grow(tmp_path, monkeypatch, cut: int | None = None, n: int = 20) -> dict:
    """make's grow stage on the work folder _stage_runner fills, the fake SGLang answering."""
    from specgate_lab.drafter import make

    said: list[str] = []
    _fake_sglang(monkeypatch, cut_after_batches=cut)
    made = make._grow_stage(Path("t"), tmp_path / "work", n, 256, 0, 0, said.append, None, False, 0.0)
    made["said"] = said
    return made


def test_a_further_round_asks_new_prompts_only_and_goes_on_where_its_deadline_cut_it(tmp_path, monkeypatch):
    """More answers, not more passes: each round is distilled into its own folder with its own
    seed, leaves out every prompt an earlier round asked (none answered twice, none held out
    before taught now), asks no gate prompt again, and a round cut by its deadline is gone on
    with rather than a new one started."""
    from specgate.errors import SpecgateError
    from specgate_lab.drafter import distil, make

    stage, _, _, data = _stage_runner(tmp_path, monkeypatch, cut_after_batches=None)
    work = data.parent
    with pytest.raises(SpecgateError, match="run --stage distil first"):
        _grow(tmp_path, monkeypatch)  # nothing to grow yet
    assert make.rounds(work) == []  # and no empty round left behind
    stage(n=300)
    first = {distil.prompt_key(p) for p in distil.load_plan(work / distil.PLAN_FILE).prompts}

    cut = _grow(tmp_path, monkeypatch, cut=1, n=300)
    assert make.rounds(work) == [work / "round-2"] and cut["prompts"]["round"] == 2
    assert cut["prompts"]["seed"] == training_prompts.SEED + 1 and "gate_prompts_judged" not in cut["prompts"]
    assert cut["distillation"]["prompts_not_answered_by_the_deadline"] > 0
    plan = distil.load_plan(work / "round-2" / distil.PLAN_FILE)
    assert not {distil.prompt_key(p) for p in plan.prompts} & first
    assert not any(p.kind.startswith(training_prompts.GATE_KIND) for p in plan.prompts)
    overlap = sum(distil.prompt_key(p) in first for p in training_prompts.generate(300, seed=training_prompts.SEED + 1))
    assert cut["distillation"]["dropped_as_asked_in_an_earlier_round"] == overlap > 0  # templates repeat across seeds

    again = _grow(tmp_path, monkeypatch, n=300)  # the cut round again, not a third one
    assert make.rounds(work) == [work / "round-2"] and len(again["distillation"]["calls"]) == 2
    assert again["distillation"]["prompts_not_answered_by_the_deadline"] == 0
    third = _grow(tmp_path, monkeypatch)
    assert make.rounds(work) == [work / "round-2", work / "round-3"] and third["prompts"]["round"] == 3
    both = first | {distil.prompt_key(p) for p in plan.prompts}
    assert not {distil.prompt_key(p) for p in distil.load_plan(work / "round-3" / distil.PLAN_FILE).prompts} & both

    recorded = make._recorded_data(work)
    assert [r["round"] for r in recorded["rounds"]] == [2, 3]
    assert make.data_files(work) == [data, work / "round-2" / make.DATA_FILE, work / "round-3" / make.DATA_FILE]
    (work / "round-4").mkdir()
    (work / "round-4" / make.DATA_FILE).write_text("")
    with pytest.raises(SpecgateError, match=r"round-4: a round of data without its distilled.json: run --stage grow again"):
        make._recorded_data(work)


def _rows(path: Path, n: int, kind: str = "self", first_id: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(
        json.dumps({"i": i, "kind": kind, "prompt_ids": [1, 2], "output_ids": [first_id + i, 5, 6]}) + "\n" for i in range(n)
    ))  # fmt: skip


def test_adding_a_round_never_moves_an_earlier_sample_across_the_held_out_split(tmp_path):
    """A refine on more rounds judges on every round's held-out answers: the first round's are
    the ones its parent never learned only if that round splits as it did alone."""
    import random

    from specgate_lab.drafter.train import TrainSettings, held_by_rounds, split_held_out, split_rounds

    settings = TrainSettings()
    first, second = tmp_path / "distilled.jsonl", tmp_path / "round-2" / "distilled.jsonl"
    _rows(first, 500)
    _rows(second, 400, first_id=1000)
    alone_taught, alone_held, _, alone = split_rounds([first], settings, random.Random(settings.seed))
    taught, held, _, figures = split_rounds([first, second], settings, random.Random(settings.seed))
    _, expected_held = split_held_out(500, settings.held_out, random.Random(settings.seed))
    assert [s[0][2] for s in alone_held] == expected_held  # the split a drafter of round 1 alone had
    assert held[: len(alone_held)] == alone_held and taught[: len(alone_taught)] == alone_taught
    assert [f["held_out_samples"] for f in figures] == [alone[0]["held_out_samples"], 32]
    assert all(s[0][2] >= 1000 for s in held[len(alone_held):])  # the second round's own share
    assert not {s[0][2] for s in taught} & {s[0][2] for s in held}
    by_round = held_by_rounds(held, figures)  # cut back into rounds, as training judges each apart
    assert by_round[0] == alone_held and by_round[1] == held[len(alone_held):] and len(by_round[1]) == 32
    assert held_by_rounds(alone_held, alone) == [alone_held]


def test_a_refine_on_more_rounds_goes_on_but_one_missing_a_round_its_parent_learned_is_refused(tmp_path, monkeypatch):
    from specgate.errors import SpecgateError
    from specgate_lab.drafter.make import FINAL_DIR

    work, record = _refine_setup(tmp_path)
    grown = {**record, "rounds": [{"round": 2, "prompts": {"digest": "r2"}, "distillation": {"samples": 9}}]}
    made = _refine(tmp_path, grown, _fake_train(beats=True), monkeypatch)  # parent of round 1, refined on 1 and 2
    assert made["rounds"] == grown["rounds"]
    assert json.loads((tmp_path / FINAL_DIR / "drafter.json").read_text())["rounds"] == grown["rounds"]
    with pytest.raises(SpecgateError, match=r"trained on 1 further round\(s\) of data .* \(0 there\)"):
        _refine(tmp_path, record)  # the child learned round 2; this data lacks it
    changed = {**record, "rounds": [{**grown["rounds"][0], "distillation": {"samples": 10}}]}
    with pytest.raises(SpecgateError, match="restore the rounds it learned from"):
        _refine(tmp_path, changed)


def test_a_round_a_failure_cut_is_distilled_again_and_a_broken_or_overlapping_one_is_named(tmp_path, monkeypatch):
    """A grow that fails after its server booted leaves the round's server log and nothing else: the
    next grow distils that round again (not 'finish it' advice that cannot work). A round whose
    plan is gone is not distilled again silently, one whose data is gone is named before training,
    and rounds that share a prompt (round 1 distilled anew after round 2 was grown) are refused."""
    from specgate.errors import SpecgateError
    from specgate_lab.drafter import distil, make

    stage, _, _, data = _stage_runner(tmp_path, monkeypatch, cut_after_batches=None)
    work = data.parent
    stage(n=100)
    (work / "round-2").mkdir()
    (work / "round-2" / "distilled.server.log").write_text("booted, then out of memory\n")
    with pytest.raises(SpecgateError, match="round-2: a round of data without its distilled.json: run --stage grow again"):
        make._recorded_data(work)
    grown = _grow(tmp_path, monkeypatch, n=300)
    assert grown["prompts"]["round"] == 2 and make.rounds(work) == [work / "round-2"]
    assert [r["round"] for r in make._recorded_data(work)["rounds"]] == [2]

    plan = (work / "round-2" / distil.PLAN_FILE).read_bytes()
    (work / "round-2" / distil.PLAN_FILE).unlink()
    with pytest.raises(SpecgateError, match="round-2: its data and record are here but not its distil-plan.jsonl"):
        _grow(tmp_path, monkeypatch)
    with pytest.raises(SpecgateError, match="round-2: a round of data without its distil-plan.jsonl: restore it"):
        make._recorded_data(work)
    (work / "round-2" / distil.PLAN_FILE).write_bytes(plan)
    answers = (work / "round-2" / make.DATA_FILE).read_bytes()
    (work / "round-2" / make.DATA_FILE).write_text('{"i": 99999, "kind": "chat", "prompt_ids": [1], "output_ids": [2]}\n')
    with pytest.raises(SpecgateError, match=r"round-2/distilled.jsonl, line 1: plan index 99999 outside the plan"):
        make._recorded_data(work)
    (work / "round-2" / make.DATA_FILE).write_bytes(answers)

    stage(n=1500)  # round 1 distilled anew (another request): round 2 was made against the old one
    with pytest.raises(SpecgateError, match=r"round-2/distil-plan.jsonl: asks a prompt .*distil-plan.jsonl asked too"):
        make._recorded_data(work)


def test_rounds_judged_apart_pool_by_their_tokens_and_a_round_with_none_judged_gives_no_figure():
    from specgate_lab.drafter.train import expected_accept_length, pooled, tau_by_round

    first, second = ([0.8 * 100, 0.6 * 100], 100), ([0.5 * 300, 0.25 * 300], 300)
    assert pooled([first, second]) == [0.575, 0.3375]  # weighed by tokens, as if judged together
    assert pooled([first]) == [0.8, 0.6] and tau_by_round([first, second]) == [2.28, 1.625]
    assert tau_by_round([first, ([0.0, 0.0], 0)]) == [2.28, None]  # never the 1.0 of a zero accuracy
    assert expected_accept_length(pooled([first, ([0.0, 0.0], 0)])) == 2.28


def test_a_plan_asks_each_prompt_once():
    from specgate_lab.drafter import distil

    prompts = training_prompts.generate(4000, seed=training_prompts.SEED + 1)  # holds one repeat
    assert len({distil.prompt_key(p) for p in prompts}) == 3999
    plan = distil._new_plan(prompts, _Tokenizer(), distil.DistilSettings(), lambda *a, **k: [])
    assert len(plan.prompts) == 3999 and plan.made["dropped_as_repeated"] == 1
    assert len({distil.prompt_key(p) for p in plan.prompts}) == 3999


def test_first_round_data_without_a_plan_neither_grows_nor_trains_beside_rounds_and_says_why(tmp_path, monkeypatch):
    """Data distilled before plans were kept cannot be grown from (a further round could not
    leave out its prompts), and beside further rounds it cannot be checked against them: both
    say so, and a refused grow leaves no empty round behind."""
    from specgate.errors import SpecgateError
    from specgate_lab.drafter import distil, make

    stage, _, _, data = _stage_runner(tmp_path, monkeypatch, cut_after_batches=None)
    work = data.parent
    stage(n=100)
    _grow(tmp_path, monkeypatch, n=100)
    plan = (work / distil.PLAN_FILE).read_bytes()
    (work / distil.PLAN_FILE).unlink()
    with pytest.raises(SpecgateError, match=r"distil-plan.jsonl: not found: the first round's prompts cannot be checked"):
        make._recorded_data(work)
    with pytest.raises(SpecgateError, match=r"the first round's data predates plans.*--stage distil --fresh"):
        _grow(tmp_path, monkeypatch, n=100)
    assert make.rounds(work) == [work / "round-2"]  # no empty round-3
    (work / distil.PLAN_FILE).write_bytes(plan)
    assert [r["round"] for r in make._recorded_data(work)["rounds"]] == [2]


def test_the_all_stage_records_and_checks_every_round_it_trains_on(tmp_path, monkeypatch):
    from specgate.errors import SpecgateError
    from specgate_lab.drafter import make

    stage, _, _, data = _stage_runner(tmp_path, monkeypatch, cut_after_batches=None)
    work = data.parent
    stage(n=100)
    _grow(tmp_path, monkeypatch, n=100)
    trained: list = []
    monkeypatch.setattr(make, "train", lambda target, paths, *a, **k: trained.append(paths) or {"checkpoints": {}})
    monkeypatch.setattr(make, "_gpu", lambda: "none (a test)")
    monkeypatch.setattr(make, "_distil_stage", lambda *a, **k: make._data_record(work / make.DATA_RECORD))
    monkeypatch.setattr("specgate_lab.assets.make_smollm2", lambda out, gguf: (tmp_path / "target", None))
    monkeypatch.setattr(make, "WORK_DIR", work.name)
    from specgate_lab.drafter.train import TrainSettings

    made = make.make_smollm2_eagle3(tmp_path, None, 100, TrainSettings(), 256, print, stage="all")
    assert trained == [make.data_files(work)] and [r["round"] for r in made["rounds"]] == [2]
    (work / "round-3").mkdir()
    (work / "round-3" / "distilled.server.log").write_text("booted, then failed\n")  # a grow that failed
    with pytest.raises(SpecgateError, match="round-3: a round of data without its distilled.json"):
        make.make_smollm2_eagle3(tmp_path, None, 100, TrainSettings(), 256, print, stage="all")
