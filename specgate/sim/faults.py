"""SIMULATOR injectable faults: each one exists to prove that one gate can fail.

Given on the simulator's command line as `--sim-fault NAME[=VALUE]` (repeatable), or
from outside the deployment through the environment, the way a regression in the code
under test would arrive: `SPECGATE_SIM_FAULTS="eagle3-decode:diverge-at=5;*:slowdown=0.3"`
(config name or `*`, then the fault). The launcher tells each server its config name
in `SPECGATE_CONFIG`.

| fault            | what the server then does                                         | gate that must go red        |
|------------------|-------------------------------------------------------------------|------------------------------|
| diverge-at=K     | speculative output takes a non-top-2 token at position K           | greedy equivalence           |
| stop-leak        | speculative output runs past a stop string and keeps it in text   | stop-string check            |
| overshoot        | speculative output emits up to `steps` tokens past max_new_tokens  | max_new_tokens check         |
| stop-overshoot   | keeps the verify step's tokens after a stop string (text cut there)| token count at a stop        |
| prefill-stop-miss| speculative output looks for stop strings only after the first    | the first-token stop edge    |
|                  | (prefill) token's text: a stop string that token holds is missed   | (cases.first_token_stop_case)|
| stop-list-order  | speculative output checks stop strings once per verify step, in    | stop strings ended where the |
|                  | the order the request lists them (SGLang 0.5.14): a step completing| baseline's ended (feature    |
|                  | two ends on the one listed first                                   | stop_order draws such lists) |
| penalty-per-step | the penalties count one token per verify step (its last): accepted | greedy equivalence, feature  |
|                  | drafts go uncounted, as a penalizer advanced per step would        | penalties (token comparison) |
| bias-off-drafts  | logit_bias is left off drafted positions (the bonus token has it): | feature logit_bias: a banned |
|                  | a banned token can be accepted from the draft                      | token in the answer          |
| min-new-per-step | min_new_tokens is held against verify steps, not tokens: EOS, stop | feature min_new_tokens: the  |
|                  | ids and stop strings stay held back past M tokens                  | same end after M             |
| n-choices-differ | with sampling_params.n > 1, choice j (from 0) of a speculative     | feature n: choices identical |
|                  | answer parts from the first at its token j                         | to each other                |
| grammar-off-drafts| the regex's mask is left off drafted positions (the grammar not   | feature grammar: the text    |
|                  | advanced over accepted drafts): text outside the grammar           | valid under the regex        |
| stop-id-overshoot| keeps the verify step's tokens after one of the request's          | feature stop_token_ids: ids  |
|                  | stop_token_ids, text cut at the stop                               | not kept past a stop         |
| diverge-past=P   | speculative output takes a non-top-2 token at every position from  | the context-length edge      |
|                  | sequence position P on (prompt and answer): a drafter past its     | (context_edge.context_edge_  |
|                  | position limit corrupting what verify keeps                        | case)                        |
| reserve=N        | keeps N more slots per request than SGLang's draft-token reservation| the context-length edge's    |
|                  | (a release that changed it): the context edge's request is refused | refusal: NOT CHECKED         |
| accept-collapse  | the draft is always wrong: accept length 1.0                       | accept length / beats        |
| fake-verify-ct=T | spec_verify_ct reported as completion_tokens / T (an accept length | the accept gates' counter    |
|                  | of T claimed); the other spec counters stay the true ones          | cross-check (accept_counts)  |
| slowdown=F       | every step costs (1+F) times as much                               | no-regression (decode tok/s) |
| prefill-verify-  | a verify in prefill attention mode runs the prefill path (its      | beats per context bucket: the|
| past=N           | --sim-prefill-verify-factor and -ms-per-1k) only from KV length N  | short bucket passes, one past|
|                  | on, whatever the backends; below N it costs a decode-path verify   | N fails (the slope's lever)  |
| crash-after=N    | the process exits when request N+1 arrives                         | every test of that config    |
| never-ready      | /health_generate never answers 200; the process stays alive        | boot timeout                 |
| boot-crash-once=F| dies while booting unless file F exists (then creates it): like    | the pool's boot-alone retry  |
|                  | SGLang's "Not enough memory" when neighbours boot at once          |                              |
| boot-offset=S    | this boot runs every step exp(N(0, S)) times as long, drawn once   | between-boot noise: intervals|
|                  | at start (SPECGATE_SIM_SEED makes the draw reproducible per server)| must hold it (calibrate)     |
| h200-noise       | speed noise shaped as the H200's (sim/noise.py): a speculative     | between-boot and request     |
| [=SCALE]         | server's steps cost exp(run + own) times as long, the run offset   | noise: intervals must hold it|
|                  | shared by every speculative server of the run (SPECGATE_RUN_ID),   | (replicas of one run are not |
|                  | own drawn per boot; plain its own between-boot offset; requests    | independent boots)           |
|                  | AR(1) within a boot. SCALE multiplies every SD (default 1)         |                              |
| drift=F          | steps cost (1 + F x minutes since boot) times as much              | interleaving must cancel it  |
| trickle-after=N  | from request N+1 on, answers 200 and then only keep-alives, forever| the per-request deadline     |
| trickle-get=PATH | GET PATH (/health_generate, /get_server_info) answers 200 and its | the probes' whole-request    |
|                  | headers, then one byte of body at a time, never finishing         | deadline; boot_timeout_s     |
| burst-stream     | streamed chunks are held and sent in two bursts (half way through  | fidelity: the speed gates    |
|                  | max_new_tokens, then at the end), as a buffering proxy delivers    | FAIL on the server's own     |
|                  | them; meta_info's e2e_latency / decode_throughput and the log stay | figure                       |
|                  | the server's true ones                                             |                              |
| server-info-list | /get_server_info answers a JSON list instead of an object          | a report despite odd info    |
| echo-headers     | /generate answers 500 with the request's headers in its body       | no credential in any output  |
|                  | (Authorization included), as a debugging proxy or framework does   | (secrets.py masking)         |
| node-crash=R     | with --nnodes > 1, the node of rank R dies at boot                  | multi-node teardown (ssh)    |
| greedy-accept    | at temperature > 0, verify accepts a draft only where it is the    | sampling equivalence: the    |
|                  | target's argmax and replaces a rejected one (and the bonus) by the | samples' likelihood, sharper |
|                  | argmax (SGLang's ROCm verify, PR #31214)                           | than the reference's         |
| drafts-unfiltered| the acceptance test leaves top_k, top_p, min_p off (or those named:| sampling equivalence: tokens |
| [=F,F]           | drafts-unfiltered=min_p): accepted drafts break them (vLLM #42744) | outside the setting          |
| temperature-twice| verify divides the logits by the temperature twice                 | sampling equivalence at T!=1 |
| penalties-off-verify| verify tests and replaces drafts without the penalties and the   | sampling equivalence under   |
|                  | logit_bias (only the prefill's token has them): a verify not wired | penalties and logit_bias     |
|                  | to the penalizers                                                  |                              |
| boundary-jitter=S| NOT a defect: every sampler (plain and verify alike) draws from     | none: sampling equivalence   |
|                  | logits N(0, S) off the scoring pass's, as bf16 decode and prefill  | must PASS (its violation test|
|                  | kernels differ; tokens at a filter's edge fall past it as scored,  | weighs the reference's own   |
|                  | on both sides (SGLang 0.5.14: ~0.1% at top_p 0.9 and top_k 20)     | count)                       |
"""

