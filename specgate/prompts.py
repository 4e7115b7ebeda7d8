"""Prompt sets (fixtures/prompts/*.jsonl, shipped in the package) and the chat formats that turn them into text.

SGLang's native /generate takes raw text, so the chat template is applied here. The
formats are written out rather than loaded from a tokenizer so that the CPU-only suite
needs no transformers; a deployment picks the one its model was trained with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from specgate.documents import parse_json, read_document

KNOWN_SETS = ("chat", "code", "math", "summarisation", "translation", "long_context")
KNOWN_FORMATS = ("raw", "chatml", "llama3")


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class Prompt:
    set_name: str
    prompt_id: str
    messages: tuple[Message, ...]

    @property
    def label(self) -> str:
        return f"{self.set_name}/{self.prompt_id}"


def set_of(label: str) -> str:
    """The prompt set a request's label (`Prompt.label`, set/id) names."""
    return label.split("/", 1)[0]


@cache
def load_prompt_set(set_name: str) -> tuple[Prompt, ...]:
    from specgate.resources import prompts_dir

    return load_prompt_file(prompts_dir() / f"{set_name}.jsonl", set_name)


@cache
def load_prompt_file(path: Path, set_name: str) -> tuple[Prompt, ...]:
    """One JSONL prompt file (a built-in set, or a user's `workload.prompt_files` entry).
    ValueError names the file and line of anything it cannot use."""
    try:
        text = read_document(path, "a JSONL prompt file")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the prompt file: {exc}") from None
    prompts = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line)
            messages = tuple(Message(m["role"], m["content"]) for m in row["messages"])
            if not messages or not all(isinstance(m.role, str) and isinstance(m.content, str) for m in messages):
                raise TypeError("messages must be a non-empty list of {role, content} strings")
            prompt_id = str(row["id"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{path}:{lineno}: expected {{'id', 'messages': [{{'role', 'content'}}]}}: {exc}"
            ) from None
        if prompt_id in seen:
            raise ValueError(f"{path}:{lineno}: id {prompt_id!r} appears twice (ids label requests in reports)")
        seen.add(prompt_id)
        prompts.append(Prompt(set_name, prompt_id, messages))
    if not prompts:
        raise ValueError(f"{path}: prompt set is empty")
    return tuple(prompts)


def load_prompts(set_names: tuple[str, ...]) -> tuple[Prompt, ...]:
    return tuple(p for name in set_names for p in load_prompt_set(name))


def messages_digest(conversations: list[tuple[Message, ...]]) -> str:
    """A short digest of conversations' roles and texts, in order: names a prompt list in a record
    (a drafter's training, say) so that a reader can tell whether it is the same list."""
    h = hashlib.sha256()
    for messages in conversations:
        for m in messages:
            h.update(f"{m.role}\x00{m.content}\x01".encode())
    return h.hexdigest()[:16]


def builtin_sets_digest() -> str:
    """messages_digest of every built-in prompt set, in KNOWN_SETS order."""
    return messages_digest([p.messages for p in load_prompts(KNOWN_SETS)])


def render(messages: tuple[Message, ...], fmt: str) -> str:
    """Apply a chat format, ending with the assistant's turn open."""
    if fmt == "raw":
        return "\n\n".join(m.content for m in messages)
    if fmt == "chatml":
        body = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
        return body + "<|im_start|>assistant\n"
    if fmt == "llama3":
        body = "".join(f"<|start_header_id|>{m.role}<|end_header_id|>\n\n{m.content}<|eot_id|>" for m in messages)
        return "<|begin_of_text|>" + body + "<|start_header_id|>assistant<|end_header_id|>\n\n"
    raise ValueError(f"unknown prompt format {fmt!r}; known: {', '.join(KNOWN_FORMATS)}")
