"""Where a measured answer ended inside its fixed length: the end-of-turn ids from the model's
own files, each speed request's answer length, and the accept-length floor saying how much of
what it pooled ran on past the answers."""

from __future__ import annotations

import json

from specgate.measure.answer_end import answer_digest, answer_tokens, end_ids, past_the_end


def test_end_ids_come_from_the_models_own_files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 2}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7]}))
    assert end_ids(tmp_path) == {2, 7}
    assert end_ids(tmp_path / "absent") == frozenset()  # a hub id: nothing claimed
    assert end_ids("HuggingFaceTB/SmolLM2-135M-Instruct") == frozenset()
    (tmp_path / "generation_config.json").write_text("{not json")
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": [True, -1, "2", 5]}))
    assert end_ids(tmp_path) == {5}  # garbage is no evidence
    # hostile files: nested past Python's recursion limit, huge, a folder, a loop: none is evidence
    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert end_ids(tmp_path) == frozenset()
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 3, "pad": "x" * (2 << 20)}))
    assert end_ids(tmp_path) == frozenset()
    (tmp_path / "config.json").unlink()
    (tmp_path / "config.json").mkdir()
    assert end_ids(tmp_path) == frozenset()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert end_ids(tmp_path / "loop") == frozenset()


def test_an_answer_ends_at_its_first_end_of_turn_and_unknown_is_not_guessed():
    ends = frozenset({2})
    assert answer_tokens((5, 6, 2, 9, 2), 5, ends) == 3
    assert answer_tokens((5, 6, 7), 3, ends) == 3  # never ended: all of it is answer
    assert answer_tokens((5, 6, 2), 3, frozenset()) is None  # no ids known
    assert answer_tokens((), 3, ends) is None  # a server that sent no token ids
    assert answer_tokens((5, 2), 3, ends) is None  # ids that do not account for every token


def test_an_answers_digest_is_its_token_ids_in_order():
    digest = answer_digest([5, 6, 2])
    assert digest == answer_digest((5, 6, 2)) and len(digest) == 16 and int(digest, 16) >= 0
    assert digest != answer_digest([5, 6]) and digest != answer_digest([6, 5, 2])
    assert answer_digest([12, 3]) != answer_digest([1, 23])  # ids kept apart, not run together


def test_a_speed_samples_digest_is_its_answer_up_to_its_end_of_turn():
    """Tokens accepted past the end of turn at the limit do not make another answer: the digest
    stops at the end, where the end is known; without all the ids there is none."""
    from specgate.client import FinishReason, GenerateRequest, GenerateResult
    from specgate.measure.speed import SpeedSample

    request = GenerateRequest(max_new_tokens=5, text="hi", ignore_eos=False, stream=True)

    def sample(ids: tuple[int, ...], completion: int, ends: frozenset[int]) -> SpeedSample:
        result = GenerateResult(request=request, text="x", output_ids=ids, finish_reason=FinishReason("length", None),
                                completion_tokens=completion, prompt_tokens=3, e2e_s=0.1, server_e2e_s=None,
                                ttft_s=0.01, decode_s=0.05, first_chunk_tokens=1, chunks=3)  # fmt: skip
        return SpeedSample.of(result, ends=ends)

    past = sample((5, 6, 2, 9, 9), 5, frozenset({2}))
    assert past.answer_tokens == 3 and past.answer_digest == answer_digest([5, 6, 2])
    assert sample((5, 6, 7, 8, 9), 5, frozenset({2})).answer_digest == answer_digest([5, 6, 7, 8, 9])
    assert sample((5, 6, 2, 9, 9), 5, frozenset()).answer_digest == answer_digest([5, 6, 2, 9, 9])  # end unknown
    assert sample((5, 6), 5, frozenset({2})).answer_digest is None  # not every id came back


def test_past_the_end_pools_tokens_and_counts_requests():
    assert past_the_end([(10, None)]) is None
    assert past_the_end([(10, 4), (10, 10), (20, None)]) == {"requests": 1, "of": 2, "tokens": 6, "token_share": 0.3}


