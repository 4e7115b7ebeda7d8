"""Deployments: what to boot, what to send it, and which verdicts to reach.

A deployment file (`fixtures/deployments/*.toml`) is the only input a user writes.
It is read once with tomllib and turned into frozen dataclasses; every other module
receives these dataclasses, never raw dicts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import weakref
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specgate import project as _project
from specgate.drafter_card import load_card
from specgate.errors import DeploymentError, DeploymentErrors
from specgate.gate_kinds import calling, check_planned, declared_kinds
from specgate.prompts import KNOWN_FORMATS, KNOWN_SETS, Prompt, load_prompt_file, load_prompt_set
from specgate.resources import builtin_deployments_dir
from specgate.sampling_spec import SamplingSpec, parse_sampling
from specgate.secrets import (
    env_name_problem,
    key_to_mask,
    remember_env,
    remember_forwarded,
    remember_url,
    secret_flag,
    secret_flag_in,
    url_password_env,
)
from specgate.sglang_cli import declared_release, digest_words
from specgate.tomlcheck import Table, read_toml, safe_name_problem

DEFAULT_DEPLOYMENT = "sim"
DEFAULT_COMMAND = ("{python}", "-m", "sglang.launch_server")
LAUNCHERS = ("local", "url", "ssh")
# What a run against servers attached by url can do where more boots would help: specgate cannot
# restart a server it did not start, so `launch.boots` is never the advice there.
URL_ONE_BOOT = (
    'a server attached by url (launcher = "url") is one boot: specgate cannot restart it. Restart the '
    "servers by hand between runs (each passing run is then one more boot of the runner's history), or let "
    'specgate launch them (launcher = "local" or "ssh", which can boot each config several times a run)'
)
# Replicate boots per config: beyond a few dozen the between-boot spread is known well enough,
# and every one is a server held at once.
MAX_BOOTS = 32
# Context buckets: below this a "long" prompt is no longer than the shipped sets' own; above, no
# model of today takes it.
MIN_CONTEXT_TOKENS = 256
MAX_CONTEXT_TOKENS = 4 * 1024 * 1024
# Flags the launcher owns: a deployment that sets them would fight the port picker.
LAUNCHER_OWNED_FLAGS = ("--port", "--nccl-port", "--host")
# With the ssh launcher, SGLang's multi-node flags too: it gives every node its rank and the
# address where rank 0 gathers them, and a deployment that set them would contradict launch.ssh.nodes.
MULTI_NODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")
# Where the reference's figures and golden answers come from: "boot" (booted and measured in every
# run) or "stored" (the stored baseline of this machine's fingerprint: for a model whose boot takes
# many minutes, a run then boots only the speculative configs; see specgate/verdicts/stored_reference.py).
CPU_AFFINITIES = ("none", "split")
REFERENCE_SOURCES = ("boot", "stored")
# How the ssh launcher's client reaches a remote server: through `ssh -L` (the server listens on
# the remote loopback only), or straight at host:port (the server listens on every interface).
SSH_REACH = ("forward", "direct")
# Placeholders the local launcher fills in commands and args. Only `{word}` is one: any other
# brace is the argument's own text, so JSON-valued SGLang flags need no escaping.
PLACEHOLDERS = ("python", "repo", "model")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Upper bounds that catch typos: nothing SGLang serves generates more, or serves more at once.
MAX_NEW_TOKENS = 1 << 20
MAX_CONCURRENCY = 4096
# Counts, each with its own bound and so its own message (a repeats of 10**9 was blamed on
# max_repeats, the first field compared with it): far above what a run of days sends, far below
# what would only ever end by the request deadline of every one of them.
MAX_REPEATS = 10_000  # measured requests per config and concurrency (repeats, max_repeats, a sweep's)
MAX_EXAMPLES = 100_000  # equivalence cases per config
MAX_WARMUP_REQUESTS = 10_000
MAX_TOP_LOGPROBS = 1000  # what SGLang returns per position; the rule reads the top-2
MAX_PARALLEL = 256  # a sweep's servers held at once per GPU
MAX_NODES = 256  # ssh nodes of one multi-node server
MAX_SWEEP_SETTING = 256  # a sweep's --speculative-num-steps, topk or draft-token count
# Upper bounds on durations, in seconds: far above any real boot or request, far below what the
# clocks and timers underneath take (a deadline of 1e30 s overflows them mid-run, not in `check`).
MAX_WAIT_S = 86400.0  # a boot or one request: a day
MAX_GRACE_S = 3600.0  # a shutdown, a GPU's memory release, a stagger between boots: an hour
# A regression tolerance is a fraction of the stored figure the run may fall by: 1 (100%) would put
# the bar at zero, whose log no interval has, so the largest is just under it (over 0.5 is VACUOUS).
MAX_TOLERANCE = 0.999
# Bounds on ratios and margins that catch a unit mistake (a percentage for a fraction, 1e308):
# no speedup reaches 100x, no verify step accepts 100 tokens, no bf16 tie is 10 nats wide.
MAX_RATIO = 100.0
MAX_TOKENS_PER_STEP = 100.0
MAX_TIE_MARGIN = 10.0
HARDWARE_KEYS = ("gpu", "gpu_count", "driver", "cuda", "sglang")


# The request features greedy equivalence can draw into its cases (`[equivalence] features`; their
# params and oracles: specgate.equivalence.features), in the order cases name them.
REQUEST_FEATURES = ("penalties", "min_new_tokens", "logit_bias", "stop_order", "stop_token_ids", "n", "grammar")

# The differences a config may declare known (`tolerate`): each is the name of a failure shape
# the equivalence check recognises (specgate.equivalence.known), described for `specgate check`.
TOLERABLE = {
    # SGLang 0.5.11's STANDALONE speculation generates on past the stop string that ended the
    # baseline's answer: the text is cut at the same place, but output_ids and completion_tokens
    # hold extra tokens.
    "stop-overshoot": "the speculative answer has the baseline's text and tokens, then more token ids past the "
    "stop string that ended the baseline (its text cut at the same place)",
    # SGLang up to 0.5.17 checks max_new_tokens before its stop checks, so one verify step can
    # accept the stop and reach the limit.
    "past-stop-at-length": "the speculative answer has the baseline's tokens up to the stop string or stop token "
    "(EOS) that ended the baseline, then ran on to max_new_tokens within the same verify step",
    # SGLang tries the stop strings in list order, not in the order they occur, so a verify step
    # that completes two stops ends on the one listed first.
    "stop-list-order": "the speculative answer has the baseline's tokens up to the stop string that ended the "
    "baseline, then ran on within the same verify step to another stop string listed before it in the request",
}


def expand_placeholders(text: str, values: dict[str, str]) -> str:
    """`{python}`, `{repo}`, `{model}` replaced; every other character kept as written."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), text)


def unknown_placeholders(text: str) -> list[str]:
    return [m.group(0) for m in _PLACEHOLDER.finditer(text) if m.group(1) not in PLACEHOLDERS]


@dataclass(frozen=True)
class SshSpec:
    """`[launch.ssh]`: where the ssh launcher boots each node of a server, and how it gets there."""

    hosts: tuple[str, ...]  # one per node; hosts[0] is rank 0 (and serves HTTP)
    user: str | None = None
    port: int | None = None
    identity_file: Path | None = None
    options: tuple[str, ...] = ()  # more ssh arguments, e.g. ["-o", "ProxyJump=bastion"]
    # The remote working directory (None: the login directory); also what `{repo}` becomes there.
    directory: str | None = None
    python: str = "python3"  # what `{python}` becomes on the remote side
    reach: str = "forward"  # SSH_REACH
    # Where the other nodes find rank 0 (--dist-init-addr HOST:PORT); None: hosts[0]. Set it when
    # hosts[0] is an ssh alias the nodes cannot resolve, or rank 0 has a faster cluster network.
    dist_init_host: str | None = None
    # Names of variables of specgate's own environment to hand to the remote servers (over the ssh
    # session's input, never on a command line): a remote shell does not inherit this one's.
    forward_env: tuple[str, ...] = ()

    @property
    def nodes(self) -> int:
        return len(self.hosts)


