"""Training prompts for the drafter: made here, never taken from the gate's held-out sets.

The gate measures accept length on `fixtures/prompts`; a drafter trained on those would
flatter itself. These prompts cover the same kinds of request (chat, code, math, summaries,
translation, long inputs) but are built from templates, vocabularies and passages of their
own, drawn with a fixed seed, and `leaks()` proves no prompt shares an 8-word run with any
held-out prompt (a self-test checks it). The answers are the target's own (self-distillation,
specgate_lab.drafter.distil), so the prompts only need to steer it into varied, realistic text.
"""

from __future__ import annotations

import functools
import inspect
import random
import re
from dataclasses import dataclass

from specgate.prompts import KNOWN_SETS, Message, load_prompts

SEED = 20261130
SHINGLE = 8  # words: a shared run this long is a leak

TOPICS = (
    "photosynthesis", "compound interest", "the water cycle", "black holes", "vaccines", "inflation",
    "the printing press", "plate tectonics", "machine learning", "the immune system", "supply and demand",
    "renewable energy", "the Roman Empire", "DNA replication", "recycling", "time zones", "the stock market",
    "volcanoes", "bees and pollination", "the internet", "electric cars", "sleep cycles", "coral reefs",
    "the French Revolution", "antibiotics", "solar panels", "earthquakes", "blockchains", "the moon's phases",
    "public libraries", "composting", "migration of birds", "credit scores", "tides", "the Silk Road",
    "nuclear fusion", "rainforests", "jazz music", "chess openings", "typography", "the human heart",
)
AUDIENCES = ("a child", "a high-school student", "a busy manager", "a retired engineer", "a new employee")
ASKS = (
    "Describe {t} for {a} in a short paragraph.",
    "What should {a} know about {t}? Keep it brief.",
    "List three surprising facts about {t}.",
    "Give an analogy that makes {t} easy to grasp.",
    "Write a short, friendly note to {a} introducing {t}.",
    "What are common misconceptions about {t}?",
    "Why does {t} matter in everyday life? Answer for {a}.",
    "Outline a five-minute talk on {t} for {a}.",
    "Compare {t} with something {a} already knows well.",
)
ADVICE = (
    "I have a job interview tomorrow and feel nervous. Any advice?",
    "How do I keep houseplants alive while travelling for two weeks?",
    "What is a sensible weekly routine for learning to play the guitar?",
    "How can I make my small kitchen feel less cluttered?",
    "I keep forgetting people's names right after meeting them. What helps?",
    "How should I plan a budget for my first month living alone?",
    "What is a good way to start running if I have never exercised?",
    "How can a small team run shorter, more useful meetings?",
)
CODE_TASKS = (
    "reverses the words in a sentence", "counts vowels in a string", "merges two sorted lists",
    "checks whether a number is prime", "flattens a nested list", "parses a CSV line into fields",
    "computes the median of a list", "removes duplicate items while keeping order",
    "converts Celsius to Fahrenheit", "finds the longest common prefix of some strings",
    "validates a simple email address", "groups words by their first letter",
    "returns the running total of a list", "rotates a matrix by 90 degrees", "implements binary search",
    "reads a text file and counts its lines", "turns a dictionary into a query string",
    "computes the factorial iteratively", "checks if brackets in a string are balanced",
    "capitalises the first letter of each word", "sums the digits of an integer", "transposes a matrix",
    "finds all anagrams of a word in a list", "converts a Roman numeral to an integer",
    "chunks a list into pieces of size n", "counts word frequencies in a paragraph",
    "returns the k largest numbers of a list", "checks whether two strings are rotations of each other",
    "generates the first n rows of Pascal's triangle", "converts seconds to hours, minutes and seconds",
    "interleaves two lists", "removes punctuation from a string", "finds the second smallest element",
    "validates a sudoku row", "computes a moving average over a window", "swaps the keys and values of a map",
    "finds the missing number in a sequence from 1 to n", "formats a number with thousands separators",
    "detects a cycle in a linked list", "implements a stack with push and pop",
)
LANGUAGES = ("Python", "JavaScript", "Go", "Rust", "C", "Java", "TypeScript")
CODE_ASKS = (
    "In {lang}, implement a routine that {task}.",
    "Show me {lang} code that {task}, and explain it briefly.",
    "How would you write a {lang} helper that {task}? Include a usage example.",
    "Give a {lang} snippet that {task}, with a comment on its complexity.",
    "I need {lang} code which {task}. Keep it short and idiomatic.",
)
# The gate's translation set asks for French and German too, and into English: languages are
# not held-out text (the 8-word leak check is), and a drafter that never saw them drafts them badly.
TARGET_LANGUAGES = ("Spanish", "Italian", "Portuguese", "Dutch", "Swedish", "French", "German")
TRANSLATE_ASKS = ("Please render this in {lang}:", "Translate into {lang}:", "How would you say this in {lang}?")
SUBJECTS = ("My brother", "The new teacher", "Our neighbour", "The baker", "A tourist", "The old captain",
            "My grandmother", "The young pilot", "Her cousin", "The shy student")
