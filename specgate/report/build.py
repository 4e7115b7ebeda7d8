"""Gather one run's measurements and verdicts into a single JSON-ready document.

The Markdown summary and the chart are both rendered from this document, so what a
human reads and what a machine reads cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specgate.deployment import Deployment
from specgate.equivalence.check import EquivalenceStats
from specgate.measure.speed import SpeedMeter
from specgate.measure.summary import summarise_speed
from specgate.server.pool import BootRecord
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.gates import FAIL, INCONCLUSIVE, SKIP, Verdict


@dataclass
class TestTally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0


def _speed_rows(deployment: Deployment, meter: SpeedMeter, verdicts: list[Verdict]) -> list[dict]:
    conf = deployment.gates.confidence
    rows = []
    order = list(deployment.configs)
    for (config, concurrency), record in sorted(
        meter.results.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0]))
    ):
        if not record.samples:
            continue
        summary = summarise_speed(record, meter.results.get((deployment.reference, concurrency)), conf)
        warm = record.warmups[-1] if record.warmups else None
        gate_states = [v.status for v in verdicts if v.config == config and v.status != SKIP]
        rows.append(
            {
                "config": config,
                "concurrency": concurrency,
                "speculative": record.speculative,
                "n": len(record.samples),
                "decode_tps": summary.decode_tps.as_dict(),
                "ratio_to_reference": summary.ratio_to_reference.as_dict() if summary.ratio_to_reference else None,
                "accept_length": summary.accept_length.as_dict() if summary.accept_length else None,
                "ttft_ms": summary.ttft_s.scaled(1000).as_dict(),
                "warmup_requests": warm.requests if warm else 0,
                "warmup_settled": warm.settled if warm else None,
                # Calibration: how far the first cold figure was from the settled ones, and the
                # spread of the measured requests (what a tolerance has to live with).
                "warmup_first_tps": round(warm.decode_tps[0], 2) if warm and warm.decode_tps else None,
                "warmup_last_tps": round(warm.decode_tps[-1], 2) if warm and warm.decode_tps else None,
                "cv": round(_cv(record.decode_tps), 4),
                "verdict": "FAIL"
                if any(s in (FAIL, INCONCLUSIVE) for s in gate_states)
                else ("pass" if gate_states else "—"),
            }
        )
    return rows


def _cv(values: list[float]) -> float:
    """Coefficient of variation of one config's per-request figures."""
    return float(np.std(values, ddof=1) / np.mean(values)) if len(values) > 1 and np.mean(values) else 0.0


def _equivalence_rows(stats: dict[str, EquivalenceStats]) -> list[dict]:
    return [
        {
            "config": config,
            "cases": s.cases,
            "requests": s.requests,
            "exact_matches": s.matches,
            "near_tie_flips": len(s.flips),
            "decisive_failures": len(s.failures),
            "tolerated": s.tolerated[:20],
            "tokens_compared": s.tokens_compared,
            "flips": [
                {
                    "prompt": f.case_label,
                    "position": f.position,
                    "baseline_token": f.baseline_token,
                    "spec_token": f.spec_token,
                    "margin": round(f.margin, 5),
                }
                for f in s.flips
            ],
            "failures": s.failures[:20],
            "divergence_margins": sorted(round(m, 5) for m in s.divergence_margins),
        }
        for config, s in stats.items()
    ]


def build_report(
    deployment: Deployment,
    meter: SpeedMeter,
    verdicts: list[Verdict],
    equivalence: dict[str, EquivalenceStats],
    boots: list[BootRecord],
    fingerprint: Fingerprint | None,
    provenance: dict,
    tally: TestTally,
    phase_seconds: dict[str, float],
    server_infos: dict[str, dict],
    baseline_problems: list[str],
    margins: dict | None = None,
    fidelity: list[dict] | None = None,
    diagnoses: list[dict] | None = None,
) -> dict:
    failed_gates = [v for v in verdicts if v.failed]
    overall = "FAIL" if (tally.failed or tally.errors or failed_gates) else "PASS"
    return {
        "deployment": deployment.name,
        "deployment_file": str(deployment.path),
        "description": deployment.description,
        "simulator": deployment.simulator,
        "overall": overall,
        "tests": tally.__dict__,
        "fingerprint": fingerprint.as_dict() if fingerprint else None,
        "provenance": provenance,
        "tie_margin": deployment.equivalence.tie_margin,
        "speed": _speed_rows(deployment, meter, verdicts),
        "gates": [
            {
                "gate": v.gate,
                "config": v.config,
                "status": v.status,
                "summary": v.summary,
                "notes": v.notes,
                "figures": v.figures,
            }
            for v in verdicts
        ],
        "equivalence": _equivalence_rows(equivalence),
        "equivalence_not_checked": None if deployment.equivalence.enabled else deployment.equivalence.skip_reason,
        "baseline_problems": baseline_problems,
        "baseline_margins": margins,
        "boots": [{"config": b.config, "seconds": round(b.seconds, 2), "ok": b.ok, "note": b.note} for b in boots],
        "phase_seconds": {k: round(v, 2) for k, v in phase_seconds.items()},
        "fidelity": fidelity or [],
        "diagnosis": diagnoses or [],
        "server_settings": {
            name: {k: info.get(k) for k in SETTINGS_SHOWN if k in info} for name, info in server_infos.items()
        },
    }


# The server settings worth showing next to a figure: what actually ran, per SGLang itself.
SETTINGS_SHOWN = (
    "version",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_attention_mode",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "disable_cuda_graph",
    "cuda_graph_max_bs",
    "disable_overlap_schedule",
    "tp_size",
)
