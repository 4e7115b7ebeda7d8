"""The simulator against the client: what the suite reads is what SGLang would send."""

from __future__ import annotations

import pytest

from specgate.client import GenerateRequest, SglangClient
from specgate.deployment import load_deployment
from specgate.server.local import LocalLauncher
from specgate.sim.cost import CostModel
from specgate.sim.engine import Generation, GenParams, SpecSettings
from specgate.sim.faults import Faults, parse_faults
from specgate.sim.model import ToyModel

SPEC = SpecSettings("EAGLE3", steps=2, topk=1, draft_tokens=3, attention_mode="decode", draft_agreement=0.7)


def run(prompt, spec=None, faults=None, **params):
    gen = Generation(prompt, GenParams(**{"max_new_tokens": 48, **params}), spec, faults or Faults(), CostModel())
    for _ in gen.steps():
        pass
    return gen.state


def test_speculation_reproduces_greedy_except_at_near_ties():
    flips = 0
    for p in range(40):
        prompt = [10 + p, 20, 30 + p]
        plain, spec = run(prompt), run(prompt, SPEC)
        n = next((i for i, (a, b) in enumerate(zip(plain.output_ids, spec.output_ids)) if a != b), None)
        if n is None:
            assert plain.output_ids == spec.output_ids
            continue
        flips += 1
        dist = plain.distributions[n]
        assert dist.logits[0] - dist.logits[1] < 0.02  # only near-ties may flip
        assert spec.output_ids[n] == dist.tokens[1]
    assert flips < 20


def test_accept_length_emerges_from_draft_agreement():
    good = run([1, 2, 3], SPEC, ignore_eos=True)
    bad = run([1, 2, 3], SPEC, parse_faults(["accept-collapse"]), ignore_eos=True)
    assert 1.5 < len(good.output_ids) / good.verify_ct <= 3.0
    assert bad.accepted_drafts == 0 and bad.accept_histogram[0] == bad.verify_ct


def test_prefill_stop_miss_misses_only_a_stop_string_in_the_first_token():
    """The fault a stop check that sees verify output alone would be: a stop string the first
    (prefill) token holds runs on, in text; one that a later token completes still stops."""
    prompt = [5, 6, 7]
    first = run(prompt, max_new_tokens=1).text
    later = run(prompt, ignore_eos=True).text.split()[3]
    fault = parse_faults(["prefill-stop-miss"])
    for spec, faults in ((None, None), (SPEC, None), (None, fault)):  # plain servers never have it
        healthy = run(prompt, spec, faults, stop=(first,))
        assert healthy.text == "" and len(healthy.output_ids) == 1 and healthy.finish_reason["matched"] == first
    missed = run(prompt, SPEC, fault, stop=(first,))
    assert missed.text.startswith(first) and len(missed.output_ids) > 1
    assert run(prompt, SPEC, fault, stop=(later,)).text == run(prompt, SPEC, stop=(later,)).text


def test_fault_specs_are_validated():
    assert parse_faults(["diverge-at=4", "slowdown=0.3"]).diverge_at == 4
    for bad in ("diverge-at=x", "explode", "stop-leak=1", "prefill-stop-miss=1", "slowdown=fast"):
        with pytest.raises(ValueError, match="--sim-fault"):
            parse_faults([bad])
    for together in (["stop-list-order", "stop-leak"], ["prefill-stop-miss", "stop-list-order"]):
        with pytest.raises(ValueError, match="cannot be combined"):
            parse_faults(together)


def test_draft_agreement_is_deterministic():
    m = ToyModel([1, 2], 0.5)
    assert [m.draft([1, 2, k]) for k in range(50)] == [m.draft([1, 2, k]) for k in range(50)]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One plain and one speculative simulator per spelling of the spec counters."""
    dep = load_deployment(None)
    launcher = LocalLauncher(dep, tmp_path_factory.mktemp("logs"))
    started = {}
    variants = {
        "plain": [],
        **{
            f"spec-{names}": [
                "--speculative-algorithm",
                "EAGLE3",
                "--speculative-num-steps",
                "2",
                "--speculative-num-draft-tokens",
                "3",
                "--sim-meta-names",
                names,
            ]
            for names in ("latest", "0.5.11", "0.5.8", "0.5.3")
        },
        "spec-incremental": ["--speculative-algorithm", "EAGLE3", "--incremental-streaming-output"],
    }
    from specgate.deployment import ServerConfig

    try:
        for name, args in variants.items():
            started[name] = launcher.start(ServerConfig(name, tuple(args), {}, None, ""))
        for handle in started.values():
            launcher.wait_ready(handle, None)
        yield {name: SglangClient(h.base_url) for name, h in started.items()}
    finally:
        for handle in started.values():
            launcher.stop(handle)


PROMPT = "Explain speculative decoding in one paragraph."


def test_stream_and_json_agree_and_counts_come_from_meta_info(servers):
    for name, client in servers.items():
        whole = client.generate(GenerateRequest(max_new_tokens=40, text=PROMPT, ignore_eos=True))
        streamed = client.generate(GenerateRequest(max_new_tokens=40, text=PROMPT, ignore_eos=True, stream=True))
        assert whole.output_ids == streamed.output_ids and whole.text == streamed.text, name
        assert streamed.completion_tokens == 40 and streamed.decode_tps and streamed.ttft_s
        if name.startswith("spec"):
            # one chunk per verify step, several tokens each: chunk counting would be wrong
            assert streamed.chunks < streamed.completion_tokens
            assert streamed.accept_length == pytest.approx(40 / streamed.spec.verify_ct)


@pytest.mark.parametrize("names", ["latest", "0.5.11", "0.5.8"])
def test_spec_counters_read_under_every_spelling(servers, names):
    r = servers[f"spec-{names}"].generate(GenerateRequest(max_new_tokens=30, text=PROMPT, ignore_eos=True))
    assert r.spec.verify_ct > 0 and r.spec.accepted_drafts is not None and r.spec.proposed_drafts is not None
    # the prefill token, plus per verify step the accepted drafts and one bonus token
    assert r.spec.accepted_drafts + r.spec.verify_ct + 1 >= r.completion_tokens
    assert r.spec.accepted_drafts <= r.spec.proposed_drafts
    assert (r.spec.histogram is not None) == (names != "0.5.8")


def test_oldest_spelling_still_gives_accept_length(servers):
    r = servers["spec-0.5.3"].generate(GenerateRequest(max_new_tokens=30, text=PROMPT, ignore_eos=True))
    assert r.spec.accepted_drafts is None and r.accept_length > 1


def test_top_logprobs_and_server_endpoints(servers):
    client = servers["plain"]
    r = client.generate(GenerateRequest(max_new_tokens=12, text=PROMPT, top_logprobs=2))
    assert len(r.top_logprobs) == r.completion_tokens
    assert all(pos[0][0] == tok for pos, tok in zip(r.top_logprobs, r.output_ids))
    assert r.spec is None and r.accept_length is None
    assert client.server_info()["version"].endswith("specgate-sim")
    assert "model_path" in client.model_info()


def test_input_ids_requests(servers):
    """Token ids in, as well as text: the same ids give the same answer."""
    client = servers["plain"]
    a = client.generate(GenerateRequest(max_new_tokens=10, input_ids=(5, 6, 7, 8)))
    b = client.generate(GenerateRequest(max_new_tokens=10, input_ids=(5, 6, 7, 8), stream=True))
    assert a.prompt_tokens == 4 and a.output_ids == b.output_ids and a.completion_tokens == 10