ACTIONS = (
    "bought fresh bread", "lost the keys", "painted the fence", "missed the last bus",
    "found a small cat", "opened a bookshop", "fixed the bicycle", "planted tomatoes",
)
PLACES = ("near the station", "in the village", "after the concert", "before breakfast", "by the river")
MODULES = ("textwrap", "json", "csv", "heapq", "bisect", "fractions", "statistics", "shutil", "difflib",
           "itertools", "functools", "pathlib", "string", "calendar", "zipfile", "queue", "sched", "uuid",
           "collections", "decimal", "datetime", "random", "re", "os", "subprocess", "threading", "logging",
           "argparse", "tarfile", "gzip", "email", "http.client", "urllib.parse", "sqlite3", "unittest",
           "contextlib", "dataclasses", "enum", "inspect", "pickle", "copy", "pprint", "socket")
SUMMARY_ASKS = (
    "Give the gist of this passage in a sentence or two:",
    "Explain the following text in plain words:",
    "What is this text about? Answer briefly.",
    "Turn this into three short bullet points:",
)


@dataclass(frozen=True)
class TrainingPrompt:
    kind: str
    messages: tuple[Message, ...]

    @property
    def text(self) -> str:
        return "\n".join(m.content for m in self.messages)


def _passages() -> list[str]:
    """English prose that ships with Python: the documentation of modules and of their public
    classes and functions, paragraph by paragraph."""
    import importlib

    out: list[str] = []
    for name in MODULES:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module) or ""]
        for attr in sorted(dir(module)):
            if not attr.startswith("_") and callable(obj := getattr(module, attr, None)):
                docs.append(inspect.getdoc(obj) or "")
        for doc in docs:
            for para in re.split(r"\n\s*\n", doc):
                para = " ".join(para.split())
                if len(para.split()) >= 25 and para not in out:
                    out.append(para)
    return out


def _math(rng: random.Random) -> str:
    a, b, c = rng.randint(3, 90), rng.randint(2, 40), rng.randint(2, 12)
    forms = (
        f"A box holds {a} pencils. A school orders {c} boxes and gives away {b} pencils. How many are left?",
        f"What is {a} percent of {b * 25}? Explain each step.",
        f"A cyclist rides {a} km in {c} hours. What is her average speed in km per hour?",
        f"If 4y - {b} = {a}, what is y?",
        f"A rectangle is {a} cm long and {b} cm wide. Find its area and its perimeter.",
        f"Share {a * c} marbles equally among {c} children. How many does each child get?",
    )
    return rng.choice(forms)


