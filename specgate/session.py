"""Everything one gate run holds: deployment, servers, measurements, verdicts.

Built lazily by the pytest plugin the first time a gate test asks for it, so that
collecting or running the self-tests never reads a deployment or boots anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specgate.deployment import Deployment, bucket_label, bucket_view
from specgate.equivalence.oracle import REPLAY_FILE, EquivalenceOracle
from specgate.gate_kinds import timing_gates
from specgate.measure.density import DensityProbe
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import SpeedMeter
from specgate.report.build import TestTally
from specgate.sampling.check import SamplingChecker, prompts_for
from specgate.sampling.live import poster, why_not_checkable
from specgate.sampling.replay import SAMPLING_REPLAY_FILE, SamplingReplay
from specgate.server.launcher import BootProgress
from specgate.server.pool import ServerPool
from specgate.verdicts.gates import Verdict, verdicts_of_failure
from specgate.verdicts.judge import Judge
from specgate.verdicts.outcome import FailedTest


def reference_stored(deployment: Deployment, update_baselines: bool) -> bool:
    """Whether this run takes the reference from the stored baseline instead of booting it: where
    the deployment opts in, except in a baseline update, which is what records those figures."""
    return deployment.launch.reference_stored and not update_baselines


@dataclass(frozen=True)
class RunOptions:
    report_dir: Path
    baselines_dir: Path
    update_baselines: bool
    allow_fingerprint_mismatch: bool
    examples: int
    # Gates that could not compare or could not fail end the run non-zero unless allowed
    # (this flag, or `[gates] uncompared = "warn"` in the deployment).
    allow_uncompared: bool = False
    seed: int | None = None  # the plan's round order (the self-tests fix it; real runs draw it)
    commit: str = ""  # seeds the equivalence cases: they vary between commits, not between reruns
    case_seed: int | None = None  # a fixed seed for them instead (reproducing a run, the self-tests)


@dataclass(frozen=True)
class BucketRun:
    """One context bucket's measurement and gates (`workload.context_buckets`; measure.context):
    its own pinned requests, plan and judge, over the run's servers."""

    tokens: int
    deployment: Deployment  # measure.context.bucket_view: concurrency 1, context_repeats requests
    meter: SpeedMeter
    plan: SamplingPlan
    judge: Judge


