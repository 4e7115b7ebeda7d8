"""The equivalence rule, on synthetic answers: strict at decisive positions, excused
only for a swap of near-tied tokens, invariants checked whatever the numerics."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from specgate.client import FinishReason, GenerateRequest, GenerateResult
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.check import EquivalenceStats, compare

TIE = 0.05


def answer(ids, margins=None, text=None, finish="length", n=None):
    tops = None
    if margins is not None:
        # top-1 is the emitted token; top-2 is token+1000 at `margin` below
        tops = tuple(((t, -0.1), (t + 1000, -0.1 - m)) for t, m in zip(ids, margins))
    return GenerateResult(
        request=GenerateRequest(max_new_tokens=n or 16, text="p"),
        text=text if text is not None else " ".join(map(str, ids)),
        output_ids=tuple(ids),
        prompt_tokens=1,
        completion_tokens=len(ids),
        finish_reason=FinishReason(*finish) if isinstance(finish, tuple) else FinishReason(finish),
        e2e_s=0.0,
        server_e2e_s=None,
        top_logprobs=tops,
    )


def case(n=16, stop=()):
    return GenerationCase("set/p", "p", n, tuple(stop), 1)


def judge(base, spec, c=None):
    return compare(c or case(), base, spec, TIE, "http://b", "http://s")


def test_identical_outputs_match():
    out = judge(answer([1, 2, 3], [1, 1, 1]), answer([1, 2, 3]))
    assert out.kind == "match" and out.ok and out.tokens_compared == 3


def test_swap_of_near_tied_tokens_is_excused_and_recorded():
    base = answer([1, 2, 3], [1.0, 0.01, 1.0])
    out = judge(base, answer([1, 1002, 7]))
    assert out.kind == "near-tie-flip" and out.ok
    assert out.flip.position == 1 and abs(out.flip.margin - 0.01) < 1e-9


def test_divergence_at_decisive_position_fails_with_reproducer():
    out = judge(answer([1, 2, 3], [1.0, 0.3, 1.0]), answer([1, 1002, 3]))
    assert not out.ok and out.kind == "divergence"
    assert "decisive divergence at output token 1" in out.message
    assert "margin 0.3000 >= tie margin 0.05" in out.message
    assert "curl -s http://b/generate" in out.message and "curl -s http://s/generate" in out.message


def test_near_tie_does_not_excuse_a_token_outside_the_tie():
    out = judge(answer([1, 2, 3], [1.0, 0.01, 1.0]), answer([1, 99, 3]))
    assert not out.ok and "not among the baseline's near-tied tokens" in out.message


def test_with_top5_only_tokens_inside_the_tie_are_excused():
    """top_logprobs may be > 2: a token far below top-1 is in the list but never tied."""
    base = _two(2, ((2, -0.1), (3, -0.11), (4, -12.0), (5, -13.0), (6, -14.0)), first=((1, -0.1),))
    assert judge(base, answer([1, 3])).kind == "near-tie-flip"
    far = judge(base, answer([1, 4]))
    assert not far.ok and "not among the baseline's near-tied tokens [2, 3]" in far.message


def test_no_logprobs_means_no_excuse():
    out = judge(answer([1, 2, 3]), answer([1, 1002, 3]))
    assert not out.ok and "no top-2 logprobs" in out.message


def test_early_end_and_finish_mismatch_fail():
    assert "ended at token 2" in judge(answer([1, 2, 3], [1, 1, 1]), answer([1, 2])).message
    out = judge(answer([1, 2], [1, 1], finish="length"), answer([1, 2], finish="stop"))
    assert not out.ok and "finish differs" in out.message


def test_invariants_max_new_tokens_and_stop_leak():
    over = judge(answer([1, 2, 3], [1, 1, 1]), answer([1, 2, 3, 4]), case(n=3))
    assert over.kind == "invariant" and "4 tokens with max_new_tokens = 3" in over.message
    leak = judge(answer([1], [1], text="a"), answer([1], text="a. b"), case(stop=["."]))
    assert leak.kind == "invariant" and "past stop string '.'" in leak.message


def test_a_stop_string_both_servers_run_past_at_the_same_place_is_the_servers_and_tokens_decide():
    """Seen on SGLang 0.5.14: with max_new_tokens hit on the token that completes "\n\n", the plain
    server too kept the stop string; the speculative answer is then judged on its tokens."""
    c = case(n=3, stop=["\n\n"])
    base = answer([7, 8, 9], [1.0, 1.0, 1.0], text="Summary:\n\n")
    same = judge(base, answer([7, 8, 9], text="Summary:\n\n"), c)
    assert same.kind == "match"
    other = judge(base, answer([7, 8, 1009], text="Summary:\n\nThe"), c)
    assert other.kind == "divergence" and "decisive divergence at output token 2" in other.message
    alone = judge(answer([7, 8, 9], [1, 1, 1], text="Summary: ok"), answer([7, 8, 9], text="Summary:\n\nThe"), c)
    assert alone.kind == "invariant" and "past stop string" in alone.message
    # Completed by the last allowed token, the stop stays in the text for plain SGLang too: not a
    # break by itself; the tokens (and here the text) decide.
    at_end = judge(answer([7, 8, 9], [1, 1, 1], text="Summary: ok"), answer([7, 8, 9], text="Summary:\n\n"), c)
    assert at_end.kind == "divergence" and "text differs" in at_end.message


@given(
    ids=st.lists(st.integers(0, 500), min_size=1, max_size=30),
    margins=st.data(),
    at=st.data(),
)
def test_property_first_difference_decides(ids, margins, at):
    """For any baseline and any single-token change, the verdict follows the rule:
    excused exactly when the margin there is under the tie and the token is top-2."""
    # margins kept off the tie value itself, where float rounding decides either way
    m = margins.draw(
        st.lists(st.floats(0, 3).filter(lambda x: abs(x - TIE) > 1e-6), min_size=len(ids), max_size=len(ids))
    )
    i = at.draw(st.integers(0, len(ids) - 1))
    to_top2 = at.draw(st.booleans())
    spec = list(ids)
    spec[i] = ids[i] + 1000 if to_top2 else ids[i] + 2000
    out = judge(answer(ids, m), answer(spec), case(n=64))
    assert out.ok == (to_top2 and m[i] < TIE)
    assert out.tokens_compared == i


def test_an_invariant_the_baseline_breaks_alike_is_not_blamed_on_speculation():
    # SGLang 0.5.11 on the H200: the token that reached max_new_tokens also held the stop
    # string; both servers returned it (finish length). The tokens are then compared as usual.
    c = case(n=3, stop=("\n\n",))
    base = answer([1, 2, 3], [1, 1, 1], text="ab\n\n\n\n")
    assert judge(base, answer([1, 2, 3], text="ab\n\n\n\n"), c).kind == "match"
    # a speculative server breaking it where the baseline does not still fails
    clean = answer([1, 2, 3], [1, 1, 1], text="abc")
    out = judge(clean, answer([1, 2, 3], text="ab\n\nc"), c)
    assert out.kind == "invariant" and "runs past stop string" in out.message


def test_tokens_kept_past_the_stop_are_a_stop_overshoot_failure_unless_declared():
    c = case(stop=(".",))
    base = answer([1, 2], [1, 1], text="a", finish=("stop", "."))
    over = answer([1, 2, 3, 4], text="a", finish=("stop", "."))
    out = judge(base, over, c)
    assert not out.ok and out.message.startswith("stop overshoot") and "2 more token id(s)" in out.message
    declared = compare(c, base, over, TIE, "http://b", "http://s", tolerate=("stop-overshoot",))
    assert declared.ok and declared.kind == "tolerated"
    # anything but that exact shape still fails under the declaration
    for other in (
        answer([1, 2, 3], text="a b", finish=("stop", ".")),  # other text
        answer([1, 2, 3], text="a", finish="length"),  # did not stop on the string
        answer([1, 2, 3], text="a", finish=("stop", 0)),  # stopped on a token id, not the string
        answer(list(range(1, 20)), text="a", finish=("stop", ".")),  # past max_new_tokens = 16
    ):
        assert not compare(c, base, other, TIE, "http://b", "http://s", ("stop-overshoot",)).ok, other


def test_a_stop_string_the_first_token_holds_is_judged_as_any_stop_string_is():
    """The first-token stop edge (cases.first_token_stop_case) has no rule of its own: the
    reference's answer is one token with its text cut before the stop, as any answer that ends on
    a stop string; one token id each is compared, not two empty answers."""
    c = case(stop=("nemi",))
    base = answer([42], [1.0], text="", finish=("stop", "nemi"))
    same = judge(base, answer([42], text="", finish=("stop", "nemi")), c)
    assert same.kind == "match" and same.tokens_compared == 1
    # the stop missed in the first token: its text runs on, and the invariant says where
    run_on = judge(base, answer([42, 7, 8], text="nemi kalo su", finish="length"), c)
    assert run_on.kind == "invariant" and "past stop string 'nemi': found at char 0" in run_on.message
    # found only in a later token, the text cut at the first occurrence: more ids past the stop,
    # failed; but not named stop-overshoot (PR #23802's miss cannot happen at the prefill's token,
    # which SGLang checks alone), so a stop-overshoot declaration does not excuse it
    later = judge(base, answer([42, 7, 42], text="", finish=("stop", "nemi")), c)
    assert not later.ok and later.shape is None and "went on" in later.message
    assert not compare(c, base, answer([42, 7, 42], text="", finish=("stop", "nemi")), TIE, "b", "s", ("stop-overshoot",)).ok


def _two(second, tops_at_1, texts=(), first=((1, -0.1), (7, -5.0))):
    """An answer [1, second] whose ranking at token 1 is `tops_at_1` ((id, logprob), best first;
    None: no logprobs at all)."""
    return GenerateResult(
        request=GenerateRequest(max_new_tokens=8, text="p"),
        text="",
        output_ids=(1, second),
        prompt_tokens=1,
        completion_tokens=2,
        finish_reason=FinishReason("length"),
        e2e_s=0.0,
        server_e2e_s=None,
        top_logprobs=(tuple(first), tuple(tops_at_1)) if tops_at_1 is not None else None,
        token_texts=tuple(texts),
    )


def _ranked(tops_at_1, texts=()):
    """The baseline's answer [1, 2], its ranking at token 1 `tops_at_1`."""
    return _two(2, tops_at_1, texts)


