"""How far a perturbed SmolLM2 drafter drops the STANDALONE accept length, measured with HF transformers
on CPU (not SGLang): a lab benchmark that sizes `--noise` for `specgate-lab assets smollm2-perturbed`.

    python -m specgate_lab.drafter_match ASSETS_DIR --noise 0.01 0.02 ... [--seeds 0 1] [--prompts 20]
        [--max-new-tokens 128] [--json FILE]

For each prompt (the shipped sets, first few of each, in the deployments' ChatML), the unperturbed
model answers greedily (the target's own argmax, as SGLang's greedy verify takes it); every drafter
(the unperturbed copy itself, then each SIGMA and seed) then reads prompt + answer in one forward
pass, and position i matches where its argmax is the answer's token i. Chain drafting (topk 1) only
drafts along the answer while every earlier draft matched, so these teacher-forced matches decide
every verify step exactly: `chain_accept` replays them for 3 draft steps (4 draft tokens: the
verified token and 3 drafts) and gives tokens per verify step as the gate pools them
(completion_tokens / verify steps). Beside it, the closed form 1 + p + p² + p³ from the per-token
match rate p (independent matches; clustered mismatches make the replay a little higher).

Weights are read from the bf16 checkpoints and computed in float32: the CPU's bf16 kernels are slow
and float32 keeps near ties of the same weights from flipping between the two passes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DRAFT_STEPS = 3  # --speculative-num-steps of smollm2-h200-ab's standalone configs
PER_SET = 4
SETS = ("chat", "code", "math", "summarisation", "translation")  # long_context left out: CPU time


def chain_accept(matches: Sequence[bool], steps: int = DRAFT_STEPS) -> int:
    """Verify steps a chain drafter of `steps` draft tokens takes to produce an answer of len(matches)
    tokens, where matches[i] says whether its draft for token i (given the answer before it) is the
    answer's token. Token 0 comes from prefill, not from a verify step; each step then accepts the
    drafts up to the first mismatch (at most `steps`) plus the target's own next token."""
    n = len(matches)
    i, verifies = 1, 0
    while i < n:
        accepted = 0
        while accepted < steps and i + accepted < n and matches[i + accepted]:
            accepted += 1
        i += accepted + 1
        verifies += 1
    return verifies


def closed_form_accept_length(p: float, steps: int = DRAFT_STEPS) -> float:
    """Tokens per verify step with independent matches of probability p: 1 + p + ... + p^steps."""
    return sum(p**k for k in range(steps + 1))


@dataclass
class Tally:
    tokens: int = 0  # answer tokens (completion_tokens)
    verifies: int = 0
    matched: int = 0
    drafted: int = 0  # positions 1..n-1: the ones a draft is made for

    def add(self, matches: Sequence[bool]) -> None:
        self.tokens += len(matches)
        self.verifies += chain_accept(matches)
        self.matched += sum(matches[1:])
        self.drafted += max(len(matches) - 1, 0)

    @property
    def accept_length(self) -> float:
        return self.tokens / self.verifies if self.verifies else float("nan")

    @property
    def p(self) -> float:
        return self.matched / self.drafted if self.drafted else float("nan")