def test_the_accept_floor_says_how_much_it_pooled_past_the_answers(sim_deployment, pytester, tmp_path):
    """The simulator's model folder names '.' and ',' (ids 1, 2) as its end of sequence: most
    answers 'end' early, and the floor's verdict says what share of its tokens followed."""
    model = tmp_path / "toy-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    from tests.self.helpers import sim_deployment_dict

    launch_args = sim_deployment_dict()["launch"]["args"]
    at = launch_args.index("--model-path") + 1
    loaded = [*launch_args[:at], str(model), *launch_args[at + 1 :]]  # the folder the server loads
    floor = {"launch": {"args": loaded}, "gates": {"accept_length": [{"config": "eagle3-decode", "at_least": 1.2}]}}
    d = sim_deployment(floor)
    result = d.run(pytester, "-k", "accept_length_floor")
    assert result.ret == 0, result.stdout.str()[-3000:]
    gate = next(g for g in d.report()["gates"] if g["gate"].startswith("accept:"))
    past = gate["figures"]["past_answer_end"]
    assert past["of"] == gate["figures"]["n"] and 0 < past["requests"] <= past["of"] and 0 < past["token_share"] < 1
    assert any("ran past the model's end-of-sequence token" in note for note in gate["notes"]), gate["notes"]
    # The folder the server did not load is not read: the deployment's `model` names one with end
    # ids, the server loads the toy model (no folder): nothing is claimed.
    d = sim_deployment({"model": str(model), "gates": {"accept_length": [{"config": "eagle3-decode", "at_least": 1.2}]}})
    assert d.run(pytester, "-k", "accept_length_floor").ret == 0
    gate = next(g for g in d.report()["gates"] if g["gate"].startswith("accept:"))
    assert "past_answer_end" not in gate["figures"]


def test_a_workload_may_measure_answers_alone(sim_deployment, pytester):
    """workload.ignore_eos = false: requests stop where the answer ends, the pinned sequence is
    another (stored samples of the default do not pair with it), and the floor says τ is over
    answers alone; anything but a boolean is refused naming the field."""
    import pytest

    from specgate.deployment import parse_deployment
    from specgate.errors import SpecgateError
    from specgate.measure.speed import SpeedMeter
    from tests.self.helpers import merge, sim_deployment_dict

    default = parse_deployment(sim_deployment_dict(), __import__("pathlib").Path("x.toml"))
    answers = parse_deployment(merge(sim_deployment_dict(), {"workload": {"ignore_eos": False}}), __import__("pathlib").Path("x.toml"))
    assert default.workload.ignore_eos is True and answers.workload.ignore_eos is False
    assert SpeedMeter(answers).workload_digest != SpeedMeter(default).workload_digest
    assert not any(r.ignore_eos for r in SpeedMeter(answers).requests)
    with pytest.raises(SpecgateError, match="ignore_eos"):
        parse_deployment(merge(sim_deployment_dict(), {"workload": {"ignore_eos": "no"}}), __import__("pathlib").Path("x.toml"))
    # answers of unequal length drain a batch: a row at concurrency 4 would not be at 4
    with pytest.raises(SpecgateError, match=r"workload\.ignore_eos.*concurrency \[1, 4\]"):
        parse_deployment(merge(sim_deployment_dict(), {"workload": {"ignore_eos": False, "concurrency": [1, 4]}}),
                         __import__("pathlib").Path("x.toml"))
    # a whole run: the speed test's length check follows the mode, the floor and the report say it
    d = sim_deployment({"workload": {"ignore_eos": False, "max_new_tokens": 60},
                        "gates": {"accept_length": [{"config": "eagle3-decode", "at_least": 1.2}]}})
    result = d.run(pytester, "-k", "accept_length_floor or decode_speed")
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = d.report()
    assert report["ignore_eos"] is False
    gate = next(g for g in report["gates"] if g["gate"].startswith("accept:"))
    assert gate["figures"]["answers_only"] is True

    assert any("τ over the answers alone" in note for note in gate["notes"])
    assert "stopped where each answer ended (workload.ignore_eos = false)" in (d.report_dir / "report.md").read_text()


def test_an_answer_too_short_to_time_is_not_sent_again():
    """Greedy: a prompt answered in one chunk is answered so again. The error says what to do."""
    import pytest

    from specgate.client import FinishReason, GenerateRequest, GenerateResult
    from specgate.errors import UntimeableAnswer
    from specgate.measure.speed import SpeedSample

    request = GenerateRequest(max_new_tokens=64, text="hi", ignore_eos=False, stream=True)
    brief = GenerateResult(request=request, text="Hi.", output_ids=(5, 2), finish_reason=FinishReason("stop", 2),
                           completion_tokens=2, prompt_tokens=3, e2e_s=0.01, server_e2e_s=None, chunks=1)
    with pytest.raises(UntimeableAnswer, match="ended on its own") as caught:
        SpeedSample.of(brief)
    assert caught.value.ended_on_its_own and "prompt_files" in str(caught.value)