from __future__ import annotations

from dataclasses import dataclass

KNOWN = (
    "diverge-at",
    "stop-leak",
    "overshoot",
    "stop-overshoot",
    "prefill-stop-miss",
    "stop-list-order",
    "penalty-per-step",
    "bias-off-drafts",
    "min-new-per-step",
    "n-choices-differ",
    "grammar-off-drafts",
    "stop-id-overshoot",
    "diverge-past",
    "reserve",
    "accept-collapse",
    "fake-verify-ct",
    "slowdown",
    "prefill-verify-past",
    "crash-after",
    "never-ready",
    "boot-crash-once",
    "boot-offset",
    "h200-noise",
    "drift",
    "trickle-after",
    "trickle-get",
    "burst-stream",
    "server-info-list",
    "echo-headers",
    "node-crash",
    "greedy-accept",
    "drafts-unfiltered",
    "temperature-twice",
    "penalties-off-verify",
    "boundary-jitter",
)
FILTERS = ("top_k", "top_p", "min_p")


@dataclass(frozen=True)
class Faults:
    diverge_at: int | None = None
    stop_leak: bool = False
    overshoot: bool = False
    stop_overshoot: bool = False
    # Stop strings are looked for only in the text after the first (prefill) token, as a server
    # whose stop check runs on verify output alone would: narrower than stop-leak, so only a stop
    # string within the first token's text tells it from a healthy server.
    prefill_stop_miss: bool = False
    # Stop strings are looked for once per verify step, after its tokens are appended, and tried in
    # the order the request lists them, as SGLang's Req._check_str_based_finish does.
    stop_list_order: bool = False
    # Request-feature faults (sim/features.py): each mishandles one feature on the speculative path.
    penalty_per_step: bool = False
    bias_off_drafts: bool = False
    min_new_per_step: bool = False
    n_choices_differ: bool = False
    grammar_off_drafts: bool = False
    stop_id_overshoot: bool = False
    diverge_past: int | None = None  # a sequence position (prompt tokens + answer tokens)
    reserve: int = 0  # slots kept per request beyond SGLang's draft-token reservation
    accept_collapse: bool = False
    fake_verify_ct: float = 0.0  # the accept length a faked spec_verify_ct claims; 0: the true count
    slowdown: float = 0.0
    prefill_verify_past: int | None = None  # KV length from which prefill-mode verify runs the prefill path
    crash_after: int | None = None
    never_ready: bool = False
    boot_crash_once: str | None = None  # a marker file: absent, the boot dies and creates it
    boot_offset: float = 0.0  # SD of log(step cost) between boots
    h200_noise: float = 0.0  # the scale of the H200's measured speed noise (sim/noise.py); 0: off
    drift: float = 0.0  # relative slowdown per minute since boot
    trickle_after: int | None = None
    trickle_get: str | None = None  # a GET endpoint whose body never finishes
    # Stream chunks held and written in two bursts, as a buffering proxy in front of the server
    # delivers them: the client times the second half's arrival, the server its true decoding.
    burst_stream: bool = False
    server_info_list: bool = False
    echo_headers: bool = False  # a 500 whose body echoes the request's headers, Authorization too
    node_crash: int | None = None  # the rank of the node that dies at boot
    # Sampling faults (sim/sampled.py): each breaks rejection sampling's exactness in verify only.
    greedy_accept: bool = False
    drafts_unfiltered: frozenset[str] = frozenset()  # the filters the acceptance test leaves off
    temperature_twice: bool = False
    penalties_off_verify: bool = False
    # Healthy numerics, not a fault: the samplers' logits differ from the scoring pass's by this SD
    # (nats), the same for every server at the same context, so both sides sample one distribution.
    boundary_jitter: float = 0.0

    @property
    def active(self) -> list[str]:
        return [k for k, v in self.__dict__.items() if v not in (None, False, 0.0, frozenset())]


