"""The deployment's `[sampling]` section: which sampling settings the distributional equivalence
test compares a speculative config with its reference under, and how many samples it draws.

Speculative sampling is exact in theory (rejection sampling of the drafts), so at every setting
the speculative server's samples must follow the reference's distribution. Greedy equivalence
cannot see a verify that takes the argmax at temperature > 0 or drops a filter on accepted
drafts; this test can (specgate.sampling).

```toml
[sampling]
enabled = true            # false: the test is NOT CHECKED (and says so)
prompts = 8               # prompts per setting (the workload's, one of each set in turn)
samples = 64              # continuations per prompt per side
max_new_tokens = 32       # each continuation's length (run past the end of sequence)
alpha = 0.05              # stage 1's false-alarm rate, over every setting and statistic
confirm_alpha = 0.2       # the confirmation's, per setting stage 1 rejected (0: no confirmation)
boundary_margin = 0.1     # nats: a token is outside a setting only this far past its boundary
seed_param = "sampling_seed"   # SGLang's per-request seed; "" where a release has none
top_logprobs = 20         # top logprobs per scored position (at least each top_k + 5)
skip = ["top_k20"]        # settings turned off by name

[[sampling.settings]]     # replaces the default set (temperature 0.7 and 1.0, top_p 0.9,
name = "t0.8-p0.95"       # top_k 20, min_p 0.1)
temperature = 0.8
top_p = 0.95
```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from specgate.errors import DeploymentError, DeploymentErrors
from specgate.tomlcheck import Table

R = TypeVar("R")


@dataclass(frozen=True)
class SamplingSetting:
    name: str
    temperature: float
    top_p: float = 1.0
    top_k: int = -1  # -1: off
    min_p: float = 0.0
    # Penalties and bias: state that advances per token, where a verify that advances it per step
    # or per accepted chunk samples from another distribution (SGLang's penalizers' names).
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()

    @property
    def filters(self) -> tuple[str, ...]:
        """The filters this setting turns on, in SGLang's order."""
        return tuple(
            name
            for name, on in (("top_k", self.top_k > 0), ("top_p", self.top_p < 1.0), ("min_p", self.min_p > 0.0))
            if on
        )

    def describe(self) -> str:
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k > 0:
            parts.append(f"top_k {self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top_p {self.top_p:g}")
        if self.min_p > 0.0:
            parts.append(f"min_p {self.min_p:g}")
        if self.frequency_penalty:
            parts.append(f"frequency_penalty {self.frequency_penalty:g}")
        if self.presence_penalty:
            parts.append(f"presence_penalty {self.presence_penalty:g}")
        if self.repetition_penalty != 1.0:
            parts.append(f"repetition_penalty {self.repetition_penalty:g}")
        if self.logit_bias:
            parts.append(f"logit_bias on {len(self.logit_bias)} token(s)")
        return ", ".join(parts)

    def sampling_params(self) -> dict[str, Any]:
        """SGLang's sampling_params for it (off filters at SGLang's defaults; penalties and bias only
        where set, so a release without a penalizer is asked nothing it does not know)."""
        out: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p}
        if self.frequency_penalty:
            out["frequency_penalty"] = self.frequency_penalty
        if self.presence_penalty:
            out["presence_penalty"] = self.presence_penalty
        if self.repetition_penalty != 1.0:
            out["repetition_penalty"] = self.repetition_penalty
        if self.logit_bias:
            out["logit_bias"] = {str(t): b for t, b in self.logit_bias}
        return out


DEFAULT_SETTINGS = (
    SamplingSetting("t0.7", 0.7),
    # Temperature 1 with the three penalties: state a verify must advance per token.
    SamplingSetting("t1.0-penalties", 1.0, frequency_penalty=0.4, presence_penalty=0.2, repetition_penalty=1.1),
    SamplingSetting("top_p0.9", 1.0, top_p=0.9),
    SamplingSetting("top_k20", 1.0, top_k=20),
    SamplingSetting("min_p0.1", 1.0, min_p=0.1),
)


@dataclass(frozen=True)
class SamplingSpec:
    enabled: bool = True
    settings: tuple[SamplingSetting, ...] = DEFAULT_SETTINGS
    prompts: int = 8
    samples: int = 64
    max_new_tokens: int = 32
    alpha: float = 0.05
    # A setting stage 1 rejects on its statistics is redrawn under fresh seeds, both sides, and
    # fails only if that draw rejects too at this level: a healthy build then fails at most
    # alpha x confirm_alpha of runs (1%), while a real shift, seen twice, costs little power.
    confirm_alpha: float = 0.2
    boundary_margin: float = 0.1
    seed_param: str = "sampling_seed"
    top_logprobs_floor: int = 20

    @property
    def active(self) -> bool:
        return self.enabled and bool(self.settings)

    @property
    def false_alarm_rate(self) -> float:
        """The bound on how often a healthy config fails the whole test (independent stages)."""
        return self.alpha * self.confirm_alpha if self.confirm_alpha > 0 else self.alpha

    @property
    def top_logprobs(self) -> int:
        """How many top logprobs a scored position needs: enough to see past every top_k."""
        return max([self.top_logprobs_floor, *(s.top_k + 5 for s in self.settings if s.top_k > 0)])


