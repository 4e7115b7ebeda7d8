"""The simulator's cost across context length (issue 48 item 4): each step grows with the
request's KV length on its own curve, the Kimi twin reproduces the public figures it targets,
and the fault prefill-verify-past=N makes prefill-mode verify degrade only past N. Every figure
here is the SIMULATOR's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from specgate.resources import builtin_deployments_dir
from specgate.server.local import free_port
from specgate.sim.__main__ import build_parser, configured
from specgate.sim.cost import CostModel, Growth, parse_growth
from specgate.sim.curve import decode_tps, tokens_per_cycle
from specgate.sim.faults import parse_faults
from specgate.sim.tokenizer import VOCAB

K = 1024
# Public figures of another engine (vLLM, 2026), Kimi-K2.5/K2.6 with EAGLE-3 on 8x RTX PRO 6000
# over PCIe, as issue 48 quotes them: NOT measured here. "Short context" taken as 1K tokens.
PUBLIC = {
    "baseline": {1 * K: 92.0, 16 * K: 81.5, 32 * K: 73.4},
    "eagle3-prefill": {2 * K: 75.0, 10 * K: 32.2, 30 * K: 25.3},
    "eagle3-decode": {2 * K: 116.6, 10 * K: 112.8, 30 * K: 107.5},
}
# What the twin's flags give (sim/curve.py), at 1K / 2K / 10K / 16K / 30K / 32K: the figures its
# fixture and docs/kimi.md state, held here so a change to either is seen.
TWIN = {
    "baseline": (91.9, 91.1, 85.7, 82.0, 74.6, 73.6),
    "eagle3-prefill": (76.4, 74.9, 32.2, 29.8, 25.3, 24.8),
    "eagle3-decode": (117.0, 116.7, 113.9, 112.0, 107.7, 107.1),
}
TWIN_FILE = "kimi-k2.5-rtxpro6000-tp8-sim.toml"


def _deployment(name: str) -> dict:
    return tomllib.loads((builtin_deployments_dir() / name).read_text())


def _argv(deployment: dict, config: str, *extra: str) -> list[str]:
    return [*deployment["launch"]["args"], *deployment["configs"][config]["args"], *extra]


# --- the curves ---------------------------------------------------------------------------------
def test_a_growth_curve_is_piecewise_linear_per_1000_kv_tokens():
    curve = parse_growth("0.5,2048:4,10240:1", "--flag")
    assert curve.ms(0) == 0.0
    assert curve.ms(1000) == pytest.approx(0.5)
    assert curve.ms(2048) == pytest.approx(0.5 * 2.048)
    assert curve.ms(4048) == pytest.approx(0.5 * 2.048 + 4 * 2.0)
    assert curve.ms(12240) == pytest.approx(0.5 * 2.048 + 4 * 8.192 + 1 * 2.0)
    assert parse_growth(curve.spec, "--flag") == curve
    assert parse_growth("0.085", "--flag") == Growth(((0, 0.085),))


@pytest.mark.parametrize(
    "text, says",
    [
        ("fast", "expected MS[,FROM:MS...]"),
        ("2048:1", "expected MS[,FROM:MS...]"),  # the first slope runs from 0: no FROM
        ("1,2", "expected MS[,FROM:MS...]"),
        ("1,4096:2,2048:3", "must ascend"),
        ("-1", "finite number >= 0"),
        ("nan", "finite number >= 0"),
    ],
)
def test_a_bad_growth_flag_is_refused_naming_the_flag(capsys, text, says):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--sim-prefill-verify-ms-per-1k", text])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--sim-prefill-verify-ms-per-1k" in err and says in err, err


def test_without_growth_flags_every_step_costs_what_it_did_at_every_length():
    # The short-context figures of every sim deployment and stored sim baseline: a step of 2 ms,
    # a decode-path verify of 3 tokens 2 x 1.1 ms, a prefill-path one 2.4 x 2 ms, at any KV length.
    cost = CostModel(hybrid_attention=True)
    for kv in (0, 500, 32 * K):
        assert cost.decode_step_s(kv) == pytest.approx(0.002)
        assert cost.spec_cycle_s(2, 3, "decode", kv) == pytest.approx((2 * 0.3 + 2.0 * 1.1) / 1000)
        assert cost.spec_cycle_s(2, 3, "prefill", kv) == pytest.approx((2 * 0.3 + 2.0 * 2.4) / 1000)


def test_each_step_grows_on_its_own_curve_and_one_backend_takes_the_decode_path():
    def cost(*backends: str) -> CostModel:
        flags = ["--sim-step-ms-per-1k", "0.1", "--sim-decode-verify-ms-per-1k", "0.2", "--sim-prefill-verify-ms-per-1k", "3"]
        return configured([*backends, *flags, "--speculative-algorithm", "EAGLE3"])[0]

    hybrid = cost("--prefill-attention-backend", "flashinfer", "--decode-attention-backend", "triton")
    one = cost("--attention-backend", "triton")
    grew = {
        "plain": hybrid.plain_step_ms(10_000) - hybrid.plain_step_ms(0),
        "decode": hybrid.cycle_ms(2, 3, "decode", 10_000) - hybrid.cycle_ms(2, 3, "decode", 0),
        "prefill": hybrid.cycle_ms(2, 3, "prefill", 10_000) - hybrid.cycle_ms(2, 3, "prefill", 0),
        # one backend for both: SGLang ignores the mode, the verify runs the decode path
        "prefill, one backend": one.cycle_ms(2, 3, "prefill", 10_000) - one.cycle_ms(2, 3, "prefill", 0),
    }
    assert grew == pytest.approx({"plain": 1.0, "decode": 2.0, "prefill": 30.0, "prefill, one backend": 2.0})


def test_the_engine_charges_each_step_at_the_requests_kv_length():
    from specgate.sim.engine import Generation, GenParams
    from specgate.sim.faults import Faults

    cost = CostModel(step_growth=Growth(((0, 1.0),)))  # 1 ms more per 1,000 KV tokens
    prompt = [7 + i % 900 for i in range(4000)]
    gen = Generation(prompt, GenParams(max_new_tokens=5, ignore_eos=True), None, Faults(), cost)
    step_costs = [c for _, c in gen.steps()][1:]  # after the prefill
    # the step making output token i (i from 1) attends over the prompt and the i tokens before it
    assert step_costs == pytest.approx([(2.0 + (4000 + i) / 1000) / 1000 for i in range(1, 5)])


def test_the_engine_accepts_as_the_accept_model_says():
    from statistics import mean

    from specgate.sim.engine import Generation, GenParams
    from specgate.sim.faults import Faults

    cost, spec = configured(_argv(_deployment(TWIN_FILE), "eagle3-decode"))
    assert spec is not None
    lengths = []
    for seed in range(12):
        prompt = [7 + (i * (seed + 3) + seed) % 1000 for i in range(300)]
        gen = Generation(prompt, GenParams(max_new_tokens=200, ignore_eos=True), spec, Faults(), cost)
        for _ in gen.steps():
            pass
        lengths.append(len(gen.state.output_ids) / gen.state.verify_ct)
    assert mean(lengths) == pytest.approx(tokens_per_cycle(spec, 300), rel=0.03)


# --- the Kimi twin ------------------------------------------------------------------------------
@pytest.mark.parametrize("config", list(PUBLIC))
def test_the_kimi_twin_is_within_ten_percent_of_every_public_figure(config):
    cost, spec = configured(_argv(_deployment(TWIN_FILE), config))
    for context, public in PUBLIC[config].items():
        simulated = decode_tps(cost, spec, context)
        assert simulated == pytest.approx(public, rel=0.10), f"{config} at {context} tokens: {simulated:.1f} vs {public}"
    got = tuple(round(decode_tps(cost, spec, n * K), 1) for n in (1, 2, 10, 16, 30, 32))
    assert got == TWIN[config]


def test_the_kimi_twin_tells_one_story_at_short_context():
    # The shipped prompts (a few hundred tokens): prefill mode loses to plain decoding, decode
    # mode wins, as at every longer length.
    twin = _deployment(TWIN_FILE)
    speed = {c: decode_tps(*configured(_argv(twin, c)), 300) for c in PUBLIC}
    assert speed["eagle3-prefill"] < 0.9 * speed["baseline"] < speed["baseline"] * 1.2 < speed["eagle3-decode"]


# --- the fault ----------------------------------------------------------------------------------
def test_prefill_verify_past_degrades_prefill_mode_only_past_its_length():
    assert parse_faults(["prefill-verify-past=8192"]).prefill_verify_past == 8192
    with pytest.raises(ValueError, match="expected prefill-verify-past=<non-negative integer>"):
        parse_faults(["prefill-verify-past=8K"])
    sim = _deployment("sim.toml")
    fault = ["--sim-fault", "prefill-verify-past=8192"]
    plain = decode_tps(*configured(_argv(sim, "baseline", *fault)), 1 * K)
    prefill_cost, spec = configured(_argv(sim, "eagle3-prefill", *fault))
    decode_cost, _ = configured(_argv(sim, "eagle3-decode", *fault))
    # A cycle's cost below the length is the decode path's; from it on, the prefill path's.
    assert prefill_cost.cycle_ms(2, 3, "prefill", 8191) == decode_cost.cycle_ms(2, 3, "decode", 8191) == pytest.approx(0.6 + 2.2)
    assert prefill_cost.cycle_ms(2, 3, "prefill", 8192) == pytest.approx(0.6 + 4.8)
    assert decode_cost.cycle_ms(2, 3, "decode", 32 * K) == pytest.approx(0.6 + 2.2)  # decode mode untouched
    short, long = decode_tps(prefill_cost, spec, 1 * K), decode_tps(prefill_cost, spec, 32 * K)
    assert short > 1.2 * plain and long < plain, (short, long, plain)
    # Without the fault sim.toml's prefill mode pays at every length (its backends are a hybrid pair).
    healthy_cost, _ = configured(_argv(sim, "eagle3-prefill"))
    assert decode_tps(healthy_cost, spec, 1 * K) < plain


# --- served through the real simulator ----------------------------------------------------------
def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _post(url: str, body: dict) -> urllib.request.Request:
    return urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})


def test_a_long_prompt_is_served_at_the_curves_speed_and_one_too_long_is_refused(tmp_path):
    twin = _deployment(TWIN_FILE)
    port = free_port()
    argv = _argv(twin, "eagle3-prefill", "--context-length", "40960", "--port", str(port))
    cost, spec = configured(argv)
    assert spec is not None
    # One request's accept length is a draw (19 to 24 cycles for 48 tokens): the server keeps the
    # accept model's mean here (SGLang's own switch), so what is timed is the cost model; the accept
    # model is held to its mean over many prompts in test_the_engine_accepts_as_the_accept_model_says.
    accept = tokens_per_cycle(spec, 30 * K)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SGLANG_SIMULATE_ACC_LEN": str(accept)}
    server = subprocess.Popen([sys.executable, "-m", "specgate.sim", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        prompt = " ".join(VOCAB[7 + i % 1000] for i in range(30 * K))  # one known word, one token
        body = {"text": prompt, "stream": True, "sampling_params": {"max_new_tokens": 48, "ignore_eos": True, "temperature": 0}}
        cpu_before = _cpu_s(server.pid)
        arrivals: list[tuple[float, int, dict]] = []
        with urllib.request.urlopen(_post(f"{base}/generate", body), timeout=60) as response:
            for line in response:
                if line.startswith(b"data: {"):
                    chunk = json.loads(line[6:])
                    arrivals.append((time.perf_counter(), len(chunk["output_ids"]), chunk["meta_info"]))
        cpu_s = _cpu_s(server.pid) - cpu_before
        (t0, n0, _), (t1, n1, meta) = arrivals[0], arrivals[-1]
        assert meta["prompt_tokens"] == 30 * K and meta["completion_tokens"] == 48
        measured = (n1 - n0) / (t1 - t0)  # tokens after the first over their time, as the gate times them
        expected = decode_tps(cost, spec, 30 * K + 24)  # the answer's middle
        assert measured == pytest.approx(expected, rel=0.10), (measured, expected)
        # The simulated time is slept, not burnt: the server's own work for 30K tokens is small.
        assert cpu_s < 0.5, cpu_s
        too_long = {"text": prompt + " " + prompt, "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(_post(f"{base}/generate", too_long), timeout=30)
        assert refused.value.code == 400
        assert "longer than the model's context length (40960 tokens)" in refused.value.read().decode()
    finally:
        server.terminate()
        server.wait(timeout=10)
