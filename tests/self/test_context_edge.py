"""The edge "a prompt at the context length" (issue 14): a prompt sized by the reference's own
token counts so that a whole answer crosses the drafter's context length, or ends on the server's
last slot; where nothing can be sized, the edge is left out and the report says why. In process,
with the simulator's engine answering as the servers would (the stand-ins of
test_first_token_stop_edge.py); the whole gate on the simulator runs it in test_e2e_gate.py.
"""

from __future__ import annotations

import json

import pytest
from test_first_token_stop_edge import SPEC, SimServer, deployment, oracle

from specgate.equivalence.cases import draw_cases, edge_name
from specgate.equivalence.context_edge import (
    CONTEXT_EDGE,
    MAX_CONTEXT_EDGE_TOKENS,
    SIZE_TOLERANCE,
    context_edge_case,
    server_context_length,
    target_prompt_tokens,
)
from specgate.sim.faults import parse_faults
from specgate.sim.tokenizer import encode

INFO = {"max_req_input_len": 2047}  # as SGLang's scheduler reports a 2,048-token context


def at_length(cases):
    return [c for c in cases if CONTEXT_EDGE in c.label]


@pytest.mark.parametrize(
    ("info", "length"),
    [
        ({"max_req_input_len": 8191}, 8192),  # SGLang 0.5: the scheduler's figure
        ({"server_args": {"context_length": 4096}}, 4096),  # a release that nests its arguments
        ({"context_len": 2048}, 2048),
        ({"context_length": None, "max_req_input_len": None}, None),
        ({}, None),
    ],
)
def test_the_servers_context_length_is_read_under_each_name(info, length):
    assert server_context_length(info) == length


def test_the_answer_crosses_the_drafters_length_or_ends_on_the_servers_last_slot():
    assert target_prompt_tokens(8192, 2048, 64) == (2016, "a whole answer crosses the drafter's context length 2048")
    # no drafter length below the server's: the answer's last token takes the last slot SGLang allows
    assert target_prompt_tokens(8192, None, 64) == (8127, "a whole answer reaches the server's context length 8192")
    assert target_prompt_tokens(8192, 8192, 64)[0] == 8127


def test_the_prompt_is_sized_by_the_servers_own_counts_within_the_tolerance(tmp_path):
    dep = deployment(tmp_path)
    counts: list[int] = []

    def count_tokens(text: str) -> int:  # a tokenizer of its own: 1.3 tokens per word, and a header
        counts.append(round(1.3 * len(text.split())) + 11)
        return counts[-1]

    case = context_edge_case(dep, INFO, count_tokens)
    assert not isinstance(case, str), case
    wanted = 2048 - dep.equivalence.max_new_tokens - 1
    assert wanted - SIZE_TOLERANCE <= counts[-1] <= wanted and len(counts) <= 8
    assert edge_name(case) == f"{CONTEXT_EDGE}: {counts[-1]} prompt tokens, a whole answer reaches the server's context length 2048"
    assert case.max_new_tokens == dep.equivalence.max_new_tokens and case.stop == () and case.concurrency == 1
    assert dep.workload.prompts()[0].messages[-1].content in case.text  # the first prompt's question, last


@pytest.mark.parametrize(
    ("info", "count", "why"),
    [
        ({}, lambda t: 10, "reports no context length"),
        ({"max_req_input_len": 10 * MAX_CONTEXT_EDGE_TOKENS}, lambda t: 10, "costs more than it shows"),
        (INFO, lambda t: 5000, "the first prompt alone holds 5000 tokens"),
        (INFO, lambda t: 7 if len(t) < 2000 else 3000, "could not size the prompt"),  # a count that jumps past it
    ],
)
def test_where_no_prompt_can_be_sized_the_edge_is_left_out_and_says_why(tmp_path, info, count, why):
    left_out = context_edge_case(deployment(tmp_path), info, count)
    assert isinstance(left_out, str) and why in left_out


def test_a_drafter_shorter_than_the_server_sets_where_the_answer_crosses(tmp_path):
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({"max_position_embeddings": 1000}))
    args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
    dep = deployment(tmp_path, {"configs": {"eagle3-decode": {"args": args}}})
    case = context_edge_case(dep, INFO, lambda text: len(encode(text)))
    assert not isinstance(case, str)
    half = dep.equivalence.max_new_tokens // 2
    assert 1000 - half - SIZE_TOLERANCE <= len(encode(case.text)) <= 1000 - half
    assert "crosses the drafter's context length 1000" in case.label