def parse_faults(specs: list[str]) -> Faults:
    values: dict[str, object] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        if name not in KNOWN:
            raise ValueError(f"--sim-fault {spec!r}: unknown fault; known: {', '.join(KNOWN)}")
        key = name.replace("-", "_")
        if name in ("diverge-at", "diverge-past", "crash-after", "trickle-after", "node-crash", "reserve", "prefill-verify-past"):
            if not (value.isascii() and value.isdigit()):
                raise ValueError(f"--sim-fault {spec!r}: expected {name}=<non-negative integer>")
            values[key] = int(value)
        elif name == "boot-crash-once":
            if not value:
                raise ValueError(f"--sim-fault {spec!r}: expected boot-crash-once=<marker file>")
            values[key] = value
        elif name == "trickle-get":
            if not value.startswith("/"):
                raise ValueError(f"--sim-fault {spec!r}: expected trickle-get=/<endpoint>, e.g. trickle-get=/health_generate")
            values[key] = value
        elif name == "h200-noise":
            try:
                scale = float(value) if value else 1.0
            except ValueError:
                raise ValueError(f"--sim-fault {spec!r}: expected h200-noise[=<scale of the measured SDs>], e.g. h200-noise=2") from None
            if not (scale == scale and 0 < scale <= 100):
                raise ValueError(f"--sim-fault {spec!r}: expected a scale above 0 and at most 100")
            values[key] = scale
        elif name == "fake-verify-ct":
            try:
                claimed = float(value)
            except ValueError:
                raise ValueError(f"--sim-fault {spec!r}: expected fake-verify-ct=<accept length>, e.g. 2.5") from None
            if not 1 <= claimed <= 100:
                raise ValueError(f"--sim-fault {spec!r}: expected an accept length from 1 to 100")
            values[key] = claimed
        elif name == "drafts-unfiltered":
            named = [f.strip() for f in value.split(",") if f.strip()] if value else list(FILTERS)
            wrong = [f for f in named if f not in FILTERS]
            if wrong:
                raise ValueError(f"--sim-fault {spec!r}: expected drafts-unfiltered[=F,...] with F among {', '.join(FILTERS)}")
            values[key] = frozenset(named)
        elif name in ("slowdown", "boot-offset", "drift", "boundary-jitter"):
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"--sim-fault {spec!r}: expected {name}=<fraction>, e.g. {name}=0.05") from None
            if not (number == number and abs(number) < 100):  # NaN or absurd
                raise ValueError(f"--sim-fault {spec!r}: expected a finite fraction")
            # A step that costs (1+F) times as much must still cost something; jitter is a spread.
            low, what = (0.0, ">= 0") if name == "boundary-jitter" else (-1.0, "> -1 (a cost cannot fall to zero)")
            if number < low or (low == -1.0 and number <= low):
                raise ValueError(f"--sim-fault {spec!r}: expected {name} {what}")
            values[key] = number
        else:
            if value:
                raise ValueError(f"--sim-fault {spec!r}: {name} takes no value")
            values[key] = True
    # Each of these says when stop strings are looked for; together they would say it twice.
    clash = [n for n in ("stop-leak", "prefill-stop-miss") if values.get(n.replace("-", "_"))]
    if values.get("stop_list_order") and clash:
        raise ValueError(f"--sim-fault stop-list-order cannot be combined with {', '.join(clash)}")
    return Faults(**values)  # type: ignore[arg-type]


