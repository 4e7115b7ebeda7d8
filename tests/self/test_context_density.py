"""The context buckets' prompts are built at the characters per token of the tokenizer under test
(measure.density): measured once per run on the reference's server, rounded so that one tokenizer
gives the same prompts run after run, a fallback for an absurd count, and the report says which."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import tomli_w

from specgate.client import GenerateRequest
from specgate.deployment import load_deployment
from specgate.measure.context import calibration_text, corpus_of, long_prompt
from specgate.measure.density import CALIBRATION_CHARS, DensityProbe, calibration_request, density_of, rounded
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import SpeedMeter
from specgate.report.markdown import _density_line, _load
from specgate.report.model import ContextPrompts, SpeedRow
from specgate.secrets import redact
from specgate.sim.tokenizer import encode
from tests.self.helpers import merge, sim_deployment_dict


def _dep(tmp_path, workload=None):
    data = merge(sim_deployment_dict(), {"workload": workload or {}})
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return load_deployment(str(path))


def test_the_ratio_is_rounded_so_one_tokenizer_gives_one_ratio():
    assert rounded(5.1848) == 5.2 and rounded(5.17) == 5.15 and rounded(3.0) == 3.0
    found = density_of(8192, 1580, "baseline")
    assert found == density_of(8192, 1580, "baseline")
    assert found.chars_per_token == 5.2 and found.measured == pytest.approx(5.1848, abs=1e-4)
    assert found.fallback is None and found.config == "baseline" and found.prompt_tokens == 1580
    # Near counts round alike: a tokenizer release that moves the count a little keeps the prompts.
    assert density_of(8192, 1575, "baseline").chars_per_token == 5.2


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        (100, "81.92 per token, outside 1.5–12"),
        (6000, "1.3653 per token, outside 1.5–12"),
        (0, "counted no prompt tokens"),
    ],
)
def test_an_absurd_count_falls_back_to_four_and_says_why(tokens, says):
    found = density_of(8192, tokens, "baseline")
    assert found.chars_per_token == 4.0
    assert found.fallback is not None and says in found.fallback and "built at 4" in found.fallback


def test_a_buckets_prompt_is_a_pure_function_of_the_ratio(tmp_path):
    workload = _dep(tmp_path).workload
    at_5 = long_prompt(workload, 10240, 2, chars_per_token=5.2)
    assert at_5 == long_prompt(workload, 10240, 2, chars_per_token=5.2)  # pairs run after run
    assert at_5 != long_prompt(workload, 10240, 2, chars_per_token=5.25)
    assert long_prompt(workload, 10240, 2) == long_prompt(workload, 10240, 2, chars_per_token=4.0)
    assert 0.97 * 10240 * 5.2 <= len(at_5.text) <= 10240 * 5.2


def test_the_calibration_sample_has_the_whole_corpus_ratio(tmp_path):
    """A sample of every k-th sentence (not the corpus's first pages, one document's): on the
    simulator's tokenizer its ratio is the whole corpus's within 2%, where the first 4,096
    characters are 9% off."""
    workload = _dep(tmp_path).workload
    whole = "\n\n".join(corpus_of(workload).documents)
    ratio = len(whole) / len(encode(whole))
    sample = calibration_text(workload, CALIBRATION_CHARS)
    assert len(sample) <= CALIBRATION_CHARS and sample == calibration_text(workload, CALIBRATION_CHARS)
    assert sample.startswith("<|im_start|>user\nCalibration text.")
    assert len(sample) / len(encode(sample)) == pytest.approx(ratio, rel=0.02)


def test_the_calibration_prompt_is_the_same_whatever_buckets_are_listed(tmp_path):
    """With every bucket under 2K tokens it followed the longest bucket (4 characters a token of
    it), so adding a 1,500-token bucket beside 1K sent another sample and could move the ratio,
    and with it every bucket's prompts."""
    sent = {
        tuple(buckets): calibration_request(_dep(tmp_path, {"context_buckets": buckets}).workload).text
        for buckets in (["1K"], [1024, 1500], ["1K", "32K"], [256])
    }
    assert len(set(sent.values())) == 1, {k: len(v or "") for k, v in sent.items()}
    assert len(next(iter(sent.values())) or "") <= CALIBRATION_CHARS


def test_check_holds_the_references_launch_to_the_calibration_prompt(tmp_path):
    """The calibration prompt no longer shrinks with the buckets: a reference launched too short
    for it is refused before anything boots, naming the flag and the value it needs; the other
    configs, which never send it, are not."""
    from specgate.context_fit import refusals

    dep = _dep(tmp_path, {"context_buckets": [256]})
    said = refusals(dep, "baseline", ["--context-length", "2048"], True, None)
    assert said == [
        "the context buckets' calibration prompt (measure.density: 8,192 characters, whatever buckets are listed, sent "
        "to the reference) needs up to 2732 tokens (at 3 characters each, + 1 answer token), over --context-length "
        "2048: raise --context-length to at least 2732"
    ]
    assert refusals(dep, "eagle3-decode", ["--context-length", "2048"], True, None) == []
    assert refusals(dep, "baseline", ["--context-length", "4096"], True, None) == []


