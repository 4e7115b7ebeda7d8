"""Self-distillation data: the target answers the training prompts, through SGLang.

EAGLE-3 trains best on the target's own answers (its hidden states and its next tokens then
agree with what it will see when serving). A plain SGLang server is booted with SGLang's own
CLI, every prompt is sent greedily in large batches through `/generate`, and each sample is
kept as token ids (prompt ids from the target's tokenizer, answer ids exactly as SGLang
produced them), so training sees the very tokens the server decodes.
Runs on the GPU host (needs SGLang and transformers); never imported on CPU.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import httpx

from specgate.errors import SpecgateError
from specgate.prompts import Message, render
from specgate.server.local import free_port
from specgate_lab.drafter.prompts import (
    GATE_KIND,
    SEED,
    TrainingPrompt,
    from_self_passages,
    from_self_written,
    self_passage_seeds,
    self_prompt_seeds,
    vocabulary_words,
)

# The order the answered prompts are sent in (see _new_plan).
ANSWER_ORDER_SEED = 20261202


@dataclass(frozen=True)
class DistilSettings:
    max_new_tokens: int = 256
    batch: int = 256  # prompts per /generate call; SGLang batches them itself
    parallel_calls: int = 8  # 8 x 256 in flight fills the server's 2048 running requests
    boot_timeout_s: float = 600.0
    prompt_format: str = "chatml"
    # Prompts the target writes itself first (sampled from specgate_lab.drafter.prompts seeds), then
    # answers greedily like the rest: wider than templates alone.
    self_prompts: int = 0
    self_temperature: float = 0.9
    self_max_tokens: int = 64
    # Passages of everyday prose the target writes (sampled as the prompts are), made into
    # summarisation and long-input prompts (specgate_lab.drafter.prompts.from_self_passages).
    self_passages: int = 0
    passage_max_tokens: int = 320
    # time.time() after which no new batch is sent (batches in flight still finish: one took up to
    # ~40 s on the H200). A device call that runs past its limit brings nothing back, so a cut
    # distillation keeps what was answered and its record says how much was left out.
    answer_until: float | None = None
    # A further round of data (specgate_lab.drafter.make's grow stage) draws its seeds with another
    # seed, and leaves out every prompt an earlier round asked (`exclude`: prompt_key of each),
    # so that no prompt is answered twice and none held out before is taught now.
    prompt_seed: int = SEED
    exclude: frozenset[str] = frozenset()


def prompt_key(prompt: TrainingPrompt) -> str:
    """What makes two training prompts the same one: their messages' text, ignoring case."""
    return "\n".join(f"{m.role}: {m.content}" for m in prompt.messages).lower()


def answer_in_batches(
    ask, texts: list[str], batch: int, parallel: int, until: float | None, keep=None  # noqa: ANN001
) -> list[dict | None]:
    """`ask(texts)` for each batch of `texts`, `parallel` at a time; a batch not started by `until`
    is not sent, and its answers are None (the caller keeps only what was answered). `keep(start,
    answers)`, where given, takes each batch's answers as it comes back (so that an interrupted
    run keeps what was answered). On an interrupt no queued batch is sent, and the caller's
    stopping of the server ends those in flight: nothing waits for them."""

    def one(start: int) -> list[dict | None]:
        chunk = texts[start : start + batch]
        if until is not None and time.time() > until:
            return [None] * len(chunk)
        answers = ask(chunk)
        if len(answers) != len(chunk):
            raise SpecgateError(f"distillation: {len(chunk)} prompts sent in one call, {len(answers)} answers came back")
        if keep is not None:
            keep(start, answers)
        return answers

    ex = ThreadPoolExecutor(parallel)
    try:
        futures = [ex.submit(one, start) for start in range(0, len(texts), batch)]
        pending = set(futures)
        while pending:
            # Short waits: a signal that reaches another thread is handled only when the main
            # thread runs Python again, and a wait without a timeout may last a whole batch.
            _, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                failed.result()
        out = [a for f in futures for a in f.result()]
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown()
    return out