@dataclass(frozen=True)
class LaunchSpec:
    launcher: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    boot_timeout_s: float
    coexist: bool
    shutdown_timeout_s: float
    gpu_release_timeout_s: float
    # Seconds between starting servers that boot side by side: SGLang sizes its KV cache from the
    # free memory it sees around loading weights, and neighbours allocating in that window make it
    # fail ("Not enough memory"). A few seconds apart, their profiling windows do not meet.
    boot_stagger_s: float = 0.0
    # Servers per config (replicate boots): performance differs between server processes more
    # than between requests of one, and only several boots show by how much.
    boots: int = 1
    # The environment variable that holds the servers' API key: the local launcher passes it as
    # --api-key, the client sends it as a bearer token; it is never written anywhere.
    api_key_env: str | None = None
    ssh: SshSpec | None = None  # with launcher = "ssh" only
    reference_from: str = "boot"  # REFERENCE_SOURCES
    # Send the reference's first requests again once the speed phase is over, to measure how far
    # the host drifted during the run (where servers take turns this costs the reference a boot).
    drift_check: bool = True
    # "split": each local server booted side by side pinned to its own fixed slice of this host's
    # CPUs (specgate.server.affinity); "none": where the kernel puts it.
    cpu_affinity: str = "none"
    # The SGLang release the servers run, where specgate cannot ask that SGLang itself (an ssh
    # host, a CI runner without it): their launch flags are checked against its parser's table.
    sglang_release: str | None = None

    @property
    def reference_stored(self) -> bool:
        """The deployment opts in to taking the reference from the stored baseline (a baseline
        update still boots it: that is where the stored figures and answers come from)."""
        return self.reference_from == "stored"

    @property
    def owned_flags(self) -> tuple[str, ...]:
        return LAUNCHER_OWNED_FLAGS + (MULTI_NODE_FLAGS if self.launcher == "ssh" else ())

    @property
    def more_boots(self) -> str:
        """How this deployment gets more boots per side, for advice that needs them."""
        if self.launcher == "url":
            return (
                "more boots, which servers attached by url get only by hand: restart them between runs (each "
                'passing run is one more boot of the runner\'s history), or let specgate launch them (launcher = "local" '
                'or "ssh", which can boot each config several times a run)'
            )
        return "more boots on both sides (launch.boots, and a baseline recorded with them)"


