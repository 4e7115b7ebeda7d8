"""Which drafter each speculative config ran: its path, the checksum of its weights as read
now, and, where the lab's `specgate-lab assets smollm2-eagle3` made it, how it was trained (drafter.json).

Accept length belongs to the drafter: a report (and a stored baseline) that does not say which
weights produced it cannot explain a change in it. The checksum is recomputed at every run and
compared with the one recorded at training, so a file swapped under the same path is named.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import NamedTuple

from specgate import project
from specgate.deployment import Deployment, expand_placeholders, flag_int, flag_value
from specgate.drafter_card import DrafterCard, load_card
from specgate.measure.answer_end import ANSWER_DIGEST_SCHEME
from specgate.measure.stats import Interval, pooled_ratio
from specgate.prompts import builtin_sets_digest, set_of

DRAFT_PATH_FLAG = "--speculative-draft-model-path"
DUMMY_FLAG = "--speculative-draft-load-format"
RECORD = "drafter.json"


def weights_sha256(directory: Path) -> str | None:
    """None where the folder holds no weight files; OSError where one cannot be read."""
    files = sorted(directory.glob("*.safetensors")) + sorted(directory.glob("*.bin"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def drafter_identity(deployment: Deployment, config: str) -> dict | None:
    """None for a config without a draft model path (plain decoding, n-gram) or a drafter card;
    with a card (specgate.drafter_card), the card as read and whether the weights match it."""
    path = deployment.configs[config].drafter_card
    if path is None:
        return _flag_identity(deployment, config)
    try:
        card: DrafterCard | None = load_card(path)
    except ValueError as exc:
        card, unreadable = None, str(exc)[:300]
    identity = _flag_identity(deployment, config, card.weights if card else None)
    if identity is None:
        return None
    identity["card"] = {"path": str(path), **(card.model_dump() if card else {"unreadable": unreadable})}
    if card and card.sha256 and identity.get("sha256"):
        identity["matches_card"] = card.sha256 == identity["sha256"]
    return identity


def _flag_identity(deployment: Deployment, config: str, weights: str | None = None) -> dict | None:
    """The drafter the config's flags name (else `weights`, its card's): path, checksum, drafter.json."""
    cfg = deployment.configs[config]
    args = (*deployment.launch.args, *cfg.args)
    raw = flag_value(args, DRAFT_PATH_FLAG) or weights  # the last one given, as SGLang keeps
    if raw is None:
        return None
    path = expand_placeholders(raw, {"repo": str(project.current().root), "model": deployment.model})
    out: dict = {"path": path}
    if flag_value(args, DUMMY_FLAG) == "dummy":
        out["weights"] = "random (--speculative-draft-load-format dummy): no trained weights"
        return out
    directory = Path(path)
    if not directory.is_dir():
        out["weights"] = "not a directory on this host (a hub id, or another machine's path): not checksummed"
        return out
    try:
        out["sha256"] = weights_sha256(directory)
    except OSError as exc:
        out["sha256"] = None
        out["weights"] = f"weights unreadable: {exc}"
    if out["sha256"] is None and "weights" not in out:
        out["weights"] = "no *.safetensors or *.bin in this folder"
    record = directory / RECORD
    if record.is_file():
        try:
            made = json.loads(record.read_text())
            if not isinstance(made, dict):
                raise ValueError(f"expected a JSON object, got {type(made).__name__}")
            ckpt = made.get("checkpoint") or {}
            training = made.get("training") or {}
            held = ckpt.get("held_out") or {}
            prompts = made.get("prompts") or {}
            out["made"] = {
                "by": made.get("made_by"),
                "date": made.get("date"),
                "role": made.get("role"),
                "step": ckpt.get("step"),  # since random weights, refines included
                "refined_from": ckpt.get("refined_from"),
                "steps_done": training.get("steps_done"),
                "train_s": training.get("train_s"),
                # every round of data it learned from (a grow stage adds rounds beside the first)
                "samples": _over_rounds(made, "samples"),
                "answer_tokens": _over_rounds(made, "answer_tokens"),
                "data_rounds": 1 + len(made.get("rounds") or []),
                "prompts_digest": prompts.get("digest"),
                "software": made.get("software"),
                # What training expected of it on answers it never learned (2 steps, topk 1), every
                # answer token counted; records before that figure give none (theirs flattered).
                "held_out_tau": held.get("expected_tau_all_tokens"),
                # ... and on each round's apart (the first comparable with drafters of that round alone)
                "held_out_tau_by_round": held.get("expected_tau_by_round"),
                "vocab_coverage": (training.get("vocab_coverage") or {}).get("held_out"),
                # The same figure on the gate's own prompts' answers (judged, never taught): near the
                # gate's τ, the gap to held_out_tau is the prompts; far above it, it is the serving.
                "gate_prompts_tau": held.get("expected_tau_gate_prompts"),
                # ... over each answer's first gate_answer_tokens tokens, what a gate of that length reads
                "gate_head_tau": held.get("expected_tau_gate_prompts_head"),
                "gate_answer_tokens": held.get("gate_answer_tokens"),
                # ... per prompt set, as recorded (expected_by_set says where it applies)
                "gate_head_tau_by_set": held.get("expected_tau_gate_prompts_head_by_set"),
                # ... walked cycle by cycle as a server counts τ (specgate_lab/drafter/walk.py, in the lab): the position
                # average above weighs easy stretches as much as hard ones, a server does not
                "gate_head_walked_tau": held.get("walked_tau_gate_prompts_head"),
                "gate_head_walked_tau_by_set": held.get("walked_tau_gate_prompts_head_by_set"),
                # ... and per gate prompt, [tokens, cycles], so a run is compared with the prompts it sent
                "gate_head_walked_by_prompt": held.get("walked_gate_prompts_head_by_prompt"),
                # ... and which answer each was, by its token ids (a run's answer of another text was not walked)
                "gate_head_digest_by_prompt": held.get("walked_gate_prompts_head_digest_by_prompt"),
                "gate_head_digest_scheme": held.get("walked_gate_prompts_head_digest_scheme"),
                "gate_prompts_digest": prompts.get("gate_prompts_judged"),
                # the model whose answers training judged (another target answers otherwise)
                "target": made.get("target"),
            }
            expected = expected_by_set(out["made"], deployment, config)
            if expected:
                out["expected_tau_by_set"] = expected
            walked = expected_by_set(out["made"], deployment, config, "gate_head_walked_tau_by_set")
            if walked:
                out["walked_tau_by_set"] = walked
                by_prompt = recorded_prompt_walks(out["made"], walked)
                if by_prompt:
                    out["walked_by_prompt"] = by_prompt
                    digests = recorded_prompt_digests(out["made"], by_prompt)
                    if digests:
                        out["walked_digest_by_prompt"] = digests
            recorded = ckpt.get("sha256")
            out["matches_record"] = recorded == out["sha256"] if recorded and out["sha256"] else None
        except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
            out["made"] = {"unreadable": f"{record}: {str(exc)[:200]}"}
    return out


def expected_by_set(
    made: dict, deployment: Deployment, config: str, field: str = "gate_head_tau_by_set"
) -> dict[str, float]:
    """Training's expected τ per prompt set (`field` of the record's figures: averaged, or walked),
    where it is a figure for what this config measures:
    2 draft steps at topk 1 (what training's figure models), answers as long as the workload's,
    the same built-in prompts (their digest) in the ChatML the distillation rendered them in,
    answered by the same target model, and only the sets this workload sends. Values that are not
    an accept length are dropped."""
    raw = made.get(field)
    walked = field == "gate_head_walked_tau_by_set"
    args = (*deployment.launch.args, *deployment.configs[config].args)
    wl = deployment.workload
    applies = (
        isinstance(raw, dict)
        and flag_int(args, "--speculative-num-steps") == 2
        and flag_int(args, "--speculative-eagle-topk") == 1
        and made.get("gate_answer_tokens") == wl.max_new_tokens
        and wl.prompt_format == "chatml"
        and made.get("gate_prompts_digest") == builtin_sets_digest()
        and made.get("target") == deployment.model
        # walked, it models requests that stop where the answer ends, not ones run past it
        and (not walked or not wl.ignore_eos)
    )
    if not applies:
        return {}
    out = {}
    for name, value in raw.items():  # type: ignore[union-attr]
        # 2 steps: a bonus token and at most two drafts per cycle (3); walked, up to 4 (a 4-token answer
        # in one cycle: its first token came from prefill)
        if name in wl.prompt_sets and _is_tau(value, 4.0 if walked else 3.0):
            out[str(name)] = round(float(value), 3)
    return out


def recorded_prompt_walks(made: dict, walked_by_set: dict[str, float]) -> dict[str, tuple[int, int]]:
    """The record's per-prompt walk, [tokens, cycles] by label (set/id), for the prompts of sets
    whose walk applies to this config (`walked_by_set`, from expected_by_set, decided that); a pair
    that is not two counts of a walk (cycles from 1 to tokens, at most 4 tokens a cycle) is dropped."""
    raw = made.get("gate_head_walked_by_prompt")
    out: dict[str, tuple[int, int]] = {}
    if not isinstance(raw, dict):
        return out
    for label, pair in raw.items():
        if (
            isinstance(label, str)
            and set_of(label) in walked_by_set
            and isinstance(pair, list | tuple)
            and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
            and 1 <= pair[1] <= pair[0] <= 4 * pair[1]
        ):
            out[label] = (pair[0], pair[1])
    return out


def recorded_prompt_digests(made: dict, walked_by_prompt: dict[str, tuple[int, int]]) -> dict[str, str]:
    """The record's digest of each walked answer (answer_end.answer_digest) by label, for the
    prompts walked per prompt here, where the record made them as answer_digest does now;
    anything but 16 lowercase hex digits is dropped."""
    raw = made.get("gate_head_digest_by_prompt")
    # digests made another way would all differ: read only those of this scheme
    if not isinstance(raw, dict) or made.get("gate_head_digest_scheme") != ANSWER_DIGEST_SCHEME:
        return {}
    return {
        label: digest
        for label, digest in raw.items()
        if label in walked_by_prompt and isinstance(digest, str) and _HEX16.fullmatch(digest)
    }


_HEX16 = re.compile(r"[0-9a-f]{16}")


def _is_tau(value: object, most: float = 4.0) -> bool:
    """An accept length of 2 draft steps: a number from 1 to `most` (no bool, NaN or huge integer)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 1.0 <= value <= most


def drafters(deployment: Deployment) -> dict[str, dict]:
    found = {}
    for name in deployment.configs:
        identity = drafter_identity(deployment, name)
        if identity is not None:
            found[name] = identity
    return found


def _over_rounds(made: dict, key: str) -> int | None:
    """A distillation count summed over every round of data the record names; None where any
    round does not give it (a partial sum would understate what the drafter learned from)."""
    rounds = made.get("rounds") or []
    values = [(made.get("distillation") or {}).get(key)]
    values += [((r if isinstance(r, dict) else {}).get("distillation") or {}).get(key) for r in rounds]
    counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(counts) < len(values):
        return values[0] if not rounds else None
    return sum(counts)


def describe(identity: dict) -> str:
    """One line for a report: path, checksum, how it was made."""
    parts = [identity["path"]]
    if "weights" in identity:
        parts.append(identity["weights"])
    if identity.get("sha256"):
        parts.append(f"sha256 {identity['sha256'][:16]}")
    made = identity.get("made") or {}
    if made.get("unreadable"):
        parts.append(f"its {RECORD} is unreadable ({made['unreadable']})")
    elif made.get("role"):
        parts.append(
            f"{made['role']} checkpoint of `{made.get('by')}` ({made.get('date')}): step {made.get('step')}, "
            f"{made.get('samples')} distilled answers, {made.get('answer_tokens')} answer tokens"
            + (f" ({made['data_rounds']} rounds of data)" if (made.get("data_rounds") or 1) > 1 else "")
        )
        if made.get("refined_from"):
            parts.append(f"refined from sha256 {str(made['refined_from'])[:16]}")
        if made.get("held_out_tau") is not None:
            held = f"training expected τ {made['held_out_tau']} at 2 steps, topk 1, on its held-out answers"
            by_round = made.get("held_out_tau_by_round")
            if isinstance(by_round, list) and len(by_round) > 1:
                held += " (by round of data: " + ", ".join("none held out" if t is None else str(t) for t in by_round) + ")"
            if made.get("vocab_coverage") is not None:
                held += f" (its draft vocabulary holds {100 * made['vocab_coverage']:.1f}% of their tokens)"
            if made.get("gate_prompts_tau") is not None:
                held += f", {made['gate_prompts_tau']} on the gate's own prompts (answers judged on, never trained on"
                if made.get("gate_head_tau") is not None and made.get("gate_answer_tokens") is not None:
                    held += f"; {made['gate_head_tau']} over their first {made.get('gate_answer_tokens')} answer tokens"
                    if _is_tau(made.get("gate_head_walked_tau")):
                        held += (
                            f", {made['gate_head_walked_tau']} walked cycle by cycle as a server counts answers "
                            "that stop at their end"
                        )
                held += ")"
            parts.append(held)
    if identity.get("matches_record") is False:
        parts.append("WEIGHTS DIFFER from the checksum recorded when it was trained")
    card = identity.get("card") or {}
    if card.get("unreadable"):
        parts.append(f"its drafter card is unreadable ({card['unreadable']})")
    elif card:
        said = f"card {card['path']}"
        if card.get("made"):
            said += f": made {card['made']}"
        if card.get("expected_accept_length") is not None:
            said += f"; expected accept length {card['expected_accept_length']:g}"
        parts.append(said)
    if identity.get("matches_card") is False:
        parts.append("WEIGHTS DIFFER from the drafter card's checksum")
    return "; ".join(str(p) for p in parts)


# Before the serving is judged on the answers the walk speaks for alone, enough of them must be
# left: a bootstrap over a handful of pairs is little more than their range, and where most
# answers parted, the parting itself is the finding.
MIN_KEPT = 10


class WalkComparison(NamedTuple):
    """Training's walk set against a run's requests: the τ it predicts for them, served over
    walked over all of them, what the walk was taken over; and, walked per prompt, how many served
    answers parted from the walked ones and served over walked over the rest (`kept_ratio`, None
    where too few are left to judge on). `compared_by_ids`: requests whose answer and walked answer
    were both known by their token ids; `by_ids`: of the parted, those whose ids differ (the rest by
    length alone); `proven`: of the rest, those whose ids are the walked answer's; `at_limit`: of
    the rest kept by length alone, those at the length limit, which the length cannot tell apart."""

    predicted: float
    ratio: Interval
    basis: str
    parted: int = 0
    sent: int = 0
    kept_ratio: Interval | None = None
    by_ids: int = 0
    proven: int = 0
    at_limit: int = 0
    limit: int | None = None

    @property
    def compared_by_ids(self) -> int:
        return self.by_ids + self.proven


def walk_comparison(
    answers: list[tuple[str, int, int]],
    walked_by_set: dict[str, float],
    confidence: float,
    walked_by_prompt: dict[str, tuple[int, int]] | None = None,
    served: list[tuple[int | None, str | None]] | None = None,
    walked_digests: dict[str, str] | None = None,
    limit: int | None = None,
) -> WalkComparison | None:
    """Training's walk of the gate's answers set against a run's requests, `answers` holding
    (prompt label set/id, tokens, verify steps) per request as the gate pooled them. Returns the τ
    the walk predicts for these requests, the served τ over it, and what the walk was taken over.
    Each request's tokens over its prompt's walked τ (where every request's prompt was walked on
    its own, else its set's) are the verify steps the walk expects of it; the predicted τ is all
    tokens over all those steps, and served over walked is Σ expected steps / Σ served steps with
    requests resampled in pairs: the walk depends on the same requests, so which prompts were drawn
    cancels out of the ratio. None for fewer than two requests, or where a request's set has no
    walked figure (a whole-run prediction would leave requests out).

    Walked per prompt, a request whose answer is another text than the walked one is not what the
    walk walked: the server's greedy answer went another way than the distillation's (other
    kernels, a near-tie; seen on the H200: 8 of 30 answers, and most of a 4% shortfall,
    results/2026-12-03-h200-from-scratch). Those are counted apart, and the ratio is also given
    over the rest, where it can judge the serving, if at least MIN_KEPT and half are left.
    `served` gives per request (answer tokens up to the model's end of turn, the answer's digest),
    either None where unknown: where the digest and the walked one (`walked_digests` by label)
    are both known, the ids decide; elsewhere the answer's length does (up to its end of turn:
    tokens accepted past it at the limit are not another answer), which is no proof of the same
    text: a parted answer of the walked length stays in the rest."""
    if len(answers) < 2:
        return None
    by_prompt = walked_by_prompt or {}
    per_prompt = bool(by_prompt) and all(label in by_prompt for label, _, _ in answers)
    known = served if served is not None and len(served) == len(answers) else [(None, None)] * len(answers)
    expected_steps, served_steps, kept = [], [], []
    by_ids = proven = at_limit = 0
    for (label, tokens, verify), (answer_tokens, served_digest) in zip(answers, known, strict=True):
        if per_prompt:
            walked_tokens, walked_cycles = by_prompt[label]
            walked: float | None = walked_tokens / walked_cycles
            walked_digest = (walked_digests or {}).get(label)
            if served_digest and walked_digest:
                same = served_digest == walked_digest
                by_ids += not same
                proven += same
            else:
                same = (answer_tokens or tokens) == walked_tokens
                at_limit += same and limit is not None and walked_tokens >= limit
            kept.append(same)
        else:
            walked = walked_by_set.get(set_of(label))
        if walked is None or not _is_tau(walked) or verify <= 0:
            return None
        expected_steps.append(tokens / walked)
        served_steps.append(verify)
    predicted = sum(tokens for _, tokens, _ in answers) / sum(expected_steps)
    basis = "per prompt sent" if per_prompt else "per prompt set, over every built-in prompt of the set"
    ratio = pooled_ratio(expected_steps, served_steps, confidence)
    parted = kept.count(False)
    rest = len(answers) - parted
    kept_ratio = None
    if parted and rest >= MIN_KEPT and 2 * rest >= len(answers):
        kept_ratio = pooled_ratio(
            [e for e, k in zip(expected_steps, kept, strict=True) if k],
            [s for s, k in zip(served_steps, kept, strict=True) if k],
            confidence,
        )
    return WalkComparison(
        predicted, ratio, basis, parted, len(answers), kept_ratio, by_ids, proven, at_limit, limit
    )


def walk_note(compared: WalkComparison, floor: float) -> str:
    """Whose shortfall a failing floor is: the serving's where the server accepts less than the
    drafter's own walk of the same answers, the drafter's where that walk itself misses the floor.
    Where answers parted from the walked ones, the serving is judged on the rest, or not at all
    where too few are left. The walk is one figure without an interval: within 1% of the floor it
    is called at it."""
    walked, ratio = compared.predicted, compared.ratio
    said = (
        f"training's walk of the gate's answers (cycle by cycle, as a server counts; {compared.basis}) predicts "
        f"τ {walked:.3f} for these requests; served over walked {_interval(ratio)} (requests resampled in pairs)"
    )
    judged: Interval | None = ratio
    on = ""
    rest = compared.sent - compared.parted
    if compared.parted:
        by_length = compared.parted - compared.by_ids
        if not by_length:
            how = "their token ids differ"
        elif not compared.by_ids:
            how = "another length"
        else:
            how = f"{compared.by_ids} by their token ids, {by_length} by another length"
        said += (
            f"; {compared.parted} of the {compared.sent} served answers parted from the ones training walked "
            f"({how}: greedy decoding went another way than in the distillation, on other kernels or "
            "at a near-tie), and the walk says nothing of them"
        )
        if 2 * compared.parted > compared.sent:
            said += (
                "; that more than half parted is itself a finding: the serving may have changed the target's "
                "answers (set the plain server's answers beside the distillation's)"
            )
        judged = compared.kept_ratio
        if judged is not None:
            by_length_kept = rest - compared.proven
            if not by_length_kept:
                what, on = "the very answers walked, by their token ids", " on the very answers walked"
            else:
                what = (
                    "of the walked length, no proof of the same text"
                    if not compared.proven
                    else f"{compared.proven} the very answers walked by their token ids, {by_length_kept} of the walked length"
                )
                if compared.at_limit:
                    what += f"; {compared.at_limit} of them at the {compared.limit}-token limit, which the length cannot tell apart"
                on = " on the answers kept"
            said += f"; over the other {rest} ({what}) served over walked {_interval(judged)}"
    elif compared.proven and compared.proven == compared.sent:
        said += "; every served answer is the one training walked (by its token ids)"
    if judged is None:
        serving = (
            f": too few served answers are the walked ones ({rest} of {compared.sent}; at least {MIN_KEPT} and half "
            "are needed) to judge the serving against the walk"
        )
    elif judged.high < 1.0:
        serving = (
            f": the server accepts {100 * (1 - judged.estimate):.1f}% less than the same drafter walks{on}; look at "
            "the serving (hidden-state capture, draft vocabulary, attention mode) or weights other than the walked ones"
        )
    elif judged.low > 1.0:
        serving = f": the server accepts more than the walk predicts{on}"
    else:
        serving = (
            f": the server is consistent with the walk{on} (a serving loss of up to {100 * (1 - judged.low):.1f}% "
            "is not excluded)"
        )
        if judged is not ratio and ratio.high < 1.0 and judged.low > ratio.estimate:
            serving += "; the shortfall over all requests lies mostly in the answers that parted from the walked ones"
    if abs(walked - floor) <= 0.01 * floor:
        drafter = f"; the walk itself is at the floor {floor:g} (within 1%): this drafter is borderline on these prompts"
    elif walked < floor:
        drafter = f"; the walk itself is below the floor {floor:g}: on these prompts the drafter falls short whatever the serving"
    else:
        drafter = f"; the walk clears the floor {floor:g}: served as it walks, this drafter would pass"
    return said + serving + drafter


def _interval(ratio: Interval) -> str:
    return f"{ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}]"
