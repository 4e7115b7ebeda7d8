"""The sampling equivalence check: per speculative config, per sampling setting, many sampled
continuations per prompt from the config and from its reference (seeds drawn per request,
batched), each scored on the reference (its prompt logprobs), then:

1. the likelihood test (stats.likelihood_test): the samples' log-likelihood per token under the
   target, speculative against reference;
2. per-position token frequencies (stats.position_tests) where dense enough;
3. violations (violations.py): tokens outside the setting as the reference's scoring pass ranks
   them, the speculative side's count against the reference's own (stats.violation_test). Not
   "must be 0": on SGLang 0.5.14 the reference's own samples
   break top_p 0.9 and top_k 20 in about 0.1% of tokens as bf16 scoring ranks them, and a healthy
   speculative side as often.

Two stages, declared in advance. Stage 1 tests every setting at `alpha` over the whole test:
half to the likelihood tests (Bonferroni over settings), the other half to the position tests
(Bonferroni over every tested position of every setting), or, where some setting filters, a
quarter to those and a quarter to the violation tests (Bonferroni over the filtering settings).
A setting stage 1 rejects is redrawn, both sides under fresh seeds, and tested again at
`confirm_alpha` on the statistics that rejected; it fails only if both stages reject. The draws
are independent, so a healthy config fails at most alpha x confirm_alpha of runs
(spec.false_alarm_rate, stated in the report with both stages' statistics).
benchmarks/sampling_false_alarms.py measures the false-alarm rate over simulated runs (with
and without the scoring jitter that puts healthy tokens past a boundary), and each fault's
detection rate.

Calibration: the reference is also sampled under other seeds (the A/A), compared with itself
by stage 1's statistics at its thresholds; its spread gives the smallest likelihood shift stage 1
detects (80% power), stated per setting with the A/A's own outcome.

A failing setting names the prompt, the evidence and a curl reproducer with the seed, and the
case joins the replay file (replay.py), asked first on every later run.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specgate.prompts import Prompt, render
from specgate.sampling import wire
from specgate.sampling.replay import SamplingReplay
from specgate.sampling.stats import (
    LikelihoodTest,
    detectable_rate,
    detectable_shift,
    likelihood_test,
    position_tests,
    violation_test,
)
from specgate.sampling.violations import violation
from specgate.sampling_spec import SamplingSetting, SamplingSpec

Post = Callable[[dict[str, Any]], Any]  # POST /generate with this body: the parsed JSON answer
SAMPLE_BATCH = 64
SCORE_BATCH = 32


@dataclass(frozen=True)
class SamplingPrompt:
    label: str
    text: str


@dataclass
class Side:
    """One server's continuations of one prompt under one setting, scored on the reference."""

    seeds: list[int]
    ids: list[list[int]]
    logprobs: list[list[float]]
    tops: list[list[wire.Tops]]

    @property
    def loglik(self) -> list[float]:
        return [sum(lp) / max(len(lp), 1) for lp in self.logprobs]


@dataclass
class _Ahead:
    """A config's samples drawn before its reference was up (servers that take turns)."""

    prompt_ids: dict[str, list[int]]
    drawn: dict[tuple[str, bool], dict[str, list[list[int]]]]  # (setting, confirmation) -> prompt -> samples
    seconds: float


@dataclass
class _ReferenceDraw:
    prompt_ids: dict[str, list[int]] = field(default_factory=dict)
    main: dict[str, Side] = field(default_factory=dict)
    aa: dict[str, Side] = field(default_factory=dict)
    seconds: float = 0.0


def prompts_for(spec: SamplingSpec, sequence: tuple[Prompt, ...], prompt_format: str) -> list[SamplingPrompt]:
    """The workload's prompts in its pinned order (one of each set in turn), the first `spec.prompts`."""
    return [SamplingPrompt(p.label, render(p.messages, prompt_format)) for p in sequence[: spec.prompts]]


def _seed_stream(*parts: object) -> random.Random:
    return random.Random(int(hashlib.sha256(repr(parts).encode()).hexdigest()[:16], 16))