def generate(n: int, seed: int = SEED) -> list[TrainingPrompt]:
    """`n` prompts across six kinds, the same list for the same (n, seed)."""
    rng = random.Random(seed)
    passages = _passages()
    makers = {
        "chat": lambda: rng.choice(ASKS).format(t=rng.choice(TOPICS), a=rng.choice(AUDIENCES))
        if rng.random() < 0.7
        else rng.choice(ADVICE),
        "code": lambda: rng.choice(CODE_ASKS).format(lang=rng.choice(LANGUAGES), task=rng.choice(CODE_TASKS)),
        "math": lambda: _math(rng),
        "summarisation": lambda: f"{rng.choice(SUMMARY_ASKS)}\n\n{rng.choice(passages)}",
        "translation": lambda: (
            f"{rng.choice(TRANSLATE_ASKS).format(lang=rng.choice(TARGET_LANGUAGES))} {rng.choice(SUBJECTS)} "
            f"{rng.choice(ACTIONS)} {rng.choice(PLACES)}."
        ),
        "long_context": lambda: (
            "Read the notes below, then answer: which part matters most to a beginner, and why?\n\n"
            # 6 to 18 passages: ~400 to ~1,800 tokens, around the held-out long_context prompts (~1,000-1,400)
            + "\n\n".join(rng.sample(passages, rng.randint(6, 18)))
        ),
    }
    kinds = list(makers)
    out: list[TrainingPrompt] = []
    seen: set[str] = set()
    misses = 0
    while len(out) < n:
        kind = kinds[len(out) % len(kinds)]
        content = makers[kind]()
        if content in seen:
            misses += 1
            if misses > 200 * n:
                raise ValueError(f"only {len(out)} distinct training prompts can be made, not {n}")
            continue
        seen.add(content)
        system = (Message("system", "You are a helpful assistant."),) if rng.random() < 0.3 else ()
        out.append(TrainingPrompt(kind, (*system, Message("user", content))))
    return out


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


@functools.cache
def _held_out_shingles() -> frozenset[tuple[str, ...]]:
    held: set[tuple[str, ...]] = set()
    for p in load_prompts(KNOWN_SETS):
        for m in p.messages:
            held |= _shingles(m.content)
    return frozenset(held)


# The gate's own prompts (fixtures/prompts) go through the distillation too, answered by the
# target, but only to judge the drafter on: training never learns them, and epochs are not chosen
# by them (that would fit the drafter to the test). They tell whether training's expected accept
# length misses the server's because the gate's prompts differ from the training data (then it
# is low on them too) or because serving differs from training (then it is not).
GATE_KIND = "gate:"  # a sample kind that starts so is judged on, never taught


def gate_prompts() -> list[TrainingPrompt]:
    from specgate.prompts import KNOWN_SETS, load_prompts

    return [TrainingPrompt(f"{GATE_KIND}{p.set_name}", p.messages) for p in load_prompts(KNOWN_SETS)]


def leaks(prompts: list[TrainingPrompt]) -> list[str]:
    """Training prompts that share an 8-word run with a held-out (fixtures/prompts) prompt."""
    held = _held_out_shingles()
    return [p.text[:80] for p in prompts if _shingles(p.text) & held]


def digest(prompts: list[TrainingPrompt]) -> str:
    from specgate.prompts import messages_digest

    return messages_digest([p.messages for p in prompts])