THREE_WAY = ((2, -0.5), (3, -0.52), (4, -0.6), (5, -3.0))
WORDS = ((2, "ff"), (3, "ver"), (4, "n"), (5, "f"))


def test_a_decisive_parting_says_where_the_speculative_token_stood_in_the_baselines_ranking():
    """A three-way near tie: the baseline's top two within the tie margin, the speculative server's
    token its third, past the margin. It fails (the rule was set before the run), and the failure
    says the rank, the gap and the words, so that a reader can tell it from a token the baseline
    never listed."""
    out = judge(_ranked(THREE_WAY, WORDS), answer([1, 4]))
    assert not out.ok and "not among the baseline's near-tied tokens [2, 3]" in out.message
    assert "speculative token 4 'n' is the baseline's choice 3, 0.1 below the baseline's token; tie margin 0.05" in out.message
    assert "the baseline's top 4 there: 2 'ff' top, 3 'ver' -0.02, 4 'n' -0.1, 5 'f' -2.5" in out.message
    d = out.divergence
    assert (d.spec_rank, round(d.spec_gap, 6), d.position, d.baseline_token, d.spec_token) == (3, 0.1, 1, 2, 4)

    unlisted = judge(_ranked(THREE_WAY), answer([1, 9]))
    assert "speculative token 9 is not among the baseline's top 4 (at least 2.5 below the baseline's token)" in unlisted.message
    assert unlisted.divergence.spec_rank is None and unlisted.divergence.spec_gap is None
    assert "the baseline's top 4 there: 2 top, 3 -0.02, 4 -0.1, 5 -2.5" in unlisted.message  # no texts given