class SamplingChecker:
    def __init__(
        self,
        spec: SamplingSpec,
        prompts: list[SamplingPrompt],
        seed: int,
        replay: SamplingReplay | None = None,
    ) -> None:
        self.spec = spec
        self.prompts = prompts
        self.seed = seed
        self.replay = replay
        self._reference: dict[tuple[str, str], _ReferenceDraw] = {}
        self.rows: dict[str, dict[str, Any]] = {}  # config -> the report's row
        self.not_checked: dict[str, str] = {}  # config -> why its samples were not compared
        self.interrupted: dict[str, str] = {}  # config -> what its check had drawn when a signal stopped it
        self._ahead: dict[str, _Ahead] = {}  # config -> its samples drawn while its reference was down

    def report_rows(self) -> list[dict[str, Any]]:
        """The report's section: each config's row, or why it was not checked."""
        rows = list(self.rows.values())
        undecided = [(c, "NOT CHECKED", why) for c, why in self.not_checked.items()]
        undecided += [(c, "INTERRUPTED", what) for c, what in self.interrupted.items()]
        for config, status, why in undecided:
            if config not in self.rows:
                rows.append(
                    {
                        "config": config,
                        "reference": "",
                        "status": status,
                        "alpha": self.spec.alpha,
                        "confirm_alpha": self.spec.confirm_alpha,
                        "false_alarm_rate": self.spec.false_alarm_rate,
                        "tests": 0,
                        "likelihood_threshold": 0.0,
                        "position_threshold": 0.0,
                        "violation_threshold": None,
                        "not_checked": why,
                        "settings": [],
                    }
                )
        return rows

    # --- drawing ---------------------------------------------------------------------------
    def _prompts(self, setting: SamplingSetting) -> list[SamplingPrompt]:
        replayed = self.replay.prompts(setting.name) if self.replay else []
        seen = {p.label for p in replayed}
        return [*replayed, *(p for p in self.prompts if p.label not in seen)]

    def _draw(self, post: Post, score: Post, ids: list[int], setting: SamplingSetting, seeds: list[int], where: str) -> Side:
        return self._score(score, ids, seeds, self._sample(post, ids, setting, seeds, where))

    def _sample(self, post: Post, ids: list[int], setting: SamplingSetting, seeds: list[int], where: str) -> list[list[int]]:
        n = self.spec.max_new_tokens
        outs: list[list[int]] = []
        for at in range(0, len(seeds), SAMPLE_BATCH):
            chunk = seeds[at : at + SAMPLE_BATCH]
            answer = post(wire.sample_payload(ids, setting, chunk, n, self.spec.seed_param))
            outs += [wire.output_ids(item, where) for item in wire.items(answer, len(chunk), where)]
        short = [len(o) for o in outs if len(o) != n]
        if short:
            raise wire.MalformedAnswer(
                f"{where}: asked for {n} tokens with ignore_eos, {len(short)} answer(s) hold another count "
                f"(first: {short[0]})",
                url=where,
            )
        return outs

    def _score(self, score: Post, ids: list[int], seeds: list[int], outs: list[list[int]]) -> Side:
        """Samples scored on the reference: their log-likelihood and the top tokens at each position."""
        logprobs: list[list[float]] = []
        tops: list[list[wire.Tops]] = []
        for at in range(0, len(outs), SCORE_BATCH):
            chunk_ids = outs[at : at + SCORE_BATCH]
            answer = score(wire.score_payload([ids + o for o in chunk_ids], len(ids), self.spec.top_logprobs))
            for item, cont in zip(wire.items(answer, len(chunk_ids), "the reference's scoring"), chunk_ids):
                lp, tp = wire.scores(item, cont, "the reference's scoring")
                logprobs.append(lp)
                tops.append(tp)
        return Side(seeds, outs, logprobs, tops)

    def _reference_draw(
        self, reference: str, post_ref: Post, setting: SamplingSetting, confirm: bool = False
    ) -> _ReferenceDraw:
        """Stage 1's reference samples and its A/A, or (confirm) the confirmation's fresh samples,
        drawn once per reference and setting and shared by every config."""
        key = (reference, setting.name + ("/confirm" if confirm else ""))
        if key in self._reference:
            return self._reference[key]
        started = time.perf_counter()
        draw = _ReferenceDraw()
        parts = ("confirm",) if confirm else ()
        rng = _seed_stream(self.seed, reference, setting.name, "reference", *parts)
        for prompt in self._prompts(setting):
            if prompt.label not in draw.prompt_ids:
                tok = wire.items(post_ref(wire.tokenise_payload(prompt.text)), 1, f"{reference} (tokenise)")[0]
                draw.prompt_ids[prompt.label] = wire.prompt_ids(tok, f"{reference} (tokenise)")
            ids = draw.prompt_ids[prompt.label]
            for target in (draw.main,) if confirm else (draw.main, draw.aa):
                seeds = [rng.getrandbits(63) for _ in range(self.spec.samples)]
                target[prompt.label] = self._draw(post_ref, post_ref, ids, setting, seeds, reference)
        draw.seconds = time.perf_counter() - started
        self._reference[key] = draw
        return draw

    def _spec_seeds(self, config: str, setting: SamplingSetting, confirm: bool) -> dict[str, list[int]]:
        """The speculative side's seeds per prompt: the same whether drawn now or ahead of its reference."""
        parts = ("confirm",) if confirm else ()
        rng = _seed_stream(self.seed, config, setting.name, "speculative", *parts)
        return {p.label: [rng.getrandbits(63) for _ in range(self.spec.samples)] for p in self._prompts(setting)}

    def draw_ahead(self, config: str, post_spec: Post) -> None:
        """Where servers take turns (launch.coexist = false): `config`'s samples for every setting, its
        stage-2 confirmations' too, drawn while it is up, to be scored when its reference is
        (`check` then scores them instead of drawing). The prompts are tokenised by the config's own
        server: the same model; the reference's tokens are checked against them before scoring."""
        started = time.perf_counter()
        ids: dict[str, list[int]] = {}
        drawn: dict[tuple[str, bool], dict[str, list[list[int]]]] = {}
        for setting in self.spec.settings:
            for confirm in (False, True) if self.spec.confirm_alpha > 0 else (False,):
                outs = {}
                for prompt in self._prompts(setting):
                    if prompt.label not in ids:
                        tok = wire.items(post_spec(wire.tokenise_payload(prompt.text)), 1, f"{config} (tokenise)")[0]
                        ids[prompt.label] = wire.prompt_ids(tok, f"{config} (tokenise)")
                    seeds = self._spec_seeds(config, setting, confirm)[prompt.label]
                    outs[prompt.label] = self._sample(post_spec, ids[prompt.label], setting, seeds, config)
                drawn[(setting.name, confirm)] = outs
        self._ahead[config] = _Ahead(ids, drawn, time.perf_counter() - started)

    def _spec_draw(
        self, config: str, post_spec: Post | None, post_ref: Post, setting: SamplingSetting, ref: _ReferenceDraw, confirm: bool
    ) -> tuple[dict[str, Side], float]:
        started = time.perf_counter()
        ahead = self._ahead.get(config)
        sides = {}
        for label, seeds in self._spec_seeds(config, setting, confirm).items():
            ids = ref.prompt_ids[label]
            if ahead is not None:
                if ahead.prompt_ids.get(label) != ids:
                    raise wire.MalformedAnswer(
                        f"{config} and its reference tokenise prompt {label} differently: samples drawn ahead "
                        "cannot be scored on the reference (are they the same model?)",
                        url=config,
                    )
                sides[label] = self._score(post_ref, ids, seeds, ahead.drawn[(setting.name, confirm)][label])
            elif post_spec is None:
                raise RuntimeError(f"{config}: no samples drawn ahead and no server to draw them from")
            else:
                sides[label] = self._draw(post_spec, post_ref, ids, setting, seeds, config)
        return sides, time.perf_counter() - started

    # --- judging ----------------------------------------------------------------------------
    def check(
        self,
        config: str,
        reference: str,
        post_spec: Post | None,
        post_ref: Post,
        spec_url: str = "http://SPEC",
        api_key_env: str | None = None,
    ) -> dict[str, Any]:
        """Draws and judges every setting (stage 1), confirms each statistical rejection on fresh
        draws (stage 2); returns the report's row (status PASS or FAIL)."""
        results: list = []
        started = time.perf_counter()
        try:
            for setting in self.spec.settings:
                ref = self._reference_draw(reference, post_ref, setting)
                spec_sides, seconds = self._spec_draw(config, post_spec, post_ref, setting, ref, confirm=False)
                results.append((setting, ref, spec_sides, seconds))
            row, culprits = self._judge(config, reference, results)
            for (setting, ref, _, _), s in zip(results, row["settings"]):
                if s["status"] == "FAIL" and self.spec.confirm_alpha > 0:
                    s["confirmation"] = self._confirm(config, reference, post_spec, post_ref, setting, row, s)
                    if not s["confirmation"]["rejected"]:
                        s["status"] = "PASS"
                    s["evidence"].append(s["confirmation"]["evidence"])
                if s["status"] == "FAIL":
                    self._reproduce(config, setting, ref, s, culprits[setting.name], spec_url, api_key_env)
        except KeyboardInterrupt:
            self.interrupted[config] = self._cut_short(results, time.perf_counter() - started)
            raise
        row["status"] = "FAIL" if any(s["status"] == "FAIL" for s in row["settings"]) else "PASS"
        self.rows[config] = row
        return row

    def _cut_short(self, drawn: list, seconds: float) -> str:
        """What an interrupted check had done: the settings drawn on both sides, the one it was
        drawing (or, all drawn, that a confirmation was), and the time it ran; no verdict."""
        names = [s.name for s in self.spec.settings]
        done = [r[0].name for r in drawn]
        at = f", {names[len(done)]} being drawn" if len(done) < len(names) else ", stage 2's confirmations being drawn"
        return (
            f"a signal stopped it after {seconds:.1f} s, with no verdict: {len(done)} of {len(names)} setting(s) "
            f"drawn on both sides ({', '.join(done) or 'none'}){at}"
        )

    def _confirm(
        self,
        config: str,
        reference: str,
        post_spec: Post | None,
        post_ref: Post,
        setting: SamplingSetting,
        row: dict[str, Any],
        stage1: dict[str, Any],
    ) -> dict[str, Any]:
        """Stage 2: the setting redrawn on both sides under fresh seeds; it confirms only what stage 1
        rejected, each at confirm_alpha: a likelihood shift in the same direction again (one-sided),
        token frequencies differing again at some dense position (Bonferroni over the setting's).
        Each stage-1 statistic thus meets a stage-2 event of chance at most confirm_alpha, drawn
        independently: summed over stage 1's Bonferroni budget, at most alpha x confirm_alpha."""
        level = self.spec.confirm_alpha
        ll_was = stage1["likelihood"]["p"] < row["likelihood_threshold"]
        pos_was = stage1["positions_rejected"] > 0
        v_was = stage1["violation_p"] is not None and stage1["violation_p"] < row["violation_threshold"]
        sharper = stage1["likelihood"]["shift"] > 0
        ref = self._reference_draw(reference, post_ref, setting, confirm=True)
        sides, seconds = self._spec_draw(config, post_spec, post_ref, setting, ref, confirm=True)
        labels = list(sides)
        a, b = [ref.main[p] for p in labels], [sides[p] for p in labels]
        seed = int(_seed_stream(self.seed, config, setting.name, "bootstrap", "confirm").getrandbits(31))
        ll = likelihood_test([s.loglik for s in a], [s.loglik for s in b], 1 - level, seed)
        # The one-sided p in stage 1's direction (half the two-sided p on that side, the rest beyond).
        same_way = (ll.z > 0) == sharper
        p_same = ll.p / 2 if same_way else 1 - ll.p / 2
        pos = position_tests([s.ids for s in a], [s.ids for s in b])
        pos_bar = level / max(len(pos), 1)
        rejected_pos = [t for t in pos if t.p < pos_bar]
        v_spec, _ = _violations(setting, self.spec.boundary_margin, b, labels)
        v_ref, _ = _violations(setting, self.spec.boundary_margin, a, labels)
        v_p = _violation_p(setting, v_spec, v_ref, b, a)
        v_again = v_p is not None and v_p < level
        rejected = (ll_was and p_same < level) or (pos_was and bool(rejected_pos)) or (v_was and v_again)
        way = "more" if sharper else "less"
        found = [
            f"log-likelihood shift {ll.shift:+.4f} [{ll.low:+.4f}, {ll.high:+.4f}] nats, p = {p_same:.2g} for samples "
            f"{way} likely again" + ("" if ll_was else " (not confirming: stage 1's likelihood did not reject)")
        ]
        found.append(
            f"{len(rejected_pos)} of {len(pos)} dense position(s) below p {pos_bar:.2g}"
            + ("" if pos_was else " (not confirming: stage 1's positions did not reject)")
        )
        if v_p is not None:
            found.append(
                f"{sum(v_spec.values())} token(s) outside the setting against the reference's {sum(v_ref.values())}, "
                f"p = {v_p:.2g}" + ("" if v_was else " (not confirming: stage 1's violations did not reject)")
            )
        verdict = "CONFIRMED: the setting fails" if rejected else "NOT confirmed: stage 1's rejection was chance, the setting passes"
        return {
            "likelihood": {**_likelihood(ll), "p": p_same},
            "likelihood_threshold": level,
            "position_threshold": pos_bar,
            "positions_tested": len(pos),
            "positions_rejected": len(rejected_pos),
            "violations": dict(v_spec),
            "violations_reference": dict(v_ref),
            "violation_p": v_p,
            "rejected": rejected,
            "seconds": round(seconds, 3),
            "evidence": (
                f"confirmation on fresh seeds, both sides, at level {level:g}: "
                + "; ".join(found)
                + f": {verdict}"
            ),
        }

    def _reproduce(
        self,
        config: str,
        setting: SamplingSetting,
        ref: _ReferenceDraw,
        row: dict[str, Any],
        culprit: tuple[str, int] | None,
        spec_url: str,
        api_key_env: str | None,
    ) -> None:
        """A failed setting's reproducer (stage 1's prompt and seed) and its replay case."""
        if culprit is None:
            return
        label, seed = culprit
        payload = {
            "input_ids": ref.prompt_ids[label],
            "sampling_params": wire.sample_params(setting, self.spec.max_new_tokens, seed, self.spec.seed_param),
        }
        # Without a seed parameter the server drew its own: no seed reproduces the failing draw.
        row.update(
            prompt=label, seed=seed if self.spec.seed_param else None, reproducer=wire.curl(spec_url, payload, api_key_env)
        )
        if self.replay is not None:
            text = next(p.text for p in self._prompts(setting) if p.label == label)
            self.replay.remember(config, setting, SamplingPrompt(label, text), seed, row["evidence"][0])

    def _judge(
        self, config: str, reference: str, results: list
    ) -> tuple[dict[str, Any], dict[str, tuple[str, int] | None]]:
        """Stage 1: the report's row, and per setting the (prompt label, seed) a failure reproduces with."""
        alpha = self.spec.alpha
        confidence = 1 - alpha / 2 / max(len(results), 1)
        computed = []
        for setting, ref, sides, seconds in results:
            labels = list(sides)
            a = [ref.main[p] for p in labels]
            aa = [ref.aa[p] for p in labels]
            b = [sides[p] for p in labels]
            seed = int(_seed_stream(self.seed, config, setting.name, "bootstrap").getrandbits(31))
            ll = likelihood_test([s.loglik for s in a], [s.loglik for s in b], confidence, seed)
            ll_aa = likelihood_test([s.loglik for s in a], [s.loglik for s in aa], confidence, seed)
            pos = position_tests([s.ids for s in a], [s.ids for s in b])
            pos_aa = position_tests([s.ids for s in a], [s.ids for s in aa])
            computed.append((setting, ref, sides, seconds, labels, a, b, ll, ll_aa, pos, pos_aa))
        ll_bar = alpha / 2 / max(len(computed), 1)
        positions = sum(len(c[9]) for c in computed)
        filtering = sum(bool(c[0].filters) for c in computed)
        # The second half of alpha: the positions', shared with the violation tests where any
        # setting filters (the split depends on the settings alone, never on the draws).
        pos_bar = alpha / (4 if filtering else 2) / max(positions, 1)
        v_bar = alpha / 4 / filtering if filtering else None
        judged = [self._setting_row(c, ll_bar, pos_bar, v_bar) for c in computed]
        rows = [r for r, _ in judged]
        culprits = {r["setting"]: culprit for r, culprit in judged}
        failed = [r for r in rows if r["status"] == "FAIL"]
        return {
            "config": config,
            "reference": reference,
            "status": "FAIL" if failed else "PASS",
            "alpha": alpha,
            "confirm_alpha": self.spec.confirm_alpha,
            "false_alarm_rate": self.spec.false_alarm_rate,
            "tests": len(computed) + positions + filtering,
            "likelihood_threshold": ll_bar,
            "position_threshold": pos_bar,
            "violation_threshold": v_bar,
            "not_checked": None,
            "settings": rows,
        }, culprits

    def _setting_row(
        self, c: tuple, ll_bar: float, pos_bar: float, v_bar: float | None
    ) -> tuple[dict[str, Any], tuple[str, int] | None]:
        setting, ref, sides, seconds, labels, a, b, ll, ll_aa, pos, pos_aa = c
        margin = self.spec.boundary_margin
        v_spec, where_spec = _violations(setting, margin, b, labels)
        v_ref, _ = _violations(setting, margin, a, labels)
        v_p = _violation_p(setting, v_spec, v_ref, b, a)
        v_rejected = v_p is not None and v_bar is not None and v_p < v_bar
        checked = sum(len(s.ids) * self.spec.max_new_tokens for s in b)
        top1_a, top1_b = _top1_share(a), _top1_share(b)
        rejected = sorted((t for t in pos if t.p < pos_bar), key=lambda t: t.p)
        evidence: list[str] = []
        within_chance: str | None = None
        culprit: tuple[str, int] | None = None  # (prompt label, seed) of the failure's reproducer
        if v_rejected:
            kind, _ = max(v_spec.items(), key=lambda kv: kv[1])
            evidence.append(
                f"{100 * sum(v_spec.values()) / checked:.1f}% of sampled tokens ({sum(v_spec.values())} of {checked}) "
                f"break the setting: {_kinds(v_spec, setting)}; the reference's own samples: {sum(v_ref.values())} "
                f"(p = {v_p:.2g} < {v_bar:.2g} that speculation breaks it no more often)" + _known_cause(kind)
            )
            culprit = where_spec[kind]
        elif v_p is not None and v_bar is not None and sum(v_spec.values()) > sum(v_ref.values()):
            # Below the bar of a failure, yet more breaks than the reference's: said beside the PASS, so a
            # fault that drops every filter is not read as min_p's alone where min_p's side failed.
            within_chance = (
                f"not a failure: {sum(v_spec.values())} of {checked} sampled tokens break the setting "
                f"({_kinds(v_spec, setting)}) against the reference's {sum(v_ref.values())} (p = {v_p:.2g}, "
                f"not below {v_bar:.2g})"
            )
        if ll.p < ll_bar:
            how = (
                "more likely under the target than its own samples: sharper than the setting (verify taking the "
                "argmax, or the temperature applied twice?)"
                if ll.shift > 0
                else "less likely under the target than its own samples: flatter than the setting (a filter or the "
                "temperature ignored, or a temperature above 1 applied twice?)"
            )
            evidence.append(
                f"log-likelihood per token {ll.b_mean:.4f} against the reference's {ll.a_mean:.4f} (shift "
                f"{ll.shift:+.4f} [{ll.low:+.4f}, {ll.high:+.4f}] nats; rank test z = {ll.z:.2f}, p = {ll.p:.2g} "
                f"< {ll_bar:.2g}): the speculative samples are {how}; the reference's top-1 token: "
                f"{100 * top1_b:.1f}% of speculative tokens, {100 * top1_a:.1f}% of the reference's"
            )
            if culprit is None:
                side = b[ll.strongest]
                pick = max(range(len(side.seeds)), key=lambda i: side.loglik[i] * (1 if ll.shift > 0 else -1))
                culprit = (labels[ll.strongest], side.seeds[pick])
        if rejected:
            first = rejected[0]
            evidence.append(
                f"token frequencies differ at {len(rejected)} of {len(pos)} dense position(s); first: "
                f"{labels[first.prompt]} output token {first.position} (G = {first.g:.1f}, df {first.df}, "
                f"p = {first.p:.2g} < {pos_bar:.2g})"
            )
            if culprit is None:
                culprit = (labels[first.prompt], b[first.prompt].seeds[0])
        failed = v_rejected or ll.p < ll_bar or bool(rejected)
        # The A/A, judged at the same thresholds: a reference that disagrees with itself under other
        # seeds would make every verdict here doubtful (the report says so beside it).
        aa_passed = ll_aa.p >= ll_bar and all(t.p >= pos_bar for t in pos_aa)
        row: dict[str, Any] = {
            "setting": setting.name,
            "described": setting.describe(),
            "params": _numeric_params(setting),
            "status": "FAIL" if failed else "PASS",
            "prompts": len(labels),
            "samples": self.spec.samples,
            "tokens": self.spec.max_new_tokens,
            "likelihood": _likelihood(ll),
            "top1_reference": top1_a,
            "top1_speculative": top1_b,
            "violations": dict(v_spec),
            "violations_reference": dict(v_ref),
            "violation_p": v_p,
            "checked_tokens": checked,
            "positions_tested": len(pos),
            "positions_rejected": len(rejected),
            "aa_shift": ll_aa.shift,
            "aa_p": ll_aa.p,
            "aa_passed": aa_passed,
            "detectable_shift": detectable_shift(ll_aa.se, ll_bar),
            "detectable_violation_rate": detectable_rate(checked, v_bar if setting.filters else None),
            "seconds": round(seconds, 3),
            "reference_seconds": round(ref.seconds, 3),
            "evidence": evidence,
            "prompt": None,
            "seed": None,
            "reproducer": None,
            "confirmation": None,
            "within_chance": within_chance,
        }
        return row, culprit if failed else None