# Templated prompts alone proved too narrow (results/2026-11-30-h200-eagle3: held-out top-1
# accuracy 0.37 against 0.72 on prompts like the training ones). The target also writes
# prompts of its own, sampled, from these seeds: its own idea of what users ask. The subjects
# are the curated topics and, far more of them, English words from the target's own vocabulary
# (`vocabulary_words`), so that the answers cover what users might ask about, not 80 topics.
SELF_STYLES = (
    "Write one question that a curious person might ask an AI assistant about {t}.",
    "Write a short request that someone might send to a helpful assistant about {t}.",
    "Write one practical everyday question about {t}, as a user would type it.",
    "Write a question a student could ask a tutor about {t}.",
    "Write a short instruction asking an assistant to explain, list or compare something about {t}.",
    "Write a short programming task involving {t} that a developer might ask an assistant to code.",
    "Write a short math word problem about {t}.",
    "Write one sentence about {t} and ask for it to be translated into another language.",
    "Write a request asking an assistant to summarise or rewrite a short text about {t}.",
    "Write a message asking an assistant for advice about a problem with {t}.",
    # Everyday advice and short writing, what users send a chat assistant most: the gate's chat set
    # walked lowest (1.80 against 2.00 overall, results/2026-12-02-h200-round3) when only three of
    # the ten styles above asked for them.
    "Write a message someone might send an assistant asking for step-by-step tips on {t}.",
    "Write a request asking an assistant to plan a day, a weekend or a schedule around {t}.",
    "Write a short request asking an assistant to draft a polite message, note or email about {t}.",
    "Write a question about a personal situation involving {t}, as someone would type it to a chatbot.",
    "Write a request asking an assistant to explain {t} simply, to a child or a beginner.",
)
SELF_TOPICS = (
    *TOPICS, "cooking pasta", "saving money", "learning a language", "writing an email", "job interviews",
    "gardening", "travel planning", "fitness", "time management", "pets", "home repairs", "photography",
    "poetry", "history of science", "geometry", "probability", "SQL queries", "Python lists", "web design",
    "public speaking", "climate", "nutrition", "board games", "friendship", "music theory", "astronomy",
    "first aid", "car maintenance", "negotiation", "note taking", "movies", "philosophy", "economics",
)
SELF_VOCABULARY_SHARE = 0.7  # of the seeds, the rest use SELF_TOPICS
_WORD = re.compile(r"[a-z]{5,14}")


def vocabulary_words(tokens: list[str] | dict[str, int]) -> list[str]:
    """Whole lowercase English-looking words of a byte-level BPE vocabulary (tokens that start a
    word, marked with 'Ġ'), sorted: the same list for the same tokenizer."""
    return sorted({t[1:] for t in tokens if t.startswith("\u0120") and _WORD.fullmatch(t[1:])})


SELF_MIN_WORDS, SELF_MAX_WORDS = 4, 60


def self_prompt_seeds(n: int, words: list[str] | tuple[str, ...] = (), seed: int = SEED) -> list[TrainingPrompt]:
    """What the target is asked in order to write `n` prompts (sampled answers become prompts):
    a style and a subject each, the subject a vocabulary word (`words`) for
    SELF_VOCABULARY_SHARE of them where words are given."""
    rng = random.Random(f"self:{seed}")
    out = []
    for _ in range(n):
        style = rng.choice(SELF_STYLES)
        subject = rng.choice(words) if words and rng.random() < SELF_VOCABULARY_SHARE else rng.choice(SELF_TOPICS)
        out.append(TrainingPrompt("self-seed", (Message("user", style.format(t=subject) + " Only write the question."),)))
    return out


def from_self_written(texts: list[str]) -> tuple[list[TrainingPrompt], dict[str, int]]:
    """The target's sampled texts as user prompts: first paragraph, quotes and labels stripped,
    4 to 60 words, distinct, and no 8-word run shared with the held-out prompts."""
    firsts = []
    for text in texts:
        first = text.strip().split("\n\n")[0].strip().strip('"').strip()
        firsts.append(re.sub(r"^(question|request|instruction)\s*:\s*", "", first, flags=re.IGNORECASE))
    kept, dropped = _kept(firsts, SELF_MIN_WORDS, SELF_MAX_WORDS)
    return [TrainingPrompt("self", (Message("user", first),)) for first in kept], dropped


