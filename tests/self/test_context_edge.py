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
    Capacity,
    context_edge_case,
    draft_reservation,
    server_capacity,
    target_prompt_tokens,
)
from specgate.sim.faults import parse_faults
from specgate.sim.tokenizer import encode

INFO = {"max_req_input_len": 2042}  # as SGLang 0.5.14's scheduler reports a 2,048-token context
CAPACITY = server_capacity(INFO)
# SGLang 0.5.14 serving SmolLM2 (8,192 tokens) with the topk-4 tree, as the H200 run of 2026-12-02 saw it
TREE = {"max_req_input_len": 8186, "speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 4,
        "speculative_num_steps": 3, "speculative_num_draft_tokens": 8}
MODELS_8K = {"object": "list", "data": [{"id": "smollm2", "max_model_len": 8192}]}


def at_length(cases):
    return [c for c in cases if CONTEXT_EDGE in c.label]


@pytest.mark.parametrize(
    ("info", "models", "tokens"),
    [
        ({"max_req_input_len": 8186}, None, 8190),  # SGLang 0.5: the scheduler clips an answer past + 4
        ({"max_req_input_len": 8186}, MODELS_8K, 8190),  # the scheduler's is the tighter
        (TREE, MODELS_8K, 8180),  # 8192 less max(4 x 3, 8) slots for the tree's drafts
        (TREE, None, 8175),  # no context length: max_req_input_len + 1 is the least it can be
        ({"server_args": {"context_length": 4096}}, None, 4094),  # nested; max_req_input_len taken as 4090
        ({"context_len": 2048}, None, 2046),
        ({}, {"data": [{"max_model_len": 2048}]}, 2046),
        ({"context_length": None, "max_req_input_len": None}, None, None),
        ({}, None, None),
        ({"max_req_input_len": True}, {"data": [{"max_model_len": True}]}, None),  # JSON's true is no length
        ({}, {"data": "8192"}, None),
        ({}, ["not", "an", "object"], None),
        ({"max_req_input_len": 8186, "max_total_num_tokens": 5000, "page_size": 64}, None, 4872),  # the KV pool's clip
        ({}, {"data": [{"max_model_len": None}]}, None),
    ],
)
def test_a_servers_capacity_is_read_under_each_name_less_its_draft_reservation(info, models, tokens):
    capacity = server_capacity(info, models)
    assert (capacity.tokens if capacity else None) == tokens