def _likelihood(ll: LikelihoodTest) -> dict[str, float]:
    return {"reference": ll.a_mean, "speculative": ll.b_mean, "shift": ll.shift, "low": ll.low, "high": ll.high, "z": ll.z, "p": ll.p}


def _violations(
    setting: SamplingSetting, margin: float, sides: list[Side], labels: list[str]
) -> tuple[dict[str, int], dict[str, tuple[str, int]]]:
    """Tokens breaking the setting, by filter, and the first (prompt label, seed) of each."""
    counts: dict[str, int] = {}
    first: dict[str, tuple[str, int]] = {}
    if not setting.filters:
        return counts, first
    for side_index, side in enumerate(sides):
        for sample, (lps, tops) in enumerate(zip(side.logprobs, side.tops)):
            for lp, top in zip(lps, tops):
                kind = violation(setting, margin, lp, top)
                if kind is not None:
                    counts[kind] = counts.get(kind, 0) + 1
                    first.setdefault(kind, (labels[side_index], side.seeds[sample]))
    return counts, first


def _violation_p(
    setting: SamplingSetting, v_spec: dict[str, int], v_ref: dict[str, int], spec: list[Side], reference: list[Side]
) -> float | None:
    """The violation test's p (None for a setting without filters: nothing to break)."""
    if not setting.filters:
        return None
    tokens = [sum(len(lp) for s in side for lp in s.logprobs) for side in (spec, reference)]
    return violation_test(sum(v_spec.values()), sum(v_ref.values()), tokens[0], tokens[1])