class _Server:
    def __init__(self, name: str, prompt_tokens: int = 1600) -> None:
        config, _, boot = name.partition("@")
        self.name, self.config, self.boot = name, config, int(boot or 1)
        self.sent: list[GenerateRequest] = []
        self.prompt_tokens = prompt_tokens

    def generate(self, request: GenerateRequest):
        self.sent.append(request)
        return SimpleNamespace(prompt_tokens=self.prompt_tokens)


def test_the_reference_counts_once_and_only_its_first_boot(tmp_path):
    workload = _dep(tmp_path).workload
    acquired: list[str] = []
    servers = {n: _Server(n) for n in ("baseline", "baseline@2", "eagle3-decode")}

    def acquire(name):
        acquired.append(name)
        return servers[name]

    probe = DensityProbe(workload, "baseline", acquire)
    probe.offer(servers["eagle3-decode"])  # type: ignore[arg-type]
    probe.offer(servers["baseline@2"])  # type: ignore[arg-type]
    assert probe.found is None and not any(s.sent for s in servers.values())
    probe.offer(servers["baseline"])  # type: ignore[arg-type]
    (sent,) = servers["baseline"].sent
    assert sent.max_new_tokens == 1 and sent.text == calibration_text(workload, CALIBRATION_CHARS)
    assert probe.resolve().chars_per_token == rounded(len(sent.text) / 1600) and not acquired
    # Not offered: the reference's server is acquired for it, once.
    fresh = DensityProbe(workload, "baseline", acquire)
    fresh.resolve()
    fresh.resolve()
    assert acquired == ["baseline"]


def test_a_bucket_is_sized_before_the_measured_servers_is_acquired(tmp_path):
    """Where servers take turns, acquiring the reference's to count stops the server in use: the
    plan builds a bucket's requests (which may acquire it) before it acquires the one it measures."""
    dep = _dep(tmp_path, {"context_buckets": ["1K"], "context_repeats": 3})
    order: list[str] = []
    servers = {n: _Server(n, 950) for n in dep.configs}

    class Pool:
        live: dict = {}

        def acquire(self, name):
            order.append(name)
            return servers[name]

    pool = Pool()
    probe = DensityProbe(dep.workload, "baseline", pool.acquire)
    meter = SpeedMeter(dep, context=1024, density=probe)
    plan = SamplingPlan(dep, pool, meter, ["eagle3-decode"], seed=0)  # type: ignore[arg-type]
    meter.measure = lambda server, concurrency, count: order.append(f"measure {server.name}")  # type: ignore[method-assign]
    plan._measure("eagle3-decode", 1, 1)
    assert order == ["baseline", "eagle3-decode", "measure eagle3-decode"]
    assert (
        meter.requests[0].text
        == long_prompt(dep.workload, 1024, 0, chars_per_token=probe.resolve().chars_per_token).text
    )


def _row(**kw):
    base = dict(config="baseline", concurrency=1, speculative=False, n=3, decode_tps={"estimate": 1, "low": 1, "high": 1, "confidence": 0.95},
                ratio_to_reference=None, accept_length=None, ttft_ms={"estimate": 1, "low": 1, "high": 1, "confidence": 0.95},
                warmup_requests=1, warmup_settled=True, verdict="—")  # fmt: skip
    return SpeedRow.model_validate({**base, **kw})


def test_the_report_says_the_ratio_in_the_rows_label_and_a_fallback_as_such():
    measured = ContextPrompts(
        chars_per_token=5.2, measured=5.1848, config="baseline", chars=8192, prompt_tokens=1580, fallback=None
    )
    assert (
        _load(_row(context=32768, prompt_tokens=32500), measured)
        == "1, 32K context (32,500 prompt tokens, built at 5.20 chars/token)"
    )
    # The OFF TARGET flag stays.
    assert _load(_row(context=32768, prompt_tokens=20000), measured).endswith(
        "built at 5.20 chars/token, OFF TARGET by -39%)"
    )
    (line,) = _density_line(measured)
    assert "built at 5.20 characters per token, as baseline's server counted 1,580 tokens" in line
    # Said so that no credential shape hides the name ("token: NAME" reads as a key field).
    assert redact(line) == line
    fell = density_of(8192, 100, "baseline")
    (line,) = _density_line(ContextPrompts.model_validate(fell.as_dict()))
    assert "built at 4 characters per token (FALLBACK): baseline's server counted 100 tokens" in line


def test_a_bucket_never_measured_boots_nothing_for_its_digest(tmp_path):
    """A report or baseline written after a run cut short asks each bucket's digest: one whose
    ratio was never counted has none, and asking must not acquire the reference's server."""
    dep = _dep(tmp_path, {"context_buckets": ["1K"]})

    def acquire(name):
        raise AssertionError(f"acquired {name} after the run")

    meter = SpeedMeter(dep, context=1024, density=DensityProbe(dep.workload, "baseline", acquire))
    assert meter.workload_digest == ""
    assert SpeedMeter(dep).workload_digest  # the short workload's needs no count
