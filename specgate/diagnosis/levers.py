"""Levers: changes that would make a slow speculative config faster, each with its evidence.

A finder looks at one config (its effective settings, cycle model, log, histogram, draft
config) and at its siblings (other speculative configs measured in the same run) and
returns the levers it can support. A lever is only named with evidence, and its strength
says what kind:

    MEASURED  a sibling that differs in this setting alone was measured faster, here;
    OBSERVED  the server's own counters or log show the cause (accept histogram, τ,
              decode batches without CUDA graphs);
    SETTING   a setting known to cost this, next to a cycle cost that fits it.

A sibling measured *not* faster contradicts a lever, and the lever is dropped.
Ranking: strength, then the measured gain, then the order of FINDERS (the most common
causes of a slow cycle first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from specgate.deployment import DiagnosisSpec
from specgate.diagnosis.cycle import CycleModel
from specgate.diagnosis.settings import EffectiveSettings
from specgate.diagnosis.signals import DraftConfig, GraphUse
from specgate.measure.speed import ConfigSpeed
from specgate.measure.stats import Interval
from specgate.measure.summary import accept_length_of
from specgate.server_flags import NEW_BOUND, OLD_BOUND, accepts, graph_bound_args, parse_release

MEASURED, OBSERVED, SETTING = 3, 2, 1
STRENGTH_NAMES = {MEASURED: "measured", OBSERVED: "observed", SETTING: "setting"}

# Where a setting appears on SGLang's command line, to write a lever as flags.
FLAGS = {
    "attention_mode": "--speculative-attention-mode",
    "num_steps": "--speculative-num-steps",
    "topk": "--speculative-eagle-topk",
    "draft_tokens": "--speculative-num-draft-tokens",
    "cuda_graph_max_bs": NEW_BOUND,  # the spelling every supported release takes (server_flags.py)
    "prefill_backend": "--prefill-attention-backend",
    "decode_backend": "--decode-attention-backend",
    "attention_backend": "--attention-backend",
    "algorithm": "--speculative-algorithm",
    "tp_size": "--tp-size",
    "context_length": "--context-length",
    "draft_model_path": "--speculative-draft-model-path",
}
BOOL_FLAGS = {"cuda_graph_disabled": "--disable-cuda-graph", "overlap_disabled": "--disable-overlap-schedule"}
# Environment that fixes what a run measures rather than how the server runs (SGLang's
# SGLANG_SIMULATE_ACC_LEN and _METHOD): never offered as a lever.
SIMULATION_KNOBS = ("env:SGLANG_SIMULATE_",)


# The settings field each SGLang flag sets, so that a flag given in a deployment and the
# setting the server reports count as one difference.
FLAG_KEYS = {flag: key for key, flag in {**FLAGS, **BOOL_FLAGS}.items()}
FLAG_KEYS.update({"--tp": "tp_size", "--speculative-topk": "topk", OLD_BOUND: "cuda_graph_max_bs"})
MODE_FLAG = FLAGS["attention_mode"]


def attention_modes(subject: Subject) -> tuple[str, str | None]:
    """(what the config asked for, what the server runs) for --speculative-attention-mode: asked is
    the config's flag, else SGLang's default "prefill"; the server's reported value is the effective
    one (SGLang 0.5.17 on switches to decode by itself in some cases: the evidence folder of
    server_flags.py); where the server does not report it, the flag given is taken as in effect."""
    asked = subject.flags.get(MODE_FLAG) or "prefill"
    return asked, subject.settings.attention_mode or subject.flags.get(MODE_FLAG)


def parse_flags(args: tuple[str, ...]) -> dict[str, str]:
    """`--flag value` / `--flag=value` / a bare `--flag` (value "") from a config's args."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            flag, eq, value = arg.partition("=")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
                value = args[i + 1]
                i += 1
            out[flag] = value
        i += 1
    return out


def as_flag(key: str, value: object) -> str:
    if key.startswith("--"):
        return f"without {key}" if value is None else (key if value == "" else f"{key} {value}")
    if key in BOOL_FLAGS:
        return BOOL_FLAGS[key] if value else f"without {BOOL_FLAGS[key]}"
    if key.startswith("env:"):
        return f"{key[4:]}={value}" if value is not None else f"without {key[4:]}"
    return f"{FLAGS.get(key, key)} {value}"


