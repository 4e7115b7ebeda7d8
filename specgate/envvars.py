"""The environment variables specgate reads to change what a run does, and a warning for a name
that is one of them misspelt: `SPECGATE_SIM_FAULT=...` (singular) was read by nothing, so a
newcomer proving that a gate can fail saw it pass and concluded the gate could not fail.

Variables of the user's own naming (a `launch.api_key_env` such as SPECGATE_API_KEY) are theirs:
only names close to these are warned of, never every SPECGATE_ name.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

SIM_FAULTS = "SPECGATE_SIM_FAULTS"  # the simulator's injected faults (specgate/sim/faults.py)

READ = (
    SIM_FAULTS,
    "SPECGATE_SIM_SEED",
    "SPECGATE_COMMIT",
    "SPECGATE_COMMIT_TIME",
    "SPECGATE_BRANCH",
    "SPECGATE_ALLOW_DIRTY",
    "SPECGATE_DEPLOYMENT",
    "SPECGATE_STATE_DIR",
    "SPECGATE_MACHINE_STATE_DIR",
    "SPECGATE_NO_SSHD",
    "SPECGATE_CPUS",
)


def misspelt(environ: Mapping[str, str]) -> list[str]:
    """A warning per set variable that is not one specgate reads but close to one."""
    out = []
    for name in sorted(environ):
        # Any case, and the words run together or split (specgate_sim_faults, SPEC_GATE_SIM_FAULTS).
        folded = name.upper().replace("SPEC_GATE", "SPECGATE")
        if not folded.startswith("SPECGATE") or name in READ:
            continue
        close = difflib.get_close_matches(folded, READ, n=1, cutoff=0.85)
        if close:
            out.append(f"{name} is set but specgate reads no such variable: did you mean {close[0]}?")
    return out


def injected_faults(environ: Mapping[str, str]) -> str | None:
    """The simulator faults this run injects, as given (None: none)."""
    value = environ.get(SIM_FAULTS, "").strip()
    return value or None