def parse_sampling(t: Table) -> SamplingSpec:
    """Every problem of the table is collected and reported at once (DeploymentErrors), each
    naming its field and what was expected: a fix never only uncovers the next one."""
    errors: list[DeploymentError] = []

    def read(parse: Callable[[], R], fallback: R) -> R:
        try:
            return parse()
        except DeploymentErrors as exc:
            errors.extend(exc.errors)
        except DeploymentError as exc:
            errors.append(exc)
        return fallback

    enabled = read(lambda: t.flag("enabled", True), True)
    no_tables: list[Table] = []
    tables = read(lambda: t.table_list("settings"), no_tables)
    if "settings" in t.keys() and not tables and not errors:
        # `settings = []` reads as "none", yet an empty list fell back to the defaults.
        errors.append(t.error("settings", "is empty: list the settings, leave it out for the defaults, or set enabled = false"))
    parsed: list[SamplingSetting | None] = []
    for i, table in enumerate(tables):
        parsed.append(read(partial(_parse_setting, table, i), None))
    settings = [s for s in parsed if s is not None] or ([] if tables else list(DEFAULT_SETTINGS))
    names = [s.name for s in settings]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        errors.append(t.error("settings", f"setting names must differ; {', '.join(dupes)} appears more than once"))
    no_skip: list[str] = []
    skip = read(lambda: t.str_list("skip", []), no_skip)
    unknown = [n for n in skip if n not in names]
    every_setting_read = all(s is not None for s in parsed)  # else a broken setting's name may be the one skipped
    if unknown and every_setting_read:
        errors.append(t.error("skip", f"names no setting: {', '.join(unknown)}; the settings are {', '.join(names)}"))
    spec = SamplingSpec(
        enabled=enabled,
        settings=tuple(s for s in settings if s.name not in skip),
        prompts=read(lambda: t.integer("prompts", 8, minimum=1, maximum=256), 8),
        # Two samples per side are the least a rank test can order; fewer than ~20 detect little.
        samples=read(lambda: t.integer("samples", 64, minimum=2, maximum=4096), 64),
        max_new_tokens=read(lambda: t.integer("max_new_tokens", 32, minimum=1, maximum=1024), 32),
        alpha=read(lambda: t.number("alpha", 0.05, minimum=1e-6, maximum=0.5), 0.05),
        confirm_alpha=read(lambda: t.number("confirm_alpha", 0.2, minimum=0.0, maximum=0.5), 0.2),
        boundary_margin=read(lambda: t.number("boundary_margin", 0.1, minimum=0.0, maximum=5.0), 0.1),
        seed_param=read(lambda: _seed_param(t), "sampling_seed"),
        # The top logprobs asked per scored position (at least top_k + 5 of every setting): the
        # more, the tighter the top_p nucleus bound; 20 is plenty for a real vocabulary's tail.
        top_logprobs_floor=read(lambda: t.integer("top_logprobs", 20, minimum=2, maximum=1000), 20),
    )
    errors.extend(t.unknown_problems())
    if errors:
        raise DeploymentErrors(errors)
    return spec


# The sampling_params keys the check sends itself: a seed under one of those names overwrote it
# (seed_param = "temperature" sent a temperature of ~1e18, and every setting passed, uniform).
_SENT_PARAMS = (
    "temperature", "top_p", "top_k", "min_p", "max_new_tokens", "ignore_eos", "n", "stop",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias",
)  # fmt: skip


def _seed_param(t: Table) -> str:
    name = t.text("seed_param", "sampling_seed")
    if name in _SENT_PARAMS:
        raise t.error("seed_param", f"{name!r} is a sampling parameter the check sends itself; name the seed's own "
                      "parameter (SGLang's is sampling_seed), or \"\" where the release has none")
    return name


def _parse_setting(t: Table, index: int) -> SamplingSetting:
    """One [[sampling.settings]] entry, every broken field of it listed (DeploymentErrors)."""
    errors: list[DeploymentError] = []

    def read(parse: Callable[[], R], fallback: R) -> R:
        try:
            return parse()
        except DeploymentError as exc:
            errors.append(exc)
        return fallback

    temperature = read(lambda: t.number("temperature", minimum=1e-3, maximum=10.0), 1.0)
    top_p = read(lambda: t.number("top_p", 1.0, minimum=1e-3, maximum=1.0), 1.0)
    top_k = read(lambda: t.integer("top_k", -1, minimum=-1, maximum=100_000), -1)
    min_p = read(lambda: t.number("min_p", 0.0, minimum=0.0, maximum=0.999), 0.0)
    frequency = read(lambda: t.number("frequency_penalty", 0.0, minimum=-2.0, maximum=2.0), 0.0)
    presence = read(lambda: t.number("presence_penalty", 0.0, minimum=-2.0, maximum=2.0), 0.0)
    repetition = read(lambda: t.number("repetition_penalty", 1.0, minimum=0.01, maximum=10.0), 1.0)
    no_bias: tuple[tuple[int, float], ...] = ()
    bias = read(lambda: _logit_bias(t), no_bias)
    if top_k == 0:
        errors.append(t.error("top_k", "expected -1 (off) or an integer >= 1, got 0"))
    name = read(lambda: t.name("name", f"setting{index}"), f"setting{index}")
    errors.extend(t.unknown_problems())
    if errors:
        raise DeploymentErrors(errors)
    return SamplingSetting(name, temperature, top_p, top_k, min_p, frequency, presence, repetition, bias)


def _logit_bias(t: Table) -> tuple[tuple[int, float], ...]:
    """`logit_bias = {"42" = -5.0}`: token ids (as text, as SGLang takes them) to a bias in logits."""
    table = t.table("logit_bias")
    out = []
    # names(): its keys are the user's (token ids), so the generated schema takes any key rather
    # than only the ids some shipped deployment happened to use.
    for key in table.names():
        if not key.isdigit():
            raise table.error(key, "expected a token id (digits) as the key")
        out.append((int(key), table.number(key, minimum=-100.0, maximum=100.0)))
    return tuple(sorted(out))
