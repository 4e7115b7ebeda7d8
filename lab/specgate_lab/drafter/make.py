"""`specgate-lab assets smollm2-eagle3 DIR`: a trained EAGLE-3 drafter for SmolLM2-135M-Instruct.

prompts (specgate_lab.drafter.prompts, none from the held-out fixtures) → the target's own greedy
answers through SGLang (specgate_lab.drafter.distil) → SpecForge training (specgate_lab.drafter.train)
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
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path

from specgate.errors import SpecgateError
from specgate.measure.drafters import weights_sha256
from specgate_lab.drafter import prompts as training_prompts
from specgate_lab.drafter.distil import (
    PLAN_FILE,
    DistilSettings,
    Plan,
    answered_so_far,
    data_figures,
    distil,
    load_plan,
    prompt_key,
)
from specgate_lab.drafter.train import TrainSettings, train

LINK = "smollm2-eagle3"
FINAL_DIR = "smollm2-eagle3-trained"
WEAK_DIR = "smollm2-eagle3-weak"
# The distillation server: Triton attention for prefill and decode (its kernels compile in
# seconds; FlashInfer's JIT took 259 s of boot plus 113 s at the first request on a fresh H200,
# half a device call: tools/gpu_run.sh compiles the gate's FlashInfer kernels beside it instead,
# with tools/warm_kernels.py), no CUDA graphs (capturing many batch sizes costs more than it
# saves here), and wide batches: a 135M model decodes launch-bound, so 2048 sequences cost little
# more per step than 512 (4000 answers took 51 s at 512 on the H200). Sampling in PyTorch: in
# every distillation that sampled (the target writing prompts and passages) no batch was scheduled
# for 82-120 s after the first sampled requests arrived (1,767 of them queued by then), and in the
# one that only decoded greedily none waited. The cause is not shown; FlashInfer compiling its
# sampling kernels on first use is one candidate, and sampling in PyTorch rules it out.
SERVER_ARGS = [
    "--sampling-backend",
    "pytorch",
    "--attention-backend",
    "triton",
    "--disable-cuda-graph",
    "--mem-fraction-static",
    "0.5",
    "--max-running-requests",
    "2048",
]


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


STAGES = ("all", "distil", "grow", "train", "refine")
WORK_DIR = "smollm2-eagle3-work"  # the first round's data, and each further round's folder
DATA_FILE = "distilled.jsonl"
DATA_RECORD = "distilled.json"  # how the data was made: read back by a later `train` stage
# The drafter learned its training answers far better than held-out ones (0.895 against 0.768
# step-1 accuracy at step 8,530, results/2026-12-02-h200-answers): more answers, not more passes.
# A grow stage distils a further round into its own folder beside the first (work/round-2, ...),
# with its own plan, seed and held-out share; the first round's files and split stay as they were,
# so a drafter trained on fewer rounds is refined on more without judging on answers it learned.
ROUND_PREFIX = "round-"


def rounds(work: Path) -> list[Path]:
    """The further rounds of data in the work folder, in order (the first is the folder itself)."""
    found = [
        p for p in work.glob(f"{ROUND_PREFIX}*")
        if p.is_dir() and re.fullmatch(r"[1-9][0-9]*", p.name.removeprefix(ROUND_PREFIX))
    ]  # round-02 or round-2x is not a round this stage made: never read as one
    return sorted(found, key=round_number)


def round_number(folder: Path) -> int:
    """A further round's number, from its folder's name (round-N)."""
    return int(folder.name.removeprefix(ROUND_PREFIX))


def data_files(work: Path) -> list[Path]:
    """Every round's data, the first round's first (training reads the gate prompts from it)."""
    return [work / DATA_FILE, *(r / DATA_FILE for r in rounds(work))]


def make_smollm2_eagle3(
    out_dir: Path,
    gguf: str | None,
    n_prompts: int,
    train_settings: TrainSettings,
    max_new_tokens: int,
    log,
    self_prompts: int = 0,
    stage: str = "all",
    self_passages: int = 0,
    fresh: bool = False,
) -> dict:
    """`distil` makes the training data, `train` trains from data already in DIR (a device call
    is 10 minutes: a fresh machine's first SGLang boot alone took 259 s), `all` does both;
    `grow` distils a further round of data beside it (new prompts, none asked before);
    `refine` trains the trained drafter in DIR further on the data there (every round), keeping
    the weak checkpoint as it is."""
    from specgate_lab.assets import make_smollm2

    if stage not in STAGES:
        raise SpecgateError(f"--stage {stage!r}: expected one of {', '.join(STAGES)}")
    started = time.monotonic()
    target, _ = make_smollm2(out_dir, gguf)
    work = out_dir / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    data = work / DATA_FILE
    if stage == "grow":
        until = _answer_until("distil", train_settings)
        return _grow_stage(target, work, n_prompts, max_new_tokens, self_prompts, self_passages, log, until, fresh, started)
    if stage in ("all", "distil"):
        until = _answer_until(stage, train_settings)
        record = _distil_stage(target, data, n_prompts, max_new_tokens, self_prompts, self_passages, log, until, fresh)
        (work / DATA_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if stage == "distil":
            return {**record, "data": str(data), "total_s": round(time.monotonic() - started, 1), "checkpoints": {}}
        record = _recorded_data(work, stage)  # training reads every round here: each checked and recorded
    else:
        record = _recorded_data(work, stage)
    if stage == "refine":
        return _refine(out_dir, target, data, record, train_settings, log, started)
    figures = train(target, data_files(work), {"final": out_dir / FINAL_DIR, "weak": out_dir / WEAK_DIR}, train_settings, log)
    made = _made(target, record, figures, started)
    for role, ckpt in figures["checkpoints"].items():
        doc = {**made, "role": role, "checkpoint": ckpt}
        (Path(ckpt["dir"]) / "drafter.json").write_text(json.dumps(doc, indent=2) + "\n")
    return _link_and_summarise(out_dir, made, figures["checkpoints"])


def _made(target: Path, record: dict, figures: dict, started: float) -> dict:
    return {
        "made_by": "specgate-lab assets smollm2-eagle3",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "gpu": _gpu(),
        "software": _versions(),
        "target": str(target),
        **record,
        "training": {k: v for k, v in figures.items() if k != "checkpoints"},
        "total_s": round(time.monotonic() - started, 1),
    }


def _link_and_summarise(out_dir: Path, made: dict, checkpoints: dict) -> dict:
    link = out_dir / LINK
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(FINAL_DIR)
    summary = {**made, "checkpoints": checkpoints}
    (out_dir / "smollm2-eagle3.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# What a distillation leaves of the deadline: batches in flight when it stops sending (~40 s),
# writing the data, and (a distil stage in a device call) packing it to be sent back.
DISTIL_RESERVE_S = 75.0


def _answer_until(stage: str, settings: TrainSettings) -> float | None:
    """When the distillation stops sending prompts: the deadline less its reserve, and, where
    training follows in the same run, less the training's time too."""
    if settings.deadline is None:
        return None
    training = settings.time_budget_s if stage == "all" else 0.0
    return settings.deadline - DISTIL_RESERVE_S - training


def _distil_stage(
    target: Path, data: Path, n_prompts: int, max_new_tokens: int, self_prompts: int, self_passages: int, log,
    answer_until: float | None = None, fresh: bool = False, round_number: int = 1, exclude: frozenset[str] = frozenset(),
) -> dict:
    """Distil anew, or go on with the plan an earlier distil stage of the same request left
    unfinished (its deadline cut it): a device call is 10 minutes, a data set may need several.
    The first round also answers the gate's prompts (judged on, never taught); a further round
    draws with its own seed and leaves out the prompts in `exclude`."""
    seed = training_prompts.SEED + round_number - 1
    prompts = training_prompts.generate(n_prompts, seed=seed)
    judged = training_prompts.gate_prompts() if round_number == 1 else []
    leaked = training_prompts.leaks(prompts)
    if leaked:
        raise SpecgateError(f"{len(leaked)} training prompt(s) share text with fixtures/prompts, e.g. {leaked[0]!r}")
    asked = {
        "n": len(prompts),
        "seed": seed,
        "digest": training_prompts.digest(prompts),
        "source": "specgate_lab.drafter.prompts (templates and Python's module docs; no 8-word run shared with "
        "fixtures/prompts)",
        "self_written_asked": self_prompts,
        "self_written_passages_asked": self_passages,
    }
    if round_number == 1:
        # answered with the rest, judged on, never taught (specgate_lab.drafter.prompts.gate_prompts)
        asked["gate_prompts_judged"] = training_prompts.digest(judged)
    else:
        asked["round"] = round_number
    earlier = _unfinished(data.parent, asked, max_new_tokens, log, fresh)
    if earlier is not None and not earlier["prompts_not_answered_by_the_deadline"]:
        log(f"distilled already: {earlier['samples']} samples, every prompt of the plan answered; nothing to do")
        return {"prompts": asked, "distillation": earlier}
    resume = earlier is not None
    log(f"{'going on with' if resume else 'distilling'} the plan of {len(prompts)} templated prompts through SGLang ...")
    settings = replace(
        DistilSettings(), max_new_tokens=max_new_tokens, self_prompts=self_prompts, self_passages=self_passages,
        answer_until=answer_until, prompt_seed=seed, exclude=exclude,
    )
    distilled = distil(target, [*judged, *prompts], data, settings, SERVER_ARGS, resume=resume)
    distilled["calls"] = [*(earlier or {}).get("calls", []), distilled.pop("this_call")]
    log(f"distilled: {distilled}")
    if distilled["prompts_not_answered_by_the_deadline"]:
        log(
            f"the deadline cut the distillation: {distilled['prompts_not_answered_by_the_deadline']} prompts of the "
            "plan not answered yet; run the distil stage again (same sizes) to go on, or train on what there is"
        )
    return {"prompts": asked, "distillation": distilled}


def _grow_stage(
    target: Path, work: Path, n_prompts: int, max_new_tokens: int, self_prompts: int, self_passages: int, log,
    answer_until: float | None, fresh: bool, started: float,
) -> dict:
    """A further round of data: the last round again where its deadline cut it, else a new one.
    Its prompts leave out every prompt an earlier round asked (their plans say which)."""
    # A round adds to a first one (without it there is nothing to grow); the last round may be one
    # a deadline or a failure cut, to go on with here.
    _recorded_data(work, "grow", last_may_be_unfinished=True)
    if not (work / PLAN_FILE).is_file():
        raise SpecgateError(
            f"{work / PLAN_FILE}: not found: the first round's data predates plans, so a further round cannot leave "
            "out the prompts it asked; distil the first round anew (--stage distil --fresh) before growing"
        )
    earlier = rounds(work)
    last = earlier[-1] if earlier else None
    if last is not None and (last / DATA_RECORD).is_file() and (last / DATA_FILE).is_file() and not (last / PLAN_FILE).is_file():
        raise SpecgateError(
            f"{last}: its data and record are here but not its {PLAN_FILE} (which prompts it was to answer): restore "
            "the plan (a drafter:grow pack holds it) rather than distil the round again, or move the folder away"
        )
    if last is not None and not _finished(last):
        number, folder = round_number(last), last
    else:
        number = round_number(last) + 1 if last is not None else 2
        folder = work / f"{ROUND_PREFIX}{number}"
    folder.mkdir(exist_ok=True)
    exclude = frozenset(
        prompt_key(p) for f in (work, *earlier) if f != folder for p in load_plan(f / PLAN_FILE).prompts
    )
    log(f"round {number} of training data ({folder}), leaving out the {len(exclude)} prompts asked before")
    try:
        record = _distil_stage(
            target, folder / DATA_FILE, n_prompts, max_new_tokens, self_prompts, self_passages, log, answer_until,
            fresh, round_number=number, exclude=exclude,
        )
    except BaseException:
        if not any(folder.iterdir()):  # nothing was asked: leave no empty round for training to trip on
            folder.rmdir()
        raise
    (folder / DATA_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return {**record, "data": str(folder / DATA_FILE), "total_s": round(time.monotonic() - started, 1), "checkpoints": {}}


def _finished(folder: Path) -> bool:
    """Whether a round's record is there and its data answers every prompt of its plan."""
    if not (folder / DATA_RECORD).is_file() or not (folder / PLAN_FILE).is_file():
        return False
    return not data_figures(folder / DATA_FILE, load_plan(folder / PLAN_FILE))["prompts_not_answered_by_the_deadline"]


def _unfinished(work: Path, asked: dict, max_new_tokens: int, log, fresh: bool = False) -> dict | None:
    """The distillation record of an earlier distil stage with this very request, its counts
    taken again from the plan and data beside it; or None, and then the distillation starts
    anew: it says why, and moves what was there aside (`*.replaced`) rather than deleting it."""
    record, plan_path, data = work / DATA_RECORD, work / PLAN_FILE, work / DATA_FILE
    if not record.is_file() and not data.exists():
        return None
    why = "--fresh asked for new data" if fresh else _differs(record, plan_path, data, asked, max_new_tokens)
    if why is None:
        earlier = json.loads(record.read_text())["distillation"]
        earlier.update(data_figures(data, load_plan(plan_path)))  # the data, not the record, says what is answered
        return earlier
    moved = []
    for p in (record, plan_path, data):
        if p.exists():
            p.replace(p.with_name(p.name + ".replaced"))
            moved.append(f"{p.name} → {p.name}.replaced")
    log(f"{work}: starting the distillation anew ({why}); moved aside: {', '.join(moved)}")
    return None


def _differs(record: Path, plan: Path, data: Path, asked: dict, max_new_tokens: int) -> str | None:
    """Why the earlier distillation here is not one this request can go on with, or None."""
    if not plan.is_file() or not data.is_file():
        return f"{plan.name if not plan.is_file() else data.name} is missing"
    try:
        doc = json.loads(record.read_text())
        earlier = doc["distillation"]
        if "calls" not in earlier:
            return "its record predates plans that go on over calls"
        for key, value in asked.items():
            if doc["prompts"].get(key) != value:
                return f"prompts.{key} was {doc['prompts'].get(key)!r}, this request's is {value!r}"
        if earlier.get("max_new_tokens") != max_new_tokens:
            return f"max_new_tokens was {earlier.get('max_new_tokens')!r}, this request's is {max_new_tokens}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{record.name} is unreadable ({exc})"
    return None


def _recorded_data(work: Path, stage: str = "train", last_may_be_unfinished: bool = False) -> dict:
    """What a `distil` stage (this machine's, or a carried copy) and any `grow` stages left for
    training. Each further round must be whole (record, plan, data of that plan) and share no
    prompt with another round: a shared one could be taught in one round and held out in the
    other. With `last_may_be_unfinished` (a grow about to go on with it) the last round is not
    read."""
    data, record = work / DATA_FILE, work / DATA_RECORD
    missing = [str(p) for p in (data, record) if not p.is_file()]
    if missing:
        raise SpecgateError(
            f"--stage {stage}: {', '.join(missing)} not found; run --stage distil first (or restore its data)"
        )
    doc = _data_record(record)
    out: dict = {"prompts": doc["prompts"], "distillation": doc["distillation"]}
    folders = rounds(work)
    if last_may_be_unfinished:
        folders = folders[:-1]
    if not folders:
        return out
    asked_in: dict[str, Path] = {}
    out["rounds"] = []
    for folder in (work, *folders):
        doc, plan = _whole_round(folder, is_first=folder == work, is_last=folder == folders[-1])
        for prompt in plan.prompts:
            key = prompt_key(prompt)
            if asked_in.setdefault(key, folder) != folder:
                raise SpecgateError(
                    f"{folder / PLAN_FILE}: asks a prompt {asked_in[key] / PLAN_FILE} asked too ({prompt.messages[-1].content[:80]!r}): "
                    "one round could teach what another holds out; was the first round distilled anew after this "
                    "one was grown? Move the later round away and grow it again"
                )
        if folder != work:
            out["rounds"].append({"round": round_number(folder), "prompts": doc["prompts"], "distillation": doc["distillation"]})
    return out


def _whole_round(folder: Path, is_first: bool, is_last: bool) -> tuple[dict, Plan]:
    """A round's record and plan, once its record, plan and data are there and the data answers
    that plan."""
    for path in (folder / DATA_RECORD, folder / PLAN_FILE, folder / DATA_FILE):
        if path.is_file():
            continue
        if is_first:  # its folder holds every round: "move it away" would take them all
            raise SpecgateError(
                f"{path}: not found: the first round's prompts cannot be checked against the further rounds "
                f"({ROUND_PREFIX}N beside it); move those away to train on the first round alone, or distil it anew"
            )
        hint = "run --stage grow again to finish it, or move" if is_last and path.name == DATA_RECORD else "restore it, or move"
        raise SpecgateError(f"{folder}: a round of data without its {path.name}: {hint} the folder away")
    doc = _data_record(folder / DATA_RECORD)
    plan = load_plan(folder / PLAN_FILE)
    answered_so_far(folder / DATA_FILE, len(plan.prompts))  # names the line that is not the plan's
    return doc, plan


def _data_record(record: Path) -> dict:
    try:
        doc = json.loads(record.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecgateError(f"{record}: not the record a distil stage writes: {exc}") from None
    if not isinstance(doc, dict) or not {"prompts", "distillation"} <= set(doc):
        raise SpecgateError(f"{record}: expected the keys 'prompts' and 'distillation' a distil stage writes")
    return doc


# What must match between a parent's training and a refine of it: the same samples, read the
# same way, split by the same seed, or the held-out answers would include ones it learned; and
# the same draft vocabulary size, or its weights do not fit the drafter being refined.
SAME_AS_PARENT = ("seed", "held_out", "max_length", "draft_vocab_size")
STAGING = "refined"  # in the work folder: the refine's checkpoint until it replaces the parent
KEPT = "parent-"  # in the work folder: each replaced parent, by the first 16 hex of its sha256


def _refine(
    out_dir: Path, target: Path, data: Path, record: dict, settings: TrainSettings, log, started: float
) -> dict:
    work, final = data.parent, out_dir / FINAL_DIR
    staging = work / STAGING
    _refuse_interrupted(final, staging, work)
    parent = _read_record(
        final / "drafter.json", "run --stage train first, or restore the drafters it made (DRAFTERS_IN)"
    )
    parent_ckpt = _checked_parent(final, parent, record, data, settings)
    weak = _read_record(
        out_dir / WEAK_DIR / "drafter.json",
        "the weak checkpoint is kept from the first training: restore the drafters it made (DRAFTERS_IN), or run --stage train",
    )
    if staging.exists():  # left by a refine that stopped before its checkpoint was written: nothing of it is kept
        shutil.rmtree(staging)
    kept = work / f"{KEPT}{parent_ckpt['sha256'][:16]}"
    figures = train(target, data_files(work), {"final": staging}, replace(settings, init_from=str(final)), log)
    made = _made(target, record, figures, started)
    made["parent"] = parent  # the chain: each refine keeps the whole record of what it started from
    checkpoints = {"weak": weak.get("checkpoint") or {}}
    if "final" not in figures["checkpoints"]:
        log(f"the parent ({parent_ckpt['sha256'][:16]}) stays: refining did not beat it on the held-out answers")
        made["outcome"] = "the parent stays: no epoch beat it on the held-out answers"
        checkpoints["final"] = parent_ckpt
        return _link_and_summarise(out_dir, made, checkpoints)
    made["training"]["settings"]["init_from"] = str(kept)  # where the parent is once replaced
    ckpt = figures["checkpoints"]["final"]
    ckpt["steps_this_stage"] = ckpt["step"]
    ckpt["step"] = int(parent_ckpt.get("step") or 0) + ckpt["step"]  # steps since random weights
    ckpt["refined_from"] = parent_ckpt["sha256"]
    ckpt["dir"] = str(final)
    # The record goes in before the swap, and the swap is two renames: an interrupted one leaves
    # both checkpoints, each with its record, and the next refine says where (_refuse_interrupted).
    (staging / "drafter.json").write_text(json.dumps({**made, "role": "final", "checkpoint": ckpt}, indent=2) + "\n")
    if kept.exists():  # the same parent refined before: that copy is the same weights, keep it
        shutil.rmtree(final)
    else:
        final.rename(kept)
    staging.rename(final)
    checkpoints["final"] = ckpt
    return _link_and_summarise(out_dir, made, checkpoints)


def _refuse_interrupted(final: Path, staging: Path, work: Path) -> None:
    if final.exists() or not (staging / "drafter.json").is_file():
        return
    parents = sorted(p.name for p in work.glob(f"{KEPT}*"))
    raise SpecgateError(
        f"{final}: missing, and {staging} holds a refined checkpoint with its record: a refine stopped between "
        f"moving the parent aside ({', '.join(parents) or 'none kept'} in {work}) and putting its checkpoint in "
        f"place; move {staging} (or the parent) to {final}, then run again"
    )


def _checked_parent(final: Path, parent: dict, record: dict, data: Path, settings: TrainSettings) -> dict:
    """The parent's checkpoint entry, once its record says it is a final checkpoint of these weights,
    trained on this data with this split."""
    where = final / "drafter.json"
    ckpt = parent.get("checkpoint")
    if parent.get("role") != "final" or not isinstance(ckpt, dict) or not isinstance(ckpt.get("sha256"), str):
        raise SpecgateError(f"{where}: expected the record of a final checkpoint (role 'final', checkpoint.sha256)")
    actual = weights_sha256(final)
    if actual != ckpt["sha256"]:
        raise SpecgateError(
            f"{where}: records weights {ckpt['sha256'][:16]}, but {final} holds {str(actual)[:16]}: "
            "not the checkpoint it describes; restore the drafters the train stage made"
        )
    if {k: parent.get(k) for k in ("prompts", "distillation")} != {k: record.get(k) for k in ("prompts", "distillation")}:
        raise SpecgateError(
            f"{where}: trained on other data than {data.parent / DATA_RECORD} "
            "(prompts or distillation differ): refining on it would judge on answers the parent learned"
        )
    # Further rounds may have been added since (each split apart), never changed or taken away.
    was_rounds, now_rounds = parent.get("rounds") or [], record.get("rounds") or []
    if now_rounds[: len(was_rounds)] != was_rounds:
        raise SpecgateError(
            f"{where}: trained on {len(was_rounds)} further round(s) of data that {data.parent} does not hold as they "
            f"were ({len(now_rounds)} there): restore the rounds it learned from before refining it"
        )
    was = (parent.get("training") or {}).get("settings") or {}
    differ = [
        f"{k} {was.get(k)!r} (this run: {getattr(settings, k)!r})"
        for k in SAME_AS_PARENT
        if was.get(k) != getattr(settings, k)
    ]
    if differ:
        raise SpecgateError(
            f"{where}: the parent was trained with {', '.join(differ)}: its held-out split or its shape differs "
            "from this run's; refine with the specgate version that trained it, or train anew with --stage train"
        )
    return ckpt


def _read_record(path: Path, hint: str) -> dict:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise SpecgateError(f"{path}: not found; {hint}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecgateError(f"{path}: not a drafter record: {exc}") from None
    if not isinstance(doc, dict):
        raise SpecgateError(f"{path}: expected a JSON object (a drafter record)")
    return doc
