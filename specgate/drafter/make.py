"""`specgate assets smollm2-eagle3 DIR`: a trained EAGLE-3 drafter for SmolLM2-135M-Instruct.

prompts (specgate.drafter.prompts, none from the held-out fixtures) → the target's own greedy
answers through SGLang (specgate.drafter.distil) → SpecForge training (specgate.drafter.train)
→ two checkpoints, each with `drafter.json`: how it was made (data size, steps, time, the
software), and the sha256 of its weights, which every gate report that uses it repeats.
`smollm2-eagle3-trained` is the trained drafter; `smollm2-eagle3-weak` is the same run stopped
after a few steps, kept to show that the accept-length gates catch a worse drafter. Deployments
name `smollm2-eagle3`, a link to the trained one: pointing it at the weak one is how a run shows
what a worse checkpoint pushed under the same path does to the gates.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

from specgate.drafter import prompts as training_prompts
from specgate.drafter.distil import DistilSettings, distil
from specgate.drafter.train import TrainSettings, train
from specgate.errors import SpecgateError

LINK = "smollm2-eagle3"
FINAL_DIR = "smollm2-eagle3-trained"
WEAK_DIR = "smollm2-eagle3-weak"
# The distillation server: Triton attention for prefill and decode (its kernels compile in
# seconds; FlashInfer's JIT took 259 s of boot plus 113 s at the first request on a fresh H200,
# half a device call: tools/gpu_run.sh compiles the gate's FlashInfer kernels beside it instead,
# with tools/warm_kernels.py), no CUDA graphs (capturing many batch sizes costs more than it
# saves here), and wide batches: a 135M model decodes launch-bound, so 2048 sequences cost little
# more per step than 512 (4000 answers took 51 s at 512 on the H200).
SERVER_ARGS = ["--attention-backend", "triton",
               "--disable-cuda-graph", "--mem-fraction-static", "0.5", "--max-running-requests", "2048"]


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("sglang", "specforge", "torch", "transformers"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _gpu() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "none"


STAGES = ("all", "distil", "train")
DATA_FILE = "distilled.jsonl"
DATA_RECORD = "distilled.json"  # how the data was made: read back by a later `train` stage


def make_smollm2_eagle3(
    out_dir: Path,
    gguf: str | None,
    n_prompts: int,
    train_settings: TrainSettings,
    max_new_tokens: int,
    log,
    self_prompts: int = 0,
    stage: str = "all",
) -> dict:
    """`distil` makes the training data, `train` trains from data already in DIR (a device call
    is 10 minutes: a fresh machine's first SGLang boot alone took 259 s), `all` does both."""
    from specgate.assets import make_smollm2

    if stage not in STAGES:
        raise SpecgateError(f"--stage {stage!r}: expected one of {', '.join(STAGES)}")
    started = time.monotonic()
    target, _ = make_smollm2(out_dir, gguf)
    work = out_dir / "smollm2-eagle3-work"
    work.mkdir(parents=True, exist_ok=True)
    data = work / DATA_FILE
    if stage in ("all", "distil"):
        record = _distil_stage(target, data, n_prompts, max_new_tokens, self_prompts, log)
        (work / DATA_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if stage == "distil":
            return {**record, "data": str(data), "total_s": round(time.monotonic() - started, 1), "checkpoints": {}}
    else:
        record = _recorded_data(work)
    figures = train(target, data, {"final": out_dir / FINAL_DIR, "weak": out_dir / WEAK_DIR}, train_settings, log)
    made = {
        "made_by": "specgate assets smollm2-eagle3",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "gpu": _gpu(),
        "software": _versions(),
        "target": str(target),
        **record,
        "training": {k: v for k, v in figures.items() if k != "checkpoints"},
        "total_s": round(time.monotonic() - started, 1),
    }
    for role, ckpt in figures["checkpoints"].items():
        doc = {**made, "role": role, "checkpoint": ckpt}
        (Path(ckpt["dir"]) / "drafter.json").write_text(json.dumps(doc, indent=2) + "\n")
    link = out_dir / LINK
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(FINAL_DIR)
    summary = {**made, "checkpoints": figures["checkpoints"]}
    (out_dir / "smollm2-eagle3.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _distil_stage(target: Path, data: Path, n_prompts: int, max_new_tokens: int, self_prompts: int, log) -> dict:
    prompts = training_prompts.generate(n_prompts)
    leaked = training_prompts.leaks(prompts)
    if leaked:
        raise SpecgateError(f"{len(leaked)} training prompt(s) share text with fixtures/prompts, e.g. {leaked[0]!r}")
    log(f"distilling {len(prompts)} prompts through SGLang ...")
    settings = replace(DistilSettings(), max_new_tokens=max_new_tokens, self_prompts=self_prompts)
    distilled = distil(target, prompts, data, settings, SERVER_ARGS)
    log(f"distilled: {distilled}")
    return {
        "prompts": {
            "n": len(prompts),
            "seed": training_prompts.SEED,
            "digest": training_prompts.digest(prompts),
            "source": "specgate.drafter.prompts (templates and Python's module docs; no 8-word run shared with "
            "fixtures/prompts)",
            "self_written_asked": self_prompts,
        },
        "distillation": distilled,
    }


def _recorded_data(work: Path) -> dict:
    """What a `distil` stage (this machine's, or a carried copy) left for training."""
    data, record = work / DATA_FILE, work / DATA_RECORD
    missing = [str(p) for p in (data, record) if not p.is_file()]
    if missing:
        raise SpecgateError(f"--stage train: {', '.join(missing)} not found; run --stage distil first (or restore its data)")
    try:
        doc = json.loads(record.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecgateError(f"{record}: not the record a distil stage writes: {exc}") from None
    if not isinstance(doc, dict) or not {"prompts", "distillation"} <= set(doc):
        raise SpecgateError(f"{record}: expected the keys 'prompts' and 'distillation' a distil stage writes")
    return {"prompts": doc["prompts"], "distillation": doc["distillation"]}
