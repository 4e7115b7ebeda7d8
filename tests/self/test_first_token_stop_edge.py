"""The edge case whose stop string is the reference's own first answer token (issue 14).

A speculative server gets its first token from prefill and the rest from verify steps; one
that looks for stop strings only in what verify steps add runs past a stop string that the
first token holds. The stop string is derived from the reference's answer to the one-token
edge, so it cannot be listed in the deployment: these tests check the derivation in each way
the reference's answers arrive (live, recorded before it stops, stored), in process, with the
simulator's engine answering as the servers would. The gate runs that show the edge failing on
a server with the prefill-stop-miss fault are in test_e2e_gate.py and test_stored_reference.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import FAST, merge, sim_deployment_dict

from specgate.client import FinishReason, GenerateRequest, GenerateResult
from specgate.deployment import parse_deployment
from specgate.equivalence.cases import (
    FIRST_TOKEN_STOP_EDGE,
    draw_cases,
    edge_cases,
    edge_name,
    first_token_stop_case,
    one_token_case,
)
from specgate.equivalence.oracle import EquivalenceOracle
from specgate.sim.cost import CostModel
from specgate.sim.engine import Generation, GenParams, SpecSettings
from specgate.sim.faults import Faults, parse_faults
from specgate.sim.tokenizer import encode

SPEC = SpecSettings("EAGLE3", steps=2, topk=1, draft_tokens=3, attention_mode="decode", draft_agreement=0.7)


class SimServer:
    """The simulator's engine behind a server's `generate`, counting what it is asked."""

    def __init__(self, name: str, spec: SpecSettings | None = None, faults: Faults | None = None) -> None:
        self.spec, self.faults = spec, faults or Faults()
        self.handle = SimpleNamespace(base_url=f"http://{name}")
        self.asked: list[GenerateRequest] = []
        self.first_token_text: str | None = None  # stands in for the reference's first answer token

    def generate(self, request: GenerateRequest) -> GenerateResult:
        self.asked.append(request)
        assert request.text is not None
        params = GenParams(max_new_tokens=request.max_new_tokens, stop=request.stop)
        gen = Generation(encode(request.text), params, self.spec, self.faults, CostModel())
        for _ in gen.steps():
            pass
        st = gen.state
        text = st.text
        if self.first_token_text is not None and request.max_new_tokens == 1:
            text = self.first_token_text
        return GenerateResult(
            request=request,
            text=text,
            output_ids=tuple(st.output_ids),
            prompt_tokens=len(gen.prompt_ids),
            completion_tokens=len(st.output_ids),
            finish_reason=FinishReason.parse(st.finish_reason),
            e2e_s=0.0,
            server_e2e_s=None,
            top_logprobs=tuple(
                tuple((tok, lp) for lp, tok in d.top_logprobs(request.top_logprobs or 2)) for d in st.distributions
            ),
        )


class Pool:
    """What the oracle asks of a ServerPool: a server per config, and which are live."""

    def __init__(
        self, servers: dict[str, SimServer], server_infos: dict[str, dict] | None = None,
        served_models: dict[str, dict] | None = None,
    ) -> None:
        self.servers = servers
        self.live = {name: s for name, s in servers.items()}
        # What each server says of itself: none a context length unless given (the context
        # edge is then left out, and sends nothing)
        self.server_infos = server_infos or {}
        self._served_models = served_models or {}  # /v1/models

    def served_models(self, name: str) -> dict:
        return self._served_models.get(name, {})

    def acquire(self, name: str) -> SimServer:
        if name not in self.servers:
            raise AssertionError(f"{name} is not up: the oracle must not ask it")
        return self.servers[name]


def deployment(tmp_path: Path, overrides: dict | None = None):
    return parse_deployment(merge(merge(sim_deployment_dict(), FAST), overrides or {}), tmp_path / "dep.toml")


def oracle(
    tmp_path: Path, servers: dict[str, SimServer], overrides: dict | None = None, server_infos: dict | None = None, **kw
) -> EquivalenceOracle:
    tmp_path.mkdir(parents=True, exist_ok=True)
    pool = Pool(servers, server_infos, kw.pop("served_models", None))
    return EquivalenceOracle(deployment(tmp_path, overrides), pool, tmp_path, examples=10, case_seed=0, **kw)


def derived(cases):
    return [c for c in cases if FIRST_TOKEN_STOP_EDGE in c.label]


# --- the case itself ------------------------------------------------------------------------
def test_the_case_stops_on_the_first_tokens_text_at_the_longest_answer(tmp_path):
    dep = deployment(tmp_path)
    case = first_token_stop_case(dep, "nemi")
    assert case is not None and case.stop == ("nemi",) and case.concurrency == 1
    # At the longest answer: a server that misses the stop runs on, and shows it. (With
    # max_new_tokens 1 the limit alone would end the answer, missed stop or not.)
    assert case.max_new_tokens == dep.equivalence.max_new_tokens
    one = one_token_case(dep)
    assert case.text == one.text and edge_cases(dep)[0] == one  # the same prompt as the one-token edge
    assert case.label.endswith(f"(edge: {FIRST_TOKEN_STOP_EDGE})")
    # Not by itself one of the deployment's edges: its stop string is the reference's to say.
    assert not derived(edge_cases(dep))


@pytest.mark.parametrize("text", ["", " ", "\n", "\n\n", " \t", "\ufffd", "ab\ufffd"])
def test_no_case_where_the_first_token_cannot_stand_as_a_stop_string(tmp_path, text):
    """Empty or whitespace only (an EOS, a newline): SGLang releases ignore or mishandle such stop
    strings each their own way, and an empty one is in every text. A lone piece of a multi-byte
    character decodes to U+FFFD, which the same token inside longer text does not."""
    assert first_token_stop_case(deployment(tmp_path), text) is None


# --- live: derived from the live reference before the cases run -----------------------------
def test_live_the_reference_is_asked_once_for_its_first_token_and_the_edge_comes_with_the_others(tmp_path):
    reference = SimServer("baseline")
    o = oracle(tmp_path, {"baseline": reference})
    assert o.live
    cases = o.explicit_cases()
    (edge,) = derived(cases)
    one = one_token_case(o.deployment)
    first_token = o.baselines[one.key].text
    assert first_token.strip() and edge.stop == (first_token,)
    assert cases[: len(edge_cases(o.deployment))] == edge_cases(o.deployment)  # after the fixed edges
    # asked once: the one-token answer is the one-token edge's baseline too, and is kept
    assert o.explicit_cases() == cases and o.baseline_for(one) is o.baselines[one.key]
    assert [r.max_new_tokens for r in reference.asked] == [1]


def test_live_a_whitespace_first_token_leaves_the_edge_out_and_the_rest_runs(tmp_path):
    reference = SimServer("baseline")
    reference.first_token_text = "\n"
    o = oracle(tmp_path, {"baseline": reference, "eagle3-decode": SimServer("eagle3-decode", SPEC)})
    assert o.explicit_cases() == edge_cases(o.deployment)
    o.check("eagle3-decode", edge_cases(o.deployment)[0])
    # the report says the edge was left out, and why, beside the edges that ran
    assert f"{FIRST_TOKEN_STOP_EDGE}: LEFT OUT (its text '\\n' is empty or whitespace)" in o.stats["eagle3-decode"].edges


def test_the_healthy_server_passes_the_edge_and_a_server_missing_it_fails_by_the_usual_rules(tmp_path):
    """Judged as any answer ending on a stop string is: the reference's answer is its first token
    with the text cut before the stop; a server that runs on keeps the stop string in its text."""
    servers = {
        "baseline": SimServer("baseline"),
        "eagle3-decode": SimServer("eagle3-decode", SPEC),
        "eagle3-prefill": SimServer("eagle3-prefill", SPEC, parse_faults(["prefill-stop-miss"])),
    }
    o = oracle(tmp_path, servers)
    (edge,) = derived(o.explicit_cases())
    baseline = o.baseline_for(edge)
    assert baseline.text == "" and len(baseline.output_ids) == 1
    assert baseline.finish_reason == FinishReason("stop", edge.stop[0])
    (healthy,) = o.check("eagle3-decode", edge)
    assert healthy.kind == "match" and healthy.tokens_compared == 1
    (missed,) = o.check("eagle3-prefill", edge)
    assert missed.kind == "invariant" and missed.shape == "unclassified" and "PR #" not in missed.message
    assert f"text runs past stop string {edge.stop[0]!r}: found at char 0" in missed.message
    # Every other case, the fixed edges and those drawn from seed 0, passes on the faulty
    # server: only a stop string inside the first token's text tells it from a healthy one.
    others = [c for c in o.explicit_cases() if c != edge] + draw_cases(o.deployment, 10, 0)
    assert others and all(out.ok for c in others for out in o.check("eagle3-prefill", c))
    # the report names the edges each config was checked on, the derived stop string included
    ran = o.stats["eagle3-prefill"].edges
    assert f"{FIRST_TOKEN_STOP_EDGE} {edge.stop[0]!r}" in ran and "max_new_tokens 1" in ran
    checked = [e for e in ran if ": LEFT OUT (" not in e]  # this stand-in reports no context length
    assert len(checked) == len(set(checked)) == len({edge_name(c) for c in o.explicit_cases()})
    assert edge_name(draw_cases(o.deployment, 1, 0)[0]) is None


# --- golden: derived while the reference is up, recorded with the other cases -----------------
def test_golden_the_edge_is_derived_while_recording_and_checked_from_the_recording(tmp_path):
    reference = SimServer("baseline")
    servers = {
        "baseline": reference,
        "eagle3-prefill": SimServer("eagle3-prefill", SPEC, parse_faults(["prefill-stop-miss"])),
    }
    o = oracle(tmp_path, servers, {"launch": {"coexist": False}})
    assert not o.live
    # Before the recording there is nothing to derive from, and the reference is not asked...
    assert not derived(o.explicit_cases()) and not reference.asked
    # ...the recording derives it (the reference is up) and records its answer with the rest.
    recorded = o.record_golden()
    cases = o.golden_cases()
    (edge,) = derived(cases)
    assert recorded == len(cases)
    one = one_token_case(o.deployment)
    assert edge.stop == (o.baselines[one.key].text,)
    # (a request feature's params make another request: a token-id anchor's plain answer is one)
    asked = [(r.text, r.max_new_tokens, r.stop, r.extra) for r in reference.asked]
    assert len(asked) == len(set(asked))  # each request once: the one-token answer is not asked twice
    golden = json.loads(o.golden_path.read_text())
    assert [e["case"] for e in golden["entries"]] == [c.as_dict() for c in cases]
    # what a stored baseline holds comes from the same list
    answers = o.golden_answers()
    assert answers is not None and derived(e.case for e in answers.entries) == [edge]
    # The later check (the reference stopped): the recorded case, failing on the faulty server.
    del servers["baseline"]
    (missed,) = o.check("eagle3-prefill", edge)
    assert missed.kind == "invariant" and "found at char 0" in missed.message


# --- stored: the case comes from what was stored ------------------------------------------------
def _stored(tmp_path, keep_edge: bool):
    """The answers a baseline update of a stored-reference deployment stores (with or without
    the derived edge: a baseline recorded before the edge existed has none)."""
    o = oracle(tmp_path / "update", {"baseline": SimServer("baseline")}, {"launch": {"reference_from": "stored"}})
    o.record_golden()
    answers = o.golden_answers()
    assert answers is not None
    entries = tuple(e for e in answers.entries if keep_edge or FIRST_TOKEN_STOP_EDGE not in e.case.label)
    return dataclasses.replace(answers, entries=entries)


@pytest.mark.parametrize("keep_edge", [True, False], ids=["stored-with-the-edge", "stored-before-the-edge"])
def test_stored_the_edge_is_what_was_stored_and_the_reference_is_never_asked(tmp_path, keep_edge):
    stored = _stored(tmp_path, keep_edge)
    spec = SimServer("eagle3-decode", SPEC)
    o = oracle(
        tmp_path / "run",
        {"eagle3-decode": spec},
        {"launch": {"reference_from": "stored"}},
        stored_answers=lambda: stored,
    )
    cases, missing = o.cases_with_answers("eagle3-decode")
    assert not missing and len(derived(cases)) == (1 if keep_edge else 0)
    assert all(out.ok for c in cases for out in o.check("eagle3-decode", c))
    not_checked = [e for e in o.stats["eagle3-decode"].edges if "NOT CHECKED" in e and FIRST_TOKEN_STOP_EDGE in e]
    why = "the stored answers hold none: stored before this edge, or left out then"
    assert not_checked == ([] if keep_edge else [f"{FIRST_TOKEN_STOP_EDGE}: NOT CHECKED ({why})"])