@dataclass
class GateSession:
    deployment: Deployment
    options: RunOptions
    pool: ServerPool
    meter: SpeedMeter
    plan: SamplingPlan
    oracle: EquivalenceOracle
    judge: Judge
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # (phase, config) -> outcome ("passed", "failed", "error", "skipped") -> count of gate tests
    config_outcomes: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    failed_tests: list[FailedTest] = field(default_factory=list)  # for the report
    # (phase, config, seconds it ran) of the gate test a signal stopped in its call: pytest
    # reports no such call, so the run's report learns from this what it was doing.
    cut_short: tuple[str, str, float] | None = None
    sampling: SamplingChecker | None = None  # the sampling equivalence test's draws and verdicts
    # Where servers take turns: each speculative config's sampling row, or what stopped its check.
    sampled_in_turns: dict[str, dict | Exception] | None = None
    buckets: dict[int, BucketRun] = field(default_factory=dict)  # by prompt tokens
    density: DensityProbe | None = None  # the buckets' characters per token (measure.density)
    # (config, context tokens) -> whether every speed test of it so far passed: a server lost after
    # its measurement there completed leaves its gates there judged on whole data (verdicts.not_run).
    speed_whole: dict[tuple[str, int], bool] = field(default_factory=dict)
    # Gate test name -> the servers already lost when it began judging: a verdict reached before a
    # loss was reached on what the server had served, and stands (verdicts.not_run).
    lost_before: dict[str, frozenset[str]] = field(default_factory=dict)

    def lost_now(self) -> frozenset[str]:
        """The servers failed so far: the pool's, and those whose measurement failed (the plan's)."""
        return frozenset({**self.plan.errors, **self.pool.failed})

    def measured_whole(self) -> set[tuple[str, int]]:
        """The (config, context) pairs whose speed tests all passed: their figures are whole."""
        return {key for key, whole in self.speed_whole.items() if whole}

    def all_verdicts(self) -> list[Verdict]:
        """The run's verdicts: the short workload's judge's, then each context bucket's."""
        return [*self.judge.verdicts, *(v for b in self.buckets.values() for v in b.judge.verdicts)]

    def judge_for(self, context: int) -> Judge:
        """The judge of a context bucket (0: the short workload's)."""
        return self.buckets[context].judge if context else self.judge

    def sampling_row(self, config: str) -> dict:
        """`config`'s sampling row. Where servers coexist, its server and its reference's are asked
        side by side. Where they take turns (launch.coexist = false), on the first call every
        speculative config draws its samples while it is up (one boot each), then each reference
        boots once to draw its own and score them all; a config's error is raised at its own test."""
        assert self.sampling is not None
        dep = self.deployment
        if dep.launch.coexist:
            spec_server, ref_server = self.pool.acquire(config), self.pool.acquire(dep.reference_of(config))
            return self.sampling.check(
                config, dep.reference_of(config), poster(spec_server), poster(ref_server),
                spec_server.client.base_url, dep.launch.api_key_env,
            )  # fmt: skip
        if self.sampled_in_turns is None:
            self.sampled_in_turns = self._sample_in_turns()
        found = self.sampled_in_turns.get(config)
        if isinstance(found, Exception):
            raise found
        if found is None:
            raise RuntimeError(f"{config}: not among the speculative configs sampled in turns")
        return found

    def _sample_in_turns(self) -> dict[str, dict | Exception]:
        assert self.sampling is not None
        dep = self.deployment
        out: dict[str, dict | Exception] = {}
        urls: dict[str, str] = {}
        # A server already up draws first: one boot fewer (each boot of a large model is long).
        order = sorted(dep.speculative_configs, key=lambda c: c not in self.pool.live)
        for config in order:
            try:
                server = self.pool.acquire(config)
                urls[config] = server.client.base_url
                self.sampling.draw_ahead(config, poster(server))
            except Exception as exc:  # its own test says it; the others still run
                out[config] = exc
        by_reference: dict[str, list[str]] = {}
        for config in dep.speculative_configs:
            if config not in out:
                by_reference.setdefault(dep.reference_of(config), []).append(config)
        for reference, configs in by_reference.items():
            try:
                ref_server = self.pool.acquire(reference)
            except Exception as exc:
                out.update({c: exc for c in configs})
                continue
            for config in configs:
                try:
                    out[config] = self.sampling.check(
                        config, reference, None, poster(ref_server), urls[config], dep.launch.api_key_env
                    )
                except Exception as exc:
                    out[config] = exc
        return out

    def count(self, phase: str | None, outcome: str) -> int:
        """Gate tests of `phase` (every phase if None) that ended in `outcome`, over all configs."""
        return sum(
            counts.get(outcome, 0) for (p, _), counts in self.config_outcomes.items() if phase is None or p == phase
        )

    def tally(self) -> TestTally:
        return TestTally(*(self.count(None, o) for o in ("passed", "failed", "skipped", "error")))

    def excluded_from_baseline(self) -> dict[str, str]:
        """Speculative configs whose equivalence did not pass here: their figures are a broken
        (or unverified) build's, so they are left out of the stored baseline, with the reason."""
        if not self.deployment.equivalence.enabled:
            return {}  # declared not checkable; the stored document says so (baseline_document)
        out = {}
        for name in self.deployment.speculative_configs:
            outcomes = self.config_outcomes.get(("equivalence", name), {})
            if outcomes.get("failed", 0):
                out[name] = "greedy equivalence failed in the recording run"
            elif outcomes.get("error", 0):
                out[name] = "its equivalence test errored in the recording run (server boot or death)"
            elif not outcomes.get("passed", 0):
                out[name] = "greedy equivalence was not verified in the recording run"
        return out

    def _speed_verdict(self, failed: FailedTest) -> bool:
        """`failed` (a failed test) is a beats or no-regression gate on speed that
        judged and did not pass, not one that raised before judging."""
        timing = timing_gates(self.deployment)
        return any(v.failed and v.gate in timing for v in verdicts_of_failure(failed.test, self.all_verdicts()))

    def why_no_baseline(self) -> str | None:
        """A baseline states that what it holds is correct and measured in full."""
        dep = self.deployment
        blocking = [f for f in self.failed_tests if not self._speed_verdict(f)]
        if blocking:
            # A failed update writes nothing: its figures replace the stored ones whole, and a run
            # that failed (a divergence, a dead server, inconsistent counters) is no record to compare
            # with. A speed gate that judged and did not pass (EAGLE-3 losing to plain decoding, a
            # speedup below the old record) is a verdict on figures measured in full: they are stored.
            more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
            return f"a gate test failed in the recording run: {blocking[0]}{more}"
        if self.count("golden", "failed") + self.count("golden", "error"):
            return "the baseline's golden answers could not be recorded"
        if dep.launch.reference_stored and dep.equivalence.enabled and self.oracle.golden_answers() is None:
            # Later runs check equivalence against these answers alone: a baseline without them
            # would make every one of those runs fail closed.
            return (
                'launch.reference_from = "stored" needs the reference\'s golden answers in the baseline, and this run '
                "recorded none (test_record_baseline_golden did not run, or not every case was answered)"
            )
        excluded = self.excluded_from_baseline()
        if dep.speculative_configs and len(excluded) == len(dep.speculative_configs):
            return "no speculative config passed greedy equivalence in this run: " + "; ".join(
                f"{c}: {why}" for c, why in excluded.items()
            )
        broken_speed = [
            c
            for (phase, c), outcomes in self.config_outcomes.items()
            if phase == "speed" and c not in excluded and outcomes.get("failed", 0) + outcomes.get("error", 0)
        ]
        if broken_speed:
            return f"the speed test of {', '.join(sorted(broken_speed))} failed in this run"
        measured = {key for key, record in self.meter.results.items() if record.samples}
        missing = [
            f"{c} at concurrency {n}"
            for n in dep.workload.concurrency
            for c in dep.configs
            if c not in excluded and (c, n) not in measured
        ]
        if missing:
            return f"no speed measurements for {', '.join(missing)}"
        # Later runs pair their requests with the stored ones and measure more, while undecided,
        # only up to what is stored: a short record would silently cap every later gate.
        wanted = dep.workload.max_repeats
        short = [
            f"{c} at concurrency {n} ({len(record.samples)} of {wanted})"
            for (c, n), record in sorted(self.meter.results.items())
            if c not in excluded and len(record.samples) < wanted
        ]
        if short:
            return f"measurement incomplete, every config needs workload.max_repeats requests: {', '.join(short)}"
        # Each context bucket's figures are stored whole too: a later run pairs with them.
        wanted = dep.workload.context_repeats
        thin = [
            f"{c} at {bucket_label(tokens)} ({have} of {wanted})"
            for tokens, b in sorted(self.buckets.items())
            for c in dep.configs
            if c not in excluded
            and (have := len(r.samples) if (r := b.meter.results.get((c, 1))) is not None else 0) < wanted
        ]
        if thin:
            return f"context buckets measured incompletely, each needs workload.context_repeats requests: {', '.join(thin)}"
        return None

    @property
    def reference_stored(self) -> bool:
        """The reference is not booted in this run (a baseline update always boots it)."""
        return reference_stored(self.deployment, self.options.update_baselines)

    @property
    def sampling_not_checkable(self) -> str | None:
        """Why this run cannot compare samples, or None."""
        return why_not_checkable(self.deployment, self.reference_stored)

    @property
    def uncompared_allowed(self) -> bool:
        # A baseline update records, it does not compare: its regression gates have nothing to
        # compare with by design (the report still says NOT COMPARED, and PARTIAL).
        return (
            self.options.allow_uncompared
            or self.options.update_baselines
            or self.deployment.gates.uncompared == "warn"
        )

    @classmethod
    def create(
        cls,
        deployment: Deployment,
        options: RunOptions,
        progress: BootProgress | None,
        configs: list[str] | None = None,
    ) -> GateSession:
        pool = ServerPool(deployment, options.report_dir / "logs", progress)
        stored = reference_stored(deployment, options.update_baselines)
        if stored:
            pool.never_boot(
                deployment.reference,
                'launch.reference_from = "stored": its figures and golden answers come from the stored baseline',
            )
        # The buckets' prompts are sized on the reference's tokenizer (measure.density), one ratio
        # for every config: the short workload's meter offers it the reference's server when up.
        density = (
            DensityProbe(deployment.workload, deployment.reference, pool.acquire)
            if deployment.workload.context_buckets
            else None
        )
        meter = SpeedMeter(deployment, density=density)
        plan = SamplingPlan(deployment, pool, meter, configs, options.seed, getattr(progress, "measuring", None))

        def judge_of(dep: Deployment, its_plan: SamplingPlan, context: int) -> Judge:
            return Judge(
                dep,
                its_plan,
                options.baselines_dir,
                options.allow_fingerprint_mismatch,
                reference_stored=stored,
                recording=options.update_baselines,
                context=context,
                buckets=deployment.judged_contexts,
            )

        judge = judge_of(deployment, plan, 0)
        buckets = {}
        for tokens in deployment.workload.context_buckets:
            view = bucket_view(deployment, tokens)
            its_meter = SpeedMeter(view, context=tokens, density=density)
            its_plan = SamplingPlan(view, pool, its_meter, configs, options.seed, getattr(progress, "measuring", None))
            buckets[tokens] = BucketRun(tokens, view, its_meter, its_plan, judge_of(view, its_plan, tokens))
        oracle = EquivalenceOracle(
            deployment,
            pool,
            options.report_dir,
            options.examples,
            commit=options.commit,
            case_seed=options.case_seed,
            replay_path=options.baselines_dir / deployment.name / REPLAY_FILE,
            stored_answers=(lambda: judge.stored_reference().answers(deployment, options.examples)) if stored else None,
        )
        sampling = SamplingChecker(
            deployment.sampling,
            prompts_for(deployment.sampling, deployment.workload.speed_sequence(), deployment.workload.prompt_format),
            oracle.seed,  # like the greedy cases: new draws on every commit, the same on a rerun
            SamplingReplay(options.baselines_dir / deployment.name / SAMPLING_REPLAY_FILE, deployment.name),
        )
        return cls(
            deployment, options, pool, meter, plan, oracle, judge, sampling=sampling, buckets=buckets, density=density
        )

    def close(self) -> None:
        self.pool.close()