def _prompts(count: int):
    from specgate.prompts import load_prompt_set, render

    chosen = [p for s in SETS for p in load_prompt_set(s)[:PER_SET]]
    return [(p.label, render(p.messages, "chatml")) for p in chosen[:count]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specgate_lab.drafter_match", description=__doc__.split("\n\n")[0])
    parser.add_argument("assets", help="the folder `specgate-lab assets smollm2` wrote (perturbed copies made here)")
    parser.add_argument("--noise", type=float, nargs="+", required=True, help="SIGMAs to measure")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--json", default=None, help="write every figure, per prompt, here")
    parser.add_argument(
        "--answers", default=None, help="the target's answers (token ids): read from here where present, else written here"
    )
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specgate.measure.stats import paired_pooled_ratio
    from specgate.verdicts.ab_gate import share_of_budget
    from specgate_lab.assets import TARGET_DIR
    from specgate_lab.perturb import make_smollm2_perturbed

    torch.manual_seed(0)
    assets = Path(args.assets)
    target_dir = assets / TARGET_DIR
    if not (target_dir / "config.json").is_file():
        print(f"drafter_match: {target_dir} has no config.json: run `specgate-lab assets smollm2 {assets}` first", file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    answers = []  # (label, prompt length, full token ids)
    t0 = time.monotonic()
    key = {"prompts": args.prompts, "max_new_tokens": args.max_new_tokens}
    kept = json.loads(Path(args.answers).read_text()) if args.answers and Path(args.answers).is_file() else None
    if kept is not None and kept.get("key") == key:
        answers = [(a["prompt"], a["prompt_tokens"], torch.tensor(a["ids"])) for a in kept["answers"]]
    else:
        with torch.no_grad():
            for label, text in _prompts(args.prompts):
                ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
                # The mask given, not inferred: the GGUF's tokenizer names <|im_start|> its EOS, and a mask
                # inferred from a pad id would hide every <|im_start|> of the prompt. Stops where SGLang does,
                # at the model's own EOS (<|im_end|>, config.json).
                out = target.generate(
                    ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=args.max_new_tokens,
                    eos_token_id=target.config.eos_token_id, pad_token_id=target.config.eos_token_id,
                )  # fmt: skip
                answers.append((label, ids.shape[1], out[0]))
        if args.answers:
            stored = [{"prompt": label, "prompt_tokens": plen, "ids": full.tolist()} for label, plen, full in answers]
            Path(args.answers).write_text(json.dumps({"key": key, "answers": stored}) + "\n")
    print(f"target answers: {len(answers)} prompts, {sum(len(a) - p for _, p, a in answers)} tokens, {time.monotonic() - t0:.0f} s", flush=True)

    def matches_of(model) -> list[list[bool]]:
        rows = []
        with torch.no_grad():
            for _, plen, full in answers:
                logits = model(full.unsqueeze(0)).logits[0]
                # logits at position j predict token j + 1: the answer's tokens are plen .. len-1
                drafted = logits[plen - 1 : len(full) - 1].argmax(-1)
                rows.append((drafted == full[plen:]).tolist())
        return rows

    drafters = [("unperturbed", 0.0, None, target_dir)]
    for sigma in args.noise:
        for seed in args.seeds:
            drafters.append((f"noise {sigma!r} seed {seed}", sigma, seed, make_smollm2_perturbed(assets, sigma, seed)))
    results = []
    base_tau = None
    base_rows: list[dict] = []
    for label, sigma, seed, path in drafters:
        model = target if sigma == 0.0 else AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        rows = matches_of(model)
        pooled = Tally()
        per_prompt = []
        for (plabel, _, _), row in zip(answers, rows, strict=True):
            one = Tally()
            one.add(row)
            pooled.add(row)
            per_prompt.append({"prompt": plabel, "tokens": one.tokens, "verifies": one.verifies, "p": one.p, "accept_length": one.accept_length})
        if base_tau is None:
            base_tau, base_rows = pooled.accept_length, per_prompt
        ratio = pooled.accept_length / base_tau
        closed = closed_form_accept_length(pooled.p)
        # The A/B accept gate's own interval (paired per prompt, half of a 95% budget) over these
        # prompts, one request each: how decisively a gate at 5% would judge this drop.
        gate = paired_pooled_ratio(
            [r["tokens"] for r in per_prompt], [r["verifies"] for r in per_prompt],
            [r["tokens"] for r in base_rows], [r["verifies"] for r in base_rows], share_of_budget(0.95),
        )  # fmt: skip
        results.append({
            "drafter": label, "sigma": sigma, "seed": seed, "p": pooled.p, "accept_length": pooled.accept_length,
            "closed_form": closed, "ratio_to_unperturbed": ratio, "gate_interval": gate.as_dict(), "per_prompt": per_prompt,
        })  # fmt: skip
        print(
            f"{label:26s} p {pooled.p:.4f}  accept length (replayed) {pooled.accept_length:.3f}  "
            f"1+p+p2+p3 {closed:.3f}  ratio to unperturbed {ratio:.3f} [{gate.low:.3f}, {gate.high:.3f}]",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"max_new_tokens": args.max_new_tokens, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
