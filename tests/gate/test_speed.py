"""Single-stream (and concurrent) decode speed of every config, recorded through pytest-benchmark.

The sampling plan measures every config of the run in rounds, one pinned request to each
server in a fresh random order, so slow drift of the machine hits all configs alike;
this test then reads its config's figures. pytest-benchmark gets each request's
end-to-end time; the figures the gates use (decode tok/s from the stream, TTFT, accept
length per request) go into its extra_info, so its JSON output holds everything the
report shows.
"""

import statistics

import pytest

from specgate.measure.bench import record_durations

pytestmark = pytest.mark.specgate("speed")


def test_decode_speed(specgate, speed_target, benchmark):
    config, concurrency, *bucket = speed_target
    # A context bucket (config, 1, prompt tokens) has its own requests, plan and meter.
    context = bucket[0] if bucket else 0
    run = specgate.buckets[context] if context else specgate
    workload = run.deployment.workload
    # A run that records the baseline measures up to max_repeats: later runs pair their requests
    # with the stored ones and can only measure more, while undecided, up to what is stored.
    wanted = workload.max_repeats if specgate.options.update_baselines else workload.repeats
    # Interleaved, every server of the run is measured in the same rounds; in blocks, this config
    # alone, while its server is up (the others boot in their own turn, once each).
    together = run.plan.configs if run.plan.interleaved else [config]
    run.plan.ensure(together, concurrency, wanted)
    run.plan.raise_for(config)
    record = run.meter.record(config, concurrency)
    samples = record.samples
    record_durations(benchmark, [s.e2e_s for s in samples])

    taus = [s.accept_length for s in samples if s.accept_length]
    warm = record.warmups[-1] if record.warmups else None
    benchmark.extra_info.update(
        config=config,
        concurrency=concurrency,
        context=context,
        prompt_tokens=[s.prompt_tokens for s in samples],
        decode_tps_median=statistics.median(s.decode_tps for s in samples),
        decode_tps=[round(s.decode_tps, 3) for s in samples],
        boot=[s.boot for s in samples],
        # The raw per-request figures, request by request: which prompt, how many tokens in how
        # many verify steps (accept length is theirs), and the time to the first token.
        prompt=[run.meter.label(s) for s in samples],
        completion_tokens=[s.completion_tokens for s in samples],
        verify_ct=[s.verify_ct for s in samples],
        answer_digest=[s.answer_digest for s in samples],  # which text each answer was (its token ids)
        ttft_s=[round(s.ttft_s, 6) for s in samples],
        ttft_s_median=statistics.median(s.ttft_s for s in samples),
        accept_length=(
            sum(s.completion_tokens for s in samples if s.verify_ct) / sum(s.verify_ct for s in samples if s.verify_ct)
        )
        if taus
        else None,
        warmup_requests=warm.requests if warm else 0,
        warmup_settled=warm.settled if warm else None,
        interleaved=specgate.plan.interleaved,
        simulator=specgate.deployment.simulator,
    )
    if specgate.deployment.configs[config].speculative:
        assert taus, (
            f"{config} is configured speculative, but no response carried spec_verify_ct: "
            "speculation is silently off (or this SGLang names the counter differently)"
        )
    if workload.ignore_eos:
        short = [s.completion_tokens for s in samples if s.completion_tokens != workload.max_new_tokens]
        assert not short, (
            f"{config}: with ignore_eos every request must return max_new_tokens = {workload.max_new_tokens} "
            f"tokens; got {short}: the tok/s of a shortened request is not comparable"
        )
    else:  # answers alone (workload.ignore_eos = false): each ends where it ends, never past the limit
        over = [s.completion_tokens for s in samples if s.completion_tokens > workload.max_new_tokens]
        assert not over, f"{config}: requests returned more than max_new_tokens = {workload.max_new_tokens}: {over}"