@dataclass(frozen=True)
class Subject:
    """One speculative config at one concurrency, with every witness the run has for it."""

    config: str
    concurrency: int
    settings: EffectiveSettings
    env: dict[str, str]
    model: CycleModel
    record: ConfigSpeed
    graphs: GraphUse | None = None
    histogram: tuple[int, ...] | None = None
    draft: DraftConfig | None = None
    flags: dict[str, str] = field(default_factory=dict)  # the config's own args, parsed

    @property
    def simulated_tau(self) -> str | None:
        return self.env.get("SGLANG_SIMULATE_ACC_LEN")

    def differences(self, other: Subject) -> dict[str, tuple[object, object]]:
        """What differs between two configs: in the settings the servers report, in the flags the
        deployment gives them (a flag SGLang does not report back still counts), and in their
        environment. A flag that sets a reported setting counts once, under the setting's name."""
        diff = self.settings.differences(other.settings)
        # Another release (a config with its own command, side by side) differs in everything its
        # code does: never a one-setting sibling.
        if self.settings.version != other.settings.version:
            diff["version"] = (self.settings.version, other.settings.version)
        mine_reported, theirs_reported = self.settings.as_dict(), other.settings.as_dict()
        for flag in sorted(set(self.flags) | set(other.flags)):
            mine, theirs = self.flags.get(flag), other.flags.get(flag)
            key = FLAG_KEYS.get(flag, flag)
            # Where the server reports the setting, its report decides (one config may spell out
            # the default the other gets); the flag counts only where neither server says.
            reported = mine_reported.get(key) is not None or theirs_reported.get(key) is not None
            if mine != theirs and not reported:
                diff.setdefault(key, (mine, theirs))
        for key in sorted(set(self.env) | set(other.env)):
            if self.env.get(key) != other.env.get(key):
                diff[f"env:{key}"] = (self.env.get(key), other.env.get(key))
        return diff


@dataclass(frozen=True)
class Sibling:
    subject: Subject
    speed_ratio: Interval  # the sibling's decode tok/s over this config's, paired per request

    @property
    def faster(self) -> bool:
        return self.speed_ratio.low > 1.0

    @property
    def slower(self) -> bool:
        return self.speed_ratio.high < 1.0


@dataclass(frozen=True)
class Lever:
    key: str
    action: str  # what to change, as SGLang flags or environment
    why: str
    evidence: tuple[str, ...]
    strength: int
    gain: float | None = None  # measured speed ratio after the change, where a sibling measured it
    sibling: str | None = None

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "action": self.action,
            "why": self.why,
            "evidence": list(self.evidence),
            "strength": STRENGTH_NAMES[self.strength],
            "gain": None if self.gain is None else round(self.gain, 4),
            "sibling": self.sibling,
        }


@dataclass(frozen=True)
class Thresholds:
    """The deployment's [diagnosis] thresholds the levers use; the defaults are DiagnosisSpec's."""

    last_step_floor: float = DiagnosisSpec.last_step_floor  # a draft step accepted this rarely costs more than it yields
    drafter_floor: float = DiagnosisSpec.drafter_floor  # τ under this: the drafter's drafts are (almost) all rejected


@dataclass
class Context:
    subject: Subject
    siblings: list[Sibling]
    thresholds: Thresholds
    used_siblings: set[str] = field(default_factory=set)

    def sibling_differing_in(
        self, keys: set[str], accept: Callable[[Subject], bool], same_tau: bool = True
    ) -> Sibling | None:
        """The best-measured sibling whose settings differ from this config's in `keys` only
        (a sibling run at another simulated accept length differs in that, so never qualifies).
        With `same_tau`, its accept length must agree with this config's too: a setting that
        should not change τ (attention mode, CUDA graphs) is not credited with what τ did."""
        found = [
            s
            for s in self.siblings
            if set(self.subject.differences(s.subject)) <= keys
            and self.subject.differences(s.subject)
            and accept(s.subject)
            and (not same_tau or _same_tau(self.subject.model, s.subject.model))
        ]
        return max(found, key=lambda s: s.speed_ratio.estimate) if found else None


# Settings whose change is expected to move τ: a sibling differing in them is compared on speed
# even where its accept length differs.
TAU_SETTINGS = {"num_steps", "draft_tokens", "topk", "draft_model_path", "algorithm"}


def _same_tau(a: CycleModel, b: CycleModel) -> bool:
    return a.tau.low <= b.tau.high and b.tau.low <= a.tau.high