def test_a_flip_records_how_far_below_the_top_its_token_was_and_its_context():
    flip = judge(_ranked(THREE_WAY, WORDS), answer([1, 3])).flip
    assert round(flip.spec_gap, 6) == 0.02 and flip.context
    again = compare(GenerationCase("set/p [other case]", "p", 4, (".",), 2), _ranked(THREE_WAY), answer([1, 4]), TIE, "b", "s")
    assert again.divergence.context == flip.context  # same prompt, same baseline tokens before: same context
    other_prompt = compare(GenerationCase("set/q", "q", 4, (), 1), _ranked(THREE_WAY), answer([1, 4]), TIE, "b", "s")
    assert other_prompt.divergence.context != flip.context


def test_a_parting_says_how_every_answer_that_reached_its_context_chose_there():
    """Answers that agreed with the baseline there count too (a context passed 29 times and
    failed once is not 'met once'), per config; and the baseline's margins there where they
    differed between requests."""
    from specgate.equivalence.check import EquivalenceStats
    from specgate.equivalence.partings import met_elsewhere

    decode, tree = EquivalenceStats(), EquivalenceStats()
    low = ((2, -0.5), (3, -0.54), (4, -0.875))
    for base, spec, stats in (
        (_ranked(low), [1, 3], decode),  # a near-tie flip
        (_ranked(low), [1, 2], decode),  # agrees
        (_ranked(THREE_WAY), [1, 4], decode),  # the decisive parting
        (_ranked(THREE_WAY), [1, 2], tree),  # agrees
        (_ranked(THREE_WAY), [9], tree),  # another prefix: did not reach the context
    ):
        stats.add(judge(base, answer(spec)), "set/p")
        stats.answered("p", tuple(spec))
    answers = [("eagle3-decode", *a) for a in decode.answers] + [("eagle3-tree", *a) for a in tree.answers]
    d = decode.divergences[0]
    told = met_elsewhere(d.prompt_digest, d.prefix, d.baseline_token, answers, decode.partings() + tree.partings(), d.context)
    assert told == [
        "eagle3-decode: 2 (the baseline's) 1x, 3 1x, 4 1x",
        "eagle3-tree: 2 (the baseline's) 1x",
        "the baseline's top-1/top-2 margin there differed between requests: 0.02, 0.04",
    ]
    alone = EquivalenceStats()
    alone.add(judge(_ranked(THREE_WAY), answer([1, 4])), "set/p")
    alone.answered("p", (1, 4))
    d = alone.divergences[0]
    assert met_elsewhere(d.prompt_digest, d.prefix, 2, [("c", *a) for a in alone.answers], alone.partings(), d.context) == []


