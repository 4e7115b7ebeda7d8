"""SIMULATOR speed noise at the H200's measured structure (fault `h200-noise[=SCALE]`).

The constants are measured: SGLang 0.5.14, Llama-3.1-8B shape with dummy weights, one H200,
deployment `llama8b-dummy-h200-steady` (plain B; eagle3-decode E with its accept length forced
to 2; eagle3-decode-drawn D with SGLang's own draws), per-request client samples over 8-10 boots
of each config on two machines (the steady runs the CHANGELOG lists), re-analysed in issue 46. Each is the SD of the log of a
figure. The components the simulator draws are derived from them below, each with its arithmetic:

- a **run-shared** offset of every speculative server's cost: E and D of one run slow down
  together (r = 0.81 over 8 runs); plain does not move with them;
- each speculative server's **own** offset, drawn per boot;
- plain's own between-boot offset;
- **AR(1) requests** within a boot (lag-1 0.32: regimes of several requests).

Accept length has no between-boot component: nothing here touches it.

Which draws are shared is keyed on the run: the local launcher marks every server it starts with
its session's `SPECGATE_RUN_ID` (server/orphans.py, the id that reaps a killed run's servers), the
same for every server of one session (a calibration round is a session of its own). With
`SPECGATE_SIM_SEED` every draw is a function of the seed and the server's name (the run offset of
the seed alone), so a run is reproduced exactly; another run needs another seed. Without a seed,
the run offset is a function of the run id, and the rest is drawn afresh per boot.

The simulator draws each server's requests independently; on the H200 the speculative servers of
one run also share part of their request noise round by round (r ~ 0.3, below). That makes an A/B
comparison in one run a little steadier than the simulator's: the simulator errs on the wide side.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

RUN_ID_ENV = "SPECGATE_RUN_ID"  # as server/orphans.py names it (not imported: it needs psutil)

# Measured on the H200 (the CHANGELOG's h200-noise entry names the runs), SD of log figure:
PLAIN_BOOT_SD = 0.0062  # plain decode tok/s, between boots
PLAIN_REQUEST_SD = 0.0075  # plain decode tok/s, between requests of one boot
SPEEDUP_BOOT_SD = 0.0272  # E's speedup over plain (same run), between boots
SPEEDUP_REQUEST_SD = 0.0394  # E's speedup over plain, per request within one boot
PAIR_BOOT_SD = 0.0153  # E / D cycle time (two speculative servers of one run), between boots
PAIR_REQUEST_SD = 0.0457  # E / D cycle time, per request within one boot
REQUEST_LAG1 = 0.32  # lag-1 autocorrelation of a server's requests within a boot

# Derived. E / D's between-boot spread holds the two servers' own offsets alone (the shared one
# cancels): own² + own² = PAIR_BOOT_SD².
SERVER_SD = PAIR_BOOT_SD / math.sqrt(2)  # ~1.08%
# E's speedup between boots holds the shared offset, E's own and plain's own: the rest is shared.
RUN_SD = math.sqrt(SPEEDUP_BOOT_SD**2 - SERVER_SD**2 - PLAIN_BOOT_SD**2)  # ~2.42%
# A speculative server's own request noise: the speedup's per request less plain's.
SPEC_REQUEST_SD = math.sqrt(SPEEDUP_REQUEST_SD**2 - PLAIN_REQUEST_SD**2)  # ~3.87%
# The part of two speculative servers' request noise they share round by round: E / D per request
# is 2·SPEC_REQUEST_SD²·(1 − share) (the issue measured r = 0.32 round by round; this is ~0.30).
ROUND_SHARE = 1 - PAIR_REQUEST_SD**2 / (2 * SPEC_REQUEST_SD**2)


@dataclass(frozen=True)
class BootOffsets:
    """One boot's log offsets: the run's shared one (0 for plain) and the server's own."""

    run: float
    own: float

    @property
    def factor(self) -> float:
        """How many times as long every step of this boot takes."""
        return math.exp(self.run + self.own)


def _rng(environ: Mapping[str, str], what: str, per_run: bool) -> random.Random:
    """The generator of one draw. `per_run`: the same for every server of one run (keyed on the
    seed, else the run id); otherwise the server's own (keyed on the seed and its name)."""
    seed = environ.get("SPECGATE_SIM_SEED")
    if per_run:
        run = environ.get(RUN_ID_ENV)
        if seed is not None:
            return random.Random(f"{seed}:run:{what}")
        return random.Random(f"run:{run}:{what}") if run else random.Random()
    if seed is not None:
        return random.Random(f"{seed}:{environ.get('SPECGATE_CONFIG', '')}:{what}")
    return random.Random()


def boot_offsets(environ: Mapping[str, str], speculative: bool, scale: float = 1.0) -> BootOffsets:
    """This boot's draws: a speculative server gets the run's shared offset and its own; plain
    its own between-boot offset alone."""
    if not speculative:
        return BootOffsets(0.0, _rng(environ, "plain", False).gauss(0.0, PLAIN_BOOT_SD * scale))
    return BootOffsets(
        _rng(environ, "shared", True).gauss(0.0, RUN_SD * scale),
        _rng(environ, "server", False).gauss(0.0, SERVER_SD * scale),
    )


class RequestNoise:
    """AR(1) log offsets, one per request of a boot: x_k = ρ·x_(k−1) + e_k, with the innovation's
    SD chosen so the marginal SD is `sd`."""

    def __init__(self, rng: random.Random, sd: float, rho: float = REQUEST_LAG1) -> None:
        if not -1 < rho < 1:
            raise ValueError(f"AR(1) lag-1 autocorrelation {rho}: expected between -1 and 1")
        self.rng = rng
        self.rho = rho
        self.innovation_sd = sd * math.sqrt(1 - rho * rho)
        self.value = rng.gauss(0.0, sd)  # the first request starts in the stationary distribution
        self.started = False

    def next(self) -> float:
        """The next request's log offset."""
        if self.started:
            self.value = self.rho * self.value + self.rng.gauss(0.0, self.innovation_sd)
        self.started = True
        return self.value


def request_noise(environ: Mapping[str, str], speculative: bool, scale: float = 1.0) -> RequestNoise:
    """This boot's per-request process: a speculative server's own request SD, or plain's."""
    sd = (SPEC_REQUEST_SD if speculative else PLAIN_REQUEST_SD) * scale
    return RequestNoise(_rng(environ, "requests", False), sd)
