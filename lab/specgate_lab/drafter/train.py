"""EAGLE-3 training with SpecForge (SGLang's training framework) on self-distilled samples.

SpecForge 0.2.0's own `specforge train` serves the target from an SGLang server with
Mooncake; for a 135M target on one GPU a short loop is simpler, so this one drives
SpecForge's pieces directly: its draft model (`LlamaForCausalLMEagle3`), its training-time-
test wrapper (`OnlineEagle3Model`, the EAGLE-3 loss over `length` unrolled draft steps), its
BF16 optimizer, its vocabulary mapping and its legacy-rope fix for SGLang. The target is the
transformers model; its hidden states at the layers SGLang captures by default (outputs of
layers 1, L/2-1 and L-4, SGLang's `[2, L//2, L-3]`) feed the drafter, and its logits are the
teacher. A checkpoint is written after `weak_steps` (the deliberately under-trained one the
gate must catch). A few percent of the samples are held out of training: after every epoch the
drafter's accuracy on them (answers it never learned from) says how well it generalises, and the
final checkpoint is the epoch where that was best (training accuracy on seen answers flatters:
0.64 at the first draft step once measured 1.66 tokens per verify step on the gate's prompts).
The learning rate warms up, then follows a cosine to zero over the steps that fit the time
budget (timed on training steps every 50 steps, each epoch's judgement reserved apart): a
schedule laid over every planned epoch never anneals when the budget stops it first. Training
can start from an earlier checkpoint (`init_from`) on the same data and the same held-out split
(further rounds of data may have been added, each split apart: `split_rounds`);
that parent is judged first, and a checkpoint is only written for an epoch that beats it.
Runs on the GPU host; never imported on CPU.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specgate.errors import SpecgateError
from specgate.measure.answer_end import ANSWER_DIGEST_SCHEME, answer_digest
from specgate.measure.drafters import weights_sha256
from specgate.prompts import KNOWN_SETS, load_prompts
from specgate_lab.drafter.distil import PLAN_FILE, load_plan
from specgate_lab.drafter.prompts import GATE_KIND
from specgate_lab.drafter.walk import sample_flags, walk_counts, walked_accept_length


@dataclass(frozen=True)
class TrainSettings:
    # Tokens the drafter can propose. SpecForge trains and scores only the positions whose target
    # token is among them (its accuracy is silent on the rest, which are never accepted); 16,000 of
    # SmolLM2's 49,152 left names, numbers and non-English words copied from a prompt undraftable.
    draft_vocab_size: int = 32000
    ttt_length: int = 4  # unrolled draft steps trained; the gate's configs draft at most 3 deep
    lr: float = 3e-4  # the peak, reached after `warmup_steps`
    warmup_steps: int = 100
    batch_tokens: int = 16384  # padded tokens per step (samples of like length batched together)
    max_length: int = 2048  # the gate's long_context prompts are ~1,000-1,400 tokens: train that far
    epochs: int = 12
    time_budget_s: float = 240.0  # training stops here even mid-epoch (the device call is 10 min)
    weak_steps: int = 15
    held_out: float = 0.03  # share of the samples never trained on, to judge each epoch
    seed: int = 0
    deadline: float | None = None  # time.time() by which training must have stopped (the call's end)
    init_from: str | None = None  # a checkpoint directory to start from instead of fresh weights
    # The gate's answers are this long (smollm2-eagle3-h200's max_new_tokens) while the distilled
    # ones run to 256: the gate-prompt figure is also taken over each answer's first this many
    # tokens, what the gate reads, so that a gap between it and the gate's τ is the serving's.
    gate_answer_tokens: int = 128

    def __post_init__(self) -> None:
        if self.gate_answer_tokens < 1:
            raise SpecgateError(f"gate_answer_tokens {self.gate_answer_tokens}: expected a whole number of tokens >= 1")


FIT_AFTER = 50  # steps timed before the schedule's length is fitted to the time left (step 1 compiles)
JUDGE_RESERVE_S = 15.0  # kept back from the fitted steps for the last held-out judgement and the save
STEP_TIME_MARGIN = 1.02  # over the timed rate of training steps, so the cosine ends before the budget does


def capture_layers(num_layers: int) -> list[int]:
    """The layers whose outputs SGLang hands an EAGLE-3 drafter when its config names none."""
    return [1, num_layers // 2 - 1, num_layers - 4]


def draft_config(target_cfg: dict, settings: TrainSettings) -> dict:
    from specgate_lab.assets import eagle3_draft_config

    cfg = eagle3_draft_config(target_cfg)
    cfg["draft_vocab_size"] = settings.draft_vocab_size
    cfg["head_dim"] = target_cfg.get("head_dim") or target_cfg["hidden_size"] // target_cfg["num_attention_heads"]
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if target_cfg.get(key) is not None:
            cfg[key] = target_cfg[key]
    return cfg


Sample = tuple[list[int], list[int]]  # token ids, and which of them are learned (the answer's)


def load_samples(
    path: Path, max_length: int, plan_index: dict[tuple[int, ...], int] | None = None
) -> tuple[list[Sample], dict[str, list[Sample]]]:
    """The samples to train on (and hold out from), and apart, the gate's own prompts' by prompt
    set (judged only, per set as the gate reports τ); in each, the answer's tokens are learned
    and the prompt's only read. `plan_index`, where given, gets each gate prompt's plan index by
    its prompt's token ids (which gate prompt it was: `gate_prompt_labels`)."""
    out: list[Sample] = []
    gate: dict[str, list[Sample]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        ids = (row["prompt_ids"] + row["output_ids"])[:max_length]
        mask = ([0] * len(row["prompt_ids"]) + [1] * len(row["output_ids"]))[:max_length]
        if sum(mask) < 2:
            continue
        kind = str(row.get("kind", ""))
        if kind.startswith(GATE_KIND):
            gate.setdefault(kind.removeprefix(GATE_KIND), []).append((ids, mask))
            if plan_index is not None and isinstance(row.get("i"), int):
                # two gate prompts of the same tokens cannot be told apart: neither is named (-1)
                key = tuple(row["prompt_ids"])
                plan_index[key] = row["i"] if plan_index.get(key, row["i"]) == row["i"] else -1
        else:
            out.append((ids, mask))
    if not out:
        raise SpecgateError(f"{path}: no usable samples")
    return out, gate


def batches(samples: list, batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Indices grouped by length so that padding stays small, in random order."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i][0]))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * len(samples[i][0]) > batch_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    rng.shuffle(groups)
    return groups


def first_answer_tokens(samples: list[Sample], n: int) -> list[Sample]:
    """The samples with only their first `n` learned (answer) positions still learned."""
    out = []
    for ids, learn in samples:
        kept, mask = 0, []
        for learned in learn:
            keep = bool(learned) and kept < n
            kept += keep
            mask.append(1 if keep else 0)
        out.append((ids, mask))
    return out


def split_held_out(n: int, share: float, rng: random.Random) -> tuple[list[int], list[int]]:
    """(training, held-out) sample indices: `share` of them held out, but at least 32 where
    there are 320 or more (fewer judge nothing reliably), and none below 10 samples."""
    if not 0 <= share < 1:
        raise SpecgateError(f"held-out share {share}: expected a fraction >= 0 and < 1")
    order = list(range(n))
    rng.shuffle(order)
    k = max(round(n * share), min(32, n // 10)) if share > 0 else 0
    return sorted(order[k:]), sorted(order[:k])


def split_rounds(
    data_paths: list[Path],
    settings: TrainSettings,
    rng: random.Random,
    plan_index: dict[tuple[int, ...], int] | None = None,
) -> tuple[list[Sample], list[Sample], dict[str, list[Sample]], list[dict]]:
    """(taught, held-out, the gate prompts' by set, figures per round) over every round of data.
    Each round is split on its own: the first with `rng`, the split a drafter trained on it alone
    had, each further one with a seed of its own, so that adding a round never moves an earlier
    round's sample across the split (a refine judges on answers its parent never learned).
    `plan_index` gets the first round's gate prompts' plan indices (only it asks them)."""
    taught: list[Sample] = []
    held: list[Sample] = []
    gate: dict[str, list[Sample]] = {}
    figures = []
    for n, path in enumerate(data_paths):
        samples, gate_here = load_samples(path, settings.max_length, plan_index if n == 0 else None)
        for name, rows in gate_here.items():
            gate.setdefault(name, []).extend(rows)
        train_ix, held_ix = split_held_out(
            len(samples), settings.held_out, rng if n == 0 else random.Random(f"{settings.seed}:{path.parent.name}")
        )
        taught += [samples[i] for i in train_ix]
        held += [samples[i] for i in held_ix]
        figures.append({"data": str(path), "samples": len(samples), "held_out_samples": len(held_ix)})
    return taught, held, gate, figures


def gate_prompt_labels(plan_index: dict[tuple[int, ...], int], plan_path: Path) -> dict[tuple[int, ...], str]:
    """Each gate prompt's label (set/id, as the gate's reports name its requests) by its prompt's
    token ids: the plan entry the answer answered, matched to the built-in prompts by its text.
    Empty where the plan cannot be read: the walk is then given per prompt set only."""
    try:
        planned = load_plan(plan_path).prompts
    except (OSError, ValueError, SpecgateError):
        return {}

    def exact(kind: str, messages: tuple) -> tuple:  # the set and the very text, case included
        return kind, tuple((m.role, m.content) for m in messages)

    known = [(exact(f"{GATE_KIND}{p.set_name}", p.messages), p.label) for p in load_prompts(KNOWN_SETS)]
    twice = {key for key, n in Counter(key for key, _ in known).items() if n > 1}  # told apart by nothing
    label_of = {key: label for key, label in known if key not in twice}
    out = {}
    for ids, i in plan_index.items():
        label = label_of.get(exact(planned[i].kind, planned[i].messages)) if 0 <= i < len(planned) else None
        if label is not None:
            out[ids] = label
    return out


def walk_counts_by_prompt(
    heads: list[Sample], flags: list[list[tuple[bool, ...]]], labels: dict[tuple[int, ...], str]
) -> dict[str, list[int]]:
    """[tokens, verify cycles] of each gate prompt's answer head walked as a server walks it
    (walk.walk_counts), by the prompt's label; prompts without a label (no plan) are left out."""
    out: dict[str, list[int]] = {}
    for (ids, mask), answer_flags in zip(heads, flags, strict=True):
        label = _label_of((ids, mask), labels)
        tokens, cycles = walk_counts(answer_flags)
        if label is not None and cycles:
            counts = out.setdefault(label, [0, 0])
            counts[0] += tokens
            counts[1] += cycles
    return out


def answer_digests_by_prompt(heads: list[Sample], labels: dict[tuple[int, ...], str]) -> dict[str, str]:
    """Each labelled gate prompt's walked answer head by its token ids (answer_end.answer_digest),
    so a run can tell whether it served the very answer walked; a label met twice is left out."""
    out: dict[str, str] = {}
    seen: Counter = Counter()
    for ids, mask in heads:
        label = _label_of((ids, mask), labels)
        if label is not None:
            seen[label] += 1
            out[label] = answer_digest([t for t, learned in zip(ids, mask, strict=True) if learned])
    return {label: digest for label, digest in out.items() if seen[label] == 1}


def _label_of(sample: Sample, labels: dict[tuple[int, ...], str]) -> str | None:
    """Which gate prompt a sample answers, by its prompt's token ids (None without an answer or a label)."""
    ids, mask = sample
    return labels.get(tuple(ids[: mask.index(1)])) if 1 in mask else None


def held_by_rounds(held: list[Sample], data_rounds: list[dict]) -> list[list[Sample]]:
    """`held` (split_rounds' held-out samples, round after round) cut back into its rounds."""
    ends = list(itertools.accumulate(r["held_out_samples"] for r in data_rounds))
    return [held[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]


def pooled(parts: list[tuple[list[float], int]]) -> list[float]:
    """Accuracy per draft step over several sets judged apart: each part is (right answers per
    step, answer tokens judged), so the sets weigh by their tokens, as if judged together."""
    weight = sum(w for _, w in parts)
    return [round(sum(col) / max(weight, 1), 4) for col in zip(*(sums for sums, _ in parts), strict=True)]


def tau_by_round(parts: list[tuple[list[float], int]]) -> list[float | None]:
    """The expected τ on each round's held-out answers; None for a round with none judged (too
    few samples to hold any out), never the 1.0 a zero accuracy would read as."""
    return [expected_accept_length(pooled([part])) if part[1] else None for part in parts]


def vocab_coverage(samples: list[tuple[list[int], list[int]]], in_vocab: list[bool]) -> float:
    """The share of answer tokens the draft vocabulary holds (`in_vocab[token id]`).

    A token outside the vocabulary is never drafted, so it ends every accepted run it falls in.
    SpecForge 0.2.0's accuracy already counts such a position as wrong (only its loss leaves them
    out), so this share is reported beside the expected τ, never multiplied into it: it says how
    much of a shortfall the vocabulary alone explains."""
    total = covered = 0
    for ids, learn in samples:
        for token, learned in zip(ids, learn, strict=False):
            if learned:
                total += 1
                covered += token < len(in_vocab) and bool(in_vocab[token])
    return covered / total if total else 1.0


def expected_accept_length(acc: list[float], steps: int = 2) -> float:
    """Tokens per verify step at topk 1 with `steps` draft steps, if draft step k is accepted with
    probability acc[k] once the ones before it were (the bonus token counts one)."""
    return round(1 + sum(math.prod(acc[: k + 1]) for k in range(min(steps, len(acc)))), 3)


class Schedule:
    """The learning rate per step: a linear warm-up to `peak` over `warmup` steps, then a cosine
    that reaches zero just after step `total`. `refit` changes `total` mid-run (the time budget
    is re-estimated) without a jump: the cosine goes on from where it is, over the new remainder."""

    def __init__(self, peak: float, warmup: int, total: int) -> None:
        self.peak = peak
        self.warmup = max(0, min(warmup, total // 2))  # a short run still anneals after warming up
        self.total = total
        self._from_step, self._from_progress = self.warmup, 0.0

    def progress(self, step: int) -> float:
        """How far along the cosine `step` is: 0 at its start, below 1 at `total` (the last step learns)."""
        span = max(self.total - self._from_step + 1, 1)
        return min(1.0, self._from_progress + (1 - self._from_progress) * max(step - self._from_step, 0) / span)

    def rate(self, step: int) -> float:
        if step <= self.warmup and self._from_step == self.warmup:
            return self.peak * step / max(self.warmup, 1)
        return self.peak * 0.5 * (1 + math.cos(math.pi * self.progress(step)))

    def refit(self, step: int, total: int) -> None:
        if step < self.warmup and total >= 2 * self.warmup:
            self.total = total  # still warming up: the cosine has not started
            return
        if step < self.warmup:  # too short to finish warming up: anneal from the rate reached
            reached = step / max(self.warmup, 1)
            self._from_progress = math.acos(2 * reached - 1) / math.pi
        else:
            self._from_progress = self.progress(step)
        self._from_step, self.total = step, total


def fitted_steps(planned: int, done: int, seconds_per_step: float, seconds_left: float) -> int:
    """The last step that fits: never more than planned, never fewer than already done."""
    if seconds_per_step <= 0 or not math.isfinite(seconds_left):
        return planned
    return max(done, min(planned, done + int(max(seconds_left, 0) / seconds_per_step)))


def train(
    target_dir: Path, data_paths: list[Path], out_dirs: dict[str, Path], settings: TrainSettings, log, device: str = "cuda"
) -> dict:
    """Train on every round of data (`data_paths`, the first round's first); write the checkpoints
    named in `out_dirs` ("weak", "final"); return figures."""
    import torch
    from specforge.algorithms.eagle3.model import OnlineEagle3Model
    from specforge.data.preprocessing import generate_vocab_mapping_file
    from specforge.export.checkpoint_io import apply_legacy_rope_scaling
    from specforge.modeling.auto import AutoDraftModelConfig
    from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
    from specforge.optimizer import BF16Optimizer
    from specforge.utils import padding
    from transformers import AutoModelForCausalLM

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    dev = torch.device(device)
    target_cfg = json.loads((target_dir / "config.json").read_text())
    layers = capture_layers(target_cfg["num_hidden_layers"])
    gate_index: dict[tuple[int, ...], int] = {}
    taught, held, gate_by_set, data_rounds = split_rounds(data_paths, settings, rng, gate_index)
    try:  # which gate prompt each answer is: an auxiliary figure, never worth the training call
        gate_labels = gate_prompt_labels(gate_index, data_paths[0].parent / PLAN_FILE)
    except Exception as exc:  # noqa: BLE001 - a 10-minute GPU call rides on what follows
        log(f"gate prompts not told apart (the walk is given per set only): {type(exc).__name__}: {str(exc)[:300]}")
        gate_labels = {}
    samples = [*taught, *held]
    gate = [sample for rows in gate_by_set.values() for sample in rows]
    # The gate's answer length of them, all and per set: the same every epoch, so cut once.
    gate_head = first_answer_tokens(gate, settings.gate_answer_tokens)
    gate_head_by_set = {
        name: first_answer_tokens(rows, settings.gate_answer_tokens) for name, rows in sorted(gate_by_set.items())
    }
    work = data_paths[0].parent
    cfg_path = work / "draft-config.json"
    cfg_path.write_text(json.dumps(draft_config(target_cfg, settings), indent=2) + "\n")

    vocab_set = _MaskedTokens(taught)  # the draft vocabulary from the taught answers only
    # SpecForge returns a cached mapping whenever its file exists: one counted over other data
    # (fewer rounds, an earlier distillation) would be reused without a word.
    (work / "vocab-mapping.pt").unlink(missing_ok=True)
    vocab_path = generate_vocab_mapping_file(
        vocab_set, target_cfg["vocab_size"], settings.draft_vocab_size, cache_dir=str(work), cache_key="vocab-mapping"
    )
    draft = LlamaForCausalLMEagle3(AutoDraftModelConfig.from_file(str(cfg_path)), attention_backend="sdpa")
    draft.load_embedding(str(target_dir), embedding_key="model.embed_tokens.weight")
    draft.freeze_embedding()
    draft.load_vocab_mapping(vocab_path)
    if settings.init_from:
        _load_parent(draft, Path(settings.init_from))
    in_vocab = draft.t2d.bool().tolist()  # after a parent's mapping replaced the fresh one
    coverage = {"taught": vocab_coverage(taught, in_vocab), "held_out": vocab_coverage(held, in_vocab)}
    if gate:
        coverage["gate_prompts"] = vocab_coverage(gate, in_vocab)
    log(f"draft vocabulary ({settings.draft_vocab_size} tokens) holds {coverage['held_out']:.4f} of the held-out answer tokens")
    draft = draft.to(dev, torch.bfloat16)
    model = OnlineEagle3Model(draft_model=draft, length=settings.ttt_length, attention_backend="sdpa").to(dev)
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.bfloat16).to(dev).eval()

    epochs = [batches(taught, settings.batch_tokens, rng) for _ in range(settings.epochs)]
    planned = sum(len(e) for e in epochs)
    # SpecForge's scheduler is held flat; `Schedule.rate` sets each step's rate on its AdamW.
    optimizer = BF16Optimizer(
        model, lr=settings.lr, max_grad_norm=0.5, total_steps=planned, warmup_ratio=0.0, lr_scheduler="constant"
    )
    schedule = Schedule(settings.lr, settings.warmup_steps, planned)  # refitted to what the time budget holds
    written: dict[str, dict] = {}
    history: list[dict] = []
    held_history: list[dict] = []
    best: dict | None = None
    started = time.monotonic()
    step = 0
    stop_reason = ""

    def run(rows: list) -> tuple[Any, list]:
        ids, attn, mask = _pad(rows, dev)
        with torch.no_grad():
            out = target(input_ids=ids, attention_mask=attn, output_hidden_states=True, use_cache=False)
            hidden = torch.cat([out.hidden_states[i + 1] for i in layers], dim=-1)
            teacher = padding(out.logits, left=False)
        plosses, _, acces, *_ = model(
            input_ids=padding(ids, left=False),
            attention_mask=attn,
            target=teacher,
            loss_mask=mask[..., None],
            hidden_states=hidden,
        )
        return sum(0.8**i * p for i, p in enumerate(plosses)), acces

    def correct_and_weight(rows_of: list) -> tuple[list[float], int]:
        """Per draft step, right answers on `rows_of`' learned tokens, and how many tokens."""
        sums, weight = [0.0] * settings.ttt_length, 0
        model.eval()
        with torch.no_grad():
            for group in batches(rows_of, settings.batch_tokens, random.Random(0)):
                rows = [rows_of[i] for i in group]
                _, acces = run(rows)
                w = sum(sum(m) for _, m in rows)
                sums = [a + float(x) * w for a, x in zip(sums, acces, strict=False)]
                weight += w
        model.train()
        return sums, weight

    def accuracy(rows_of: list) -> list[float]:
        """Accuracy per draft step on `rows_of`' answers, weighted by their learned tokens."""
        return pooled([correct_and_weight(rows_of)])

    # Each round's held-out answers apart too: the first round's figure stays comparable with a
    # drafter judged before further rounds were added.
    held_by_round = held_by_rounds(held, data_rounds)

    def step_flags(rows_of: list) -> list[list[tuple[bool, ...]]]:
        """Per sample of `rows_of`, in order: whether each draft step is right at each answer position
        (walk.sample_flags), read off SpecForge's own step computation as it judges."""
        steps = min(2, settings.ttt_length)  # what the gate's chains draft
        out: dict[int, list[tuple[bool, ...]]] = {}
        seen: list[tuple[list, list]] = []
        judge_step = model._acc_and_loss

        def recording(**kw: Any) -> Any:
            if len(seen) < steps:
                drafted = kw["logits"].argmax(-1)
                drafted = drafted + model.draft_model.d2t[drafted]
                seen.append(((drafted == kw["target_token_ids"]).tolist(), (kw["loss_mask"].squeeze(-1) > 0).tolist()))
            return judge_step(**kw)

        model._acc_and_loss = recording  # this instance only, while it judges; removed below
        model.eval()
        try:
            with torch.no_grad():
                for group in batches(rows_of, settings.batch_tokens, random.Random(0)):
                    seen.clear()
                    run([rows_of[i] for i in group])
                    correct = [c for c, _ in seen]
                    answer = seen[0][1]  # step 0's loss mask: the answer's positions, unshifted
                    for row, i in enumerate(group):
                        out[i] = sample_flags(correct, answer[row], row)
        finally:
            del model._acc_and_loss
            model.train()
        return [out[i] for i in range(len(rows_of))]

    def walked_answer_digests(heads: list[Sample]) -> dict:
        """Which answer each gate prompt's walk walked, by its token ids: a served answer of another
        text is not what the walk walked (measure.drafters.walk_comparison). A failure here costs
        these digests only, never the walk."""
        try:
            return {
                "walked_gate_prompts_head_digest_by_prompt": answer_digests_by_prompt(heads, gate_labels),
                "walked_gate_prompts_head_digest_scheme": ANSWER_DIGEST_SCHEME,
            }
        except Exception as exc:  # noqa: BLE001 - an auxiliary figure on a 10-minute GPU call
            log(f"walked answers' digests not recorded: {type(exc).__name__}: {str(exc)[:300]}")
            return {}

    def walked_gate_head() -> dict:
        """The gate prompts' heads walked as a server walks them (walk.py), overall and per set. A
        failure here costs this figure, never the training call it rides on."""
        try:
            names = [name for name, rows in gate_head_by_set.items() for _ in rows]
            heads = [row for rows in gate_head_by_set.values() for row in rows]
            flags = step_flags(heads)
            by_set = {
                name: walked_accept_length([f for f, n in zip(flags, names, strict=True) if n == name])
                for name in gate_head_by_set
            }
            return {
                "walked_tau_gate_prompts_head": walked_accept_length(flags),
                "walked_tau_gate_prompts_head_by_set": by_set,
                # per gate prompt, [tokens, cycles]: a run that sends some of the prompts is compared
                # with the walk of those it sent (where the plan says which prompt each answer is)
                "walked_gate_prompts_head_by_prompt": walk_counts_by_prompt(heads, flags, gate_labels),
                **walked_answer_digests(heads),
            }
        except Exception as exc:  # noqa: BLE001 - an auxiliary figure on a 10-minute GPU call
            log(f"walked τ not computed: {type(exc).__name__}: {str(exc)[:300]}")
            return {"walked_tau_gate_prompts_head": None}

    def judge_held_out(epoch: int) -> dict:
        parts = [correct_and_weight(rows) for rows in held_by_round]
        acc = pooled(parts)
        tau = expected_accept_length(acc)
        judged = {
            "epoch": epoch,
            "step": step,
            # SpecForge 0.2.0's accuracy is over every answer position (its loss mask): a target
            # token outside the draft vocabulary is never predicted, so it already counts as wrong
            # there (its loss alone is restricted to in-vocabulary targets), so the vocabulary's
            # coverage is reported beside these figures, not multiplied into them.
            "acc": acc,
            "expected_tau_topk1_2steps": tau,
            # every answer token counted: what a server should measure on answers like these, and
            # what the best epoch is chosen by (the same figure; both names kept for old records)
            "expected_tau_all_tokens": tau,
        }
        if len(parts) > 1:
            judged["expected_tau_by_round"] = tau_by_round(parts)
        if gate:  # reported beside, never chosen by
            judged["expected_tau_gate_prompts"] = expected_accept_length(accuracy(gate))
            judged["gate_answer_tokens"] = settings.gate_answer_tokens
            judged["expected_tau_gate_prompts_head"] = expected_accept_length(accuracy(gate_head))
            # per set, as the gate's report gives τ: which sets the serving gap sits in
            judged["expected_tau_gate_prompts_head_by_set"] = {
                name: expected_accept_length(accuracy(rows)) for name, rows in gate_head_by_set.items()
            }
            # the same heads walked cycle by cycle, as the server counts τ (walk.py): beside, never chosen by
            judged.update(walked_gate_head())
        return judged

    def progress(loss: Any, acces: list, lr: float) -> dict:
        return {
            "step": step,
            "s": round(time.monotonic() - started, 1),
            "loss": round(float(loss), 4),
            "acc": [round(float(a), 3) for a in acces],
            "lr": float(f"{lr:.3g}"),
        }

    def seconds_left() -> float:
        left = settings.time_budget_s - (time.monotonic() - started)
        if settings.deadline is not None:
            left = min(left, settings.deadline - time.time())
        return left - JUDGE_RESERVE_S

    parent: dict | None = None
    if settings.init_from:
        parent = best = judge_held_out(0)
        log(f"held out before training (the parent {settings.init_from}): {parent}")

    judging = {"s": 0.0, "last": 0.0}  # seconds spent judging held-out answers: in all, and the last time

    def refit() -> tuple[int, float, float]:
        """The schedule's length from the training steps' rate since the last fit (judging time
        left out of it and added back per step as the last judgement's share of an epoch), every
        FIT_AFTER steps, so that a slowdown (another process on the GPU, such as a kernel warmer)
        reshapes it early."""
        now = time.monotonic()
        per_step = STEP_TIME_MARGIN * (now - timed[1] - (judging["s"] - timed[2])) / (step - timed[0])
        per_step += judging["last"] / max(len(epochs[0]), 1)  # an epoch's judgement, shared among its steps
        fitted = fitted_steps(planned, step, per_step, seconds_left())
        if fitted != schedule.total:
            schedule.refit(step, fitted)
            log(f"schedule fitted at step {step}: {fitted} steps of {planned} planned fit the time left")
        return step, now, judging["s"]

    def scheduled_end() -> str:
        """Why training stops here, where the fitted schedule ends before the planned epochs do."""
        if step >= schedule.total and schedule.total < planned:
            return f"the schedule's last step ({step} of {planned} planned: what the time budget held)"
        return ""

    timed = (0, started, 0.0)
    for epoch, plan in enumerate(epochs, start=1):
        for group in plan:
            step += 1
            loss, acces = run([taught[i] for i in group])
            loss.backward()
            lr = schedule.rate(step)
            for param_group in optimizer.optimizer.param_groups:
                param_group["lr"] = lr
            optimizer.step()
            if step == 1:
                timed = (step, time.monotonic(), judging["s"])
            elif step - timed[0] >= FIT_AFTER:
                timed = refit()
            if step % 25 == 0 or step == 1 or step == schedule.total:
                history.append(progress(loss, acces, lr))
                log(f"step {step}/{schedule.total}: {history[-1]}")
            if step == settings.weak_steps and "weak" in out_dirs:
                written["weak"] = _save(draft, out_dirs["weak"], apply_legacy_rope_scaling, step, history)
            if scheduled_end():
                stop_reason = scheduled_end()
            elif time.monotonic() - started > settings.time_budget_s:
                stop_reason = (
                    f"time budget of {settings.time_budget_s:.0f} s reached at step {step} of {schedule.total}"
                )
            elif settings.deadline is not None and time.time() > settings.deadline:
                stop_reason = f"deadline reached at step {step} of {schedule.total}"
            if stop_reason:
                if not history or history[-1]["step"] != step:  # the checkpoint's own batch, logged
                    history.append(progress(loss, acces, lr))
                break
        whole = step == sum(len(e) for e in epochs[:epoch])
        judging_from = time.monotonic()
        judged = (
            judge_held_out(epoch)
            if held
            else {"epoch": epoch, "step": step, "acc": [], "expected_tau_topk1_2steps": None, "expected_tau_all_tokens": None}
        )
        judged["whole_epoch"] = whole
        judging["last"] = time.monotonic() - judging_from
        judging["s"] += judging["last"]
        held_history.append(judged)
        log(f"held out after epoch {epoch}: {judged}")
        score = judged["expected_tau_all_tokens"]
        if best is None or score is None or score > best["expected_tau_all_tokens"]:
            best = judged
            written["final"] = _save(draft, out_dirs["final"], apply_legacy_rope_scaling, step, history, judged)
        if stop_reason:
            log(stop_reason)
            break
        if scheduled_end():  # a refit at the epoch's end found no time left
            stop_reason = scheduled_end()
            log(stop_reason)
            break
    if parent is not None and best is parent:
        log("no epoch beat the parent on the held-out answers: no checkpoint written, the parent stays")
    elif "final" not in written:  # no epoch ran (epochs = 0): the untrained drafter, said so
        written["final"] = _save(draft, out_dirs["final"], apply_legacy_rope_scaling, step, history)
    if best is not None and "final" in written:
        written["final"]["chosen"] = (
            f"epoch {best['epoch']} (step {best['step']}) of {len(held_history)}: best held-out expected accept length"
        )
    tokens = sum(len(ids) for ids, _ in samples)
    return {
        "settings": asdict(settings),
        "capture_layers": layers,
        "samples": len(samples),
        "tokens": tokens,
        "learned_tokens": sum(sum(m) for _, m in taught),  # answer tokens trained on
        "held_out_tokens": sum(sum(m) for _, m in held),  # answer tokens only judged on
        "held_out_samples": len(held),
        "data_rounds": data_rounds,
        "gate_prompt_samples": len(gate),  # the gate's own prompts' answers: judged on, never taught
        "vocab_coverage": {k: round(v, 5) for k, v in coverage.items()},  # answer tokens the draft vocabulary holds
        "held_out": held_history,
        "parent_held_out": parent,  # the starting checkpoint, judged on the same held-out answers
        "steps_planned": planned,
        "steps_scheduled": schedule.total,
        "steps_done": step,
        "stopped": stop_reason or "all epochs",
        "train_s": round(time.monotonic() - started, 1),
        "history": history,
        "checkpoints": written,
    }


class _MaskedTokens:
    """What SpecForge's vocabulary mapping reads: `input_ids` and `loss_mask` columns."""

    def __init__(self, samples: list) -> None:
        import torch

        self._cols = {
            "input_ids": [torch.tensor(ids) for ids, _ in samples],
            "loss_mask": [torch.tensor(m) for _, m in samples],
        }

    def __getitem__(self, key: str) -> list:
        return self._cols[key]

    def __len__(self) -> int:
        return len(self._cols["input_ids"])


def _pad(rows: list, dev):  # noqa: ANN001, ANN202 - torch types stay out of the module's imports
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (tokens, learn) in enumerate(rows):
        ids[r, : len(tokens)] = torch.tensor(tokens)
        attn[r, : len(tokens)] = 1
        mask[r, : len(learn)] = torch.tensor(learn)
    return ids.to(dev), attn.to(dev), mask.to(dev)


def _load_parent(draft, directory: Path) -> None:  # noqa: ANN001
    """Start from an earlier checkpoint's weights (its vocabulary mapping included); only the
    frozen embedding, which checkpoints leave out, may be missing."""
    from safetensors.torch import load_file

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise SpecgateError(f"{directory}: no *.safetensors to start training from")
    state: dict = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = draft.load_state_dict(state, strict=False)
    missing = [k for k in missing if "embed" not in k]
    if missing or unexpected:
        raise SpecgateError(
            f"{directory}: not a checkpoint of this drafter's shape (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )


def _save(draft, out_dir: Path, fix_rope, step: int, history: list, held_out: dict | None = None) -> dict:  # noqa: ANN001
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v for k, v in draft.state_dict().items() if "embed" not in k}
    draft.save_pretrained(str(out_dir), state_dict=dict(state))  # transformers pops from the dict it gets
    fix_rope(str(out_dir))
    acc = history[-1]["acc"] if history else []
    return {
        "dir": str(out_dir),
        "step": step,
        "sha256": weights_sha256(out_dir),
        "train_acc_at_save": acc,  # on batches it learned from: flatters
        "held_out": held_out,  # accuracy on answers never trained on, where judged
        "expected_tau_topk1_2steps": (held_out or {}).get("expected_tau_topk1_2steps") or expected_accept_length(acc),
        "expected_tau_all_tokens": (held_out or {}).get("expected_tau_all_tokens"),
    }
