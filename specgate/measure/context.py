"""Long prompts for the context buckets (`workload.context_buckets`): real text, pinned per bucket.

A bucket's prompt is documents concatenated, then one task, rendered with the deployment's
prompt format. The documents are every message text of the built-in prompt sets
(long_context's documents first, each without its closing question) and of the deployment's own
prompt files; the tasks are long_context's questions and the summarisation set's instructions.
Never random tokens: a drafter's accept length on noise says nothing of its traffic.

Prompt i of bucket B is a pure function of (B, i, the corpus, the characters per token it is built
at): two runs on one tokenizer send the same requests in the same order, so they pair request by
request. Each request opens with its own number and
its own first document (the order rotates per request), so SGLang's radix cache cannot serve one
request's context from another's. The shipped text is ~26 KB; a bucket longer than that repeats
it, each pass in another order (`passes` says how many).

There is no tokenizer on a CPU machine: a prompt is built to a character budget, at the
characters per token the reference's server counted for a calibration prompt of the same corpus
(measure.density; CHARS_PER_TOKEN where none is measured), and the report reads the prompt tokens
the server counted.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from specgate.context_fit import CHARS_PER_TOKEN
from specgate.deployment import Workload, bucket_label
from specgate.prompts import KNOWN_SETS, Message, load_prompt_file, load_prompt_set, render

# The report flags a bucket whose median real prompt length is further than this from its target.
LENGTH_TOLERANCE = 0.25

OPENING = 120  # characters that tell two documents apart where a prompt starts

SHORT = "short"  # the ordinary workload's bucket name


@dataclass(frozen=True)
class Corpus:
    documents: tuple[str, ...]
    tasks: tuple[str, ...]

    @property
    def chars(self) -> int:
        return sum(len(d) for d in self.documents) + 2 * len(self.documents)


def _split_question(text: str) -> tuple[str, str]:
    """A long_context prompt's document and its closing question (its last paragraph)."""
    body, _, question = text.rstrip().rpartition("\n\n")
    return (body.strip(), question.strip()) if body else (text.strip(), "")


def _instruction(text: str) -> str:
    """A summarisation prompt's instruction ("Summarise in two sentences: ...") for any text."""
    head = text.split(":", 1)[0].strip()
    return f"{head}: the documents above." if head and head != text.strip() else ""


def corpus_of(workload: Workload) -> Corpus:
    documents: list[str] = []
    tasks: list[str] = []
    for prompt in load_prompt_set("long_context"):
        for m in prompt.messages:
            body, question = _split_question(m.content)
            documents.append(body)
            if question:
                tasks.append(question)
    for prompt in load_prompt_set("summarisation"):
        tasks.extend(t for m in prompt.messages if (t := _instruction(m.content)))
    others = [load_prompt_set(s) for s in KNOWN_SETS if s != "long_context"]
    others += [load_prompt_file(f, f.stem) for f in workload.prompt_files]
    documents.extend(m.content.strip() for group in others for p in group for m in p.messages if m.content.strip())
    # One document per opening: long_context-03 is 00's and 01's text again, and two documents
    # that open alike would let a prefix cache serve one request's start from another's.
    by_opening = {d[:OPENING]: d for d in reversed(documents)}
    return Corpus(tuple(dict.fromkeys(by_opening[d[:OPENING]] for d in documents)), tuple(dict.fromkeys(tasks)))


def _order(count: int, index: int, pass_: int, tokens: int) -> list[int]:
    """The documents' order in pass `pass_` of request `index`: the first pass rotated so that
    request i opens with document i; later passes shuffled by a seed of (bucket, request, pass),
    so a repeat is never the text before it again."""
    order = [(index + k) % count for k in range(count)]
    if pass_:
        random.Random(f"{tokens}:{index}:{pass_}").shuffle(order)
    return order


def _cut(text: str, room: int) -> str:
    """`text` cut to at most `room` characters at a sentence (else word) boundary."""
    if len(text) <= room:
        return text
    head = text[:room]
    end = max(head.rfind(". "), head.rfind(".\n"))
    if end > room // 2:
        return head[: end + 1]
    return head.rsplit(" ", 1)[0] if " " in head else head