def _again(token_at_1, tops_at_1, texts=()):
    """The speculative server's second answer [1, token_at_1], its own ranking at token 1."""
    return _two(token_at_1, tops_at_1, texts, first=((1, -0.1),))


def test_asked_again_the_speculative_server_says_how_far_its_numbers_moved_the_gap():
    """The second opinion reads the speculative server's own logprobs at the parting: the gap the
    baseline held between the two tokens plus the one the server holds the other way is how far
    its numbers moved it; a token its own logits do not rank first is no near tie; a list that
    does not cover the tokens one for one is not read."""
    from specgate.equivalence.second_opinion import read_again, second_opinion
    from specgate.errors import HTTPStatusError

    base = _ranked(THREE_WAY, WORDS)
    parting = judge(base, answer([1, 4])).divergence  # the baseline held 2 0.1 above 4
    near = read_again(_again(4, ((4, -0.5), (2, -0.55), (3, -0.6)), WORDS), parting, base, 0.05)
    assert near == (
        "asked again with logprobs, it parted again with 4; its own top 3 there: 4 'n' top, 2 'ff' -0.05, "
        "3 'ver' -0.1; the baseline held 2 0.1 above 4, its own logits hold 4 0.05 above 2: a shift of 0.15 "
        "nats, 3x the tie margin 0.05"
    )
    far = read_again(_again(4, ((4, -0.1), (2, -6.1))), parting, base, 0.05)
    assert "a shift of 6.1 nats, 122x the tie margin" in far  # no near tie, whatever the server's own gap
    wrong = read_again(_again(4, ((2, -0.1), (4, -2.5))), parting, base, 0.05)
    assert "its own logits rank 2 first, yet it emitted 4: not a near tie" in wrong
    tied = read_again(_again(4, ((2, -0.5), (4, -0.5))), parting, base, 0.05)
    assert "not a near tie" not in tied and "hold 4 0 above 2: a shift of 0.1 nats" in tied  # an exact tie, either order
    assert read_again(_again(4, ((4, -0.1), (9, -0.2))), parting, base, 0.05).endswith(
        "2 not among its own top 2 at the same prefix"
    )
    assert read_again(_again(2, ((2, -0.1), (4, -0.15))), parting, base, 0.05).startswith(
        "asked again with logprobs, it answered the baseline's token this time"
    )
    assert "gave no top logprobs (this release may not return them)" in read_again(_again(4, None), parting, base, 0.05)
    first_only = GenerateResult(**{**_again(4, ((4, -0.1),)).__dict__, "top_logprobs": (((1, -0.1),),)})
    assert "its logprobs cover 1 positions for 2 tokens: not read" in read_again(first_only, parting, base, 0.05)
    short = GenerateResult(**{**_again(4, ((4, -0.1),)).__dict__, "output_ids": (1,)})
    assert "its answer ended after 1 tokens, before that token" in read_again(short, parting, base, 0.05)
    other_prefix = GenerateResult(**{**_again(4, ((4, -0.1),)).__dict__, "output_ids": (8, 4)})
    assert "parted from the baseline's before that token" in read_again(other_prefix, parting, base, 0.05)

    # the baseline's gap read from its own list, never assumed: its token unlisted, the speculative one unlisted
    odd_base = _ranked(((5, -0.1), (4, -0.3), (6, -0.9)))
    odd = judge(odd_base, answer([1, 4])).divergence
    assert read_again(_again(4, ((4, -0.1), (2, -0.3))), odd, odd_base, 0.05).endswith(
        "its own logits hold 4 0.2 above 2; the baseline did not list its own token there: the shift is unknown"
    )
    unlisted = judge(_ranked(((2, -0.1), (3, -0.2))), answer([1, 4])).divergence
    assert read_again(_again(4, ((4, -0.1), (2, -0.3))), unlisted, _ranked(((2, -0.1), (3, -0.2))), 0.05).endswith(
        "the baseline did not list 4: a shift of at least 0.3 nats"
    )
    leaning = read_again(_again(4, ((2, -0.1), (4, -0.3))), parting, base, 0.05)
    assert "its own logits hold 4 0.2 below 2: no shift towards its token" in leaning
    assert read_again(_again(4, ()), parting, base, 0.05).endswith("it listed no logprobs at that token")

    def refuses(request):
        raise HTTPStatusError("HTTP 500 from http://s/generate: boom\nTraceback …", url="http://s/generate", status=500)

    said = second_opinion(refuses, case(), parting, base, 5, 0.05)
    assert said == "asked again with logprobs, no reading (HTTPStatusError: HTTP 500 from http://s/generate: boom)"

    def garbles(request):
        return _again(4, ((4, -0.1),))._replace_me  # an AttributeError: no bug of the probe fails the check

    assert second_opinion(garbles, case(), parting, base, 5, 0.05).startswith("asked again with logprobs, no reading (AttributeError")