def boot_server(model: Path, log_path: Path, timeout_s: float, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port, nccl = free_port(), free_port()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--nccl-port", str(nccl), *extra]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SpecgateError(f"distillation server exited with {proc.returncode} while booting; log: {log_path}")
            try:
                if httpx.get(f"{url}/health_generate", timeout=5).status_code == 200:
                    return proc, url
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise SpecgateError(f"distillation server not ready after {timeout_s:.0f} s; log: {log_path}")
    except BaseException:
        stop_server(proc)  # Ctrl-C or a timeout while booting must not leave it holding the GPU
        raise


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


PLAN_FILE = "distil-plan.jsonl"  # beside the data: every prompt to answer, in the order sent


@dataclass(frozen=True)
class Plan:
    """The prompts a distillation answers, in the order it sends them, and what the target wrote to
    make them (kept, so that a later call answers the rest of the same prompts)."""

    prompts: list[TrainingPrompt]
    made: dict


def save_plan(path: Path, plan: Plan) -> None:
    with path.open("w") as f:
        f.write(json.dumps({"made": plan.made, "prompts": len(plan.prompts)}) + "\n")
        for p in plan.prompts:
            f.write(json.dumps({"kind": p.kind, "messages": [[m.role, m.content] for m in p.messages]}) + "\n")


def load_plan(path: Path) -> Plan:
    try:
        lines = path.read_text().splitlines()
        head = json.loads(lines[0])
        prompts = [
            TrainingPrompt(row["kind"], tuple(Message(role, content) for role, content in row["messages"]))
            for row in map(json.loads, lines[1:])
        ]
    except (OSError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise SpecgateError(f"{path}: not a distillation plan (a header line, then one prompt per line): {exc}") from None
    if len(prompts) != head.get("prompts"):
        raise SpecgateError(f"{path}: the header says {head.get('prompts')} prompts, the file holds {len(prompts)}")
    return Plan(prompts, head.get("made") or {})


def answered_so_far(data: Path, plan_size: int | None = None) -> dict:
    """What the data file holds: the plan indices answered, answer tokens, and samples by kind.
    A last line cut short (a run stopped while writing it) is dropped from the file: its prompt
    is answered again. An index outside the plan, or one answered twice, is an error naming the
    line: the data and the plan beside it do not belong together."""
    done: set[int] = set()
    tokens = 0
    kinds: dict[str, int] = {}
    if not data.is_file():
        return {"indices": done, "answer_tokens": tokens, "by_kind": kinds}
    raw = data.read_text()
    if raw and not raw.endswith("\n"):
        raw = raw[: raw.rfind("\n") + 1]
        data.write_text(raw)
    for n, line in enumerate(raw.splitlines(), 1):
        try:
            row = json.loads(line)
            i = int(row["i"])
            tokens += len(row["output_ids"])
            kinds[row["kind"]] = kinds.get(row["kind"], 0) + 1
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecgateError(f"{data}, line {n}: not a distilled sample with its plan index: {exc}") from None
        if i in done or i < 0 or (plan_size is not None and i >= plan_size):
            why = "answered twice" if i in done else f"outside the plan's {plan_size} prompts"
            raise SpecgateError(f"{data}, line {n}: plan index {i} {why}: this data is not the plan's beside it")
        done.add(i)
    return {"indices": done, "answer_tokens": tokens, "by_kind": dict(sorted(kinds.items()))}


def data_figures(data: Path, plan: Plan) -> dict:
    """The distillation record's counts, as the data file says them (not as a record remembers):
    samples, answer tokens, samples by kind, and the plan's prompts not answered yet."""
    total = answered_so_far(data, len(plan.prompts))
    return {
        "samples": len(total["indices"]),
        "prompts_not_answered_by_the_deadline": len(plan.prompts) - len(total["indices"]),
        "samples_by_kind": total["by_kind"],
        "answer_tokens": total["answer_tokens"],
    }


def distil(
    model: Path,
    prompts: list[TrainingPrompt],
    out_path: Path,
    settings: DistilSettings,
    server_args: list[str],
    resume: bool = False,
) -> dict:
    """Answer the plan's prompts, one JSON line each ({i, kind, prompt_ids, output_ids}) in
    `out_path`; returns figures. A new plan is `prompts` plus what the target writes (saved
    beside the data); with `resume`, the saved plan's prompts not yet answered are sent, and
    their answers appended."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    started = time.monotonic()
    # SIGTERM (gpu_run.sh's timeout, a CI cancel) unwinds like Ctrl-C, so the server is stopped.
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        return _distil(model, prompts, tokenizer, out_path, settings, server_args, started, resume)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _distil(model, prompts, tokenizer, out_path, settings, server_args, started, resume) -> dict:  # noqa: ANN001
    if settings.answer_until is not None and time.time() > settings.answer_until:
        raise SpecgateError("distillation: its deadline has passed before the server booted; nothing was asked")
    plan_path = out_path.parent / PLAN_FILE
    plan = load_plan(plan_path) if resume else None
    done = answered_so_far(out_path, len(plan.prompts))["indices"] if plan is not None else set()
    if plan is None:
        out_path.unlink(missing_ok=True)
    proc, url = boot_server(model, out_path.with_suffix(".server.log"), settings.boot_timeout_s, server_args)
    booted = time.monotonic()
    answered = [0]
    try:
        with httpx.Client(timeout=1800) as client, out_path.open("a") as data:
            lock = threading.Lock()

            def ask_all(texts: list[str], sampling: dict, keep=None) -> list[dict | None]:  # noqa: ANN001
                def ask(chunk: list[str]) -> list[dict]:
                    resp = client.post(f"{url}/generate", json={"text": chunk, "sampling_params": sampling})
                    resp.raise_for_status()
                    return resp.json()

                return answer_in_batches(ask, texts, settings.batch, settings.parallel_calls, settings.answer_until, keep)

            if plan is None:
                plan = _new_plan(prompts, tokenizer, settings, ask_all)
                save_plan(plan_path, plan)
            todo = [(i, p) for i, p in enumerate(plan.prompts) if i not in done]
            texts = [render(p.messages, settings.prompt_format) for _, p in todo]

            def keep(start: int, answers: list[dict]) -> None:
                """A batch's samples, appended as one write as soon as it is answered."""
                lines = []
                for (i, p), text, answer in zip(todo[start:], texts[start:], answers, strict=False):
                    ids = answer.get("output_ids")
                    if not isinstance(ids, list) or not ids:
                        raise SpecgateError(f"distillation: an answer carries no output_ids (keys: {sorted(answer)})")
                    prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                    lines.append(json.dumps({"i": i, "kind": p.kind, "prompt_ids": prompt_ids, "output_ids": ids}) + "\n")
                with lock:
                    data.write("".join(lines))
                    data.flush()
                    answered[0] += len(lines)

            ask_all(texts, {"temperature": 0.0, "max_new_tokens": settings.max_new_tokens}, keep)
    finally:
        stop_server(proc)
    if todo and not answered[0]:
        raise SpecgateError(f"distillation: the deadline passed before any of {len(todo)} prompts was answered")
    return {
        **plan.made,
        **data_figures(out_path, plan),
        "max_new_tokens": settings.max_new_tokens,
        "this_call": {"answered": answered[0], "boot_s": round(booted - started, 1),
                      "generate_s": round(time.monotonic() - booted, 1), "resumed": resume},
        "server_args": server_args,
    }


def _new_plan(prompts: list[TrainingPrompt], tokenizer, settings: DistilSettings, ask_all) -> Plan:  # noqa: ANN001
    """`prompts`, plus the prompts and passages the target writes (sampled), in a seeded shuffled
    order, so that a distillation cut at its deadline keeps a sample of every kind."""

    def written(seeds: list[TrainingPrompt], max_new_tokens: int, make) -> tuple[list[TrainingPrompt], dict]:  # noqa: ANN001
        """The prompts `make` builds from what the target writes when asked `seeds` (sampled), and
        how many seeds were asked: those the deadline left unasked are counted apart (never
        written, not dropped)."""
        answers = ask_all(
            [render(p.messages, settings.prompt_format) for p in seeds],
            {"temperature": settings.self_temperature, "top_p": 0.95, "max_new_tokens": max_new_tokens},
        )
        unasked = sum(a is None for a in answers)
        built, dropped = make([str(a.get("text", "")) for a in answers if a is not None])
        return built, {"asked": len(seeds) - unasked, "not_asked_by_the_deadline": unasked, "dropped": dropped}

    made: dict = {"self_written_prompts": {}, "self_written_passages": {}}
    words = vocabulary_words(tokenizer.get_vocab())
    if settings.self_prompts:
        seeds = self_prompt_seeds(settings.self_prompts, words, seed=settings.prompt_seed)
        own, figures = written(seeds, settings.self_max_tokens, from_self_written)
        made["self_written_prompts"] = {**figures, "kept": len(own), "temperature": settings.self_temperature,
                                        "vocabulary_words": len(words)}
        prompts = [*prompts, *own]
    if settings.self_passages:
        seeds = self_passage_seeds(settings.self_passages, words, seed=settings.prompt_seed)
        built, figures = written(
            seeds, settings.passage_max_tokens, lambda texts: from_self_passages(texts, seed=settings.prompt_seed)
        )
        made["self_written_passages"] = {**figures, "prompts": len(built),
                                         "by_kind": {k: sum(p.kind == k for p in built) for k in sorted({p.kind for p in built})}}
        prompts = [*prompts, *built]
    judged = [p for p in prompts if p.kind.startswith(GATE_KIND)]  # first: a deadline never cuts them
    taught = [p for p in prompts if not p.kind.startswith(GATE_KIND)]
    if settings.exclude:
        fresh = [p for p in taught if prompt_key(p) not in settings.exclude]
        made["dropped_as_asked_in_an_earlier_round"] = len(taught) - len(fresh)
        taught = fresh
    # Each prompt once: a repeat answered alike could be taught once and held out once.
    first_of: dict[str, TrainingPrompt] = {}
    for p in taught:
        first_of.setdefault(prompt_key(p), p)
    once = list(first_of.values())  # the first of each, in the order met
    made["dropped_as_repeated"] = len(taught) - len(once)
    taught = once
    random.Random(ANSWER_ORDER_SEED).shuffle(taught)
    return Plan([*judged, *taught], made)
