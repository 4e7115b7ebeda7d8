"""The trained drafter's CPU side: training prompts that never leak the held-out sets, and the
identity (checksum, provenance) every report and baseline gives the weights a config ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specgate.drafter import prompts as training_prompts
from specgate.measure.drafters import describe, drafter_identity
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
        "checkpoint": {"step": 900, "sha256": hashlib.sha256(recorded or weights).hexdigest()},
        "distillation": {"samples": 4000, "answer_tokens": 700000},
        "training": {"steps_done": 900, "train_s": 230.0},
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
    (good / "model.safetensors").write_bytes(b"other weights")
    swapped = drafter_identity(_with_drafter(good), "eagle3-decode")
    assert swapped["matches_record"] is False and "WEIGHTS DIFFER" in describe(swapped)


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


def test_the_train_stage_needs_what_a_distil_stage_left_and_names_it(tmp_path):
    """A device call is 10 minutes: data made in one call, training in the next, from what the
    distil stage wrote (or a carried copy); anything missing or garbled is named."""
    from specgate.drafter.make import DATA_FILE, DATA_RECORD, _recorded_data
    from specgate.errors import SpecgateError

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

    from specgate.drafter.train import expected_accept_length, split_held_out
    from specgate.errors import SpecgateError

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


def test_the_learning_rate_warms_up_then_anneals_to_zero_over_the_steps_that_fit():
    """A cosine laid over every planned epoch never anneals when the time budget stops it first
    (3263 of 5200 planned steps once ended at a third of the peak): the schedule's length is
    fitted to the time left, so its last step is the budget's."""
    from specgate.drafter.train import fitted_steps, learning_rate

    assert learning_rate(0, 1000, 3e-4, 100) == 0
    assert learning_rate(50, 1000, 3e-4, 100) == pytest.approx(1.5e-4)
    assert learning_rate(100, 1000, 3e-4, 100) == pytest.approx(3e-4)
    assert learning_rate(550, 1000, 3e-4, 100) == pytest.approx(1.5e-4)
    assert learning_rate(1000, 1000, 3e-4, 100) == pytest.approx(0, abs=1e-12)
    assert learning_rate(1200, 1000, 3e-4, 100) == pytest.approx(0, abs=1e-12)  # past the end: stays at zero
    rates = [learning_rate(s, 1000, 3e-4, 100) for s in range(100, 1001)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    assert fitted_steps(5200, 50, 0.125, 400.0) == 3250  # 400 s at 8 steps/s after the first 50
    assert fitted_steps(1000, 50, 0.125, 400.0) == 1000  # never past the planned epochs
    assert fitted_steps(5200, 50, 0.125, -3.0) == 50  # no time left: stop where it is
    assert fitted_steps(5200, 50, 0.0, 400.0) == 5200  # an untimed rate fits nothing: keep the plan
    assert fitted_steps(5200, 50, 0.125, float("inf")) == 5200


def test_refining_refuses_a_parent_trained_on_other_data_or_split(tmp_path):
    """Refining judges on the held-out answers of the first training: on other data, or another
    split, they would include answers the parent learned, and the 'better than the parent'
    verdict would flatter."""
    import time

    from specgate.drafter.make import DATA_FILE, FINAL_DIR, WEAK_DIR, _refine
    from specgate.drafter.train import TrainSettings
    from specgate.errors import SpecgateError

    work = tmp_path / "smollm2-eagle3-work"
    work.mkdir()
    record = {"prompts": {"digest": "abc"}, "distillation": {"samples": 20447}}

    def refine() -> None:
        _refine(tmp_path, tmp_path / "target", work / DATA_FILE, record, TrainSettings(), print, time.monotonic())

    with pytest.raises(SpecgateError, match=f"{FINAL_DIR}/drafter.json: not found; run --stage train first"):
        refine()
    (tmp_path / FINAL_DIR).mkdir()
    (tmp_path / FINAL_DIR / "drafter.json").write_text("[1]")
    with pytest.raises(SpecgateError, match="expected a JSON object"):
        refine()
    parent = {**record, "prompts": {"digest": "other"}, "training": {"settings": {"seed": 0, "held_out": 0.03}}}
    (tmp_path / FINAL_DIR / "drafter.json").write_text(json.dumps(parent))
    with pytest.raises(SpecgateError, match="trained on other data"):
        refine()
    parent = {**record, "training": {"settings": {"seed": 1, "held_out": 0.03, "max_length": 2048}}}
    (tmp_path / FINAL_DIR / "drafter.json").write_text(json.dumps(parent))
    with pytest.raises(SpecgateError, match="the parent's seed differ"):
        refine()
    parent["training"]["settings"]["seed"] = 0
    (tmp_path / FINAL_DIR / "drafter.json").write_text(json.dumps(parent))
    with pytest.raises(SpecgateError, match=f"{WEAK_DIR}/drafter.json: not found"):  # before any training
        refine()
    assert not (tmp_path / WEAK_DIR).exists() and not (work / "refined").exists()  # nothing trained, nothing moved