def _kept(texts: list[str], min_words: int, max_words: int) -> tuple[list[str], dict[str, int]]:
    """The texts of `min_words` to `max_words` words, distinct (ignoring case), and with no 8-word
    run shared with the held-out prompts, in order; how many were dropped, by why."""
    kept: list[str] = []
    seen: set[str] = set()
    dropped = {"length": 0, "duplicate": 0, "held-out": 0}
    for text in texts:
        if not min_words <= len(text.split()) <= max_words:
            dropped["length"] += 1
        elif text.lower() in seen:
            dropped["duplicate"] += 1
        elif leaks([TrainingPrompt("candidate", (Message("user", text),))]):
            dropped["held-out"] += 1
        else:
            seen.add(text.lower())
            kept.append(text)
    return kept, dropped


# Summaries and long inputs built on Python's documentation alone taught the drafter technical
# prose, while users (and the gate's held-out sets) paste news, e-mails, notes and stories: the
# sets it drafted worst (results/2026-12-01-h200-drafter-heldout: summarisation 1.65, long_context
# 1.69 tokens per step against 1.96-2.06 for code and math). The target writes such passages
# itself, sampled; they become summarisation prompts (one passage) and long-input prompts (several).
PASSAGE_STYLES = (
    "Write a short local news report about {t}.",
    "Write an e-mail to a colleague about {t}, with a date, a time and a request.",
    "Write a short story about someone and {t}.",
    "Write a few paragraphs of meeting notes about {t}.",
    "Write a diary entry about a day that involved {t}.",
    "Write a short company announcement about {t}.",
    "Write a product review that mentions {t}.",
    "Write a short letter to a friend describing {t}.",
)
LONG_INPUT_ASKS = (
    "Read the texts below, then say what they have in common.",
    "Below are several notes. Summarise them in three sentences.",
    "Read these texts and list the people, places and dates they mention.",
    "Which of the following texts is the most urgent, and why?",
    "Read the material below and write a short headline for each part.",
    "Here are some documents. What question could a reader still have after reading them?",
)
PASSAGE_MIN_WORDS, PASSAGE_MAX_WORDS = 40, 400


def self_passage_seeds(n: int, words: list[str] | tuple[str, ...] = (), seed: int = SEED) -> list[TrainingPrompt]:
    """What the target is asked in order to write `n` passages of everyday prose (sampled)."""
    rng = random.Random(f"passages:{seed}")
    out = []
    for _ in range(n):
        subject = rng.choice(words) if words and rng.random() < SELF_VOCABULARY_SHARE else rng.choice(SELF_TOPICS)
        out.append(TrainingPrompt("passage-seed", (Message("user", rng.choice(PASSAGE_STYLES).format(t=subject)),)))
    return out


def from_self_passages(texts: list[str], seed: int = SEED) -> tuple[list[TrainingPrompt], dict[str, int]]:
    """The target's sampled passages as prompts: every kept passage once under a summary request,
    and every fourth count of them again as one long input of 3 to 5 passages with a question (about
    the held-out long_context prompts' 1,000-1,400 tokens; 5 passages of up to 320 tokens leave
    the 256-token answer whole within the 2,048 tokens a sample is cut at).
    A passage is kept at 40 to 400 words, distinct, and with no 8-word run shared with the
    held-out prompts; the same texts give the same prompts."""
    rng = random.Random(f"passage-prompts:{seed}")
    kept, dropped = _kept([text.strip() for text in texts], PASSAGE_MIN_WORDS, PASSAGE_MAX_WORDS)
    prompts = [TrainingPrompt("summarisation", (Message("user", f"{rng.choice(SUMMARY_ASKS)}\n\n{p}"),)) for p in kept]
    if len(kept) >= 4:
        for _ in range(len(kept) // 4):
            chosen = rng.sample(kept, min(len(kept), rng.randint(3, 5)))
            ask = rng.choice(LONG_INPUT_ASKS)
            prompts.append(TrainingPrompt("long_context", (Message("user", ask + "\n\n" + "\n\n".join(chosen)),)))
    return prompts, dropped
