"""Drive SGLang's own Req finish check (schedule_batch.py of a released wheel) on CPU.

Usage: python3 drive_req.py SGLANG_WHEEL

The wheel's Req methods that decide where an answer stops (update_finish_state and the stop
checks it calls) are taken from its schedule_batch.py by name and bound to a stub request with a
one-character-per-token tokenizer; nothing else of SGLang is imported (it needs torch and a GPU
stack). Each scenario appends one verify step's tokens and calls update_finish_state as a
speculative worker does, then prints where the request finished. This is SGLang's code run as
released, not a copy in specgate: the script only reads the wheel.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from array import array
from types import SimpleNamespace
from typing import List, Optional  # noqa: F401,UP035  (the methods' annotations name them)

METHODS = (
    "finished", "_stop_match_tail_len", "tail_str", "_check_token_based_finish",
    "_locate_str_stop_finished_len", "_check_str_based_finish", "_check_vocab_boundary_finish",
    "update_finish_state", "_cap_finished_len_at_max_new_tokens",  # the last from 0.5.18 on
)


class _Reason:
    def __init__(self, kind: str, **fields: object) -> None:
        self.kind, self.fields = kind, fields

    def __repr__(self) -> str:
        return f"{self.kind}({', '.join(f'{k}={v!r}' for k, v in self.fields.items())})"


def _reasons() -> dict[str, object]:
    return {
        "FINISH_MATCHED_STR": lambda matched: _Reason("stop", matched=matched),
        "FINISH_MATCHED_TOKEN": lambda matched: _Reason("stop", matched=matched),
        "FINISHED_MATCHED_REGEX": lambda matched: _Reason("stop-regex", matched=matched),
        "FINISH_LENGTH": lambda length: _Reason("length", length=length),
    }


def load_req_methods(wheel: str) -> type:
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("sglang/srt/managers/schedule_batch.py").decode()
    tree = ast.parse(source)
    req = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Req")
    found = {n.name: n for n in req.body if isinstance(n, ast.FunctionDef) and n.name in METHODS}
    module = ast.Module(body=[ast.ClassDef(name="Req", bases=[], keywords=[], body=list(found.values()),
                                           decorator_list=[], type_params=[])], type_ignores=[])
    namespace: dict[str, object] = {"re": re, "List": list, "Optional": Optional, **_reasons()}
    exec(compile(ast.fix_missing_locations(module), f"{wheel}:schedule_batch.py", "exec"), namespace)  # noqa: S102
    return namespace["Req"]  # type: ignore[return-value]


class CharTokenizer:
    eos_token_id = 0
    additional_stop_token_ids = None

    def decode(self, ids) -> str:  # noqa: ANN001
        return "".join(chr(i) for i in ids)


def request(cls: type, stops: list[str], max_new_tokens: int):  # noqa: ANN201
    r = cls.__new__(cls)
    r.sampling_params = SimpleNamespace(
        stop_strs=stops, stop_regex_strs=[], stop_str_max_len=max((len(s) for s in stops), default=0),
        stop_regex_max_len=0, max_new_tokens=max_new_tokens, ignore_eos=False, stop_token_ids=set(),
    )
    r.tokenizer, r.eos_token_ids, r.vocab_size = CharTokenizer(), set(), 1 << 20
    r.output_ids, r.decoded_text = array("q"), ""
    r.finished_reason, r.finished_len, r.to_finish, r.grammar = None, None, None, None
    return r


def run(cls: type, stops: list[str], steps: list[str], max_new_tokens: int = 40) -> str:
    r = request(cls, stops, max_new_tokens)
    for step in steps:
        r.output_ids.extend(ord(c) for c in step)
        r.update_finish_state(len(step))
        if r.finished_reason is not None:
            kept = "".join(chr(i) for i in r.output_ids[: r.finished_len])
            return f"finished {r.finished_reason} after {len(kept)} tokens: {kept!r}"
    return "not finished"


def main() -> None:
    cls = load_req_methods(sys.argv[1])
    print(f"SGLang Req finish check from {sys.argv[1]}")
    # One token per character: '\n\n' is two tokens here, and the verify step of the H200 case
    # ('\n\n', '1', '.') is four; the earlier text arrives in steps of three.
    text = "Facts"
    steps = [text[i : i + 3] for i in range(0, len(text), 3)]
    scenarios = [
        ("stop ['.', '\\n\\n'], one step accepts '\\n\\n1.'", [".", "\n\n"], [*steps, "\n\n1."]),
        ("stop ['\\n\\n', '.'] (the other order), same step", ["\n\n", "."], [*steps, "\n\n1."]),
        ("stop ['.', '\\n\\n'], plain decoding (one token a step)", [".", "\n\n"], [*text, "\n", "\n", "1", "."]),
    ]
    for name, stops, given in scenarios:
        print(f"- {name}: {run(cls, stops, given)}")
    # The length cap against a stop in the same step (past-stop-at-length): max_new_tokens 7.
    print(f"- stop ['.'], max_new_tokens 7, one step accepts '. Pl': {run(cls, ['.'], ['Fac', 'ts', '. Pl'], 7)}")


if __name__ == "__main__":
    main()
