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
    from specgate.verdicts.judge import Judge, other_machine

    a, b, c = "GPU-97a52846-7ef4", "GPU-163babb0-01bc", "GPU-2f0c9d11-aaaa"
    assert other_machine(a, b) is not None and f"({a} then; {b} now;" in other_machine(a, b)  # type: ignore[operator]
    assert other_machine(f"{a},{c}", f"{c},{a}") is None  # the same GPUs, listed in another order
    assert f"({a} then; {b} now;" in (other_machine(f"{c},{a}", f"{c},{b}") or "")  # names the one that differs
    assert other_machine(a, "machine-id:34e37c21e9a2c7bc") is None  # NVML failed once: ids of two kinds
    assert other_machine("", b) is None and other_machine(a, "unknown") is None  # older baselines name none

    monkeypatch.setattr(specgate.provenance, "host_id", lambda: b)
    stored = SimpleNamespace(provenance={"host_id": a})

    def judge(simulator: bool = False, launcher: str = "local") -> Judge:
        return Judge(SimpleNamespace(simulator=simulator, launch=SimpleNamespace(launcher=launcher)), None, Path("."))  # type: ignore[arg-type]

    assert judge()._machine_note(stored) == other_machine(a, b)  # type: ignore[arg-type]
    assert judge(simulator=True)._machine_note(stored) is None  # type: ignore[arg-type]
    # servers elsewhere: this host's id says nothing of theirs
    assert judge(launcher="url")._machine_note(stored) is None  # type: ignore[arg-type]
    assert judge(launcher="ssh")._machine_note(stored) is None  # type: ignore[arg-type]


def _edited(path: Path, change) -> None:
    stored = json.loads(path.read_text())
    change(stored["configs"]["baseline"]["concurrency"]["1"])
    path.write_text(json.dumps(stored, indent=2))


def test_raw_samples_edited_by_hand_are_refused_naming_the_file_and_field(tmp_path):
    """Halved samples, the summary left alone: every gate compares with the samples, so the edit
    hid a 2x slowdown. The digest recorded beside them (format /3) finds it on reading."""
    path = write_baseline("dep", FP, doc(), tmp_path)
    assert json.loads(path.read_text())["configs"]["baseline"]["concurrency"]["1"]["samples_sha256"]
    _edited(path, lambda fig: fig["samples"].update(decode_tps=[50.0, 50.0]))
    with pytest.raises(BaselineError) as err:
        load_baseline(path)
    message = str(err.value)
    assert str(path) in message and "field 'configs.baseline.concurrency.1.samples': not the samples that were recorded" in message


def test_a_digest_is_required_in_format_3_and_checked_in_any_format(tmp_path):
    path = write_baseline("dep", FP, doc(), tmp_path)
    _edited(path, lambda fig: fig.pop("samples_sha256"))
    with pytest.raises(BaselineError, match=r"field 'configs\.baseline\.concurrency\.1\.samples_sha256': expected the sha256"):
        load_baseline(path)
    path = write_baseline("dep", OTHER, doc(), tmp_path)
    stored = json.loads(path.read_text())
    stored["format"] = "specgate-baseline/2"  # an older format named, the digest kept: still checked
    stored["configs"]["baseline"]["concurrency"]["1"]["samples"]["decode_tps"] = [50.0, 50.0]
    path.write_text(json.dumps(stored))
    with pytest.raises(BaselineError, match=r"concurrency\.1\.samples': not the samples that were recorded"):
        load_baseline(path)


def test_the_digest_does_not_change_with_the_files_spelling(tmp_path):
    """Reindented, keys reordered, a float written as an integer: the same samples, the same digest."""
    path = write_baseline("dep", FP, doc(tps=100.0), tmp_path)
    stored = json.loads(path.read_text())
    fig = stored["configs"]["baseline"]["concurrency"]["1"]
    fig["samples"] = dict(reversed(list(fig["samples"].items())))
    path.write_text(json.dumps(stored, indent=7).replace("100.0", "100"))
    assert load_baseline(path).figures[("baseline", 1)].decode_tps_samples == (100.0, 100.0)
