"""Differences a deployment may declare known: counted and listed in the report, never failed.

Each is a precise shape of difference, checked as such; anything that does not fit the
shape stays a failure.
"""

TOLERABLE = {
    # Seen on the H200 with SGLang 0.5.11's STANDALONE speculation (results/2026-11-29-h200-smollm2):
    # the server generated on past the stop string that ended the baseline's answer; the text was cut
    # at the same place, but output_ids and completion_tokens held 1 to 17 extra tokens.
    "stop-overshoot": "the speculative answer has the baseline's text and tokens, then more token ids past the "
    "stop string that ended the baseline (its text cut at the same place)",
}
