"""A measured answer that loops is no evidence of speed or accept length (issue 47, item 4)."""

from __future__ import annotations

from types import SimpleNamespace

from specgate.client import FinishReason, GenerateRequest, GenerateResult, SpecCounters
from specgate.measure.speed import LOOP_FLOOR, ConfigSpeed, SpeedSample, distinct_ngram_ratio
from specgate.report.markdown import _degenerate_lines
from specgate.report.model import SpeedRow


def _measured(ids: list[int]) -> GenerateResult:
    return GenerateResult(
        request=GenerateRequest(max_new_tokens=len(ids), text="hi", stream=True),
        text="x",
        output_ids=tuple(ids),
        prompt_tokens=3,
        completion_tokens=len(ids),
        finish_reason=FinishReason("length"),
        e2e_s=1.0,
        server_e2e_s=None,
        ttft_s=0.1,
        decode_s=0.9,
        first_chunk_tokens=1,
        chunks=len(ids),
        spec=SpecCounters(verify_ct=len(ids) // 4, accepted_drafts=None, proposed_drafts=None, histogram=None, server_accept_length=None),
    )


LOOP = [7, 8, 9, 10, 11] * 13  # 65 tokens, one phrase over and over: a drafter's easiest answer
VARIED = list(range(100, 164))


def test_a_looping_answer_is_flagged_and_a_varied_one_is_not():
    assert distinct_ngram_ratio(VARIED) == 1.0
    assert distinct_ngram_ratio(LOOP) < LOOP_FLOOR
    assert distinct_ngram_ratio(LOOP[:20]) is None  # too short to tell a loop from a repeated phrase
    looped, varied = SpeedSample.of(_measured(LOOP)), SpeedSample.of(_measured(VARIED))
    assert looped.degenerate and not varied.degenerate
    record = ConfigSpeed("eagle3", 1, [looped, varied, varied])
    assert record.degenerate() == 1
    assert ConfigSpeed("eagle3", 1, []).degenerate() is None


def test_the_report_marks_speed_and_accept_length_from_looping_answers_untrusted():
    assert "degenerate" in SpeedRow.model_fields and SpeedRow._since["degenerate"] == 15
    rows = [SimpleNamespace(config="eagle3", concurrency=1, degenerate=2, n=9, context=0), SimpleNamespace(config="plain", concurrency=1, degenerate=0, n=9, context=0)]
    (line,) = _degenerate_lines(SimpleNamespace(speed=rows))
    assert "UNTRUSTED: eagle3 (concurrency 1)" in line and "2 of 9 measured answers loop" in line
    assert "speed and accept length" in line


def test_a_context_buckets_looping_answers_name_the_bucket():
    """Four rows of one config at concurrency 1 (the short workload and three buckets): the line
    must say which one loops."""
    row = SimpleNamespace(config="eagle3", concurrency=1, degenerate=3, n=9, context=32768, prompt_tokens=32000)
    (line,) = _degenerate_lines(SimpleNamespace(speed=[row]))
    assert "UNTRUSTED: eagle3 (concurrency 1, 32K context (32,000 prompt tokens))" in line, line


def test_the_calibration_table_names_each_rows_context_bucket():
    """The warmup and spread of one config at concurrency 1 differ by bucket: each row says which."""
    from specgate.report.markdown import _calibration

    row = dict(config="eagle3", concurrency=1, n=12, warmup_requests=3, warmup_first_tps=90.0, warmup_last_tps=100.0, cv=0.02)
    rows = [SimpleNamespace(**row, context=0), SimpleNamespace(**row, context=8192, prompt_tokens=8000)]
    table = _calibration(SimpleNamespace(speed=rows, equivalence=[], tie_margin=0.05))
    assert "| eagle3 | 1 | 3 |" in "\n".join(table)
    assert "| eagle3 | 1, 8K context (8,000 prompt tokens) | 3 |" in "\n".join(table)