def _cost_line(m: CycleModel) -> str:
    return (
        f"a cycle costs {m.cycle_cost:.2f} plain decode steps (t_c {m.t_c_ms.estimate:.2f} ms vs "
        f"t_d {m.t_d_ms.estimate:.2f} ms) and yields τ {m.tau.estimate:.2f} tokens"
    )


def _with_sibling(ctx: Context, lever: Lever, sibling: Sibling | None, what: str) -> Lever | None:
    """Strengthen a lever by a sibling that measured it, or drop it where one measured it wrong."""
    if sibling is None:
        return lever
    ctx.used_siblings.add(sibling.subject.config)
    r = sibling.speed_ratio
    line = (
        f"{sibling.subject.config}, {what}, decodes {r.estimate:.3f}x as fast [{r.low:.3f}, {r.high:.3f}], "
        f"a cycle costing {sibling.subject.model.cycle_cost:.2f} plain steps"
    )
    if sibling.slower:
        return None
    if sibling.faster:
        return Lever(
            lever.key,
            lever.action,
            lever.why,
            (line, *lever.evidence),
            MEASURED,
            gain=r.estimate,
            sibling=sibling.subject.config,
        )
    return Lever(
        lever.key, lever.action, lever.why, (*lever.evidence, line + " (not distinguishable here)"), lever.strength
    )


def attention_mode(ctx: Context) -> list[Lever]:
    s, m, g = ctx.subject.settings, ctx.subject.model, ctx.subject.graphs
    _, effective = attention_modes(ctx.subject)
    if not s.speculative or effective not in (None, "prefill") or not s.hybrid:
        return []  # decode mode already in effect (asked for, or switched to by SGLang: a note says so)
    mode = s.attention_mode or "not reported (SGLang's default: prefill)"
    evidence = [
        f"server settings: prefill_attention_backend {s.prefill_backend}, decode_attention_backend "
        f"{s.decode_backend}, speculative_attention_mode {mode}",
        _cost_line(m),
    ]
    # Verify without CUDA graphs is claimed only where the server's log shows it.
    if g and g.without_graph:
        evidence.append(
            f"server log: {g.without_graph} of {g.lines} decode-batch lines in the measured window ran without a graph"
        )
    lever = Lever(
        "attention-mode",
        "--speculative-attention-mode decode",
        f"verify and draft-extend run on the prefill attention backend ({s.prefill_backend}); a prefill backend "
        "that plans on the host (FlashInfer's does) waits on a host sync in its plan step on every verify "
        f"(upstream, PR #32317); in decode mode they run on {s.decode_backend}'s decode kernels, which plain "
        "decoding already uses",
        tuple(evidence),
        SETTING,
    )
    sibling = ctx.sibling_differing_in({"attention_mode"}, lambda o: o.settings.attention_mode == "decode")
    found = _with_sibling(ctx, lever, sibling, "identical but for --speculative-attention-mode decode")
    return [found] if found else []


def cuda_graphs(ctx: Context) -> list[Lever]:
    s, g, conc = ctx.subject.settings, ctx.subject.graphs, ctx.subject.concurrency
    log = (
        [f"server log: {g.without_graph} of {g.lines} decode-batch lines in the measured window ran without a graph"]
        if g and g.without_graph
        else []
    )
    if s.cuda_graph_disabled:
        lever = Lever(
            "cuda-graphs",
            _graphs_on_advice(ctx.subject.flags),
            "every draft step and verify is launched kernel by kernel; a cycle launches several forward passes",
            (
                "server settings: decode CUDA graphs off (disable_cuda_graph, disable_decode_cuda_graph or "
                "cuda_graph_config.decode.backend, as the release reports them)",
                *log,
                _cost_line(ctx.subject.model),
            ),
            OBSERVED if log else SETTING,
        )
        sibling = ctx.sibling_differing_in({"cuda_graph_disabled"}, lambda o: not o.settings.cuda_graph_disabled)
        found = _with_sibling(ctx, lever, sibling, "identical but with CUDA graphs")
        return [found] if found else []
    if s.cuda_graph_max_bs is not None and conc > s.cuda_graph_max_bs:
        # Spelled as the server's release takes it (server_flags.py: the old name is refused from 0.5.20).
        flag = " ".join(graph_bound_args(parse_release(s.version), conc))
        return [
            Lever(
                "cuda-graph-batch",
                flag,
                f"batches of {conc} requests are larger than any captured graph, so they run without one (a bound "
                f"of {conc} or more covers them)",
                (
                    f"server settings: decode graph bound {s.cuda_graph_max_bs} (cuda_graph_max_bs, or from 0.5.14 "
                    f"cuda_graph_config.decode.max_bs), measured at concurrency {conc}",
                    *log,
                ),
                OBSERVED if log else SETTING,
            )
        ]
    if g and g.without_graph > g.with_graph:
        return [
            Lever(
                "cuda-graph-unused",
                "find why decode batches miss the captured graphs "
                f"({_graph_sizes_flag(parse_release(s.version))}, batch sizes, memory)",
                "graphs are enabled but the server reports most measured batches ran without one",
                tuple(log),
                OBSERVED,
            )
        ]
    return []