def test_the_draft_reservation_is_sglangs_for_every_speculative_algorithm():
    assert draft_reservation(TREE) == 12
    assert draft_reservation({**TREE, "speculative_eagle_topk": 1, "speculative_num_steps": 2,
                              "speculative_num_draft_tokens": 3}) == 3
    assert draft_reservation({"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 8}) == 0  # not is_eagle()
    assert draft_reservation({"server_args": TREE}) == 12
    assert draft_reservation({"speculative_algorithm": None, "speculative_num_draft_tokens": 8}) == 0
    assert draft_reservation({**TREE, "speculative_eagle_topk": True, "speculative_num_draft_tokens": "8"}) == 0


def test_the_answer_crosses_the_drafters_length_or_ends_on_the_last_slot_a_request_may_hold():
    eight_k = Capacity(8192, "context length 8192")
    assert target_prompt_tokens(eight_k, 2048, 64) == (2016, "a whole answer crosses the drafter's context length 2048")
    # no drafter length below the server's: the answer's last token takes the last slot SGLang allows
    tree = server_capacity(TREE, MODELS_8K)
    assert target_prompt_tokens(tree, None, 64) == (
        8116,
        "a whole answer reaches 8180 tokens, the most a request may hold "
        "(context length 8192, less 12 slots reserved for draft tokens)",
    )
    assert target_prompt_tokens(eight_k, 8192, 64)[0] == 8128
    # an odd answer: its longer half lies past the drafter's length, and must still fit
    assert target_prompt_tokens(Capacity(8180, "x"), 8180 - 16, 33)[1].startswith("a whole answer reaches")
    # a one-token answer: the prompt is the longest the scheduler takes, not capacity less one
    plain = server_capacity({"max_req_input_len": 8186})
    assert target_prompt_tokens(plain, None, 1) == (8185, f"the prompt is the longest the server takes ({plain.describe()})")


def test_the_prompt_is_sized_by_the_servers_own_counts_within_the_tolerance(tmp_path):
    dep = deployment(tmp_path)
    counts: list[int] = []

    def count_tokens(text: str) -> int:  # a tokenizer of its own: 1.3 tokens per word, and a header
        counts.append(round(1.3 * len(text.split())) + 11)
        return counts[-1]

    case = context_edge_case(dep, CAPACITY, count_tokens)
    assert not isinstance(case, str), case
    wanted = 2046 - dep.equivalence.max_new_tokens
    assert wanted - SIZE_TOLERANCE <= counts[-1] <= wanted and len(counts) <= 8
    assert edge_name(case) == (
        f"{CONTEXT_EDGE}: {counts[-1]} prompt tokens, a whole answer reaches 2046 tokens, the most a request may hold "
        "(max_req_input_len 2042 + 4)"
    )
    assert case.max_new_tokens == dep.equivalence.max_new_tokens and case.stop == () and case.concurrency == 1
    assert dep.workload.prompts()[0].messages[-1].content in case.text  # the first prompt's question, last


@pytest.mark.parametrize(
    ("info", "count", "why"),
    [
        ({}, lambda t: 10, "no server reports a context length"),
        ({"max_req_input_len": 10 * MAX_CONTEXT_EDGE_TOKENS}, lambda t: 10, "costs more than it shows"),
        (INFO, lambda t: 5000, "the first prompt alone holds 5000 tokens"),
        (INFO, lambda t: 7 if len(t) < 2000 else 3000, "could not size the prompt"),  # a count that jumps past it
        ({"max_req_input_len": 5}, lambda t: 1, "does not fit"),  # no room for a whole answer
    ],
)
def test_where_no_prompt_can_be_sized_the_edge_is_left_out_and_says_why(tmp_path, info, count, why):
    left_out = context_edge_case(deployment(tmp_path), server_capacity(info), count)
    assert isinstance(left_out, str) and why in left_out


def test_a_drafter_shorter_than_the_server_sets_where_the_answer_crosses(tmp_path):
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({"max_position_embeddings": 1000}))
    args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
    dep = deployment(tmp_path, {"configs": {"eagle3-decode": {"args": args}}})
    case = context_edge_case(dep, CAPACITY, lambda text: len(encode(text)))
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
    infos = {"baseline": {"max_req_input_len": 4090}, "eagle3-decode": {"max_req_input_len": 2042}}
    o = oracle(tmp_path, servers, server_infos=infos)
    (edge,) = at_length(o.explicit_cases())
    assert "reaches 2046 tokens, the most a request may hold (max_req_input_len 2042 + 4)" in edge.label
    assert len(encode(edge.text)) <= 2046 - o.deployment.equivalence.max_new_tokens


def test_a_speculative_config_not_booted_yet_reserves_what_its_arguments_declare(tmp_path):
    """The golden mode boots the reference alone first: the tree it has not booted is sized for
    from its launch arguments (and the reference's length: the same model)."""
    tree_args = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                 "--speculative-eagle-topk=4", "--speculative-num-draft-tokens", "8"]
    servers = {"baseline": SimServer("baseline")}
    o = oracle(tmp_path, servers, {"configs": {"eagle3-decode": {"args": tree_args}}},
               server_infos={"baseline": {"max_req_input_len": 8186}}, served_models={"baseline": MODELS_8K})
    (edge,) = at_length(o.explicit_cases())
    assert "(context length 8192, less 12 slots reserved for draft tokens)" in edge.label
    # the shape given once for every config, in [launch] args, as the launcher passes it
    shape = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]
    shared = {"launch": {"args": shape}, "configs": {"eagle3-decode": {"args": ["--speculative-algorithm", "EAGLE3"]}}}
    o = oracle(tmp_path / "shared", servers, shared,
               server_infos={"baseline": {"max_req_input_len": 8186}}, served_models={"baseline": MODELS_8K})
    (edge,) = at_length(o.explicit_cases())
    assert "(context length 8192, less 12 slots reserved for draft tokens)" in edge.label


def test_the_prompt_leaves_room_for_the_slots_a_speculative_server_reserves(tmp_path):
    """The H200 run of 2026-12-02: sized by the plain server's figures alone, the edge's 8,118
    prompt tokens and 64 answer tokens were refused by the topk-4 tree (SGLang counts 12 slots
    for its drafts: 8,194 of 8,192)."""
    servers = {"baseline": SimServer("baseline"), "eagle3-decode": SimServer("eagle3-decode", SPEC)}
    infos = {"baseline": {"max_req_input_len": 8186}, "eagle3-decode": TREE}
    models = {"baseline": MODELS_8K, "eagle3-decode": MODELS_8K}
    o = oracle(tmp_path, servers, server_infos=infos, served_models=models)
    (edge,) = at_length(o.explicit_cases())
    answer = o.deployment.equivalence.max_new_tokens
    assert len(encode(edge.text)) + 12 + answer <= 8192
    assert "(context length 8192, less 12 slots reserved for draft tokens)" in edge.label