@dataclass(frozen=True)
class ServerConfig:
    name: str
    args: tuple[str, ...]
    env: dict[str, str]
    url: str | None
    description: str
    # Differences of this config's answers declared known (TOLERABLE):
    # counted and listed in the report, not failed. Per config, so a declaration made for one
    # speculative method does not excuse the same difference in another.
    tolerate: tuple[str, ...] = ()
    # Where one run compares two SGLang installs (an upgrade gated side by side): this config's
    # own launch command (None: launch.command) and its own plain reference for equivalence and
    # speedups (None: the deployment's `reference`).
    command: tuple[str, ...] | None = None
    reference: str | None = None
    # The config's drafter card (specgate.drafter_card), resolved against the deployment's folder.
    drafter_card: Path | None = None
    # The SGLang release this config's own command runs, where it differs from launch.sglang_release.
    sglang_release: str | None = None

    def launch_command(self, launch: LaunchSpec) -> tuple[str, ...]:
        return self.command if self.command is not None else launch.command

    def declared_release(self, launch: LaunchSpec) -> str | None:
        """The SGLang release the deployment says this config's server runs (None: not said)."""
        return self.sglang_release or launch.sglang_release

    @property
    def max_tokens_per_step(self) -> int | None:
        """The most tokens one verify step can accept (--speculative-num-steps + the verified
        token); None where the args do not say."""
        steps = flag_int(self.args, "--speculative-num-steps")
        return steps + 1 if steps is not None and steps >= 0 else None

    @property
    def speculative(self) -> bool:
        return "--speculative-algorithm" in self.args or any(
            a.startswith("--speculative-algorithm=") for a in self.args
        )

    def args_digest(self, launch: LaunchSpec) -> str:
        """Identifies what was booted, so a baseline of other flags is never compared. A flag is
        digested in its first spelling (sglang_cli.digest_spelling): one option under two names
        boots the same server, and baselines recorded under the old name stay comparable. Flags
        of how an idle server waits (sglang_cli.DIGEST_IGNORED) are left out."""
        blob = json.dumps(
            [
                digest_words(self.launch_command(launch)),
                digest_words(launch.args),
                digest_words(self.args),
                launch.env,
                self.env,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class WarmupSpec:
    min_requests: int
    max_requests: int
    settle_window: int
    settle_tolerance: float


@dataclass(frozen=True)
class Workload:
    prompt_sets: tuple[str, ...]
    prompt_format: str
    max_new_tokens: int
    concurrency: tuple[int, ...]
    repeats: int
    max_repeats: int
    warmup: WarmupSpec
    request_timeout_s: float
    # The user's own prompt files (the same JSONL as fixtures/prompts), resolved from the
    # deployment file's folder: accept length depends on the traffic, so gate on yours.
    prompt_files: tuple[Path, ...] = ()
    # Speed requests run past the model's end of sequence to max_new_tokens (true: every config
    # does the same work), or stop where the answer ends (false: τ and tok/s over answers alone,
    # nearer what training counts; every speed figure then means something else, so stored
    # baselines, calibrations and sweeps of the other mode never apply; concurrency 1 only).
    ignore_eos: bool = True
    # Prompt lengths (tokens) measured beside the ordinary short workload, each a bucket of its
    # own (specgate.measure.context): single-stream decode speed at that context length.
    # Empty: the short workload alone, as before.
    context_buckets: tuple[int, ...] = ()
    context_repeats: int = 0  # measured requests per bucket and config (0: no buckets)

    def prompts(self) -> tuple[Prompt, ...]:
        """Every prompt the workload sends: the built-in sets named, then each prompt file."""
        return tuple(p for group in self._prompt_groups() for p in group)

    def speed_sequence(self) -> tuple[Prompt, ...]:
        """The pinned order speed is measured in: one prompt of each set in turn (chat-00,
        code-00, ..., chat-01, ...). A run measures a prefix of it (`repeats`, more while
        undecided, up to `max_repeats`); set by set, a 12-request prefix would be chat and code
        only and the accept length of a check would not be the traffic's. In turn, every prefix
        holds each set within one request of the others, until a smaller set runs out."""
        groups = self._prompt_groups()
        return tuple(p for row in zip_longest(*groups) for p in row if p is not None)

    def _prompt_groups(self) -> list[tuple[Prompt, ...]]:
        return [load_prompt_set(s) for s in self.prompt_sets] + [
            load_prompt_file(f, f.stem) for f in self.prompt_files
        ]


@dataclass(frozen=True)
class EquivalenceSpec:
    # False only where outputs cannot be the model's (dummy weights with SGLang's simulated
    # accept length write a fixed token): then `skip_reason` says why, and every report says so.
    enabled: bool
    skip_reason: str
    tie_margin: float
    top_logprobs: int
    max_new_tokens: int
    stop_strings: tuple[str, ...]
    concurrency: tuple[int, ...]
    hypothesis_profile: str
    examples: int | None
    # Decisive partings at a token asked about again, with logprobs, per config per run
    # (second_opinion.py): 0 for none, where a release crashes on logprob requests.
    second_opinions: int = 5
    # The request features drawn into the cases (REQUEST_FEATURES).
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tolerances:
    # Allowed relative change against the stored baseline (`[gates.tolerance] decode_tps`, 0.10 = 10%).
    decode_tps_fraction: float
    accept_length: float
    faster_note: float
    # Per-config decode tolerances where calibration showed configs differ in noise (a speculative
    # config whose accept length varies by request needs more room than plain decoding).
    decode_tps_by_config: dict[str, float] = field(default_factory=dict)

    def decode_tps_for(self, config: str) -> float:
        return self.decode_tps_by_config.get(config, self.decode_tps_fraction)


@dataclass(frozen=True)
class BetweenBootSpread:
    """Between-boot spread declared in the deployment (SD of log figures across boots), for
    machines without a `specgate calibrate` record; `source` says where it was measured."""

    decode_tps_log_sd: float  # `[gates.between_boot] decode_tps`
    speedup_log_sd: float  # `[gates.between_boot] speedup`
    source: str
    # The parts of each that the servers of one run share (`decode_tps_shared`, `speedup_shared`;
    # None: not known), and the requests' lag-1 autocorrelation (`request_lag1`): verdicts/noise.py.
    decode_tps_shared_log_sd: float | None = None
    speedup_shared_log_sd: float | None = None
    request_lag1: float | None = None
    # `request_sd`: SD of one request's log decode tok/s within a boot (None: not known). The judge
    # measures its own requests; this serves the sensitivity `specgate check` states before a run.
    request_log_sd: float | None = None


@dataclass(frozen=True)
class Gates:
    tolerance: Tolerances
    confidence: float
    sample_batch: int
    # A gate that could not compare, or could not have failed: "fail" (the run exits non-zero)
    # or "warn" (listed loudly, exit 0) for teams that want warnings only.
    uncompared: str = "fail"
    between_boot: BetweenBootSpread | None = None
    # `[gates] detect`: the regression a no-regression gate should catch with 80% power; `specgate
    # check` and the report say the boots and minutes that would reach it (verdicts.sensitivity).
    detect: float | None = None
    # `[gates] against_stored = false`: no gate compares with a stored baseline; regressions are
    # judged by A/B in one run (`[[gates.ab]]`) and the floors, so a run needs no stored figures.
    against_stored: bool = True
    # The `[[gates.<table>]]` entries, by table, each parsed by its gate kind (specgate.gate_kinds).
    declared: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def of(self, table: str) -> tuple[Any, ...]:
        return self.declared.get(table, ())

    @property
    def beats(self) -> tuple[Any, ...]:
        """`[[gates.beats]]` (specgate.verdicts.beats_gate.BeatsGate)."""
        return self.of("beats")

    @property
    def accept_length(self) -> tuple[Any, ...]:
        """`[[gates.accept_length]]` (specgate.verdicts.accept_gate.AcceptFloorGate)."""
        return self.of("accept_length")


@dataclass(frozen=True)
class DiagnosisSpec:
    # Levers are looked for when speculation loses, misses its gate, or turns less than this
    # share of its accept length into speed (a cycle costing more than 1/floor plain steps).
    efficiency_floor: float = 0.5
    # A draft step accepted in fewer cycles than this is named as a step too many.
    last_step_floor: float = 0.2
    # Accept length under this: the drafter is named (its drafts are all but rejected).
    drafter_floor: float = 1.1


@dataclass(frozen=True)
class HistorySpec:
    """`specgate history`: when a step in the results history fails the command, how many
    records of each series the history keeps (specgate.history; docs/history.md)."""

    # A step down fails `specgate history` where a loss this large cannot be ruled out (and some loss is certain).
    threshold: float = 0.03
    # Steps among the last this many runs are new: older ones were said by the runs that followed.
    recent: int = 5
    keep: int = 500  # records per config and figure a results file keeps (the oldest dropped, said)


@dataclass(frozen=True)
class SweepSpec:
    """`specgate sweep`: the grid of speculative settings to boot and measure side by side."""

    base: str  # the config whose args and env every point starts from
    attention_mode: tuple[str, ...]
    num_steps: tuple[int, ...]
    topk: tuple[int, ...]
    draft_tokens: tuple[int, ...]  # empty: steps + 1, what SGLang uses with topk 1
    env: dict[str, tuple[str, ...]]  # each variable's values are one more axis
    parallel: int  # servers booted and held at once, per GPU
    gpus: tuple[str, ...]  # CUDA_VISIBLE_DEVICES values to spread servers over; empty: as launched
    repeats: int
    max_new_tokens: int  # per measured request (default: the workload's); shorter sweeps run sooner
    # Context buckets every point is measured at besides the short workload (default: the
    # workload's), on the same server: where along the context length speculation stops paying.
    context_buckets: tuple[int, ...] = ()


@dataclass(frozen=True)
class Deployment:
    path: Path
    name: str
    description: str
    simulator: bool
    model: str
    launch: LaunchSpec
    configs: dict[str, ServerConfig]
    reference: str
    workload: Workload
    equivalence: EquivalenceSpec
    gates: Gates
    hardware: dict[str, str] = field(default_factory=dict)
    diagnosis: DiagnosisSpec = field(default_factory=DiagnosisSpec)
    sweep: SweepSpec | None = None
    sampling: SamplingSpec = field(default_factory=SamplingSpec)  # the sampling equivalence test's settings
    history: HistorySpec = field(default_factory=HistorySpec)  # `specgate history` and the results history

    @property
    def input_files(self) -> tuple[Path, ...]:
        """The files a run's figures come from besides specgate itself: this file, its prompt
        files and its configs' drafter cards (provenance: a stored figure's commit must hold them)."""
        cards = [c.drafter_card for c in self.configs.values() if c.drafter_card is not None]
        return (self.path, *self.workload.prompt_files, *cards)

    def reference_of(self, config: str) -> str:
        """The plain config `config` is compared with: its own `reference`, else the deployment's."""
        if config in self.references:
            return config
        return self.configs[config].reference or self.reference

    @property
    def references(self) -> list[str]:
        """Every config some other config is compared with, the deployment's reference first."""
        named = [c.reference for c in self.configs.values() if c.reference]
        return list(dict.fromkeys([self.reference, *named]))

    @property
    def simulated(self) -> dict[str, bool]:
        """Config -> whether its server is specgate's simulator (`-m specgate.sim`, started here or
        over ssh): the only servers SPECGATE_SIM_FAULTS and `--sim-fault` reach."""
        if self.launch.launcher == "url":
            return dict.fromkeys(self.configs, False)
        return {n: any("specgate.sim" in p for p in c.launch_command(self.launch)) for n, c in self.configs.items()}

    @property
    def judged_contexts(self) -> int:
        """How many parts the run's false-alarm budget is split into: the short workload and each
        context bucket, every gate judged in each (verdicts/sampler.py `confidence`)."""
        return 1 + len(self.workload.context_buckets)

    def sim_fault_problems(self, environ: dict[str, str]) -> list[str]:
        """SPECGATE_SIM_FAULTS (from `environ`) and the configs' `--sim-fault` arguments, checked
        before any server boots (the simulator would refuse them only at its boot, or never see them).
        Each names its source: the variable's as itself, the file's after the file's path."""
        from specgate.sim.faults import fault_arg_problems, fault_env_problems

        out = fault_env_problems(environ, self.simulated) if environ.get("SPECGATE_SIM_FAULTS", "").strip() else []
        for name, simulated in self.simulated.items():
            config = self.configs[name]
            args = [*config.launch_command(self.launch), *self.launch.args, *config.args]
            out += [f"{self.path}: config {name!r}: {p}" for p in (fault_arg_problems(args) if simulated else [])]
        return out

    @property
    def speculative_configs(self) -> list[str]:
        """Every config that is compared with a reference (plain configs that are no one's reference too)."""
        refs = set(self.references)
        return [n for n in self.configs if n not in refs]


def resolve_deployment_path(name_or_path: str | None) -> Path:
    """A path is taken as it is; a name is looked up in the project's deployments folder, then
    among the built-ins (`sim`). None: the project's default deployment, else `sim`."""
    if name_or_path is not None and not name_or_path.strip():
        # An unset CI variable ("$DEPLOYMENT") must not silently gate the simulator.
        raise DeploymentError(Path("<empty>"), None, "the deployment name is empty; give a deployment name or a .toml path")
    project = _project.current()
    target = name_or_path or project.deployment or DEFAULT_DEPLOYMENT
    candidate = Path(target)
    # Anything there but a folder is taken as the file (read_toml names a FIFO or a device).
    if candidate.suffix == ".toml" or (candidate.exists() and not candidate.is_dir()) or "/" in target:
        if not candidate.exists():
            raise DeploymentError(candidate, None, "no such deployment file")
        return candidate
    folders = list(dict.fromkeys([project.deployments_dir, builtin_deployments_dir()]))
    for folder in folders:
        if (folder / f"{target}.toml").exists():
            return folder / f"{target}.toml"
    known = sorted({p.stem for folder in folders for p in folder.glob("*.toml")})
    raise DeploymentError(
        folders[0] / f"{target}.toml", None,
        f"no deployment named {target!r}; known: {', '.join(known)} (looked in {', '.join(map(str, folders))})",
    )


def load_deployment(name_or_path: str | None = None) -> Deployment:
    path = resolve_deployment_path(name_or_path)
    return parse_deployment(read_toml(path), path)


def parse_deployment(data: dict, path: Path) -> Deployment:
    """Every section is checked, and every problem reported at once (DeploymentErrors); a
    section that needs another (gates need configs) is checked only when that one parsed."""
    errors: list[DeploymentError] = []

    def attempt(parse, *args):  # noqa: ANN001, ANN202
        try:
            return parse(*args)
        except DeploymentErrors as exc:
            errors.extend(exc.errors)
        except DeploymentError as exc:
            errors.append(exc)
        return None

    top = Table(data, path)
    name = attempt(top.name, "name")
    description = attempt(top.text, "description", "")
    simulator = attempt(top.flag, "simulator", False)
    model = attempt(top.text, "model", "")
    launch = attempt(lambda: _parse_launch(top.table("launch")))
    configs = attempt(lambda: _parse_configs(top.table("configs", required=True), launch, path.parent)) if launch else None
    workload = attempt(lambda: _parse_workload(top.table("workload"), path.parent))
    equivalence = attempt(lambda: _parse_equivalence(top.table("equivalence")))
    hardware = attempt(_parse_hardware, top)
    diagnosis = attempt(lambda: _parse_diagnosis(top.table("diagnosis")))
    sampling = attempt(lambda: parse_sampling(top.table("sampling")))
    history = attempt(lambda: _parse_history(top.table("history")))
    reference = gates = sweep = None
    if launch and configs:
        reference = attempt(_parse_reference, top, launch, configs)
        if workload:
            gates = attempt(lambda: _parse_gates(top.table("gates"), configs, workload))
            sweep = attempt(lambda: _parse_sweep(top.table("sweep"), configs, workload)) if "sweep" in data else None
    if launch and workload and launch.reference_stored and workload.context_buckets:
        # The stand-in for an unbooted reference holds the short workload's figures alone.
        errors.append(
            top.table("workload").error(
                "context_buckets",
                'cannot be measured with launch.reference_from = "stored" yet: the stored reference stands in '
                "for the short workload only; boot the reference, or drop the buckets",
            )
        )
    if configs is None:
        top.skip("configs")  # not checked: the launch section it needs is broken
    if reference is None:
        top.skip("reference", "gates", "sweep")  # not checked: the configs (or launch, workload) are broken
    elif gates is None:
        top.skip("gates", "sweep")
    attempt(top.reject_unknown)
    # Every section that failed left an error; the None checks only tell the type checker so.
    if errors or configs is None or reference is None or gates is None:
        raise DeploymentErrors(errors)
    deployment = Deployment(
        path=path,
        name=name,
        description=description,
        simulator=simulator,
        model=model,
        launch=launch,
        configs=configs,
        reference=reference,
        workload=workload,
        equivalence=equivalence,
        gates=gates,
        hardware=hardware,
        diagnosis=diagnosis,
        sweep=sweep,
        sampling=sampling,
        history=history,
    )
    if launch.reference_stored and not gates.against_stored:
        raise top.table("gates").error(
            "against_stored",
            'is false, but launch.reference_from = "stored" takes the reference from the stored baseline: '
            "keep one of the two",
        )
    stored_beats = [g for g in gates.of("beats") if getattr(g, "against", "run") == "stored"]
    if stored_beats and not gates.against_stored:
        # The promise of against_stored = false is a run that needs no stored figures; a beats gate
        # against the stored reference would be NOT COMPARED in every run without one.
        raise top.table("gates").error(
            "against_stored",
            f'is false, but [[gates.beats]] of {", ".join(repr(g.config) for g in stored_beats)} compares with the '
            'stored baseline (against = "stored"): keep one of the two',
        )
    check_planned(deployment)
    return deployment


def check_config_named(t: Table, key: str, name: str, configs: dict[str, ServerConfig]) -> None:
    """`t`'s `key` names a config of the deployment (a reference, a sweep's base, a gate's config)."""
    if name not in configs:
        raise t.error(key, f"names config {name!r}, which is not under [configs]; have {sorted(configs)}")


def check_concurrency(t: Table, concurrency: int, workload: Workload) -> None:
    """A gate's `concurrency` is one the workload measures."""
    if concurrency not in workload.concurrency:
        raise t.error("concurrency", f"{concurrency} is not among workload.concurrency {list(workload.concurrency)}")


def _parse_reference(top: Table, launch: LaunchSpec, configs: dict[str, ServerConfig]) -> str:
    reference = top.text("reference", "baseline")
    check_config_named(top, "reference", reference, configs)
    if configs[reference].speculative:
        raise top.error("reference", f"config {reference!r} is speculative; the reference must decode plainly (no --speculative-algorithm)")
    _check_config_references(top.table("configs"), configs, reference)
    if launch.reference_stored:
        _check_stored_reference(top, configs, reference)
    if not launch.coexist and any(c.reference not in (None, reference) for c in configs.values()):
        bad = next(n for n, c in configs.items() if c.reference not in (None, reference))
        raise top.table("configs").table(bad).error(
            "reference",
            "needs launch.coexist = true: a config's own reference is asked live, beside it "
            "(the golden file that stands in for a stopped reference holds the deployment's reference only)",
        )
    return reference


def _check_stored_reference(top: Table, configs: dict[str, ServerConfig], reference: str) -> None:
    """`launch.reference_from = "stored"` works only where the stored baseline can stand in for the
    reference: one reference (the stored golden answers and figures are the deployment's reference's),
    one install (the fingerprint's SGLang is read from a booted speculative config instead of the
    reference), and something to compare with it."""
    table = top.table("configs")
    for name, config in configs.items():
        if config.reference is not None:
            raise table.table(name).error(
                "reference",
                'is not allowed with launch.reference_from = "stored": the stored baseline holds the figures and '
                f"golden answers of the deployment's reference {reference!r} only",
            )
        if config.command is not None:
            raise table.table(name).error(
                "command",
                'is not allowed with launch.reference_from = "stored": the reference is not booted, so the '
                "fingerprint's SGLang release is read from a booted speculative config, which must be the "
                "reference's install (launch.command)",
            )
    if not any(c.speculative for c in configs.values()):
        raise top.table("launch").error(
            "reference_from",
            'is "stored", but no config under [configs] speculates: nothing would be compared with the stored '
            "reference, and no booted server would show this machine's fingerprint",
        )


def flag_value(args: tuple[str, ...], *flags: str) -> str | None:
    """The value given in `args` (`--flag V` or `--flag=V`) to any of `flags` (one option's names:
    SGLang keeps deprecated aliases with the same destination), the last one given where there
    are several, as SGLang's argument parser keeps; None where none is given."""
    values = []
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                values.append(args[i + 1])
            elif arg.startswith(flag + "="):
                values.append(arg.split("=", 1)[1])
    return values[-1] if values else None


def flag_int(args: tuple[str, ...], *flags: str) -> int | None:
    """flag_value as a whole number; None where it is absent or not a number."""
    value = flag_value(args, *flags)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _check_config_references(t: Table, configs: dict[str, ServerConfig], reference: str) -> None:
    """A config's own `reference` must be a plain config that is compared with nothing itself:
    references do not chain, so every comparison is one step from a plain answer."""
    named = {c.reference for c in configs.values() if c.reference}
    for name, config in configs.items():
        own = config.reference
        if own is None:
            continue
        where = t.table(name)
        check_config_named(where, "reference", own, configs)
        if own == name:
            raise where.error("reference", f"is {own!r}, the config itself: a config compared with itself cannot fail")
        if configs[own].speculative:
            raise where.error("reference", f"names {own!r}, which is speculative; a reference must decode plainly")
        if configs[own].reference is not None:
            raise where.error(
                "reference", f"names {own!r}, which has its own reference {configs[own].reference!r}: references do not chain"
            )
        if name == reference or name in named:
            raise where.error(
                "reference", f"is set on {name!r}, which other configs are compared with: a reference has no reference"
            )


def _parse_hardware(top: Table) -> dict[str, str]:
    hardware = top.str_map("hardware", keys=HARDWARE_KEYS)
    for key in hardware:
        if key not in HARDWARE_KEYS:
            raise top.error("hardware", f"unknown key {key!r}; known: {', '.join(HARDWARE_KEYS)}")
    count = hardware.get("gpu_count")
    if count is not None and not (count.isascii() and count.isdigit()):
        raise top.error("hardware", f"gpu_count: expected a whole number as a string, e.g. \"2\"; got {count!r}")
    return hardware


def _parse_sweep(t: Table, configs: dict[str, ServerConfig], workload: Workload) -> SweepSpec:
    base = t.text("base")
    check_config_named(t, "base", base, configs)
    if not configs[base].speculative:
        raise t.error("base", f"config {base!r} is not speculative: a sweep varies speculative settings")
    if configs[base].command is not None or configs[base].reference is not None:
        # The sweep boots its points with launch.command against the deployment's reference.
        raise t.error(
            "base", f"config {base!r} has its own command or reference, which `specgate sweep` does not follow yet"
        )
    modes = tuple(t.str_list("attention_mode", ["prefill", "decode"], choices=("prefill", "decode")))
    for mode in modes:
        if mode not in ("prefill", "decode"):
            raise t.error("attention_mode", f"expected values from 'prefill', 'decode'; got {mode!r}")
    env_table = t.table("env")
    env = {}
    for key in env_table.names():
        env_table.check_env_name(key, key)
        values = env_table.str_list(key)
        if not values:
            raise env_table.error(key, "expected a non-empty list of strings (the values to sweep)")
        env[key] = tuple(values)
    env_table.reject_unknown()
    spec = SweepSpec(
        base=base,
        attention_mode=modes,
        num_steps=tuple(t.int_list("num_steps", [1, 2, 3], maximum=MAX_SWEEP_SETTING)),
        topk=tuple(t.int_list("topk", [1], maximum=MAX_SWEEP_SETTING)),
        draft_tokens=tuple(
            t.int_list(
                "draft_tokens",
                [2],
                maximum=MAX_SWEEP_SETTING,
                derived="steps + 1 at topk 1 (required where topk > 1)",
            )
            if "draft_tokens" in t.keys()
            else ()
        ),
        env=env,
        parallel=t.integer("parallel", 4, minimum=1, maximum=MAX_PARALLEL),
        gpus=tuple(t.str_list("gpus", [])),
        repeats=t.integer("repeats", workload.repeats, minimum=3, maximum=MAX_REPEATS, derived="workload.repeats"),
        max_new_tokens=t.integer(
            "max_new_tokens", workload.max_new_tokens, minimum=2, maximum=MAX_NEW_TOKENS, derived="workload.max_new_tokens"
        ),
        context_buckets=tuple(
            t.token_counts(
                "context_buckets",
                list(workload.context_buckets),
                minimum=MIN_CONTEXT_TOKENS,
                maximum=MAX_CONTEXT_TOKENS,
                meaning="the sweep's context axis: prompt lengths every point is measured at besides the short "
                "workload, on the same server (default: workload.context_buckets)",
            )
        ),
    )
    if not modes:
        raise t.error("attention_mode", "expected at least one mode")
    if any(k > 1 for k in spec.topk) and not spec.draft_tokens:
        raise t.error("draft_tokens", "is required when topk > 1 (with topk 1 it is steps + 1)")
    t.reject_unknown()
    return spec


def _parse_diagnosis(t: Table) -> DiagnosisSpec:
    default = DiagnosisSpec()  # the defaults live in the dataclass, nowhere else
    spec = DiagnosisSpec(
        efficiency_floor=t.number("efficiency_floor", default.efficiency_floor, minimum=0.0, maximum=1.0),
        last_step_floor=t.number("last_step_floor", default.last_step_floor, minimum=0.0, maximum=1.0),
        drafter_floor=t.number("drafter_floor", default.drafter_floor, minimum=1.0, maximum=MAX_TOKENS_PER_STEP),
    )
    t.reject_unknown()
    return spec


def _parse_history(t: Table) -> HistorySpec:
    default = HistorySpec()  # the defaults live in the dataclass, nowhere else
    spec = HistorySpec(
        threshold=t.number("threshold", default.threshold, minimum=0.0, maximum=1.0),
        recent=t.integer("recent", default.recent, minimum=1, maximum=10_000),
        keep=t.integer("keep", default.keep, minimum=10, maximum=1_000_000),
    )
    t.reject_unknown()
    return spec


def _parse_launch(t: Table) -> LaunchSpec:
    launcher = t.text("launcher", "local", choices=LAUNCHERS)
    command = tuple(t.str_list("command", list(DEFAULT_COMMAND)))
    if not command:
        raise t.error("command", 'expected a non-empty command, e.g. ["{python}", "-m", "sglang.launch_server"]')
    owned = LAUNCHER_OWNED_FLAGS + (MULTI_NODE_FLAGS if launcher == "ssh" else ())
    _reject_unknown_placeholders(t, "command", command)
    _reject_owned_flags(t, "command", command, owned)
    args = tuple(t.str_list("args", []))
    _reject_owned_flags(t, "args", args, owned)
    _reject_unknown_placeholders(t, "args", args)
    if launcher == "ssh":
        ssh = _parse_ssh(t.table("ssh", required=True))
        _reject_remote_repo(t, "command", command, ssh)
        _reject_remote_repo(t, "args", args, ssh)
    elif "ssh" in t.keys():
        raise t.error("ssh", f'applies to launch.launcher = "ssh" only; this deployment\'s launcher is {launcher!r}')
    else:
        ssh = None
    cpu_affinity = t.text("cpu_affinity", "none", choices=CPU_AFFINITIES)
    if cpu_affinity != "none" and launcher != "local":
        raise t.error(
            "cpu_affinity",
            f'applies to launcher = "local" only (specgate pins the servers it starts on this host); '
            f"this deployment's launcher is {launcher!r}",
        )
    if launcher == "url" and t.flag("coexist", True) is False:
        raise t.error(
            "coexist",
            'is false, but servers attached by url (launcher = "url") are up together by definition and are '
            "always measured interleaved: remove the line",
        )
    spec = LaunchSpec(
        launcher=launcher,
        command=command,
        args=args,
        env=t.env_map("env"),
        boot_timeout_s=t.number("boot_timeout_s", 900.0, minimum=0.1, maximum=MAX_WAIT_S),
        # Servers attached by url are up together by definition: measure them interleaved.
        coexist=t.flag("coexist", False) or launcher == "url",
        shutdown_timeout_s=t.number("shutdown_timeout_s", 30.0, minimum=0.1, maximum=MAX_GRACE_S),
        gpu_release_timeout_s=t.number("gpu_release_timeout_s", 120.0, minimum=0.0, maximum=MAX_GRACE_S),
        boot_stagger_s=t.number("boot_stagger_s", 0.0, minimum=0.0, maximum=MAX_GRACE_S),
        boots=t.integer("boots", 1, minimum=1),
        api_key_env=t.text("api_key_env", None),
        ssh=ssh,
        reference_from=t.text("reference_from", "boot", choices=REFERENCE_SOURCES),
        drift_check=t.flag("drift_check", True),
        cpu_affinity=cpu_affinity,
        sglang_release=_sglang_release(t),
    )
    if spec.reference_stored and launcher == "url":
        raise t.error(
            "reference_from",
            'applies to launch.launcher = "local" or "ssh": with "url" the reference is already running and '
            "costs no boot; ask it (remove reference_from)",
        )
    if spec.api_key_env is not None and (problem := env_name_problem(spec.api_key_env)):
        raise t.error("api_key_env", f"{spec.api_key_env!r} {problem}")
    key_to_mask(spec.api_key_env)  # remembered for masking where it is set; reported where it is used
    remember_env(spec.env)  # HF_TOKEN = "..." written in the file: masked like a forwarded one
    if spec.boots > MAX_BOOTS:
        raise t.error("boots", f"expected at most {MAX_BOOTS} servers per config, got {spec.boots}")
    if spec.boots > 1 and launcher == "url":
        # Every "boot" would be the same running server, counted as independent: the between-boot
        # interval would narrow on nothing.
        raise t.error("boots", f"is {spec.boots}, but {URL_ONE_BOOT}")
    t.reject_unknown()
    return spec


def _reject_unknown_placeholders(t: Table, key: str, args: tuple[str, ...]) -> None:
    for arg in args:
        if unknown := unknown_placeholders(arg):
            known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            raise t.error(key, f"unknown placeholder {unknown[0]} in {arg!r}; known: {known}")


def _reject_owned_flags(
    t: Table, key: str, args: tuple[str, ...], owned: tuple[str, ...] = LAUNCHER_OWNED_FLAGS
) -> None:
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in MULTI_NODE_FLAGS and flag in owned:
            raise t.error(
                key,
                f"must not set {flag}: the ssh launcher gives every node --nnodes, --node-rank and "
                "--dist-init-addr itself (set launch.ssh.hosts, one host per node)",
            )
        if flag in owned:
            raise t.error(key, f"must not set {flag}: specgate picks host and free ports itself")
        if secret := secret_flag_in(arg):
            # Inside a wrapper's command string the flag is named, not the string: that holds the key.
            held = f"{secret} inside a command string" if not secret_flag(arg) else flag
            taken = "" if flag == secret or held != flag else f" (SGLang takes it for {secret})"
            raise t.error(
                key, f"must not hold {held}{taken}: a key in a deployment file is committed and printed; export it and "
                "name the variable in launch.api_key_env"
            )


def _reject_remote_repo(t: Table, key: str, args: tuple[str, ...], ssh: SshSpec | None) -> None:
    """On a remote host `{repo}` is launch.ssh.directory: without one it would mean nothing there."""
    if ssh is not None and ssh.directory is None and any("{repo}" in a for a in args):
        raise t.error(key, "uses {repo}, which on the remote side is launch.ssh.directory: set launch.ssh.directory")


def _parse_ssh(t: Table) -> SshSpec:
    hosts = tuple(t.str_list("hosts"))
    if not hosts:
        raise t.error("hosts", 'expected at least one host, e.g. ["gpu-node-1"] (one per node; the first is rank 0)')
    for i, host in enumerate(hosts):
        # A leading "-" would reach ssh as an option; blanks would split into several arguments.
        if not host or host.startswith("-") or any(ch.isspace() for ch in host):
            raise t.error(f"hosts[{i}]", f"{host!r} is not a host name (no blanks, not starting with '-')")
    if len(set(hosts)) != len(hosts):
        raise t.error(
            "hosts",
            f"names a host twice ({list(hosts)}); give another name for the same machine (e.g. 127.0.0.1 and localhost)",
        )
    nodes = t.integer("nodes", len(hosts), minimum=1, maximum=MAX_NODES, derived="the number of hosts")
    if nodes != len(hosts):
        raise t.error(
            "nodes", f"is {nodes}, but launch.ssh.hosts names {len(hosts)} host(s): expected one host per node"
        )
    identity = t.text("identity_file", None)
    identity_path = Path(identity).expanduser() if identity is not None else None
    if identity_path is not None and not identity_path.is_file():
        raise t.error("identity_file", f"{identity!r}: no such file on this machine (the private key ssh -i reads)")
    user = t.text("user", None)
    if user is not None and (not user or user.startswith("-") or any(ch.isspace() or ch == "@" for ch in user)):
        raise t.error("user", f"{user!r} is not a user name")
    spec = SshSpec(
        hosts=hosts,
        user=user,
        port=t.integer("port", None, minimum=1, maximum=65535),
        identity_file=identity_path,
        options=tuple(t.str_list("options", [])),
        directory=t.text("directory", None),
        python=t.text("python", "python3"),
        reach=t.text("reach", "forward", choices=SSH_REACH),
        dist_init_host=t.text("dist_init_host", None),
        forward_env=tuple(t.str_list("forward_env", [])),
    )
    for key in ("directory", "python"):
        # Here {repo} and {python} are this machine's checkout and interpreter: for a "remote"
        # host that shares this file system (localhost, a shared home).
        value = getattr(spec, key)
        unknown = [m.group(0) for m in _PLACEHOLDER.finditer(value or "") if m.group(1) not in ("repo", "python")]
        if unknown:
            raise t.error(
                key, f"unknown placeholder {unknown[0]} in {value!r}; known here: {{repo}}, {{python}} (this machine's)"
            )
    if not spec.python.strip():
        raise t.error("python", 'expected the remote interpreter, e.g. "python3" or "/opt/sglang/bin/python"')
    for name in spec.forward_env:
        if problem := env_name_problem(name):
            raise t.error("forward_env", f"{name!r} {problem}")
    remember_forwarded(spec.forward_env)  # HF_TOKEN and the like: the servers get them, no output does
    for option in spec.options:
        if option in ("-N", "-f", "-T", "-t", "-tt", "-L", "-R", "-W", "-M", "-S"):
            raise t.error("options", f"must not hold {option}: the launcher decides how each ssh session runs")
    if spec.dist_init_host is not None and (not spec.dist_init_host or any(ch.isspace() for ch in spec.dist_init_host)):
        raise t.error("dist_init_host", f"{spec.dist_init_host!r} is not a host name or address")
    t.reject_unknown()
    return spec


def _parse_configs(t: Table, launch: LaunchSpec, folder: Path) -> dict[str, ServerConfig]:
    if not t.keys():
        raise t.error(None, "expected at least one config, e.g. [configs.baseline]")
    configs: dict[str, ServerConfig] = {}
    errors: list[DeploymentError] = []
    for name in t.names(safe=True):
        # Each config is checked on its own, so that `specgate check` lists every broken one.
        try:
            configs[name] = _parse_config(t, name, launch, folder)
        except DeploymentError as exc:
            errors.append(exc)
    if errors:
        raise DeploymentErrors(errors)
    return configs


def _parse_config(t: Table, name: str, launch: LaunchSpec, folder: Path) -> ServerConfig:
    if problem := safe_name_problem(name):
        raise t.error(name, f"config name {problem}")
    if _BUCKET_IN_TEST.search(name):
        # A gate test's id ends with a config's name ("…-beats-ref"): one ending "-at-2K" reads as
        # the 2K bucket's test (bucket_of_test), and the report would name a bucket it never ran.
        raise t.error(name, 'config name ends like a context bucket\'s test id ("-at-<tokens>"): rename it')
    c = t.table(name)
    args = tuple(c.str_list("args", []))
    _reject_owned_flags(c, "args", args, launch.owned_flags)
    _reject_unknown_placeholders(c, "args", args)
    _reject_remote_repo(c, "args", args, launch.ssh)
    url = c.text("url", None)
    if url is not None:
        remember_url(url)  # before any error below quotes it
    if launch.launcher == "url" and not url:
        raise c.error("url", 'is required when launch.launcher = "url" (the address of a running server)')
    if url is not None and not url.startswith(("http://", "https://")):
        raise c.error("url", f"expected an http:// or https:// address, got {url!r}")
    if url is not None and (env := url_password_env(url)) is not None and (problem := env_name_problem(env)):
        raise c.error("url", f"reads its password from ${{{env}}}, whose name {problem}")
    if url is not None and launch.api_key_env is not None and _url_credentials(url):
        raise c.error("url", _both_credentials(name, launch.api_key_env))
    command = c.str_list("command", None)
    if command is not None:
        if launch.launcher == "url":
            raise c.error("command", 'applies to launch.launcher = "local" or "ssh" only; a url config is not launched')
        if not command:
            raise c.error("command", 'expected a non-empty command, e.g. ["/opt/sglang-next/bin/python", "-m", "sglang.launch_server"]')
        _reject_unknown_placeholders(c, "command", tuple(command))
        _reject_owned_flags(c, "command", tuple(command), launch.owned_flags)
        _reject_remote_repo(c, "command", tuple(command), launch.ssh)
    tolerate = tuple(c.str_list("tolerate", [], choices=tuple(TOLERABLE)))
    for known in tolerate:
        if known not in TOLERABLE:
            raise c.error("tolerate", f"unknown difference {known!r}; known: {', '.join(TOLERABLE)}")
    config = ServerConfig(
        name=name,
        args=args,
        env=c.env_map("env"),
        url=url,
        description=c.text("description", ""),
        tolerate=tolerate,
        command=tuple(command) if command is not None else None,
        reference=c.text("reference", None),
        drafter_card=_drafter_card(c, folder),
        sglang_release=_sglang_release(c),
    )
    remember_env(config.env)  # as launch.env's
    c.reject_unknown()
    return config


def _sglang_release(t: Table) -> str | None:
    """A declared SGLang release ("0.5.23"), checked to read as one."""
    text = t.text("sglang_release", None)
    if text is not None and declared_release(text) is None:
        raise t.error(
            "sglang_release", f'expected an SGLang release such as "0.5.23" or "0.5.15.post1", got {text!r}'
        )
    return text


def _url_credentials(url: str) -> bool:
    """Whether `url` carries user[:password]@: httpx then sends them as Basic authorization."""
    try:
        parts = urlsplit(url)
        return bool(parts.username or parts.password)
    except ValueError:
        return False  # not a url at all: the url checks name it


def _both_credentials(name: str, key_env: str) -> str:
    # Both are an Authorization header, and a request carries one: httpx puts the url's Basic
    # credentials in place of the Bearer key, so SGLang's --api-key check answers 401 to every
    # request. A header of another name would reach neither SGLang nor a proxy that checks Basic.
    return (
        f"carries credentials (user:password@) while launch.api_key_env names {key_env}: both go in the "
        "one Authorization header of each request (Basic for the url's, Bearer for the key), and the url's "
        "would replace the key, so a server started with --api-key answers 401. Use one of them: remove "
        f"user:password@ from configs.{name}.url where the server checks its API key, or remove "
        "launch.api_key_env where a proxy in front of it checks the password"
    )


def _drafter_card(c: Table, folder: Path) -> Path | None:
    """The card's path, read once here so that a bad card is named before anything boots."""
    raw = c.text("drafter_card", None)
    if raw is None:
        return None
    path = (folder / raw).resolve() if not Path(raw).is_absolute() else Path(raw)
    try:
        load_card(path)
    except ValueError as exc:
        raise c.error("drafter_card", str(exc)) from None
    return path


def _max_repeats(t: Table, repeats: int) -> int:
    value = t.integer(
        "max_repeats", max(repeats, 45), minimum=3, maximum=MAX_REPEATS, derived="the larger of repeats and 45"
    )
    if value < repeats:
        raise t.error("max_repeats", f"expected an integer >= {repeats} (workload.repeats), got {value}")
    return value


def _parse_workload(t: Table, folder: Path) -> Workload:
    files = tuple(t.str_list("prompt_files", []))
    # Your own prompt files alone, unless built-in sets are named as well.
    sets = tuple(
        t.str_list(
            "prompt_sets",
            [] if files else list(KNOWN_SETS),
            choices=KNOWN_SETS,
            derived="every built-in set, or none where prompt_files is given",
        )
    )
    if not sets and not files:
        raise t.error("prompt_sets", f"expected at least one prompt set; known: {', '.join(KNOWN_SETS)}")
    for s in sets:
        if s not in KNOWN_SETS:
            raise t.error("prompt_sets", f"unknown prompt set {s!r}; known: {', '.join(KNOWN_SETS)}")
    paths: list[Path] = []
    for raw in files:
        path = (folder / raw).resolve() if not Path(raw).is_absolute() else Path(raw)
        if path.stem in sets or path.stem in {p.stem for p in paths}:
            raise t.error("prompt_files", f"{raw!r}: its name {path.stem!r} is already a prompt set here; rename the file")
        try:
            load_prompt_file(path, path.stem)
        except ValueError as exc:
            raise t.error("prompt_files", str(exc)) from None
        paths.append(path)
    fmt = t.text("prompt_format", "raw", choices=KNOWN_FORMATS)
    w = t.table("warmup")
    warmup = WarmupSpec(
        min_requests=w.integer("min_requests", 2, minimum=0, maximum=MAX_WARMUP_REQUESTS),
        max_requests=w.integer("max_requests", 30, minimum=1, maximum=MAX_WARMUP_REQUESTS),
        settle_window=w.integer("settle_window", 3, minimum=2, maximum=MAX_WARMUP_REQUESTS),
        settle_tolerance=w.number("settle_tolerance", 0.05, minimum=0.0, maximum=1.0),
    )
    if warmup.max_requests < warmup.min_requests:
        raise w.error("max_requests", f"expected >= min_requests ({warmup.min_requests})")
    w.reject_unknown()
    repeats = t.integer("repeats", 9, minimum=3, maximum=MAX_REPEATS)
    workload = Workload(
        prompt_sets=sets,
        prompt_format=fmt,
        max_new_tokens=t.integer("max_new_tokens", 256, minimum=2, maximum=MAX_NEW_TOKENS),
        concurrency=tuple(t.int_list("concurrency", [1], maximum=MAX_CONCURRENCY)),
        repeats=repeats,
        max_repeats=_max_repeats(t, repeats),
        warmup=warmup,
        request_timeout_s=t.number("request_timeout_s", 300.0, minimum=0.1, maximum=MAX_WAIT_S),
        prompt_files=tuple(paths),
        ignore_eos=t.flag("ignore_eos", True),
        context_buckets=tuple(
            t.token_counts(
                "context_buckets",
                [],
                minimum=MIN_CONTEXT_TOKENS,
                maximum=MAX_CONTEXT_TOKENS,
                meaning="prompt lengths (tokens) measured and gated each as a bucket of its own beside the short "
                "workload, single-stream (concurrency 1: one stream's decode speed is the subject), with long "
                "prompts built of the shipped prompt sets' text",
            )
        ),
        context_repeats=t.integer(
            "context_repeats", repeats, minimum=3, maximum=MAX_REPEATS, derived="workload.repeats"
        ),
    )
    if "context_repeats" in t.keys() and not workload.context_buckets:
        # Requests per context bucket, with no bucket to measure: a user who meant to add buckets
        # would otherwise see a run at short context alone and take it for the whole.
        raise t.error("context_repeats", "is set but workload.context_buckets is not: list the buckets it is for, or drop it")
    if not workload.ignore_eos and any(c > 1 for c in workload.concurrency):
        raise t.error(
            "ignore_eos",
            f"is false with concurrency {list(workload.concurrency)}: answers of unequal length drain a batch "
            "as they end, so a request would be timed partly at a smaller batch than its row says; measure "
            "answers alone at concurrency [1], or keep ignore_eos = true",
        )
    t.reject_unknown()
    return workload


def _parse_equivalence(t: Table) -> EquivalenceSpec:
    enabled = t.flag("enabled", True)
    skip_reason = t.text("skip_reason", "")
    if not enabled and not skip_reason.strip():
        raise t.error("skip_reason", "is required when enabled = false: say why outputs cannot be compared here")
    spec = EquivalenceSpec(
        enabled=enabled,
        skip_reason=skip_reason,
        tie_margin=t.number("tie_margin", 0.05, minimum=0.0, maximum=MAX_TIE_MARGIN),
        # More than the top-2 the rule needs: a three-way bf16 tie is seen on real models,
        # and only tokens within tie_margin of top-1 are ever excused, however many come back.
        top_logprobs=t.integer("top_logprobs", 5, minimum=2, maximum=MAX_TOP_LOGPROBS),
        max_new_tokens=t.integer("max_new_tokens", 64, minimum=1, maximum=MAX_NEW_TOKENS),
        stop_strings=tuple(t.str_list("stop_strings", ["\n\n", "."])),
        concurrency=tuple(t.int_list("concurrency", [1, 4], maximum=MAX_CONCURRENCY)),
        hypothesis_profile=t.text("hypothesis_profile", "gpu", choices=("ci", "gpu", "dev")),
        examples=t.integer("examples", None, minimum=1, maximum=MAX_EXAMPLES),
        # Spec v2 EAGLE servers crashed on logprob requests in some releases (SGLang #17349):
        # 0 turns the second requests off.
        second_opinions=t.integer("second_opinions", 5, minimum=0, maximum=100),
        features=_equivalence_features(t),
    )
    t.reject_unknown()
    return spec


def _equivalence_features(t: Table) -> tuple[str, ...]:
    """`[equivalence] features`: the request features the cases draw; a served feature left out is
    not checked, an unknown name is refused (a typo would check nothing)."""
    named = t.str_list("features", list(REQUEST_FEATURES), choices=REQUEST_FEATURES)
    for i, name in enumerate(named):
        if name not in REQUEST_FEATURES:
            raise t.error(f"features[{i}]", f"unknown request feature {name!r}; known: {', '.join(REQUEST_FEATURES)}")
    return tuple(dict.fromkeys(named))


def _parse_gates(t: Table, configs: dict[str, ServerConfig], workload: Workload) -> Gates:
    declared: dict[str, tuple[Any, ...]] = {}
    errors: list[DeploymentError] = []  # every broken gate is listed, not only the first
    for kind in declared_kinds():
        assert kind.table is not None
        entries = []
        for g in t.table_list(kind.table):
            try:
                with calling(kind, f"parse (of {g.field('').rstrip('.')} in {g.error(None, '').path})"):
                    entries.append(kind.parse(g, configs, workload))
                g.reject_unknown()
            except DeploymentError as exc:
                errors.append(exc)
        declared[kind.table] = tuple(entries)
    if errors:
        raise DeploymentErrors(errors)
    return _parse_gate_settings(t, configs, declared)


def _parse_gate_settings(t: Table, configs: dict[str, ServerConfig], declared: dict[str, tuple[Any, ...]]) -> Gates:
    tol = t.table("tolerance")
    by_config_table = tol.table("decode_tps_by_config")
    by_config = {}
    for name in by_config_table.names():
        if name not in configs:
            raise by_config_table.error(name, f"is not a config under [configs]; have {sorted(configs)}")
        by_config[name] = by_config_table.number(name, minimum=0.0, maximum=MAX_TOLERANCE)
    by_config_table.reject_unknown()
    tolerance = Tolerances(
        decode_tps_fraction=tol.number("decode_tps", 0.10, minimum=0.0, maximum=MAX_TOLERANCE),
        accept_length=tol.number("accept_length", 0.05, minimum=0.0, maximum=1.0),
        faster_note=tol.number("faster_note", 0.15, minimum=0.0, maximum=MAX_RATIO),
        decode_tps_by_config=by_config,
    )
    tol.reject_unknown()
    spread = t.table("between_boot")
    between_boot = None
    if spread.keys():
        between_boot = BetweenBootSpread(
            decode_tps_log_sd=spread.number("decode_tps", minimum=0.0, maximum=1.0),
            speedup_log_sd=spread.number("speedup", minimum=0.0, maximum=1.0),
            source=spread.text("source"),
            decode_tps_shared_log_sd=spread.number("decode_tps_shared", None, minimum=0.0, maximum=1.0),
            speedup_shared_log_sd=spread.number("speedup_shared", None, minimum=0.0, maximum=1.0),
            request_lag1=spread.number("request_lag1", None, minimum=0.0, maximum=0.9),
            request_log_sd=spread.number("request_sd", None, minimum=0.0, maximum=1.0),
        )
        for kind, shared, total in (
            ("decode_tps", between_boot.decode_tps_shared_log_sd, between_boot.decode_tps_log_sd),
            ("speedup", between_boot.speedup_shared_log_sd, between_boot.speedup_log_sd),
        ):
            if shared is not None and shared > total:
                raise spread.error(f"{kind}_shared", f"is {shared:g}, more than the whole spread {kind} = {total:g}")
        if between_boot.request_log_sd == 0:
            # 0 reads as "within-boot 0.0%" where leaving it out is said as the floor it is.
            raise spread.error(
                "request_sd", "is 0: no request decodes at exactly one speed; leave it out where it is not known"
            )
        if not between_boot.source.strip():
            raise spread.error("source", "say where the spread was measured (e.g. the specgate spread of results/…)")
        spread.reject_unknown()
    gates = Gates(
        tolerance=tolerance,
        confidence=t.number("confidence", 0.95, minimum=0.5, maximum=0.999),
        sample_batch=t.integer("sample_batch", 6, minimum=1, maximum=MAX_REPEATS),
        uncompared=t.text("uncompared", "fail", choices=("fail", "warn")),
        between_boot=between_boot,
        declared=declared,
        detect=t.number("detect", None, minimum=0.001, maximum=0.9),
        against_stored=t.flag("against_stored", True),
    )
    t.reject_unknown()
    return gates


def bucket_label(tokens: int) -> str:
    """"8K" for 8192, "1500" for 1500: the name a bucket is shown and stored under."""
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


# How a gate test's id names the bucket it measures or judges ("eagle3-decode-c1-at-8K").
_BUCKET_IN_TEST = re.compile(r"-at-([0-9]+)(K?)\]?$")


def bucket_test_id(test_id: str, tokens: int) -> str:
    """A gate test's id for one context bucket: the short workload's id with the bucket's label."""
    return f"{test_id}-at-{bucket_label(tokens)}"


def bucket_of_test(test: str) -> int:
    """The bucket (prompt tokens) a gate test's id or pytest name measures (`bucket_test_id`);
    0: the short workload."""
    found = _BUCKET_IN_TEST.search(test)
    if not found:
        return 0
    return int(found.group(1)) * (1024 if found.group(2) else 1)


_VIEWS: dict[tuple[int, int], Deployment] = {}


def bucket_view(dep: Deployment, tokens: int) -> Deployment:
    """The deployment as one context bucket's measurement and gates read it: its requests are
    single-stream (concurrency 1: the product's subject is one stream's decode speed, and a long
    prompt per request of a batch would measure the KV pool), `context_repeats` of them per
    config and boot, and never more while undecided (each costs a long prefill); no drift check of
    its own. One object per
    (deployment, bucket), so the gates planned from it keep their identity (gate_kinds.planned_of)."""
    key = (id(dep), tokens)
    if key not in _VIEWS:
        wl = dep.workload
        n = wl.context_repeats
        _VIEWS[key] = dataclasses.replace(
            dep,
            workload=dataclasses.replace(wl, concurrency=(1,), repeats=n, max_repeats=n),
            # The host's drift during the run is measured once, on the short workload: a bucket's
            # own check would boot the reference again per bucket where servers take turns.
            launch=dataclasses.replace(dep.launch, drift_check=False),
        )
        weakref.finalize(dep, _VIEWS.pop, key, None)
    return _VIEWS[key]