# How a config may have turned decode CUDA graphs off, in the words to undo it.
_GRAPHS_OFF = (
    ("--disable-cuda-graph", "remove --disable-cuda-graph"),
    ("--disable-decode-cuda-graph", "remove --disable-decode-cuda-graph"),
    ("--cuda-graph-backend-decode", "remove --cuda-graph-backend-decode disabled (or set it to full)"),
    ("--cuda-graph-config", "remove the decode backend \"disabled\" from --cuda-graph-config"),
)


def _graphs_on_advice(flags: dict[str, str]) -> str:
    """Undo what the config gave, where it gave one; else name both ways SGLang turns them off."""
    for flag, advice in _GRAPHS_OFF:
        if flag in flags:
            return advice
    return (
        "turn decode CUDA graphs on: the server reports them off, though the config gives no flag that does so "
        "(look for --disable-cuda-graph or --cuda-graph-backend-decode disabled in the launch command)"
    )


def _graph_sizes_flag(release: tuple[int, ...] | None) -> str:
    """The flag that lists the captured decode batch sizes: --cuda-graph-bs up to 0.5.13, then
    --cuda-graph-bs-decode (0.5.20 on refuses --cuda-graph-bs as an ambiguous prefix)."""
    return "--cuda-graph-bs-decode" if accepts(release, "--cuda-graph-bs-decode") else "--cuda-graph-bs"


def drafter(ctx: Context) -> list[Lever]:
    subj, m = ctx.subject, ctx.subject.model
    if subj.simulated_tau is not None or m.tau.estimate >= ctx.thresholds.drafter_floor:
        return []
    return [
        Lever(
            "drafter",
            "a drafter trained for this target (and its chat template), or no speculation",
            "almost every draft is rejected, so each cycle pays for drafting and verifying to gain nothing",
            (f"accept length τ {m.tau.estimate:.3f} [{m.tau.low:.3f}, {m.tau.high:.3f}] (meta_info, measured)",),
            OBSERVED,
        )
    ]


def draft_steps(ctx: Context) -> list[Lever]:
    subj, floor = ctx.subject, ctx.thresholds.last_step_floor
    steps = subj.settings.num_steps
    # Under SGLANG_SIMULATE_ACC_LEN the histogram is whatever the variable says: no evidence.
    if not steps or steps < 2 or subj.simulated_tau is not None:
        return []
    hist = subj.histogram
    tau = subj.model.tau.estimate
    if hist and sum(hist):
        cycles = sum(hist)
        reach = [sum(hist[k:]) / cycles for k in range(steps + 1)]  # P(at least k drafts accepted)
        reach += [0.0] * (steps + 1 - len(reach))
        last = reach[steps]
        if last >= floor:
            return []
        keep = max([k for k in range(1, steps) if reach[k] >= floor], default=1)
        evidence = (
            f"accept histogram over {cycles} measured cycles: draft {steps} (the last) was accepted in {last:.0%} "
            f"of cycles, draft {keep} in {reach[keep]:.0%}",
        )
        strength = OBSERVED
    else:
        # Without the histogram: at most (τ-1)/steps of the cycles can have accepted every draft.
        bound = (tau - 1.0) / steps
        if bound >= floor:
            return []
        keep = max(1, int(tau - 1.0 + 0.5))
        evidence = (
            f"τ {tau:.2f} over {steps} draft steps: the last step is accepted in at most {bound:.0%} of cycles",
        )
        strength = OBSERVED
    topk = subj.settings.topk or 1
    action = f"--speculative-num-steps {keep}" + (f" --speculative-num-draft-tokens {keep + 1}" if topk == 1 else "")
    lever = Lever(
        "draft-steps",
        action,
        f"every cycle pays for {steps} draft steps, but drafts past step {keep} are rarely accepted",
        (*evidence, _cost_line(subj.model)),
        strength,
    )
    # Only a sibling at the very step count suggested measures this lever.
    sibling = ctx.sibling_differing_in(
        {"num_steps", "draft_tokens"}, lambda o: o.settings.num_steps == keep, same_tau=False
    )
    found = _with_sibling(ctx, lever, sibling, "identical but with fewer draft steps")
    return [found] if found else []


