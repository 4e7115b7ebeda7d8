"""Before a run (`specgate check`): the sensitivity each no-regression speed gate will have, from
what this project stores of the runner (its history and calibration records, one per machine
fingerprint, under baselines/<deployment>/) or the deployment's declared spread.

Nothing boots, so the machine is not known: every fingerprint stored for the deployment is said
apart, named by its file. The run assumes the deployment's own plan: launch.boots now, a baseline
recorded with as many, and the gate's cap of requests per boot (workload.max_repeats).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from specgate.deployment import MAX_BOOTS, Deployment
from specgate.errors import BaselineError
from specgate.verdicts.calibration import Calibration, load_calibration
from specgate.verdicts.history import calibration_entries, load_history, pooled_spread
from specgate.verdicts.sensitivity import Design, plan_sentence, sentence


def _gates(dep: Deployment) -> list[tuple[str, str]]:
    """(config, figure) of each no-regression speed gate against stored figures, as the judge
    judges it; none where no gate compares with a stored baseline (`against_stored = false`)."""
    if not dep.gates.against_stored:
        return []
    stored = dep.launch.reference_stored
    out = []
    for config in dep.configs:
        if config in dep.references:
            if not stored:
                out.append((config, "decode_tps"))
        else:
            out.append((config, "decode_tps" if stored else "speedup"))
    return out


def _seconds(cal: Calibration | None, dep: Deployment, configs: list[str]) -> tuple[float | None, float | None]:
    """A boot and a request of each of `configs` (summed), from a calibration's measured boots
    and its decode speeds (max_new_tokens at the median tok/s); None where it has none."""
    if cal is None:
        return None, None
    boots = [float(s) for s in cal.document.get("boot_seconds") or [] if isinstance(s, (int, float))]
    speeds = [_decode_speed(cal, config) for config in configs]
    if not boots or None in speeds:
        return None, None
    return statistics.median(boots) * len(configs), sum(dep.workload.max_new_tokens / s for s in speeds if s)


def sensitivity_lines(dep: Deployment, baselines_root: Path) -> list[str]:
    """One line per stored fingerprint and gate (or one saying why none can be stated)."""
    folder = baselines_root / dep.name
    gates = [*_gates(dep), *_ab_gates(dep)]
    if not gates:
        return [
            "  sensitivity: nothing to state: no speed gate compares across boots ([gates] against_stored = false "
            "and no [[gates.ab]])"
        ]
    slugs = sorted({p.stem for sub in ("calibration", "history") for p in (folder / sub).glob("*.json")})
    lines = []
    for slug in slugs:
        try:
            cal_path = folder / "calibration" / f"{slug}.json"
            cal = load_calibration(cal_path) if cal_path.is_file() else None
            history = load_history(folder / "history" / f"{slug}.json")
        except BaselineError as exc:
            lines.append(f"  sensitivity on {slug}: not stated: {exc}")
            continue
        frames = {e.frame for e in history.entries} if history else set()
        extra = [e for e in calibration_entries(cal.document, slug) if e.frame not in frames] if cal else []
        for config, kind in gates:
            digest = dep.configs[config].args_digest(dep.launch)
            found = pooled_spread(history, config, kind.removeprefix("ab:"), digest, extra)
            if found is None:
                continue
            split = cal.spread_of(config, kind.removeprefix("ab:"), digest) if cal is not None else None
            shared = split.split_at(found.log_sd_upper) if split is not None else None
            lag1 = split.request_lag1 if split is not None else None
            design = _design(dep, config, kind, found.log_sd_upper, found.within_log_sd, shared, lag1)
            said = sentence(design, found.describe(slug))
            if dep.gates.detect is not None:
                servers = [config, dep.reference_of(config)] if kind == "speedup" else [config]
                said += "; " + plan_sentence(
                    design, dep.gates.detect, MAX_BOOTS, *_seconds(cal, dep, servers), url=dep.launch.launcher == "url"
                )
            lines.append(f"  {_gate_name(dep, config, kind)} on {slug}: {said}")
    if not lines and dep.gates.between_boot is not None:
        declared = dep.gates.between_boot
        for config, kind in gates:
            figure = kind.removeprefix("ab:")
            sd = declared.decode_tps_log_sd if figure == "decode_tps" else declared.speedup_log_sd
            shared = declared.decode_tps_shared_log_sd if figure == "decode_tps" else declared.speedup_shared_log_sd
            design = _design(dep, config, kind, sd, declared.request_log_sd, shared, declared.request_lag1)
            said = sentence(design, f"declared in [gates.between_boot]: {declared.source}")
            if dep.gates.detect is not None:
                said += "; " + plan_sentence(design, dep.gates.detect, MAX_BOOTS, None, None, url=dep.launch.launcher == "url")
            lines.append(f"  {_gate_name(dep, config, kind)}: {said}")
    if not lines:
        lines.append(
            f"  sensitivity not stated: no runner history or calibration under {folder} holds a spread of these gates' "
            "configs and no [gates.between_boot] is declared "
            f"(run `specgate calibrate {dep.path}`" + ("" if dep.simulator else " on the GPU runner") + ")"
        )
    return lines


def _ab_gates(dep: Deployment) -> list[tuple[str, str]]:
    """(candidate, "ab:decode_tps") of each A/B speed gate: judged on both servers' decode tok/s."""
    return [(gate.config, "ab:decode_tps") for gate in dep.gates.of("ab")]


def _gate_name(dep: Deployment, config: str, kind: str) -> str:
    if kind.startswith("ab:"):
        gate = next(g for g in dep.gates.of("ab") if g.config == config)
        return f"ab:{gate.name}:speed"
    return f"regression:{config}:{kind}"


def _design(
    dep: Deployment,
    config: str,
    kind: str,
    between: float,
    within: float | None,
    shared: float | None = None,
    lag1: float | None = None,
) -> Design:
    pair = kind.startswith("ab:")
    if pair:
        tolerance = next(g for g in dep.gates.of("ab") if g.config == config).speed_tolerance(dep)
    else:
        tolerance = dep.gates.tolerance.decode_tps_for(config)
    return Design(
        between_log_sd=between,
        within_log_sd=within,
        boots_now=dep.launch.boots,
        boots_stored=dep.launch.boots,
        requests=dep.workload.max_repeats,
        # An A/B speed gate keeps half the pair's budget (verdicts/ab_gate.py); every gate, its
        # share of the run's split over the context buckets (verdicts/sampler.py `confidence`).
        false_alarm=(1 - dep.gates.confidence) / (2 if pair else 1) / dep.judged_contexts,
        two_sided=kind == "decode_tps" and config in dep.references,
        shared_log_sd=shared,
        lag1=lag1,
        pair=pair,
        tolerance=tolerance,
    )


def decode_speeds(dep: Deployment, baselines_root: Path) -> dict[str, float]:
    """Each config's median decode tok/s from a calibration record of the deployment (the first one
    stored, any fingerprint: nothing is booted to tell which machine this is); {} where there is none."""
    folder = baselines_root / dep.name / "calibration"
    for path in sorted(folder.glob("*.json")):
        try:
            cal = load_calibration(path)
        except BaselineError:
            continue
        out = {config: speed for config in dep.configs if (speed := _decode_speed(cal, config)) is not None}
        if out:
            return out
    return {}


def _decode_speed(cal: Calibration, config: str) -> float | None:
    """`config`'s median decode tok/s over the calibration's boots; None where it has none."""
    medians = ((cal.document.get("configs") or {}).get(config) or {}).get("decode_tps", {}).get("boot_medians")
    return float(statistics.median(medians)) if medians else None
