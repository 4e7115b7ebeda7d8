"""The baseline's answers, live, from a golden file, or stored; and the equivalence verdicts.

Where servers coexist, the baseline is asked live (and remembered, since Hypothesis
asks the same case again while shrinking). Where they cannot, the baseline's answers
for a fixed list of cases are recorded to a golden file while it runs, and the
speculative servers are checked against that file afterwards. A deployment that takes
its reference from the stored baseline (`launch.reference_from = "stored"`) records such
a fixed list when its baseline is updated, stored in the baseline; its gate runs then
check the speculative servers against those stored answers, without booting the reference.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specgate.atomic import write_json_atomic
from specgate.client import GenerateRequest, GenerateResult
from specgate.deployment import MAX_CONCURRENCY, MAX_NEW_TOKENS, Deployment
from specgate.documents import problem, read_json
from specgate.equivalence import features, second_opinion
from specgate.equivalence.cases import (
    FIRST_TOKEN_STOP_EDGE,
    GenerationCase,
    draw_cases,
    edge_cases,
    edge_name,
    first_token_stop_case,
    first_token_stop_left_out,
    one_token_case,
)
from specgate.equivalence.check import EquivalenceStats, Outcome, compare, invariant_violations
from specgate.equivalence.context_edge import (
    CONTEXT_EDGE,
    context_edge_case,
    declared_speculation,
    is_context_edge,
    server_capacity,
)
from specgate.equivalence.evidence import keep
from specgate.equivalence.golden import GoldenAnswer, GoldenAnswers, case_settings_digest, result_to_dict
from specgate.equivalence.margins import MarginSummary, margins_of, summarise
from specgate.errors import BaselineError, EquivalenceFailure, HTTPStatusError, NotRecordedYet
from specgate.resources import package_data
from specgate.server.pool import ServerPool
from specgate.shared_files import locked

# Cases that once failed, replayed first on every later run: baselines/<deployment>/REPLAY_FILE
# (commit it with the baselines; a folder of its own, so it is never taken for a baseline).
REPLAY_FILE = "equivalence/replay.json"


def commit_seed(commit: str) -> int:
    """Cases vary between commits (each change meets new ones) yet a rerun of one commit
    draws the same: a gate must not flip on which examples a rerun happened to draw."""
    return int(hashlib.sha256(commit.encode()).hexdigest()[:8], 16)


class _ReplayCase(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    label: str
    text: str
    max_new_tokens: int = Field(ge=1, le=MAX_NEW_TOKENS)
    stop: list[str]
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    # The request features and their sampling params (GenerationCase.as_dict), where it drew any.
    features: list[str] = []
    params: dict[str, Any] = {}


class _ReplayEntry(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # config, first_failed, why: kept as written
    case: _ReplayCase


class ReplayDocument(BaseModel):
    """`baselines/<deployment>/equivalence/replay.json`: the cases that once failed, each as it was asked."""

    model_config = ConfigDict(extra="allow", strict=True)
    cases: list[_ReplayEntry]


def load_replay(path: Path) -> list[dict]:
    if not path.exists():  # not is_file(): a FIFO or a folder there is refused by name, not skipped
        return []
    try:
        data = read_json(path, "the equivalence replay file (a JSON file)")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BaselineError(path, f"equivalence replay file cannot be read as JSON: {str(exc)[:200]}") from None
    try:
        ReplayDocument.model_validate(data)
    except ValidationError as exc:
        raise BaselineError(path, f"equivalence replay file malformed: {problem(exc)}") from None
    return list(data["cases"])


class EquivalenceOracle:
    def __init__(
        self,
        deployment: Deployment,
        pool: ServerPool,
        golden_dir: Path,
        examples: int,
        commit: str = "",
        replay_path: Path | None = None,
        case_seed: int | None = None,
        stored_answers: Callable[[], GoldenAnswers] | None = None,
    ) -> None:
        self.deployment = deployment
        self.pool = pool
        self.golden_path = golden_dir / f"{deployment.name}-golden.json"
        self.examples = examples
        self.seed = commit_seed(commit) if case_seed is None else case_seed
        self.replay_path = replay_path
        self._replay: list[dict] | None = None
        self.replay_added = 0  # cases this run wrote to the replay file
        self.replay_not_kept = 0  # failing cases not written: the replay file is specgate's own shipped data
        self.baselines: dict[str, GenerateResult] = {}
        # Answers of a config's own reference (`[configs.X] reference`), asked live.
        self.other_baselines: dict[tuple[str, str], GenerateResult] = {}
        self.stats: dict[str, EquivalenceStats] = {}
        self.baseline_problems: list[str] = []
        self.baseline_margins: list[float] = []
        self._golden_cases: list[GenerationCase] | None = None  # top-1 minus top-2 at every baseline position
        # Edge cases built from the reference's own answers (None: not derived yet).
        self._reference_edges: list[GenerationCase] | None = None
        # Edges this run could not check, each with why: listed with the edges that ran.
        self._edges_left_out: list[str] = []
        # The reference's stored answers, where it is not booted (raises where there are none).
        self.stored_answers = stored_answers
        self._stored: GoldenAnswers | None = None
        # (config, context, speculative token, concurrency) of each decisive parting asked about again:
        # what was said
        self._second_opinions: dict[tuple[str, str, int, int], str] = {}

    @property
    def stored(self) -> bool:
        """True where the reference is not booted: its answers come from the stored baseline."""
        return self.stored_answers is not None

    @property
    def live(self) -> bool:
        """True where the baseline can be asked while a speculative server runs. A deployment that
        takes its reference from the stored baseline never is: its baseline update records the
        fixed case list that later runs check against (and checks exactly those cases itself)."""
        return self.deployment.launch.coexist and not self.deployment.launch.reference_stored

    def explicit_cases(self) -> list[GenerationCase]:
        """Checked on every run before anything drawn: cases that failed on an earlier run, then
        the deployment's edge cases (specgate.equivalence.cases.edge_cases), then the edges built
        from the reference's answers (reference_edge_cases; asked of it here where it runs live)."""
        out, seen = [], set()
        edges = [*edge_cases(self.deployment), *self.reference_edge_cases(ask=self.live)]
        for case in [*self.replay_cases(), *edges]:
            if case.key + str(case.concurrency) not in seen:
                seen.add(case.key + str(case.concurrency))
                out.append(case)
        return out

    def reference_edge_cases(self, ask: bool) -> list[GenerationCase]:
        """Edge cases whose request depends on what the reference answers: a stop string that is
        the text of its first answer token (specgate.equivalence.cases.first_token_stop_case),
        from its answer to the one-token edge. That answer is asked of the reference only where
        `ask` (it is up: live, or recording the golden answers); otherwise one it gave earlier in
        this run is used, and without one there is nothing to derive from yet (an empty list, not
        remembered, so a later call with the reference up still derives it). A stored reference
        needs none of this: the derived case was stored with its answer, like every other case."""
        if self._reference_edges is None:
            one = one_token_case(self.deployment)
            if one.key not in self.baselines:
                if not ask:
                    return []
                self.baselines[one.key] = self._ask_baseline(one)
            first_text = self.baselines[one.key].text
            derived = first_token_stop_case(self.deployment, first_text)
            edges = [derived] if derived is not None else []
            if derived is None:
                why = first_token_stop_left_out(first_text)
                self._edges_left_out.append(f"{FIRST_TOKEN_STOP_EDGE}: LEFT OUT ({why})")
            at_length = self._context_edge()
            if isinstance(at_length, str):
                self._edges_left_out.append(f"{CONTEXT_EDGE}: LEFT OUT ({at_length})")
            else:
                edges.append(at_length)
            self._reference_edges = edges
        return self._reference_edges

    def _context_edge(self) -> GenerationCase | str:
        """The prompt-at-the-context-length edge, sized by the reference's own token counts (it is
        up: reference_edge_cases asks only then), or why it is left out."""
        reference = self.deployment.reference
        server = self.pool.acquire(reference)

        def count_tokens(text: str) -> int:
            return server.generate(GenerateRequest(max_new_tokens=1, text=text)).prompt_tokens

        # The least capacity among the servers that have said theirs (all of them where they run
        # side by side): a case sized for the reference alone would be refused by a speculative
        # server that reserves slots for its drafts.
        infos = self.pool.server_infos
        models = {config: self.pool.served_models(config) for config in infos}  # asked once each
        found = [server_capacity(info, models[config]) for config, info in infos.items()]
        # A speculative config not booted yet (the golden mode boots the reference alone first)
        # reserves what its arguments declare, against the reference's length: the same model.
        reference_info = infos.get(reference, {})
        for config, settings in self.deployment.configs.items():
            if config not in infos and settings.speculative:
                # Not the reference's KV pool: a speculative server's is smaller (draft weights and
                # KV); its own report, once booted, is the one that counts.
                own = {k: v for k, v in reference_info.items() if k != "max_total_num_tokens"}
                declared = {**own, **declared_speculation((*self.deployment.launch.args, *settings.args))}
                found.append(server_capacity(declared, models.get(reference)))
        capacity = min((c for c in found if c is not None), key=lambda c: c.tokens, default=None)
        try:
            return context_edge_case(self.deployment, capacity, count_tokens)
        except HTTPStatusError as exc:
            # Only a refusal of the prompt leaves the edge out; a dead, hung or cancelled server is
            # the run's problem, raised as anywhere else.
            return f"the reference refused a prompt while it was sized: {str(exc)[:200]}"

    def replay_cases(self) -> list[GenerationCase]:
        """Cases that failed on an earlier run, oldest first."""
        if self._replay is None:
            self._replay = load_replay(self.replay_path) if self.replay_path else []
        seen, out = set(), []
        for entry in self._replay:
            case = GenerationCase.from_dict(entry["case"])
            if is_context_edge(case):
                # Sized for the servers of its run: this run sizes its own (the edge is checked on
                # every run), and the old one may not fit a server with another context length.
                continue
            if case.key + str(case.concurrency) not in seen:
                seen.add(case.key + str(case.concurrency))
                out.append(case)
        return out

    def remember_failure(self, config: str, case: GenerationCase, message: str) -> None:
        """Keep a failing case so every later run tries it first (atomic write; never fatal).
        Never into specgate's own shipped baselines (resources.package_data): a project's are kept."""
        if self.replay_path is None or is_context_edge(case):  # re-sized every run (replay_cases)
            return
        if package_data(self.replay_path):
            self.replay_not_kept += 1  # said at the run's end (plugin)
            return
        known = {GenerationCase.from_dict(e["case"]).key for e in (self._replay or [])}
        if case.key in known:
            return
        self.replay_cases()
        entry = {
            "case": case.as_dict(),
            "config": config,
            "first_failed": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "why": message.splitlines()[0][:300],
        }
        self._replay = [*(self._replay or []), entry]
        try:
            # Read again under the lock: another run sharing these baselines may have added cases since.
            with locked(self.replay_path):
                stored = load_replay(self.replay_path)
                if case.key in {GenerationCase.from_dict(e["case"]).key for e in stored}:
                    return
                write_json_atomic(self.replay_path, {"deployment": self.deployment.name, "cases": [*stored, entry]})
            self.replay_added += 1
        except (OSError, BaselineError):
            pass  # the failure itself is reported either way; only its replay is lost (a file broken meanwhile stays)

    def _load_stored(self) -> GoldenAnswers:
        """The stored answers, read once, held as the baseline's (with its margins and problems)."""
        if self._stored is None:
            assert self.stored_answers is not None
            stored = self.stored_answers()  # StoredReferenceError where none can be used
            for entry in stored.entries:
                self.baselines[entry.case.key] = entry.answer
                self.baseline_problems.extend(invariant_violations(entry.case, entry.answer, "baseline server (stored)"))
                self.baseline_margins.extend(margins_of(entry.answer))
            self._stored = stored
        return self._stored

    def golden_cases(self) -> list[GenerationCase]:
        """Drawn once: recorded against the baseline, then replayed on each speculative config.
        Cases that failed on earlier runs and the edge cases come first. With the reference from
        the stored baseline: exactly the stored cases, then replay cases stored since."""
        if self._golden_cases is None and self.stored:
            stored = [e.case for e in self._load_stored().entries]
            keys = {c.key + str(c.concurrency) for c in stored}
            self._golden_cases = stored + [c for c in self.replay_cases() if c.key + str(c.concurrency) not in keys]
        if self._golden_cases is None:
            explicit = self.explicit_cases()
            # Recorded while the reference runs: its answers make the drawn token-id anchors ids.
            drawn = [self.anchored_case(c, ask=True) for c in draw_cases(self.deployment, self.examples, self.seed)]
            keys = {c.key + str(c.concurrency) for c in explicit}
            self._golden_cases = explicit + [c for c in drawn if c.key + str(c.concurrency) not in keys]
        return self._golden_cases

    def anchored_case(self, case: GenerationCase, reference: str | None = None, ask: bool = False) -> GenerationCase:
        """The case with its token-id anchors (features.anchor: a logit-bias ban or a stop token
        id drawn as "the plain answer's token at K") made the ids the reference answers there,
        asked without those two features; a case without anchors as it is. `ask`: ask the
        reference even where it does not run beside the speculative servers (it is up now)."""
        params = case.sampling_params
        if not features.anchored(params):
            return case
        plain = replace(case, params=features.canonical(features.without_anchors(params)))
        if ask and plain.key not in self.baselines and (reference or self.deployment.reference) == self.deployment.reference:
            self.baselines[plain.key] = self._ask_baseline(plain)
        concrete = features.anchor(params, self.baseline_for(plain, reference).output_ids)
        named = features.features_in(concrete, features.STOP_ORDER in case.features)
        return replace(case, params=features.canonical(concrete), features=named)

    def _ask_baseline(self, case: GenerationCase, reference: str | None = None) -> GenerateResult:
        server = self.pool.acquire(reference or self.deployment.reference)
        result = server.generate(case.request(self.deployment.equivalence.top_logprobs))
        problems = invariant_violations(case, result, "baseline server")
        self.baseline_problems.extend(problems)
        self.baseline_margins.extend(margins_of(result))
        return result

    def margin_summary(self) -> MarginSummary:
        return summarise(self.baseline_margins, self.deployment.equivalence.tie_margin)

    def baseline_for(self, case: GenerationCase, reference: str | None = None) -> GenerateResult:
        reference = reference or self.deployment.reference
        if reference != self.deployment.reference:
            # Only live (coexisting) servers: the deployment refuses a config reference otherwise.
            key = (reference, case.key)
            if key not in self.other_baselines:
                self.other_baselines[key] = self._ask_baseline(case, reference)
            return self.other_baselines[key]
        if case.key not in self.baselines:
            if not self.live:
                raise NotRecordedYet(
                    f"case {case.label!r} is not in the golden file {self.golden_path}: with launch.coexist = false "
                    "the baseline is recorded first (test_record_baseline_golden must run before this test)"
                )
            self.baselines[case.key] = self._ask_baseline(case)
        return self.baselines[case.key]

    def cases_with_answers(self, config: str) -> tuple[list[GenerationCase], list[GenerationCase]]:
        """(cases the baseline's answer is known for, cases without one). Only the stored reference
        can lack one: a replay case added since the baseline was recorded. Those are counted as not
        checked for `config`, never as passed."""
        cases = self.golden_cases()
        if not self.stored:
            return cases, []  # recorded in this run: a missing answer is an error (baseline_for says why)
        answered = [c for c in cases if c.key in self.baselines]
        missing = [c for c in cases if c.key not in self.baselines]
        stats = self.stats.setdefault(config, EquivalenceStats())
        stats.not_checked = [c.label for c in missing]
        for edge in (FIRST_TOKEN_STOP_EDGE, CONTEXT_EDGE):
            if not any(edge in c.label for c in cases):
                note = f"{edge}: NOT CHECKED (the stored answers hold none: stored before this edge, or left out then)"
                if note not in self._edges_left_out:
                    self._edges_left_out.append(note)
        return answered, missing

    def golden_answers(self) -> GoldenAnswers | None:
        """This run's recorded answers of the reference for the fixed case list, for the stored
        baseline; None where not every case was recorded."""
        cases = self._golden_cases or []
        if self.stored or not cases or any(c.key not in self.baselines for c in cases):
            return None
        dep = self.deployment
        return GoldenAnswers(
            reference=dep.reference,
            args_digest=dep.configs[dep.reference].args_digest(dep.launch),
            top_logprobs=dep.equivalence.top_logprobs,
            entries=tuple(GoldenAnswer(c, self.baselines[c.key]) for c in cases),
            case_settings=case_settings_digest(dep),
        )

    def record_golden(self) -> int:
        """Ask the baseline for every golden case and write the file; returns how many. The edges
        built from the reference's answers are derived first, while it is up: they are golden
        cases like the rest, recorded here and checked later (or stored in the baseline)."""
        self.reference_edge_cases(ask=True)
        cases = self.golden_cases()
        entries = []
        for case in cases:
            # One answer per request, as baseline_for keeps live: the one-token edge was asked
            # already to derive the first-token stop edge, and a batched case asks what its lone
            # copy asked.
            if case.key not in self.baselines:
                self.baselines[case.key] = self._ask_baseline(case)
            result = self.baselines[case.key]
            entries.append({"case": case.as_dict(), "baseline": result_to_dict(result)})
        write_json_atomic(self.golden_path, {"deployment": self.deployment.name, "entries": entries})
        return len(cases)

    def check(self, config: str, case: GenerationCase) -> list[Outcome]:
        """Send `case.concurrency` copies at once to `config` and judge each answer."""
        started = time.perf_counter()
        reference = self.deployment.reference_of(config)
        case = self.anchored_case(case, reference)
        baseline = self.baseline_for(case, reference)
        server = self.pool.acquire(config)
        request = case.request()
        try:
            if case.concurrency == 1:
                answers = [server.generate(request)]
            else:
                with ThreadPoolExecutor(max_workers=case.concurrency) as ex:
                    answers = list(ex.map(server.generate, [request] * case.concurrency))
        except HTTPStatusError as exc:
            if is_context_edge(case) and exc.status in (400, 413):
                # The reference answered it; this server refused it: its limits are not the ones
                # the edge was sized for. Not a wrong answer and never a pass: NOT CHECKED for
                # this config (the gate's test fails on it), and its other cases still run.
                self._refused(config, case, str(exc))
                return []
            # A refusal names the request it refused: the gate's test reports the server error
            # alone, and without the case it cannot be reproduced.
            raise HTTPStatusError(f"{exc} (case {case.label!r})", url=exc.url, status=exc.status) from exc
        if self.live:
            reference_url = self.pool.live[reference].handle.base_url
        else:
            reference_url = "<stored-reference-not-booted>" if self.stored else "<baseline-url>"
        stats = self.stats.setdefault(config, EquivalenceStats())
        stats.cases += 1
        for feature in case.features or ("none",):  # what each feature costs, for the report
            spent = stats.seconds_by_feature.get(feature, 0.0) + time.perf_counter() - started
            stats.seconds_by_feature[feature] = round(spent, 3)
        for edge in [edge_name(case), *self._edges_left_out]:
            if edge is not None and edge not in stats.edges:
                stats.edges.append(edge)
        outcomes = [
            compare(
                case,
                baseline,
                answer,
                self.deployment.equivalence.tie_margin,
                reference_url,
                server.handle.base_url,
                self.deployment.configs[config].tolerate,
                self.deployment.launch.api_key_env,
                self.deployment.configs[config].max_tokens_per_step,
            )
            for answer in answers
        ]
        parted = next((k for k, o in enumerate(outcomes) if o.divergence is not None), None)
        if parted is not None:
            words = self._second_opinion(config, case, outcomes[parted], server.generate, baseline)
            if words:
                outcomes[parted] = _with_second_opinion(outcomes[parted], words)
        for outcome, answer in zip(outcomes, answers, strict=True):
            stats.add(outcome, case.label)
            stats.answered(case.text, answer.output_ids)
            if outcome.feature == features.N_CHOICES:
                # The choice that is not the plain answer, kept to be judged again (evidence.rejudge).
                answer = next((c for c in answer.other_choices if (c.output_ids, c.text) != (answer.output_ids, answer.text)), answer)
            keep(stats, case, outcome, baseline, answer)
        return outcomes

    def _second_opinion(
        self,
        config: str,
        case: GenerationCase,
        outcome: Outcome,
        generate: Callable[[GenerateRequest], GenerateResult],
        baseline: GenerateResult,
    ) -> str:
        """What the speculative server says of a decisive parting asked again (second_opinion.py),
        once per parting: Hypothesis replays a failing case while it shrinks, and a parting met
        again reads the first answer; up to `equivalence.second_opinions` partings per config."""
        d = outcome.divergence
        assert d is not None
        key = (config, d.context, d.spec_token, case.concurrency)  # a batch may part where one request does not
        if key in self._second_opinions:
            return self._second_opinions[key]
        if sum(k[0] == config for k in self._second_opinions) >= self.deployment.equivalence.second_opinions:
            return ""
        eq = self.deployment.equivalence
        words = second_opinion.second_opinion(generate, case, d, baseline, eq.top_logprobs, eq.tie_margin)
        self._second_opinions[key] = words
        return words

    def _refused(self, config: str, case: GenerationCase, message: str) -> None:
        stats = self.stats.setdefault(config, EquivalenceStats())
        why = f"{edge_name(case)}: REFUSED by {config} although the reference answered it ({message[:300]})"
        stats.refused.append(why)
        if why not in stats.edges:
            stats.edges.append(why)

    def check_and_remember(self, config: str, case: GenerationCase) -> list[Outcome]:
        outcomes = self.check(config, case)
        case = self.anchored_case(case, self.deployment.reference_of(config))  # the ids it asked
        for outcome in outcomes:
            if not outcome.ok:
                self.remember_failure(config, case, outcome.message)
                break
        return outcomes

    def assert_equivalent(self, config: str, case: GenerationCase) -> None:
        for outcome in self.check_and_remember(config, case):
            if not outcome.ok:
                raise EquivalenceFailure(f"[{config}] {outcome.message}")


def _with_second_opinion(outcome: Outcome, words: str) -> Outcome:
    """The outcome with the speculative server's second answer told, before the reproducers."""
    assert outcome.divergence is not None
    message = outcome.message.replace("\nreproduce:", f"\n  second opinion: {words}\nreproduce:", 1)
    return replace(outcome, message=message, divergence=replace(outcome.divergence, second_opinion=words))
