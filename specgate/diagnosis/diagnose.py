"""One diagnosis per speculative config and concurrency: the cycle model, what the server
runs, whether speculation underperforms, and the ranked levers with their evidence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specgate.deployment import Deployment
from specgate.diagnosis.cycle import CycleModel, cycle_model
from specgate.diagnosis.levers import Lever, Sibling, Subject, Thresholds, attention_modes, find_levers, parse_flags
from specgate.diagnosis.settings import EffectiveSettings, read_settings
from specgate.diagnosis.signals import draft_config, graph_use, pooled_histogram
from specgate.measure.speed import Measurements
from specgate.measure.summary import paired_speed_ratio
from specgate.server_flags import parse_release

# Where the cycle model's prediction and the measured speedup part by more than this, the
# report says time is spent outside the draft-verify cycle.
MODEL_GAP_NOTE = 0.10


@dataclass(frozen=True)
class Diagnosis:
    config: str
    concurrency: int
    settings: EffectiveSettings
    model: CycleModel
    underperforms: tuple[str, ...]  # why levers were looked for; empty: healthy
    levers: tuple[Lever, ...]
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "concurrency": self.concurrency,
            "settings": self.settings.as_dict(),
            "cycle": self.model.as_dict(),
            "underperforms": list(self.underperforms),
            "levers": [lever.as_dict() for lever in self.levers],
            "notes": list(self.notes),
        }


def _env(deployment: Deployment, config: str) -> dict[str, str]:
    return {**deployment.launch.env, **deployment.configs[config].env}


def _underperforms(deployment: Deployment, model: CycleModel) -> list[str]:
    out = []
    m = model.measured
    if m.estimate < 1.0:
        out.append(f"slower than the reference ({m.estimate:.3f}x [{m.low:.3f}, {m.high:.3f}])")
    for gate in deployment.gates.beats:
        if gate.config == model.config and gate.over == deployment.reference_of(model.config) and gate.concurrency == model.concurrency:
            # The gate passes only when the whole interval clears the ratio (inconclusive fails).
            if m.low < gate.ratio:
                out.append(f"does not clear its gate's {gate.ratio:g}x")
    floor = deployment.diagnosis.efficiency_floor
    if model.efficiency < floor:
        out.append(
            f"turns {model.efficiency:.0%} of its accept length into speed (under the {floor:.0%} floor): "
            f"a cycle costs {model.cycle_cost:.2f} plain decode steps"
        )
    return out


def diagnose(
    deployment: Deployment, meter: Measurements, server_infos: dict[str, dict], log_dir: Path | None
) -> list[Diagnosis]:
    conf = deployment.gates.confidence
    thresholds = Thresholds(
        last_step_floor=deployment.diagnosis.last_step_floor, drafter_floor=deployment.diagnosis.drafter_floor
    )
    subjects: dict[tuple[str, int], Subject] = {}
    for (config, conc), record in meter.results.items():
        reference = meter.results.get((deployment.reference_of(config), conc))
        info = server_infos.get(config)
        if config in deployment.references or reference is None or info is None:
            continue
        model = cycle_model(record, reference, conf)
        if model is None:
            continue
        settings = read_settings(info)
        subjects[(config, conc)] = Subject(
            config=config,
            concurrency=conc,
            settings=settings,
            env=_env(deployment, config),
            model=model,
            record=record,
            graphs=graph_use(log_dir / f"{config}.log", record) if log_dir else None,
            histogram=pooled_histogram(record),
            draft=draft_config(settings.draft_model_path),
            flags=parse_flags(deployment.configs[config].args),
        )
    out = []
    for (config, conc), subject in subjects.items():
        siblings = [
            Sibling(other, paired_speed_ratio(other.record, subject.record, conf))
            for (name, c), other in subjects.items()
            if c == conc and name != config
        ]
        reasons = _underperforms(deployment, subject.model)
        levers = find_levers(subject, siblings, thresholds) if reasons else []
        out.append(
            Diagnosis(config, conc, subject.settings, subject.model, tuple(reasons), tuple(levers), _notes(subject))
        )
    order = list(deployment.configs)
    return sorted(out, key=lambda d: (d.concurrency, order.index(d.config)))


def _notes(subject: Subject) -> tuple[str, ...]:
    notes = []
    if subject.simulated_tau is not None:
        notes.append(
            f"τ is fixed by SGLang (SGLANG_SIMULATE_ACC_LEN={subject.simulated_tau}): these figures time kernels "
            "and scheduling at that accept length, not a drafter's quality"
        )
    gap = subject.model.model_gap
    if abs(gap) > MODEL_GAP_NOTE:
        notes.append(
            f"τ·t_d/t_c gives {subject.model.predicted:.3f}x against the paired {subject.model.measured.estimate:.3f}x "
            f"({gap:+.0%}): τ and speed vary together across prompts, so medians of the parts do not multiply out"
        )
    s = subject.settings
    asked, _ = attention_modes(subject)
    if s.speculative and s.attention_mode == "decode" and asked != "decode":
        given = "--speculative-attention-mode prefill" if subject.flags.get("--speculative-attention-mode") else (
            "no --speculative-attention-mode (SGLang's default: prefill)"
        )
        notes.append(
            f"SGLang switched speculative_attention_mode to decode by itself: the config gives {given}, the server "
            "reports decode, so verify already runs on the decode attention backend and "
            "--speculative-attention-mode decode is no lever here"
        )
    if s.overlap_disabled:
        notes.append(_overlap_note(parse_release(s.version)))
    return tuple(notes)


# From 0.5.14 the overlapping (v2) speculative worker is SGLang's only EAGLE-3 path; before, the
# overlap scheduler's absence meant the v1 worker (SGLANG_ENABLE_SPEC_V2 chose).
SPEC_V2_ONLY_FROM = (0, 5, 14)


def _overlap_note(release: tuple[int, ...] | None) -> str:
    if release is not None and release < SPEC_V2_ONLY_FROM:
        return (
            "the overlap scheduler is off in this server: SGLang then runs its speculative v1 worker, which does "
            "not overlap CPU scheduling with the GPU (0.5.11 turns it on by default; SGLANG_ENABLE_SPEC_V2)"
        )
    return (
        "the overlap scheduler is off in this server (--disable-overlap-schedule): the host's scheduling of the next "
        "cycle no longer overlaps the GPU's work on this one, so every verify cycle pays that host time in full"
    )
