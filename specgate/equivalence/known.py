"""What equivalence failures are already known: declared differences and upstream defects.

A deployment may declare a difference known for one config (`tolerate`, one of
specgate.deployment.TOLERABLE, each the name of a shape below): it is counted
and listed, never failed, and a declaration that matched nothing in a run is itself
reported (the defect it covered may be fixed). Independently, every failure whose shape
matches a known SGLang defect is named next to it, with the issue or PR and the release
that fixed it, read against the version the server reports: on an older release it is
that defect; on a release with the fix it is a regression or another defect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Failure shapes the equivalence check names (specgate.equivalence.check.Outcome.shape).
# The speculative text runs on past a stop string: the answer has the baseline's tokens through
# the stop that ended the baseline (not its first token, which SGLang checks alone), then at least
# two more, in a verify step that can hold the stop's token and two after it. Only so can the stop
# fall out of the tail (stop_str_max_len + 1 tokens, at least 2) that the finish check decodes.
PAST_STOP = "past-stop"
# ... and the answer ended on max_new_tokens: the stop string (or a stop token such as EOS) was
# accepted in the verify step that reached the limit (the plain server, one token per step,
# stopped on it first).
PAST_STOP_AT_LENGTH = "past-stop-at-length"
STOP_OVERSHOOT = "stop-overshoot"  # text cut at the stop, token ids past it
# ... and the answer ended on another of the request's stop strings, one listed before the stop
# that ended the baseline: the verify step that completed the baseline's stop also completed the
# other, and the server took the stop strings in list order, not in the order they occur.
STOP_LIST_ORDER = "stop-list-order"
# A failure the check will not name: the answers break an invariant near a stop, but what they show
# does not fit one known shape fully, or fits more than one and cannot tell which (the verify step's
# size unknown, say). It matches no known defect and no declaration: a wrong name on a real
# upstream defect (a PR it is not) is worse than none. The message says why ("unclassified: ...").
UNCLASSIFIED = "unclassified"


@dataclass(frozen=True)
class KnownDefect:
    reference: str  # "SGLang PR #23802"
    url: str
    title: str
    shapes: tuple[str, ...]
    fixed_in: str | None  # the first release with the fix; None: no fixed release known

    def explain(self, server_version: str | None) -> str:
        """What answers of this shape are, worded to follow a plural subject ("its answers ...")."""
        head = f"match {self.reference} ({self.title}; {self.url})"
        if "specgate-sim" in (server_version or ""):
            return f"have the shape of {self.reference} ({self.title}): the SIMULATOR's fault imitates it"
        if self.fixed_in is None:
            return f"{head}: no release is known to fix it"
        running = _release(server_version)
        if running is None:
            return f"{head}, fixed in SGLang {self.fixed_in} (this server's version is unknown)"
        if running < _release(self.fixed_in):  # type: ignore[operator]
            return f"{head}, fixed in SGLang {self.fixed_in}: this server runs {server_version}, without the fix"
        return (
            f"look like {self.reference} ({self.title}), but this server runs {server_version}, which has its fix "
            f"(SGLang {self.fixed_in}): a regression of that fix, or another defect"
        )


KNOWN_DEFECTS = (
    # One verify step can accept many tokens, but the stop-string check decoded only the last
    # stop_str_max_len + 1 of them: a stop string early in an accepted batch was missed. Evidence:
    # 0.5.11 (STANDALONE ran past "\n\n" in 17 answers of 89, results/2026-11-29-h200-smollm2).
    KnownDefect(
        "SGLang PR #23802",
        "https://github.com/sgl-project/sglang/pull/23802",
        "stop-string check misses early matches during speculative decoding",
        (PAST_STOP, STOP_OVERSHOOT),
        "0.5.14",
    ),
    # SGLang's Req.update_finish_state returns FINISH_LENGTH as soon as output_ids reach
    # max_new_tokens, before it looks for stop tokens or stop strings among the tokens accepted in
    # that step. Plain decoding adds one token per step, so a stop string is always seen first;
    # a verify step that accepts the stop string *and* reaches the limit finishes on length with
    # the stop string and what follows it in the text. Evidence: 0.5.14 with a
    # trained drafter (results/2026-11-30-h200-drafter-retry: '.' in the last accepted tokens of
    # a 32-token answer, all three EAGLE-3 configs), and for the EOS token too
    # (results/2026-12-01-h200-drafter-heldout: "<|im_end|>" then "\n" up to max_new_tokens 12 and
    # 13, all three configs). Reported upstream as issue #31599; fixed by PR #33758, which runs the
    # stop checks first and caps their cut at the limit: read from the released wheels,
    # schedule_batch.py of 0.5.14 to 0.5.17 checks length first, 0.5.18 has the fix.
    KnownDefect(
        "SGLang PR #33758",
        "https://github.com/sgl-project/sglang/pull/33758",
        "stop/EOS inside a spec accept run beats the max_new_tokens finish (issue #31599): before it, a stop "
        "string or stop token accepted in the step that reaches the limit is missed",
        (PAST_STOP_AT_LENGTH,),
        "0.5.18",
    ),
    # Req._check_str_based_finish tries the request's stop strings in the order they are listed and
    # ends the answer on the first one found in the step's tail. Plain decoding adds one token per
    # step, so the first stop completed ends the answer (a single token completing two ends on the
    # one listed first there too, the baseline with it); a verify step that completes two in
    # different tokens (stop ['.', '\n\n'], accepted '\n\n', '1', '.') ends on the one listed
    # first, with the earlier one left in the text. Evidence: 0.5.14 with a trained
    # drafter (results/2026-12-02-h200-round3: long_context-01, eagle3-decode and eagle3-tree, two
    # boots); read from the released wheels, every release from 0.5.14 to 0.5.23 loops in list
    # order, and their own finish check ends such a step on the stop listed first when driven on
    # CPU (results/2026-12-02-h200-round3/sglang-finish-check-on-cpu). vLLM had the same defect and fixed it (PR #49391, "select earliest-completing stop
    # string"); no SGLang report is known.
    KnownDefect(
        "SGLang Req._check_str_based_finish (schedule_batch.py)",
        "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/managers/schedule_batch.py",
        "stop strings are tried in the order the request lists them, not the order they occur, so a verify step "
        "that completes two ends on the one listed first (vLLM fixed the same in PR #49391)",
        (STOP_LIST_ORDER,),
        None,
    ),
)


def _release(version: str | None) -> tuple[int, ...] | None:
    found = re.match(r"(\d+(?:\.\d+)*)", version or "")
    return tuple(int(x) for x in found.group(1).split(".")) if found else None


def known_defects_for(shape: str | None) -> list[KnownDefect]:
    return [d for d in KNOWN_DEFECTS if shape in d.shapes]