# Known upstream causes a violation kind points to: said beside the evidence, as a lead, not a verdict.
_KNOWN_CAUSES = {
    "min_p": (
        "; on SGLang, a known cause: its speculative verify builds its target probabilities from temperature, "
        "top_k and top_p only (speculative/eagle_utils.py, 0.5.14 to 0.5.23 at least), so min_p is not applied "
        "to accepted tokens (sgl-project/sglang#10617); a filter dropped altogether breaks the other settings too"
    ),
}


def _known_cause(kind: str) -> str:
    return _KNOWN_CAUSES.get(kind, "")


def _kinds(counts: dict[str, int], setting: SamplingSetting) -> str:
    words = {
        "top_k": f"outside top_k {setting.top_k}",
        "top_p": f"outside the top_p {setting.top_p:g} nucleus",
        "min_p": f"below min_p {setting.min_p:g}",
    }
    return ", ".join(f"{n} {words[k]}" for k, n in sorted(counts.items()))


def _top1_share(sides: list[Side]) -> float:
    hits = total = 0
    for side in sides:
        for ids, tops in zip(side.ids, side.tops):
            for token, top in zip(ids, tops):
                total += 1
                hits += bool(top) and top[0][0] == token
    return hits / total if total else 0.0


SENTENCE_LIMIT = 360  # the report's "Why FAIL" keeps a failure's first line, cut at 400 characters