def test_the_standing_is_measured_from_the_token_the_baseline_emitted_and_says_so_where_odd():
    from specgate.equivalence.partings import context_key, name, standing

    # a reference that emitted its second choice (hand-edited, or a zero tie margin): no "top choice"
    odd = judge(_ranked(((5, -0.1), (2, -0.5), (3, -0.9))), answer([1, 5]))
    assert "speculative token 5 is the baseline's top choice; the baseline itself emitted a token it did not rank first (its choice 2)" in odd.message
    assert standing(_ranked(((2, -0.5),)), 1, 9, 2).words(9, None) == "speculative token 9 is not among the baseline's top 1"
    assert name(7, "x" * 100) == f"7 {'x' * 40!r}…"
    assert context_key("ab1", []) != context_key("ab", [1])


def test_a_server_listing_more_than_asked_or_an_infinite_logprob_cannot_swell_or_sink_the_report():
    import pytest

    from specgate.client import _parse_top_logprobs
    from specgate.errors import MalformedAnswer

    flood = [[[-0.1 - k / 1e5, k, f"t{k}"] for k in range(20000)]]
    tops, texts = _parse_top_logprobs("u", flood, 5)
    assert [t for t, _ in tops[0]] == [0, 1, 2, 3, 4] and len(texts) == 5
    with pytest.raises(MalformedAnswer, match="output_top_logprobs"):
        _parse_top_logprobs("u", [[[float("-inf"), 3, "x"], [-0.1, 4, "y"]]], 5)