@pytest.mark.parametrize("length", [True, 1, 10, "4096", 4096.0, None])
def test_a_drafter_length_that_is_no_length_leaves_the_servers_in_place(tmp_path, length):
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({"max_position_embeddings": length}))
    args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
    dep = deployment(tmp_path, {"configs": {"eagle3-decode": {"args": args}}})
    case = context_edge_case(dep, CAPACITY, lambda text: len(encode(text)))
    assert not isinstance(case, str) and "reaches 2046 tokens" in case.label


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


class Refusing(SimServer):
    """Refuses every answer longer than one token, as a server with less room than it said."""

    def generate(self, request):  # noqa: ANN001, ANN201
        if request.max_new_tokens > 1:
            from specgate.errors import HTTPStatusError

            raise HTTPStatusError("POST /generate answered HTTP 400: too long", url="http://x/generate", status=400)
        return super().generate(request)


def test_a_refused_request_names_the_case(tmp_path):
    from specgate.errors import HTTPStatusError

    servers = {"baseline": SimServer("baseline"), "eagle3-decode": Refusing("eagle3-decode", SPEC)}
    o = oracle(tmp_path, servers, server_infos={"baseline": INFO})
    drawn = next(c for c in draw_cases(o.deployment, 10, 0) if c.max_new_tokens > 1)
    with pytest.raises(HTTPStatusError, match=r"HTTP 400: too long \(case .*") as err:
        o.check("eagle3-decode", drawn)
    assert err.value.status == 400 and err.value.url == "http://x/generate"
    assert drawn.label in str(err.value)


def test_a_refused_context_edge_is_not_checked_and_the_other_cases_still_run(tmp_path):
    """A speculative server that refuses the edge the reference answered compared nothing there:
    no outcome (never a pass), REFUSED in its edges, and the rest of its cases still checked."""
    servers = {"baseline": SimServer("baseline"), "eagle3-decode": Refusing("eagle3-decode", SPEC)}
    o = oracle(tmp_path, servers, server_infos={"baseline": INFO})
    (edge,) = at_length(o.explicit_cases())
    assert o.check("eagle3-decode", edge) == []
    stats = o.stats["eagle3-decode"]
    assert len(stats.refused) == 1 and "REFUSED by eagle3-decode although the reference answered it" in stats.refused[0]
    assert "HTTP 400: too long" in stats.refused[0] and stats.refused[0] in stats.edges
    assert stats.requests == 0 and stats.matches == 0
    one = [c for c in o.explicit_cases() if c.max_new_tokens == 1]
    assert one and all(out.ok for c in one for out in o.check("eagle3-decode", c))


def test_an_eagle_config_declaring_no_shape_is_sized_with_slots_assumed():
    """SGLang chooses topk, steps and draft tokens itself where none is given: before the server
    has booted and said which, ASSUMED_RESERVATION slots are kept free (and the name says so)."""
    from specgate.equivalence.context_edge import ASSUMED_RESERVATION, declared_speculation

    reference = {"max_req_input_len": 8186, "max_total_num_tokens": 900_000}
    bare = declared_speculation(("--speculative-algorithm", "EAGLE3"))
    capacity = server_capacity({**reference, **bare}, MODELS_8K)
    assert capacity.tokens == 8192 - ASSUMED_RESERVATION
    assert f"less {ASSUMED_RESERVATION} slots assumed for draft tokens (its launch arguments name none)" in capacity.limit
    shaped = declared_speculation(("--speculative-algorithm=NEXTN", "--speculative-num-steps", "3",
                                   "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"))
    assert server_capacity({**reference, **shaped}, MODELS_8K).tokens == 8180  # NEXTN is EAGLE
    # the last --speculative-algorithm given wins, whichever form it takes
    assert declared_speculation(("--speculative-algorithm=NGRAM", "--speculative-algorithm", "EAGLE3"))[
        "speculative_algorithm"] == "EAGLE3"
    assert declared_speculation(("--speculative-algorithm", "EAGLE3", "--speculative-algorithm=NGRAM"))[
        "speculative_algorithm"] == "NGRAM"
