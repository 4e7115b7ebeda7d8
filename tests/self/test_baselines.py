"""Stored baselines: round trip, atomic writes, corrupt files refused, fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specgate.errors import BaselineError
from specgate.verdicts.baselines import FORMAT, find_baselines, load_baseline, write_baseline
from specgate.verdicts.fingerprint import Fingerprint

FP = Fingerprint("NVIDIA H200", 1, "570.1", "13.0", "0.5.11", "SmolLM2-135M")
OTHER = Fingerprint("NVIDIA H100", 1, "570.1", "13.0", "0.5.11", "SmolLM2-135M")


def doc(tps=100.0):
    iv = {"estimate": tps, "low": tps - 1, "high": tps + 1, "confidence": 0.95}
    return {
        "provenance": {"date": "2026-11-29T00:00:00+00:00", "commit": "abc"},
        "configs": {
            "baseline": {
                "args_digest": "d1",
                "concurrency": {
                    "1": {
                        "n": 2,
                        "decode_tps": iv,
                        "accept_length": None,
                        "samples": {"decode_tps": [tps, tps], "completion_tokens": [64, 64], "verify_ct": [None, None]},
                    }
                },
            }
        },
    }


def test_round_trip_and_no_temp_files_left(tmp_path):
    path = write_baseline("dep", FP, doc(), tmp_path)
    assert path.name == f"{FP.slug}.json" and path.name.startswith("nvidia-h200-x1-sglang-0.5.11-")
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    stored = load_baseline(path)
    assert stored.fingerprint == FP
    assert stored.figures[("baseline", 1)].decode_tps_median == 100.0
    assert json.loads(path.read_text())["format"] == FORMAT


def test_lookup_separates_exact_from_other_machines(tmp_path):
    write_baseline("dep", OTHER, doc(80), tmp_path)
    found = find_baselines("dep", FP, tmp_path)
    assert found.exact is None and found.others[0].fingerprint == OTHER
    assert FP.differences(OTHER) == ["gpu: stored 'NVIDIA H100', now 'NVIDIA H200'"]
    write_baseline("dep", FP, doc(), tmp_path)
    assert find_baselines("dep", FP, tmp_path).exact is not None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "corrupt: not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"format": "other/9"}', "field 'format'"),
        (json.dumps({"format": FORMAT, "fingerprint": {"gpu": "x"}}), "field 'fingerprint'"),
        (
            json.dumps({"format": FORMAT, "fingerprint": FP.as_dict(), "configs": {"b": {"concurrency": {"1": {}}}}}),
            "field 'configs.b.",
        ),
    ],
)
def test_corrupt_file_is_an_error_naming_it_and_is_never_overwritten(tmp_path, content, expected):
    path = tmp_path / "dep" / f"{FP.slug}.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(BaselineError) as err:
        find_baselines("dep", FP, tmp_path)
    assert str(path) in str(err.value) and expected in str(err.value)
    with pytest.raises(BaselineError):
        write_baseline("dep", FP, doc(), tmp_path)
    assert path.read_text() == content


def test_a_speed_verdict_against_a_baseline_of_another_machine_says_so(monkeypatch):
    from types import SimpleNamespace

    import specgate.provenance
    from specgate.verdicts.judge import Judge

    monkeypatch.setattr(specgate.provenance, "host_id", lambda: "GPU-163babb0-01bc-e354-5730-d45a11677370")
    stored = SimpleNamespace(provenance={"host_id": "GPU-97a52846-7ef4-bd76-8eb5-a25ee95c91b2"})
    real = Judge(SimpleNamespace(simulator=False), None, Path("."))  # type: ignore[arg-type]
    note = real._machine_note(stored)  # type: ignore[arg-type]
    assert note is not None and "GPU-97a52846-7ef4… then, GPU-163babb0-01bc… now" in note
    assert real._machine_note(SimpleNamespace(provenance={"host_id": "GPU-163babb0-01bc-e354-5730-d45a11677370"})) is None  # type: ignore[arg-type]
    assert real._machine_note(SimpleNamespace(provenance={})) is None  # type: ignore[arg-type]  # older baselines name none
    sim = Judge(SimpleNamespace(simulator=True), None, Path("."))  # type: ignore[arg-type]
    assert sim._machine_note(stored) is None  # type: ignore[arg-type]