def test_a_servers_token_text_cannot_break_report_md():
    from specgate.report.markdown import _code

    assert _code("a `b` c") == "``a `b` c``"
    assert _code("`x") == "`` `x ``"
    assert _code("| **bold** <b>") == "`| **bold** <b>`"


# --- naming a stop run-on only where the answers fit the shape fully (issue 32, item 5) ------
# The H200 case, SGLang 0.5.14, STANDALONE, `code/code-00`, stop ['\n\n', '.'] in that order,
# max_new_tokens 52: the plain server stopped on '.' (token 30) after 26 tokens; one verify step
# of the speculative server accepted '.' and '\n\n' (token 1004), and it finished on '\n\n',
# listed first, with the '.' left in the text. The report called it past-stop ("a regression of
# PR #23802's fix, or another defect") and the config's stop-list-order declaration unused.
MEMO = "Here is a Python function that returns the n-th Fibonacci number using memoization"
MEMO_IDS = (*range(200, 225), 30)  # 26 tokens, the last '.'


def _stopped(ids, text, matched, n=52):
    return GenerateResult(
        request=GenerateRequest(max_new_tokens=n, text="Write a Python function ..."),
        text=text,
        output_ids=tuple(ids),
        prompt_tokens=30,
        completion_tokens=len(ids),
        finish_reason=FinishReason("stop", matched) if matched is not None else FinishReason("length"),
        e2e_s=0.0,
        server_e2e_s=None,
    )


CODE_00 = GenerationCase("code/code-00", "Write a Python function ...", 52, ("\n\n", "."), 1)
PLAIN = _stopped(MEMO_IDS, MEMO, ".")
STANDALONE = _stopped((*MEMO_IDS, 1004), MEMO + ".", "\n\n")


def _judged(spec, per_step, tolerate=("stop-list-order",), c=CODE_00, base=PLAIN):
    return compare(c, base, spec, TIE, "http://b", "http://s", tolerate, max_tokens_per_step=per_step)