@dataclass(frozen=True)
class LongPrompt:
    text: str  # rendered with the prompt format, ready to send
    label: str  # "context-8K/3": the bucket and the request's number
    passes: int  # how many times the corpus runs through it (more than 1: the text repeats)


def long_prompt(
    workload: Workload,
    tokens: int,
    index: int,
    corpus: Corpus | None = None,
    chars_per_token: float = CHARS_PER_TOKEN,
) -> LongPrompt:
    """Prompt `index` of the bucket of `tokens` prompt tokens, built at `chars_per_token` (see the
    module's docstring)."""
    corpus = corpus or corpus_of(workload)
    label = bucket_label(tokens)
    task = corpus.tasks[index % len(corpus.tasks)]
    opening = f"Document collection {index + 1} ({label} context). Read the documents below, then answer."
    return _filled(workload, corpus, opening, task, round(tokens * chars_per_token), tokens, index, label)


def calibration_text(workload: Workload, chars: int) -> str:
    """The calibration prompt (measure.density), at most `chars` characters with the prompt
    format's frame: the corpus's documents in their order, whole where they fit, else every k-th
    sentence of them (its whitespace kept), so that the sample has the whole corpus's mix of prose,
    code and numbers, as the buckets' prompts do (a long one holds the whole corpus, short ones
    each another document). It opens unlike every bucket's prompt, so no prefix cache serves a
    measured request from it."""
    corpus = corpus_of(workload)
    opening = "Calibration text. Read the excerpts below, then answer."
    task = corpus.tasks[0]
    frame = len(_framed(workload, opening, "", task))
    room = max(0, chars - frame)
    sentences = [s for d in corpus.documents for s in re.split(r"(?<=[.!?:]\s)", d.strip() + "\n\n") if s]
    every = max(1, math.ceil(sum(len(s) for s in sentences) / max(1, room)))
    body = re.sub(r"\n{3,}", "\n\n", _cut("".join(sentences[::every]).strip(), room))
    return _framed(workload, opening, body, task)


def _framed(workload: Workload, opening: str, body: str, task: str) -> str:
    """One long prompt: `opening`, `body`, then `task`, rendered in the deployment's format. With an
    empty body its length is the frame every budget leaves room for."""
    return render((Message("user", f"{opening}\n\n{body}\n\n{task}"),), workload.prompt_format)


def _filled(
    workload: Workload, corpus: Corpus, opening: str, task: str, budget: int, tokens: int, index: int, label: str
) -> LongPrompt:
    """`opening`, then the corpus's documents (in request `index`'s order, seeded by `tokens`) to
    `budget` characters with the frame, then `task`, rendered."""
    frame = len(_framed(workload, opening, "", task))
    room = max(0, budget - frame)
    parts: list[str] = []
    used = 0
    pass_ = 0
    while used < room:
        for k in _order(len(corpus.documents), index, pass_, tokens):
            piece = _cut(corpus.documents[k], room - used)
            if not piece:
                break
            parts.append(piece)
            used += len(piece) + 2
            if used >= room:
                break
        else:
            pass_ += 1
            continue
        break
    body = re.sub(r"\n{3,}", "\n\n", "\n\n".join(parts))
    text = _framed(workload, opening, body, task)
    return LongPrompt(text=text, label=f"context-{label}/{index:02d}", passes=pass_ + 1)


def passes_needed(workload: Workload, tokens: int) -> int:
    """How many times the corpus's text runs through a prompt of `tokens` tokens (`check` says it)."""
    corpus = corpus_of(workload)
    return max(1, math.ceil(tokens * CHARS_PER_TOKEN / corpus.chars))


def bucket_prompts(
    workload: Workload, tokens: int, count: int, chars_per_token: float = CHARS_PER_TOKEN
) -> list[LongPrompt]:
    """The first `count` prompts of the bucket of `tokens` prompt tokens, in the pinned order,
    built at `chars_per_token`."""
    corpus = corpus_of(workload)
    return [long_prompt(workload, tokens, i, corpus, chars_per_token) for i in range(count)]
