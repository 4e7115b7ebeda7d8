"""SIMULATOR word-level tokenizer: a fixed vocabulary of made-up words and punctuation.

Output text is rebuilt from ids, so stop strings such as "." or "\n" really occur in
generated text and the stop-string checks have something to bite on.
"""

from __future__ import annotations

import re
import zlib

EOS_ID = 0
PUNCTUATION = (".", ",", "\n", "?", "!", ":")
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "shi", "gu", "ba", "fe", "zo", "yu")


def _build_vocab(size: int = 1024) -> tuple[str, ...]:
    words = ["<eos>", *PUNCTUATION]
    n = len(_SYLLABLES)
    i = 0
    while len(words) < size:
        a, b, c = i % n, (i // n) % n, (i // (n * n)) % n
        words.append(_SYLLABLES[a] + _SYLLABLES[b] + ("" if i < n * n else _SYLLABLES[c]))
        i += 1
    return tuple(words)


VOCAB = _build_vocab()
VOCAB_SIZE = len(VOCAB)
PUNCT_IDS = tuple(range(1, 1 + len(PUNCTUATION)))
_INDEX = {w: i for i, w in enumerate(VOCAB)}
_PIECES = re.compile(r"\w+|[^\w\s]|\n")


def encode(text: str) -> list[int]:
    """Known words map to their id; anything else hashes into the vocabulary (lossy on purpose)."""
    ids = []
    for piece in _PIECES.findall(text):
        ids.append(_INDEX.get(piece, 1 + len(PUNCTUATION) + zlib.crc32(piece.encode()) % (VOCAB_SIZE - 7)))
    return ids or [EOS_ID + 7]


def decode(ids: list[int]) -> str:
    out: list[str] = []
    for i in ids:
        if i == EOS_ID:
            continue
        word = VOCAB[i]
        if i in PUNCT_IDS or not out or out[-1] == "\n":
            out.append(word)
        else:
            out.append(" " + word)
    return "".join(out)
