"""Do a speculative server's counters agree with each other? The accept length's witnesses.

An accept length is completion_tokens / spec_verify_ct, both the server's. A server (or a proxy,
or a release that miscounts) reporting too few verify steps makes any drafter look good: one that
accepts nothing passed an accept floor of 1.8 on a faked count. SGLang gives more than the count,
and each bounds it per request:

1. **The step's size.** A verify step yields at most its draft steps and the verified token
   (`--speculative-num-steps` + 1), so completion_tokens <= verify_ct x (steps + 1) + 1 (the
   prefill's token).
2. **Accepted drafts** (`spec_accepted_drafts` and its other spellings). Every token is an accepted
   draft or a step's verified token (or the prefill's): completion_tokens <= verify_ct +
   accepted_drafts + 1. Tokens cut at a stop or at max_new_tokens only make it smaller, so this holds
   whichever way a release counts.
3. **`spec_accept_length`**, SGLang's own completion_tokens / spec_verify_ct: times the verify count,
   it must give back the completion tokens, within one verify step's tokens (a release that divides
   what it counted before cutting the output at a stop or at max_new_tokens).
4. **The accept histogram** (cycles by accepted drafts): its cycles are the verify steps, within one.

A request whose counters break one of these has no accept length anyone can trust: the accept
gates FAIL on it (verdicts.judge), naming the request and the counters; never PASS.
"""

from __future__ import annotations

from specgate.measure.speed import ConfigSpeed, SpeedSample


def sample_problem(sample: SpeedSample, max_tokens_per_step: int | None) -> str | None:
    """Why this request's counters contradict each other, or None."""
    verify, tokens = sample.verify_ct, sample.completion_tokens
    if not verify:
        return None
    claimed = f"completion_tokens {tokens} over spec_verify_ct {verify} ({tokens / verify:.3f} per step)"
    if verify > tokens:
        return f"{claimed}, but every verify step yields at least one token"
    if max_tokens_per_step is not None and tokens > verify * max_tokens_per_step + 1:
        return f"{claimed}, but a verify step yields at most {max_tokens_per_step} tokens (--speculative-num-steps + 1)"
    if sample.accepted_drafts is not None and tokens > verify + sample.accepted_drafts + 1:
        return (
            f"{claimed}, but the server accepted {sample.accepted_drafts} drafts in those steps: at most "
            f"{verify + sample.accepted_drafts + 1} tokens (steps + accepted drafts + the prefill's token)"
        )
    slack = (max_tokens_per_step or 1) + 1
    if sample.server_accept_length is not None and abs(sample.server_accept_length * verify - tokens) > slack:
        return f"{claimed}, but the server's own spec_accept_length is {sample.server_accept_length:.3f}"
    hist = sample.accept_histogram
    if hist is not None and abs(sum(hist) - verify) > 1:
        return f"{claimed}, but its accept histogram counts {sum(hist)} verify steps"
    return None


def contradiction(record: ConfigSpeed, max_tokens_per_step: int | None) -> str | None:
    """One sentence on the requests of `record` whose counters contradict each other, or None."""
    found = [(s, why) for s in record.samples if (why := sample_problem(s, max_tokens_per_step)) is not None]
    if not found:
        return None
    first, why = found[0]
    counted = sum(1 for s in record.samples if s.verify_ct)
    return (
        f"{record.config}'s speculative counters contradict each other in {len(found)} of its {counted} measured "
        f"requests (request {first.index}: {why}): its spec_verify_ct cannot be trusted, so neither can an accept "
        "length from it"
    )
