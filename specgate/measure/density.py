"""Characters per token of the tokenizer under test, measured once per run, at which the context
buckets' long prompts are built (measure.context), so that a "32K" bucket sends near 32K tokens on
that server's tokenizer, whatever its vocabulary (code-heavy, CJK, 160K entries).

The reference config's server counts the prompt tokens of one fixed calibration prompt (built from
the buckets' own corpus, so the same kind of text), and every config of the run gets prompts built
at that ratio: all configs are sent identical requests. The ratio is rounded to ROUND_TO, so that
one tokenizer gives the same prompts run after run and they pair with stored baselines (prompt i of
bucket B stays a pure function of (B, i, the corpus, the ratio)); a changed tokenizer that moves the
ratio gives other prompts, another workload digest, and stored figures of the old ones are not
paired with the new.

A ratio outside PLAUSIBLE is taken for a server that miscounts (or a calibration prompt that did
not reach the tokenizer as text): the buckets then fall back to context_fit.CHARS_PER_TOKEN, and
the report says so. `check` cannot ask a server: it bounds the buckets at
context_fit.CHARS_PER_TOKEN_BOUND.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from specgate.client import GenerateRequest
from specgate.context_fit import CALIBRATION_CHARS, CHARS_PER_TOKEN
from specgate.deployment import Workload
from specgate.server.pool import LiveServer

ROUND_TO = 0.05
PLAUSIBLE = (1.5, 12.0)  # characters per token; outside it the measurement is not believed


@dataclass(frozen=True)
class Density:
    """What the buckets' prompts were built at, and the measurement behind it."""

    chars_per_token: float  # the ratio the prompts were built at
    measured: float | None = None  # characters over the prompt tokens the server counted (None: not measured)
    config: str | None = None  # whose server counted them
    chars: int = 0  # the calibration prompt's characters
    prompt_tokens: int | None = None  # what the server counted for it
    fallback: str | None = None  # why chars_per_token is not the measured ratio

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # every field, as report.json's context_prompts holds them


def rounded(ratio: float) -> float:
    """`ratio` to the nearest ROUND_TO (two decimals: no binary residue in the prompt's budget)."""
    return round(round(ratio / ROUND_TO) * ROUND_TO, 2)


def density_of(chars: int, prompt_tokens: int | None, config: str) -> Density:
    """The ratio the buckets are built at, from `prompt_tokens` counted by `config`'s server for
    a calibration prompt of `chars` characters: rounded, or CHARS_PER_TOKEN where it is absurd."""
    if not prompt_tokens or prompt_tokens <= 0:
        return Density(CHARS_PER_TOKEN, None, config, chars, prompt_tokens,
                       f"{config}'s server counted no prompt tokens for the calibration prompt: "
                       f"built at {CHARS_PER_TOKEN:g} characters per token")  # fmt: skip
    measured = round(chars / prompt_tokens, 4)
    low, high = PLAUSIBLE
    if not low <= measured <= high:
        return Density(CHARS_PER_TOKEN, measured, config, chars, prompt_tokens,
                       f"{config}'s server counted {prompt_tokens:,} tokens for {chars:,} characters "
                       f"({measured:g} per token, outside {low:g}–{high:g}): not believed, built at "
                       f"{CHARS_PER_TOKEN:g}")  # fmt: skip
    return Density(rounded(measured), measured, config, chars, prompt_tokens)


def calibration_request(workload: Workload) -> GenerateRequest:
    """The calibration prompt: a sample of the buckets' corpus (measure.context), rendered with the
    deployment's prompt format, context_fit.CALIBRATION_CHARS long (whatever buckets the run
    lists); one token asked for."""
    from specgate.measure.context import calibration_text

    return GenerateRequest(max_new_tokens=1, text=calibration_text(workload, CALIBRATION_CHARS))


class DensityProbe:
    """One run's Density, measured on the reference's server: where its server is up anyway (a
    meter offers it every server it warms up) or, failing that, on the server `acquire` gives for it
    before a bucket is first measured (where servers take turns, that boots it: before another's
    server is acquired, never while one is in use)."""

    def __init__(self, workload: Workload, reference: str, acquire: Callable[[str], LiveServer]) -> None:
        self.workload = workload
        self.reference = reference
        self._acquire = acquire
        self.found: Density | None = None

    def offer(self, server: LiveServer) -> None:
        """Measure on `server` if it is the reference's first boot and nothing is measured yet."""
        if self.found is None and server.config == self.reference and server.boot == 1:
            request = calibration_request(self.workload)
            assert request.text is not None
            self.found = density_of(len(request.text), server.generate(request).prompt_tokens, server.name)

    def resolve(self) -> Density:
        if self.found is None:
            self.offer(self._acquire(self.reference))
        assert self.found is not None, f"{self.reference}'s server gave no calibration"
        return self.found