def test_the_h200_standalone_answer_ending_on_the_stop_listed_first_is_stop_list_order():
    from specgate.equivalence.known import STOP_LIST_ORDER, known_defects_for

    # The step size where the config's args give it (3 steps: 4 tokens) and where they do not
    # (SGLang chooses): "." and "\n\n" are one token each, the last two; any verify step holds two.
    for per_step in (4, None):
        excused = _judged(STANDALONE, per_step)
        assert excused.kind == "tolerated" and excused.ok and excused.shape == STOP_LIST_ORDER, excused.message
        assert excused.tokens_compared == 26
        undeclared = _judged(STANDALONE, per_step, tolerate=())
        assert undeclared.kind == "invariant" and undeclared.shape == STOP_LIST_ORDER
        assert 'tolerate = ["stop-list-order"]' in undeclared.message and "#23802" not in undeclared.message
    (defect,) = known_defects_for(STOP_LIST_ORDER)
    assert "_check_str_based_finish" in defect.reference
    # The stats count it under its own shape, so the declaration is not reported as matching nothing.
    stats = EquivalenceStats()
    stats.add(_judged(STANDALONE, None), CODE_00.label)
    assert stats.shapes == {STOP_LIST_ORDER: 1} and not stats.failures and stats.tolerated


def test_a_run_on_the_answers_cannot_place_or_tell_apart_is_unclassified_and_names_no_pr():
    from specgate.equivalence.known import UNCLASSIFIED, known_defects_for

    def unclassified(outcome):
        assert not outcome.ok and outcome.kind == "invariant" and outcome.shape == UNCLASSIFIED, outcome.message
        assert "\nunclassified: " in outcome.message and "PR #" not in outcome.message
        return outcome

    assert known_defects_for(UNCLASSIFIED) == []
    # Three tokens past the '.' to '\n\n': list order in a step of four tokens, or a '.' missed
    # earlier; with the step size unknown the answers cannot tell which.
    three = _stopped((*MEMO_IDS, 11, 12, 1004), MEMO + ". x y", "\n\n")
    assert "stop-list-order if one verify step held them" in unclassified(_judged(three, None)).message
    assert _judged(three, 4).shape == "stop-list-order"  # the step size says
    # The same three tokens where a step holds at most two: the '.' stayed in the checked tail.
    assert unclassified(_judged(three, 2)).shape == UNCLASSIFIED
    # Ended on max_new_tokens three tokens past the stop, the step size unknown: past-stop-at-length
    # or past-stop. With one token past it, any step holds both: past-stop-at-length.
    short = replace(CODE_00, max_new_tokens=29, stop=(".",))
    to_limit = _stopped((*MEMO_IDS, 11, 12, 13), MEMO + ". x y", None, n=29)
    unclassified(_judged(to_limit, None, tolerate=("past-stop-at-length",), c=short))
    assert _judged(to_limit, 4, tolerate=("past-stop-at-length",), c=short).kind == "tolerated"
    one_past = _stopped((*MEMO_IDS, 11), MEMO + ". x", None, n=27)
    assert _judged(one_past, None, (), c=replace(short, max_new_tokens=27)).shape == "past-stop-at-length"
    # Other tokens before the baseline's stop: where the run-on began cannot be placed.
    parted = _stopped((*MEMO_IDS[:10], 999, *MEMO_IDS[11:], 1004), MEMO + ".", "\n\n")
    unclassified(_judged(parted, 4))
    # A baseline that did not end on a stop string: nothing to place the run-on against.
    unclassified(_judged(STANDALONE, 4, base=_stopped(MEMO_IDS, MEMO + " and", None)))
    # The stop at the first token (SGLang checks the prefill's token alone): no known miss.
    first = _stopped((30,), "", ".")
    unclassified(_judged(_stopped((30, 1, 2, 3), ". a b", None), 4, base=first, c=replace(short, max_new_tokens=4)))
    # More wrong than the stop: max_new_tokens broken too.
    unclassified(_judged(replace(STANDALONE, completion_tokens=53, output_ids=(*STANDALONE.output_ids,) * 2), 4))
    # Named past-stop (PR #23802's shape) only where the stop could leave the checked tail: two
    # tokens or more after it, in steps of three tokens or more (or of unknown size, where no
    # more specific shape could fit).
    ran_on = _stopped((*MEMO_IDS, 11, 12), MEMO + ". x y", None)
    assert _judged(ran_on, 3).shape == "past-stop" and _judged(ran_on, None).shape == "past-stop"
    unclassified(_judged(_stopped((*MEMO_IDS, 11), MEMO + ". x", None), 4))
