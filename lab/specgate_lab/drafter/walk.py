"""τ as a server counts it, from where a drafter's drafts are right: walked, not averaged.

Training's `expected_accept_length` is 1 + a₁ + a₁a₂ from per-step accuracies averaged over every
answer position: each position weighs the same. A server does not visit positions evenly. A cycle
that accepts two drafts steps over three tokens, one that accepts none over one, so where drafts
fail the server runs more cycles per token, and τ (tokens over verify cycles) is weighted towards
the hard stretches. With half an answer at 3 tokens a cycle and half at 1, the position average says
2.0 and the server measures 1.5. Walking each answer as the server does, from the per-position
correctness training already computes, gives the figure the gate reads (on answers alone: a request
that stops at its answer's end, `workload.ignore_eos = false`); the average stays beside it.

Chains only (topk 1): a tree's τ depends on which of its branches the drafter ranks where, which
step accuracies do not hold. Runs on CPU (plain lists); train.py hands it the flags.
"""

from __future__ import annotations

from collections.abc import Sequence

Flags = Sequence[Sequence[bool]]  # per answer position, in order: whether draft step k (0-based) is right


def sample_flags(correct: Sequence[Flags], answer: Sequence[bool], row: int) -> list[tuple[bool, ...]]:
    """One batch row's flags per answer token, in order: for answer token i, whether each draft
    step of the chain that first drafts token i is right (`correct[k][row][j]`: step k of the
    chain at position j).

    train.py feeds SpecForge the target's features at j with the token at j+1 and teaches it
    the target's choice at j+2 (inputs and teacher shifted by one, the loss mask not): the chain
    at j drafts tokens j+2, j+3, ... So the cycle that first drafts the answer token at position
    P runs the chain at P-2 (for the second answer token, the prompt's last position: SpecForge
    computes it, only its loss is masked). `answer[j]` marks the answer's positions (the loss
    mask, unshifted). Token 0 comes from prefill, never drafted: its flags are all False. Drafts
    past the answer's last token are never counted: the walk stops there."""
    steps = len(correct)
    positions = [j for j, kept in enumerate(answer) if kept]
    flags: list[tuple[bool, ...]] = []
    for i, position in enumerate(positions):
        chain = position - 2
        if i == 0 or chain < 0:
            flags.append((False,) * steps)
        else:
            flags.append(tuple(bool(correct[k][row][chain]) for k in range(steps)))
    return flags


def walk_counts(flags: Sequence[Sequence[bool]], steps: int = 2) -> tuple[int, int]:
    """(tokens, verify cycles) of one answer walked as a server walks it: the first token comes
    from prefill, not a cycle; a cycle at position i accepts the leading right drafts of the chain
    that starts there (at most `steps`, never past the answer's last token) and adds the target's
    own token; the next cycle starts after it. (0, 0) for an answer under two tokens: a server
    reports no verify step for it, and the gate leaves such requests out of τ."""
    n = len(flags)
    if n < 2:
        return 0, 0
    cycles, i = 0, 1
    while i < n:
        accepted = 0
        while accepted < min(steps, n - 1 - i) and accepted < len(flags[i]) and flags[i][accepted]:
            accepted += 1
        i += accepted + 1
        cycles += 1
    return n, cycles


def walked_accept_length(samples: Sequence[Sequence[Sequence[bool]]], steps: int = 2) -> float | None:
    """Tokens per verify cycle over `samples` (each: flags per answer position, in order), pooled as
    the gate pools (tokens summed over cycles summed). None where no answer has two tokens."""
    counts = [walk_counts(flags, steps) for flags in samples]
    cycles = sum(c for _, c in counts)
    return round(sum(t for t, _ in counts) / cycles, 3) if cycles else None