def unknown_fault_targets(environ: dict[str, str], configs: list[str]) -> list[str]:
    """SPECGATE_SIM_FAULTS entries aimed at a config the deployment does not have: a typo there
    would inject nothing and leave a green run that proves nothing."""
    known = set(configs) | {"*"}
    out = []
    for entry in filter(None, (e.strip() for e in environ.get("SPECGATE_SIM_FAULTS", "").split(";"))):
        target, sep, _ = entry.partition(":")
        if not sep or target.rpartition("@")[0] or target not in known:
            if target.rpartition("@")[0] in known:
                continue  # a replicate boot, CONFIG@K
            out.append(entry)
    return out


def fault_env_problems(environ: dict[str, str], simulated: dict[str, bool]) -> list[str]:
    """What is wrong with SPECGATE_SIM_FAULTS for a deployment whose configs are `simulated`
    (config -> whether its server is this simulator), found before any server boots: an entry
    aimed at no config, a fault the simulator does not know or a value it refuses (the server would
    die at boot, after the others booted), a fault aimed at a server that is no simulator (it would
    be ignored: the run would prove nothing the fault was meant to prove)."""
    stray = unknown_fault_targets(environ, list(simulated))
    out = [
        f"SPECGATE_SIM_FAULTS names no config: {'; '.join(stray)} (expected CONFIG:FAULT or *:FAULT, "
        f"CONFIG one of {', '.join(simulated)})"
    ] if stray else []  # fmt: skip
    for entry in filter(None, (e.strip() for e in environ.get("SPECGATE_SIM_FAULTS", "").split(";"))):
        if entry in stray:
            continue
        target, _, fault = entry.partition(":")
        try:
            parse_faults([fault])
        except ValueError as exc:
            out.append(f"SPECGATE_SIM_FAULTS entry {entry!r}: {str(exc).removeprefix('--sim-fault ')}")
        config = target.rpartition("@")[0] or target
        aimed = list(simulated) if target == "*" else [config]
        unreachable = [c for c in aimed if not simulated.get(c, False)]
        if unreachable:
            out.append(
                f"SPECGATE_SIM_FAULTS entry {entry!r} cannot reach config(s) {', '.join(unreachable)}: their servers "
                "are not specgate's simulator (a url, or a command other than `-m specgate.sim`), which ignores it"
                + (" (aim it at the simulated configs by name)" if len(unreachable) < len(aimed) else "")
            )
    return out


def fault_arg_problems(args: list[str]) -> list[str]:
    """What the simulator would refuse among the `--sim-fault` values of a server's arguments."""
    values = [b for a, b in zip(args, args[1:]) if a == "--sim-fault"]
    values += [a.partition("=")[2] for a in args if a.startswith("--sim-fault=")]
    out = []
    for value in values:
        try:
            parse_faults([value])
        except ValueError as exc:
            out.append(str(exc))
    return out


def faults_from_env(environ: dict[str, str]) -> list[str]:
    """The SPECGATE_SIM_FAULTS entries aimed at this server's config (or at every one)."""
    # A replicate boot (CONFIG@K) is the same config: a fault aimed at the config hits it too.
    mine = environ.get("SPECGATE_CONFIG", "").rpartition("@")[0] or environ.get("SPECGATE_CONFIG", "")
    specs = []
    for entry in filter(None, (e.strip() for e in environ.get("SPECGATE_SIM_FAULTS", "").split(";"))):
        target, sep, fault = entry.partition(":")
        if not sep:
            raise ValueError(f"SPECGATE_SIM_FAULTS entry {entry!r}: expected CONFIG:FAULT or *:FAULT")
        if target in ("*", mine):
            specs.append(fault)
    return specs