def failure_sentence(row: dict[str, Any]) -> str:
    """One complete sentence for a config's failed settings (the report's "Why FAIL" line): each
    setting, what it sets, and its evidence in short; settings that do not fit are counted, never
    cut mid-word (the assertion's further lines give every detail)."""
    failed = [s for s in row["settings"] if s["status"] == "FAIL"]
    head = (
        f"{row['config']}'s samples differ from {row['reference']}'s at {len(failed)} of "
        f"{len(row['settings'])} sampling setting(s)"
    )
    parts = [
        f"{s['setting']} ({s['described']})"
        + (f" on prompt {s['prompt']}" if s["prompt"] else "")
        + f": {_short_evidence(s, row)}"
        for s in failed
    ]
    sentence = f"{head}."
    for shown in range(len(parts), 0, -1):
        left = len(parts) - shown
        sentence = f"{head}: {'; '.join(parts[:shown])}" + (f"; and {left} more (the report's sampling section)" if left else "") + "."
        if len(sentence) <= SENTENCE_LIMIT:
            break
    return sentence


def _short_evidence(s: dict[str, Any], row: dict[str, Any]) -> str:
    """A failed setting's evidence in a few words: tokens outside it, the likelihood shift, the
    token frequencies, and whether the confirmation saw it again."""
    found = []
    outside = sum(s["violations"].values())
    v_p, v_bar = s.get("violation_p"), row.get("violation_threshold")
    if v_p is not None and v_bar is not None and v_p < v_bar:
        found.append(
            f"{outside} of {s['checked_tokens']} sampled tokens break the setting "
            f"(the reference's {sum(s['violations_reference'].values())})"
        )
    ll = s["likelihood"]
    if ll["p"] < row["likelihood_threshold"]:
        way = "more likely (sharper)" if ll["shift"] > 0 else "less likely (flatter)"
        found.append(f"log-likelihood shift {ll['shift']:+.3f} nats per token (p = {ll['p']:.2g}), samples {way} than the reference's")
    if s["positions_rejected"]:
        found.append(f"token frequencies differ at {s['positions_rejected']} of {s['positions_tested']} positions")
    if s.get("confirmation"):
        found.append(f"confirmed on fresh seeds at level {s['confirmation']['likelihood_threshold']:g}")
    return ", ".join(found) or "failed"


def _numeric_params(setting: SamplingSetting) -> dict[str, float]:
    """The setting's sampling_params as the report keeps them, one number a name (a bias by its token)."""
    out: dict[str, float] = {}
    for key, value in setting.sampling_params().items():
        if isinstance(value, dict):
            out.update({f"{key}[{token}]": float(bias) for token, bias in value.items()})
        else:
            out[key] = float(value)
    return out