def draft_context(ctx: Context) -> list[Lever]:
    subj = ctx.subject
    d = subj.draft
    if subj.simulated_tau is not None or d is None or not d.max_positions:
        return []
    spec = [s for s in subj.record.samples if s.verify_ct]
    past = [s for s in spec if s.prompt_tokens + s.completion_tokens > d.max_positions]
    if not past:
        return []
    within = [s for s in spec if s not in past]
    longest = max(s.prompt_tokens + s.completion_tokens for s in past)
    evidence = [
        f"draft config {d.path}: max_position_embeddings {d.max_positions}; {len(past)} of {len(spec)} measured "
        f"requests run past it (longest {longest} tokens)"
    ]
    strength = SETTING
    tau_past, tau_within = accept_length_of(past), accept_length_of(within)
    if tau_past is not None and tau_within is not None:
        evidence.append(f"τ {tau_past:.2f} on those requests vs {tau_within:.2f} on the rest")
        if tau_past >= 0.9 * tau_within:
            return []  # measured: the draft holds up past its trained length here
        strength = OBSERVED
    lever = Lever(
        "draft-context",
        f"a drafter trained for longer contexts (or prompts under {d.max_positions} tokens)",
        "past the positions it was trained for, the drafter's guesses degrade and fewer are accepted",
        tuple(evidence),
        strength,
    )
    sibling = ctx.sibling_differing_in({"draft_model_path"}, lambda o: True, same_tau=False)
    found = _with_sibling(ctx, lever, sibling, "identical but with another drafter")
    return [found] if found else []


def measured_siblings(ctx: Context) -> list[Lever]:
    """A sibling that differs in one setting alone and was measured faster is itself a lever.
    (Two or more differences at once would credit the change to the wrong setting.)"""
    out = []
    for sib in ctx.siblings:
        name = sib.subject.config
        diff = ctx.subject.differences(sib.subject)
        if name in ctx.used_siblings or not sib.faster or len(diff) != 1:
            continue
        key = next(iter(diff))
        if key.startswith(SIMULATION_KNOBS):
            continue  # a simulated accept length is not something to change in production
        if key not in TAU_SETTINGS and not _same_tau(ctx.subject.model, sib.subject.model):
            continue  # its τ differs for reasons this setting does not explain
        r = sib.speed_ratio
        out.append(
            Lever(
                f"as-{name}",
                ", ".join(as_flag(k, theirs) for k, (_, theirs) in sorted(diff.items())),
                f"{name} runs with this change and was measured faster",
                (
                    f"{name} decodes {r.estimate:.3f}x as fast [{r.low:.3f}, {r.high:.3f}], a cycle costing "
                    f"{sib.subject.model.cycle_cost:.2f} plain steps vs {ctx.subject.model.cycle_cost:.2f}",
                ),
                MEASURED,
                gain=r.estimate,
                sibling=name,
            )
        )
    return out


# Order matters twice: ties in ranking keep it, and measured_siblings must run last (it
# skips siblings another finder already cited).
FINDERS: tuple[Callable[[Context], list[Lever]], ...] = (
    attention_mode,
    cuda_graphs,
    draft_context,  # before drafter: a drafter run past its context is rejected for that reason
    drafter,
    draft_steps,
    measured_siblings,
)


def find_levers(subject: Subject, siblings: list[Sibling], thresholds: Thresholds) -> list[Lever]:
    ctx = Context(subject, siblings, thresholds)
    found: list[tuple[int, Lever]] = []
    for order, finder in enumerate(FINDERS):
        found.extend((order, lever) for lever in finder(ctx))
    found.sort(key=lambda ol: (-ol[1].strength, -(ol[1].gain or 0.0), ol[0]))
    return [lever for _, lever in found]
