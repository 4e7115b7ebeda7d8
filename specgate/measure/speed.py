"""Single-stream (and concurrent) decode speed of one config, warmed up until settled.

Every config is sent the same pinned sequence of requests (fixed prompts in a fixed
order, greedy, fixed max_new_tokens, and by default ignore_eos: `workload.ignore_eos`), so
two configs' figures differ by the server alone. Warmup runs until the last few decode
figures agree: cold requests on a GPU run 10–100x slower while kernels compile, and a
measurement that starts before they settle compares compilers, not decoders.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from specgate import project
from specgate.client import GenerateRequest, GenerateResult
from specgate.context_fit import CHARS_PER_TOKEN
from specgate.deployment import Deployment, WarmupSpec, expand_placeholders
from specgate.errors import UntimeableAnswer
from specgate.measure.answer_end import answer_digest, answer_tokens, end_ids
from specgate.measure.density import DensityProbe
from specgate.measure.stats import settled
from specgate.prompts import render
from specgate.server.pool import LiveServer

UNTIMED_TRIES = 3  # sends of a round whose answer arrived in one piece before that is an error
# No client sees tokens faster than the server makes them: a request the client timed at this many
# times the server's own per-request decode figure (meta_info.decode_throughput) was read late, its
# stream in a burst (a client starved of CPU), and its figure is no measurement. Seen on the loaded
# 2-core CI machine: 269,030 tok/s by the client's clock for a simulated ~800 tok/s answer, a
# within-boot spread of 140% in a calibration, and no between-boot spread estimable from it.
BURST_FACTOR = 3.0

# A measured answer that loops is no evidence of speed or accept length: a drafter predicts a loop
# perfectly, so accept length (and speed) look excellent while the output is degenerate. An
# answer is taken to loop where few of its token 4-grams are distinct.
LOOP_NGRAM = 4
LOOP_FLOOR = 0.5  # distinct 4-grams over all 4-grams below this: the answer loops
LOOP_MIN_TOKENS = 32  # fewer tokens cannot tell a loop from a short repeated phrase


def distinct_ngram_ratio(ids: tuple[int, ...] | list[int], n: int = LOOP_NGRAM) -> float | None:
    """Distinct n-grams of token ids over all of them (1.0: no n-gram repeats); None where the
    answer is too short to tell (LOOP_MIN_TOKENS)."""
    if len(ids) < max(LOOP_MIN_TOKENS, n):
        return None
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    return round(len(set(grams)) / len(grams), 4)


@dataclass(frozen=True)
class SpeedSample:
    """What one measured request gave."""

    decode_tps: float
    ttft_s: float
    e2e_s: float
    completion_tokens: int
    prompt_tokens: int
    verify_ct: int | None
    server_e2e_s: float | None
    chunks: int
    sent_at: float = 0.0  # epoch seconds
    first_chunk_tokens: int = 1
    server_decode_tps: float | None = None  # the server's own figure, where it gives one
    # Cycles by accepted drafts (index k: cycles that accepted k drafts), where the server gives it.
    accept_histogram: tuple[int, ...] | None = None
    boot: int = 1  # which boot of the config answered (launch.boots replicate servers)
    index: int = 0  # position in the pinned request sequence: pairs it with other configs' and stored samples
    # Tokens up to the model's first end of turn (measure.answer_end); the rest ran on under
    # ignore_eos. None where the end cannot be told (no local model config, no token ids).
    answer_tokens: int | None = None
    # The answer's token ids up to its end of turn (answer_tokens, where known), digested
    # (answer_end.answer_digest), where all of them came back: tells whether it is the very answer
    # training walked for its prompt. None without them.
    answer_digest: str | None = None
    # The server's other spec counters, witnesses of verify_ct (measure.accept_counts): drafts it
    # accepted, and its own completion_tokens / spec_verify_ct; None where it does not give them.
    accepted_drafts: int | None = None
    server_accept_length: float | None = None
    proposed_drafts: int | None = None  # drafts the server proposed (SGLang 0.5.19 on), beside those it accepted
    # distinct_ngram_ratio of the answer's token ids (up to its end of turn where known); None
    # without ids or too short to tell.
    distinct_ngrams: float | None = None

    @property
    def degenerate(self) -> bool:
        """The answer loops (distinct 4-grams under LOOP_FLOOR): its figures are untrusted."""
        return self.distinct_ngrams is not None and self.distinct_ngrams < LOOP_FLOOR

    @property
    def accept_length(self) -> float | None:
        return self.completion_tokens / self.verify_ct if self.verify_ct else None

    @classmethod
    def of(
        cls, result: GenerateResult, boot: int = 1, index: int = 0, ends: frozenset[int] = frozenset()
    ) -> SpeedSample:
        if result.decode_tps is None or result.ttft_s is None:
            ended = result.finish_reason.kind == "stop" and result.completion_tokens < result.request.max_new_tokens
            why = (
                "the answer ended on its own, workload.ignore_eos = false: a prompt answered this briefly "
                "cannot be timed; name prompt_sets without it or copy the prompts to keep into prompt_files, "
                "or run to max_new_tokens with ignore_eos = true"
                if ended
                else "too few tokens: raise workload.max_new_tokens; or the server or a proxy does not stream"
            )
            raise UntimeableAnswer(
                f"request produced {result.completion_tokens} token(s) in {result.chunks} chunk(s) that arrived "
                f"as one: decoding cannot be timed ({why})",
                ended_on_its_own=ended,
            )
        if result.server_decode_tps and result.decode_tps > BURST_FACTOR * result.server_decode_tps:
            raise UntimeableAnswer(
                f"request decoded at {result.decode_tps:.0f} tok/s by the client's clock and {result.server_decode_tps:.0f} by "
                f"the server's own: its {result.chunks} chunk(s) were read late, in a burst (a client starved of CPU), so "
                "decoding cannot be timed",
                ended_on_its_own=False,
            )
        answer_end = answer_tokens(result.output_ids, result.completion_tokens, ends)
        return cls(
            decode_tps=result.decode_tps,
            ttft_s=result.ttft_s,
            e2e_s=result.e2e_s,
            completion_tokens=result.completion_tokens,
            prompt_tokens=result.prompt_tokens,
            verify_ct=result.spec.verify_ct if result.spec else None,
            server_e2e_s=result.server_e2e_s,
            chunks=result.chunks,
            sent_at=result.sent_at,
            first_chunk_tokens=result.first_chunk_tokens,
            server_decode_tps=result.server_decode_tps,
            accept_histogram=result.spec.histogram if result.spec else None,
            boot=boot,
            index=index,
            answer_tokens=answer_end,
            # up to the end of turn: tokens accepted past it at the limit do not make another answer
            answer_digest=answer_digest(result.output_ids[:answer_end] if answer_end else result.output_ids)
            if result.output_ids and len(result.output_ids) == result.completion_tokens
            else None,
            accepted_drafts=result.spec.accepted_drafts if result.spec else None,
            server_accept_length=result.spec.server_accept_length if result.spec else None,
            proposed_drafts=result.spec.proposed_drafts if result.spec else None,
            distinct_ngrams=distinct_ngram_ratio(result.output_ids[:answer_end] if answer_end else result.output_ids)
            if result.output_ids and len(result.output_ids) == result.completion_tokens
            else None,
        )


@dataclass
class WarmupRecord:
    requests: int
    settled: bool
    decode_tps_per_request: list[float]  # each warm-up request's, in order


@dataclass
class ConfigSpeed:
    config: str
    concurrency: int
    samples: list[SpeedSample] = field(default_factory=list)
    warmups: list[WarmupRecord] = field(default_factory=list)
    context: int = 0  # the context bucket's prompt tokens (measure.context); 0: the short workload

    @property
    def decode_tps_per_request(self) -> list[float]:
        return [s.decode_tps for s in self.samples]

    @property
    def cycle_ms_per_request(self) -> list[float]:
        """Time per verify cycle, ms, of each speculative request: its accept length over its decode speed."""
        return [s.accept_length / s.decode_tps * 1000 for s in self.samples if s.accept_length and s.decode_tps > 0]

    @property
    def speculative(self) -> bool:
        return any(s.verify_ct for s in self.samples)

    def by_boot(self) -> dict[int, list[SpeedSample]]:
        """Samples of each boot, in pinned-sequence order."""
        out: dict[int, list[SpeedSample]] = {}
        for s in self.samples:
            out.setdefault(s.boot, []).append(s)
        return {b: sorted(v, key=lambda s: s.index) for b, v in sorted(out.items())}

    def decode_tps_by_boot(self) -> dict[int, list[float]]:
        return {b: [s.decode_tps for s in v] for b, v in self.by_boot().items()}

    def count(self, boot: int) -> int:
        return sum(1 for s in self.samples if s.boot == boot)

    def degenerate(self) -> int | None:
        """How many measured answers loop (SpeedSample.degenerate); None where none could be told."""
        told = [s for s in self.samples if s.distinct_ngrams is not None]
        return sum(s.degenerate for s in told) if told else None


class Measurements(Protocol):
    """What the report and the diagnosis read: a run's records by (config, concurrency), and
    the prompt each measured request sent (a SpeedMeter, or a view adding stored records)."""

    @property
    def results(self) -> dict[tuple[str, int], ConfigSpeed]: ...

    def label(self, sample: SpeedSample) -> str: ...


def warmup_requests(spec: WarmupSpec) -> tuple[int, int]:
    """The fewest and most requests `SpeedMeter.warm_up` sends one server at concurrency 1: it
    stops once min_requests are sent and the last settle_window figures settled (so never before
    settle_window), and at max_requests whatever they did."""
    return min(spec.max_requests, max(spec.min_requests, spec.settle_window)), spec.max_requests


class SpeedMeter:
    def __init__(self, deployment: Deployment, context: int = 0, density: DensityProbe | None = None) -> None:
        """`context`: measure the context bucket of that many prompt tokens (measure.context)
        instead of the short workload. `density`: the run's characters per token
        (measure.density), at which a bucket's prompts are built once it is known; every meter of
        the run offers it the servers it warms up (without one, a bucket is built at
        context_fit.CHARS_PER_TOKEN)."""
        self.deployment = deployment
        self.context = context
        self.density = density
        self._built: tuple[list[str], list[GenerateRequest], int, str] | None = None
        self.results: dict[tuple[str, int], ConfigSpeed] = {}
        # Per config, read once: the end-of-sequence ids of the model its server loaded (empty: not told).
        self._end_ids: dict[str, frozenset[int]] = {}
        # (server process, concurrency) already warmed. Not id(server): a server object freed after
        # release can hand its id to the next one booted, which would then skip its warmup.
        self._warm: set[tuple[str, int | None, int]] = set()

    def prepare(self) -> None:
        """Build the pinned requests. A bucket's need the run's characters per token, which may
        acquire the reference's server to measure it: call this before acquiring the server to be
        measured (where servers take turns, acquiring another would stop it)."""
        if self._built is not None:
            return
        w = self.deployment.workload
        if self.context:
            from specgate.measure.context import bucket_prompts

            ratio = self.density.resolve().chars_per_token if self.density else CHARS_PER_TOKEN
            # One request more than are measured: the warmup's own, so that no measured request's
            # context is in the server's prefix cache before it is sent.
            built = bucket_prompts(w, self.context, w.context_repeats + 1, ratio)
            labels = [b.label for b in built]
            texts = [b.text for b in built]
            warmup_index = len(built) - 1
        else:
            prompts = w.speed_sequence()
            labels = [p.label for p in prompts]  # the prompt of each pinned request, for per-set figures
            texts = [render(p.messages, w.prompt_format) for p in prompts]
            warmup_index = 0
        requests = [
            GenerateRequest(max_new_tokens=w.max_new_tokens, text=text, ignore_eos=w.ignore_eos, stream=True)
            for text in texts
        ]
        # Identifies the pinned sequence: stored samples pair with ours only if it is the same.
        blob = json.dumps([r.payload() for r in requests], sort_keys=True)
        self._built = (labels, requests, warmup_index, hashlib.sha256(blob.encode()).hexdigest()[:12])

    def _pinned(self) -> tuple[list[str], list[GenerateRequest], int, str]:
        self.prepare()
        assert self._built is not None
        return self._built

    @property
    def labels(self) -> list[str]:
        return self._pinned()[0]

    @property
    def requests(self) -> list[GenerateRequest]:
        return self._pinned()[1]

    @property
    def warmup_index(self) -> int:
        return self._pinned()[2]

    @property
    def built_at(self) -> float | None:
        """The characters per token this bucket's prompts were built at (None: the short workload,
        or a bucket not built)."""
        if not self.context or self._built is None:
            return None
        return self.density.found.chars_per_token if self.density and self.density.found else CHARS_PER_TOKEN

    @property
    def workload_digest(self) -> str:
        if self._built is None and self.density is not None and self.density.found is None and self.context:
            # Nothing of this bucket was measured (its ratio never counted): no sample to pair, and
            # a report or baseline written after the run must not boot the reference to size it.
            return ""
        return self._pinned()[3]

    def end_ids_of(self, server: LiveServer) -> frozenset[int]:
        """The model's end-of-sequence ids, read from the folder the server says it loaded (its
        /model_info `model_path`, else the deployment's model), relative paths from the project
        root where the local launcher starts servers. None claimed for a server on another host."""
        if server.config not in self._end_ids:
            found: frozenset[int] = frozenset()
            if self.deployment.launch.launcher == "local":
                reported = server.model_info.get("model_path") if isinstance(server.model_info, dict) else None
                root = str(project.current().root)
                path = Path(reported if isinstance(reported, str) and reported else expand_placeholders(
                    self.deployment.model, {"repo": root}))
                found = end_ids(path if path.is_absolute() else Path(root) / path)
            self._end_ids[server.config] = found
        return self._end_ids[server.config]

    def label(self, sample: SpeedSample) -> str:
        """The prompt (set/id) a measured request sent."""
        return self.labels[sample.index % len(self.labels)]

    def record(self, config: str, concurrency: int) -> ConfigSpeed:
        return self.results.setdefault((config, concurrency), ConfigSpeed(config, concurrency, context=self.context))

    def _round(self, server: LiveServer, concurrency: int, index: int) -> list[SpeedSample]:
        """`concurrency` requests at once, taken from the pinned sequence at `index`. A round whose
        answer cannot be timed is sent again (a client starved of CPU can read a whole stream at
        once); one that never can be is an error naming why."""
        for _ in range(UNTIMED_TRIES - 1):
            try:
                return self._round_once(server, concurrency, index)
            except UntimeableAnswer as exc:
                if exc.ended_on_its_own:  # greedy: the same prompt ends the same way again
                    raise
                continue
        return self._round_once(server, concurrency, index)

    def _round_once(self, server: LiveServer, concurrency: int, index: int) -> list[SpeedSample]:
        batch = [self.requests[(index + k) % len(self.requests)] for k in range(concurrency)]
        if concurrency == 1:
            return [SpeedSample.of(server.generate(batch[0]), server.boot, index, self.end_ids_of(server))]
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return [
                SpeedSample.of(r, server.boot, index + k, self.end_ids_of(server))
                for k, r in enumerate(pool.map(server.generate, batch))
            ]

    def warm_up(self, server: LiveServer, concurrency: int) -> WarmupRecord | None:
        key = (server.handle.base_url, server.handle.pid, concurrency)
        if key in self._warm:
            return None
        if self.density is not None:
            self.density.offer(server)  # the reference's server is up: no boot of its own for it
        spec = self.deployment.workload.warmup
        figures: list[float] = []
        done = False
        for i in range(spec.max_requests):
            # The same request(s) every round: "settled" must mean the server is warm, not that
            # consecutive prompts happen to decode alike (accept length differs by prompt).
            figures.extend(s.decode_tps for s in self._round(server, concurrency, self.warmup_index))
            if i + 1 >= spec.min_requests and settled(figures, spec.settle_window, spec.settle_tolerance):
                done = True
                break
        self._warm.add(key)
        record = WarmupRecord(requests=len(figures), settled=done, decode_tps_per_request=figures)
        self.record(server.config, concurrency).warmups.append(record)
        return record

    def sample(self, server: LiveServer, concurrency: int, count: int) -> list[SpeedSample]:
        """The first `count` pinned requests again (after warmup), not recorded: a reference measured
        anew beside later servers pairs with them request for request."""
        self.warm_up(server, concurrency)
        out: list[SpeedSample] = []
        while len(out) < count:
            out.extend(self._round(server, concurrency, len(out)))
        return out

    def measure(self, server: LiveServer, concurrency: int, count: int) -> list[SpeedSample]:
        """`count` more measured requests (rounded up to whole rounds of `concurrency`)."""
        self.warm_up(server, concurrency)
        record = self.record(server.config, concurrency)
        new: list[SpeedSample] = []
        while len(new) < count:
            # Continue the pinned sequence where the last measurement of this boot stopped.
            new.extend(self._round(server, concurrency, record.count(server.boot) + len(new)))
        record.samples.extend(new)
        return new
