"""Single-stream decode speed of every config, recorded through pytest-benchmark.

pytest-benchmark times each request end to end; the figures the gates use (decode
tok/s from the stream, TTFT, accept length per request) go into its extra_info, so
its JSON output holds everything the report shows.
"""

import statistics

import pytest

pytestmark = pytest.mark.specgate("speed")


def test_decode_speed(specgate, speed_target, benchmark):
    config, concurrency = speed_target
    workload = specgate.deployment.workload
    server = specgate.pool.acquire(config)
    warmup = specgate.meter.warm_up(server, concurrency)
    samples = []

    def one_round():
        samples.extend(specgate.meter.measure(server, concurrency, concurrency))

    # A run that records the baseline measures up to max_repeats: later runs pair their requests
    # with the stored ones and can only measure more, while undecided, up to what is stored.
    wanted = workload.max_repeats if specgate.options.update_baselines else workload.repeats
    rounds = -(-wanted // concurrency)
    benchmark.pedantic(one_round, rounds=rounds, iterations=1, warmup_rounds=0)
    if len(samples) < wanted:  # --benchmark-disable runs the function once
        samples.extend(specgate.meter.measure(server, concurrency, wanted - len(samples)))

    taus = [s.accept_length for s in samples if s.accept_length]
    benchmark.extra_info.update(
        config=config,
        concurrency=concurrency,
        decode_tps_median=statistics.median(s.decode_tps for s in samples),
        decode_tps=[round(s.decode_tps, 3) for s in samples],
        ttft_s_median=statistics.median(s.ttft_s for s in samples),
        accept_length=(
            sum(s.completion_tokens for s in samples if s.verify_ct) / sum(s.verify_ct for s in samples if s.verify_ct)
        )
        if taus
        else None,
        warmup_requests=warmup.requests if warmup else 0,
        warmup_settled=warmup.settled if warmup else None,
        simulator=specgate.deployment.simulator,
    )
    if specgate.deployment.configs[config].speculative:
        assert taus, (
            f"{config} is configured speculative, but no response carried spec_verify_ct: "
            "speculation is silently off (or this SGLang names the counter differently)"
        )
    short = [s.completion_tokens for s in samples if s.completion_tokens != workload.max_new_tokens]
    assert not short, (
        f"{config}: with ignore_eos every request must return max_new_tokens = {workload.max_new_tokens} tokens; "
        f"got {short}: the tok/s of a shortened request is not comparable"
    )