def test_the_healthy_server_passes_the_edge_and_a_drafter_corrupting_past_a_position_fails_only_it(tmp_path):
    """The fault `diverge-past`: from a sequence position on, the speculative output takes a token
    the target never would; only the long prompt reaches that far."""
    servers = {
        "baseline": SimServer("baseline"),
        "eagle3-decode": SimServer("eagle3-decode", SPEC),
        "eagle3-prefill": SimServer("eagle3-prefill", SPEC, parse_faults(["diverge-past=1900"])),
    }
    o = oracle(tmp_path, servers, server_infos={"baseline": INFO})
    (edge,) = at_length(o.explicit_cases())
    assert all(out.ok for out in o.check("eagle3-decode", edge))
    (broken,) = o.check("eagle3-prefill", edge)
    assert not broken.ok and broken.kind == "divergence" and broken.message.startswith("decisive divergence")
    others = [c for c in o.explicit_cases() if c != edge] + draw_cases(o.deployment, 10, 0)
    assert others and all(out.ok for c in others for out in o.check("eagle3-prefill", c))
    assert any(name.startswith(f"{CONTEXT_EDGE}: ") for name in o.stats["eagle3-prefill"].edges)
    # sized by the reference alone, with one-token requests, before any case ran
    assert all(r.max_new_tokens == 1 for r in servers["baseline"].asked[:3])


def test_stand_in_pool_without_a_context_length_leaves_the_edge_out(tmp_path):
    o = oracle(tmp_path, {"baseline": SimServer("baseline")})
    assert at_length(o.explicit_cases()) == []
    assert any(f"{CONTEXT_EDGE}: LEFT OUT" in e for e in o._edges_left_out)


def test_the_prompt_fits_the_shortest_context_any_server_has_reported(tmp_path):
    servers = {"baseline": SimServer("baseline"), "eagle3-decode": SimServer("eagle3-decode", SPEC)}
    infos = {"baseline": {"max_req_input_len": 4095}, "eagle3-decode": {"max_req_input_len": 2047}}
    o = oracle(tmp_path, servers, server_infos=infos)
    (edge,) = at_length(o.explicit_cases())
    assert "reaches the server's context length 2048" in edge.label
    assert len(encode(edge.text)) <= 2048 - o.deployment.equivalence.max_new_tokens - 1


@pytest.mark.parametrize("length", [True, 1, 10, "4096", 4096.0, None])
def test_a_drafter_length_that_is_no_length_leaves_the_servers_in_place(tmp_path, length):
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({"max_position_embeddings": length}))
    args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
    dep = deployment(tmp_path, {"configs": {"eagle3-decode": {"args": args}}})
    case = context_edge_case(dep, INFO, lambda text: len(encode(text)))
    assert not isinstance(case, str) and "reaches the server's context length 2048" in case.label
    assert server_context_length({"max_req_input_len": True}) is None  # JSON's true is no length


def test_a_context_case_is_never_replayed_it_is_sized_anew_each_run(tmp_path):
    replay = tmp_path / "replay.json"
    servers = {"baseline": SimServer("baseline"), "eagle3-decode": SimServer("eagle3-decode", SPEC)}
    o = oracle(tmp_path / "a", servers, server_infos={"baseline": INFO}, replay_path=replay)
    (edge,) = at_length(o.explicit_cases())
    o.remember_failure("eagle3-decode", edge, "decisive divergence")
    assert not replay.exists()  # not written: the next run sizes its own
    stale = {"case": {**edge.as_dict(), "text": edge.text + " more words"}, "config": "eagle3-decode",
             "first_failed": "2026-12-02T00:00:00+00:00", "why": "decisive divergence"}
    replay.write_text(json.dumps({"deployment": o.deployment.name, "cases": [stale]}))
    again = oracle(tmp_path / "b", servers, server_infos={"baseline": INFO}, replay_path=replay)
    assert again.replay_cases() == []  # one sized for other servers is skipped


def test_a_refused_request_names_the_case(tmp_path):
    from specgate.errors import HTTPStatusError

    class Refusing(SimServer):
        def generate(self, request):  # noqa: ANN001, ANN201
            if self.asked and request.max_new_tokens > 1:
                raise HTTPStatusError("POST /generate answered HTTP 400: too long", url="http://x/generate", status=400)
            self.asked.append(request)
            return super().generate(request)

    servers = {"baseline": SimServer("baseline"), "eagle3-decode": Refusing("eagle3-decode", SPEC)}
    o = oracle(tmp_path, servers, server_infos={"baseline": INFO})
    (edge,) = at_length(o.explicit_cases())
    servers["eagle3-decode"].asked.append(edge.request())
    with pytest.raises(HTTPStatusError, match=r"HTTP 400: too long \(case .chat/.*\(edge: prompt at the context length") as err:
        o.check("eagle3-decode", edge)
    assert err.value.status == 400 and err.value.url == "http://x/generate"
