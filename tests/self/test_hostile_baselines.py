"""Hostile stored baselines (issue 11: items 7, 11): a file whose figures cannot be a run's
is refused with the field named (the file is blamed, not the machine), and writing one
leaves no temp file behind and gives it an ordinary file mode."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import stat

import pytest

from specgate.errors import BaselineError
from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.verdicts.baselines import load_baseline, write_baseline
from specgate.verdicts.calibration import load_calibration
from specgate.verdicts.fingerprint import Fingerprint

SIM_BASELINE = next((REPO_ROOT / "baselines" / "sim").glob("*.json"))
AT = "configs.eagle3-decode.concurrency.1"


def fig(doc):
    return doc["configs"]["eagle3-decode"]["concurrency"]["1"]


def setter(path, value):
    def apply(doc):
        *head, last = path
        target = fig(doc)
        for key in head:
            target = target[key]
        target[last] = value

    return apply


HOSTILE = [
    ("completion-tokens-as-string", setter(("samples", "completion_tokens"), "64"), f"{AT}.samples.completion_tokens"),
    (
        "completion-token-as-string",
        setter(("samples", "completion_tokens", 0), "64"),
        f"{AT}.samples.completion_tokens[0]",
    ),
    ("zero-tokens", setter(("samples", "completion_tokens", 3), 0), f"{AT}.samples.completion_tokens[3]"),
    ("nan-sample", setter(("samples", "decode_tps", 2), math.nan), f"{AT}.samples.decode_tps[2]"),
    ("zero-sample", setter(("samples", "decode_tps", 2), 0), f"{AT}.samples.decode_tps[2]"),
    ("absurd-sample", setter(("samples", "decode_tps", 2), 1e30), f"{AT}.samples.decode_tps[2]"),
    ("empty-samples", setter(("samples", "decode_tps"), []), f"{AT}.samples.decode_tps"),
    ("n-zero", setter(("n",), 0), f"{AT}.n"),
    ("n-disagrees", setter(("n",), 31), f"{AT}.samples.decode_tps"),
    ("nan-estimate", setter(("decode_tps", "estimate"), math.nan), f"{AT}.decode_tps.estimate"),
    ("negative-estimate", setter(("decode_tps", "low"), -5.0), f"{AT}.decode_tps.low"),
    ("accept-below-one", setter(("accept_length", "estimate"), 0.2), f"{AT}.accept_length.estimate"),
    ("more-verifies-than-tokens", setter(("samples", "verify_ct", 0), 10_000), f"{AT}.samples.verify_ct[0]"),
    ("verify-as-bool", setter(("samples", "verify_ct", 0), True), f"{AT}.samples.verify_ct[0]"),
]


@pytest.mark.parametrize(("mutate", "field"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_baseline_with_impossible_figures_is_refused_naming_the_field(tmp_path, mutate, field):
    doc = json.loads(SIM_BASELINE.read_text())
    mutate(doc)
    path = tmp_path / SIM_BASELINE.name
    path.write_text(json.dumps(doc))  # NaN is written as JSON's NaN, as a hand edit or a bug would
    with pytest.raises(BaselineError) as err:
        load_baseline(path)
    message = str(err.value)
    assert str(path) in message and f"field '{field}'" in message and "the file is wrong" in message


def test_the_stored_baselines_and_calibrations_are_all_valid():
    for path in (REPO_ROOT / "baselines").glob("*/*.json"):
        assert load_baseline(path).figures
    for path in (REPO_ROOT / "baselines").glob("*/calibration/*.json"):
        assert load_calibration(path).spread


FP = Fingerprint("none (simulator)", 0, "none", "none", "0.1.0", "toy")


def document():
    doc = copy.deepcopy(json.loads(SIM_BASELINE.read_text()))
    for key in ("format", "deployment", "fingerprint"):
        doc.pop(key)
    return doc


def test_a_write_leaves_no_temp_file_and_a_shareable_mode(tmp_path):
    folder = tmp_path / "sim"
    folder.mkdir()
    leftover = folder / f".{FP.slug}.abc123.tmp"  # what a write killed before its rename leaves
    leftover.write_text("{partial")
    old = os.umask(0o022)
    try:
        path = write_baseline("sim", FP, document(), tmp_path)
    finally:
        os.umask(old)
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert load_baseline(path).figures


def test_temp_files_are_ignored_by_git():
    assert "baselines/**/.*.tmp" in (REPO_ROOT / ".gitignore").read_text().splitlines()


def test_the_writer_refuses_what_the_reader_would_and_writes_nothing(tmp_path):
    """One model reads and writes a baseline: a run whose document is malformed (a bug in what
    built it) fails at the write, naming the field, instead of storing a file the next run refuses."""
    bad = document()
    bad["configs"]["eagle3-decode"]["concurrency"]["1"]["samples"]["completion_tokens"][0] = 0
    with pytest.raises(BaselineError, match=rf"not written: .*field '{AT}\.samples\.completion_tokens\[0\]'"):
        write_baseline("sim", FP, bad, tmp_path)
    short = document()
    short["configs"]["eagle3-decode"]["concurrency"]["1"]["samples"]["decode_tps"].pop()
    with pytest.raises(
        BaselineError, match=rf"not written: .*field '{AT}\.samples\.decode_tps': expected \d+ per-request"
    ):
        write_baseline("sim", FP, short, tmp_path)
    assert not (tmp_path / "sim").exists() or not any((tmp_path / "sim").iterdir())


def test_a_drafter_that_accepted_nothing_is_a_storable_baseline(tmp_path):
    """One token per verify step is what a drafter with random weights measures: a figure, not a
    broken file (the reader once demanded more than 1)."""
    doc = document()
    doc["configs"]["eagle3-decode"]["concurrency"]["1"]["accept_length"].update(estimate=1.0, low=1.0, high=1.0)
    path = write_baseline("sim", FP, doc, tmp_path)
    assert load_baseline(path).figures[("eagle3-decode", 1)].accept_length == 1.0


def test_a_document_is_checked_as_the_file_will_hold_it(tmp_path):
    """The write-time check reads the JSON that will be stored: tuples (JSON has none) are lists
    there, and a value JSON cannot hold is a BaselineError naming the file, not a TypeError."""
    doc = document()
    samples = doc["configs"]["eagle3-decode"]["concurrency"]["1"]["samples"]
    samples["decode_tps"] = tuple(samples["decode_tps"])
    assert load_baseline(write_baseline("sim", FP, doc, tmp_path)).figures
    doc["configs"]["eagle3-decode"]["boot_seconds"] = object()
    with pytest.raises(BaselineError, match="not written: the document this run built is not JSON"):
        write_baseline("sim", FP, doc, tmp_path / "other")


def test_identity_fields_read_as_before(tmp_path):
    """Blank-looking strings (Python's whitespace, control separators included) are no release,
    and an infinite GPU count is a broken fingerprint, not an OverflowError."""
    doc = json.loads(SIM_BASELINE.read_text())
    doc["configs"]["eagle3-decode"]["server_version"] = " \x1c "
    path = tmp_path / SIM_BASELINE.name
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match=r"field 'configs\.eagle3-decode\.server_version': expected the release"):
        load_baseline(path)
    doc = json.loads(SIM_BASELINE.read_text())
    doc["fingerprint"]["gpu_count"] = math.inf
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match="field 'fingerprint'"):
        load_baseline(path)


def _stored_copy(root):
    """A copy of the simulator's stored documents (baseline, replay file) under `root`/sim, with the
    committed calibration record of another deployment beside them."""
    import shutil

    shutil.copytree(REPO_ROOT / "baselines" / "sim", root / "sim")
    record = next((REPO_ROOT / "baselines").glob("*/calibration/*.json"))
    (root / "sim" / "calibration").mkdir()
    shutil.copy(record, root / "sim" / "calibration" / record.name)
    return root / "sim"


def _edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


SAMPLING_REPLAY_BROKEN = json.dumps({"deployment": "sim", "cases": [
    {"config": "eagle3-decode", "setting": 3, "params": {"temperature": 0.7}, "prompt": "p", "text": "t", "seed": 1,
     "first_failed": "2026-12-01T00:00:00+00:00", "why": "w"}]})  # fmt: skip

BROKEN_STORED = [
    ("baseline", lambda f: _edit(next(f.glob("*.json")), setter(("n",), 0)), f"field '{AT}.n'"),
    (
        "calibration",
        lambda f: _edit(next((f / "calibration").glob("*.json")), lambda d: d.update(boots="three")),
        "field 'boots'",
    ),
    (
        "replay",
        lambda f: _edit(f / "equivalence" / "replay.json", lambda d: d["cases"][0]["case"].update(stop=".")),
        "field 'cases[0].case.stop'",
    ),
    # The sampling test's failed cases: a broken file was said usable by check and failed the run late.
    (
        "sampling-replay",
        lambda f: (f / "equivalence" / "sampling-replay.json").write_text(SAMPLING_REPLAY_BROKEN),
        "sampling replay file malformed: field 'cases[0].setting': expected a string",
    ),
    # A baseline of another deployment under this one's folder (moved, or edited) was compared in silence.
    (
        "baseline-of-another-deployment",
        lambda f: _edit(next(f.glob("*.json")), lambda d: d.update(deployment="other")),
        "field 'deployment': expected 'sim' (the deployment whose folder holds it), got 'other'",
    ),
    # The runner history (calibrate and passing runs append to it): broken, it failed every gate
    # test as a FAIL of the change, and calibrate with a traceback after writing its record.
    (
        "runner-history",
        lambda f: (f / "history").mkdir() or (f / "history" / "machine.json").write_text("[1,2"),
        "runner history cannot be read",
    ),
    (
        "baseline-deployment-with-a-nul",
        lambda f: _edit(next(f.glob("*.json")), lambda d: d.update(deployment="sim\x00")),
        "field 'deployment': expected 'sim' (the deployment whose folder holds it), got 'sim\\x00'",
    ),
]


@pytest.mark.parametrize(("broken", "field"), [b[1:] for b in BROKEN_STORED], ids=[b[0] for b in BROKEN_STORED])
def test_every_stored_document_is_read_before_anything_boots(tmp_path, broken, field):
    from specgate.verdicts.stored_files import check_stored_documents

    folder = _stored_copy(tmp_path)
    assert check_stored_documents(tmp_path, "sim") == 3
    broken(folder)
    with pytest.raises(BaselineError, match=re.escape(field)) as err:
        check_stored_documents(tmp_path, "sim")
    assert str(folder) in str(err.value)


def test_a_run_refuses_a_broken_stored_file_at_its_start_naming_file_and_field(sim_deployment, pytester):
    """Before: the replay file's error came as a stack from the first equivalence test, the
    baseline's and calibration's from the gates, after every server had booted and measured."""
    d = sim_deployment()
    folder = _stored_copy(d.baselines_dir)
    BROKEN_STORED[2][1](folder)
    result = d.run(pytester)
    assert result.ret == 4, result.stdout.str()[-2000:]  # pytest's usage error: `specgate run` exits 2 on it
    err = result.stderr.str()
    assert f"specgate: {folder / 'equivalence' / 'replay.json'}: equivalence replay file malformed: field" in err, err
    assert "Traceback" not in err + result.stdout.str()
    assert not (d.report_dir / "logs").exists()  # no server was started


@pytest.mark.parametrize("broken", [0, 3, 4], ids=["figure", "sampling-replay", "deployment"])
def test_check_refuses_what_the_run_would_refuse_at_its_start(tmp_path, capsys, broken):
    import dataclasses

    from specgate import cli, project

    folder = _stored_copy(tmp_path / "baselines")
    BROKEN_STORED[broken][1](folder)
    project.use(dataclasses.replace(project.current(), baselines_dir=tmp_path / "baselines"))
    try:
        code = cli.main(["check", "sim"])
    finally:
        project.use(None)
    err = capsys.readouterr().err
    assert code == 2 and BROKEN_STORED[broken][2] in err and str(folder) in err, err


def test_a_run_refuses_a_broken_sampling_replay_file_up_front_and_keeps_it_as_it_is(sim_deployment, pytester):
    d = sim_deployment()
    folder = _stored_copy(d.baselines_dir)
    BROKEN_STORED[3][1](folder)
    replay = folder / "equivalence" / "sampling-replay.json"
    result = d.run(pytester)
    assert result.ret == 4, result.stdout.str()[-2000:]  # pytest's usage error: `specgate run` exits 2 on it
    err = result.stderr.str()
    assert f"specgate: {replay}: sampling replay file malformed: field 'cases[0].setting'" in err, err
    assert not (d.report_dir / "logs").exists()  # no server was started
    assert replay.read_text() == SAMPLING_REPLAY_BROKEN  # nothing overwritten


CALIBRATION = next((REPO_ROOT / "baselines").glob("*/calibration/*.json"))
SPREAD = "configs.baseline.decode_tps"


def _figure(doc):
    return doc["configs"]["baseline"]["decode_tps"]


HOSTILE_CALIBRATIONS = [
    ("zero-spread", lambda f: f.update(between_boot_log_sd=0.0, between_boot_log_sd_upper=0.0), "spread above 0"),
    ("zero-upper-only", lambda f: f.update(between_boot_log_sd_upper=0.0), "spread above 0"),
    ("no-per-boot-figures", lambda f: f.pop("boot_medians"), "not estimable from this record"),
    ("one-boot", lambda f: f.update(boot_medians=f["boot_medians"][:1]), "at least 2 boots"),
    ("understated", lambda f: f.update(between_boot_log_sd_upper=f["between_boot_log_sd_upper"] / 4), "states"),
    ("medians-moved", lambda f: f.update(boot_medians=[f["boot_medians"][0]] * len(f["boot_medians"])), "states"),
]


@pytest.mark.parametrize(
    ("edit", "expected"), [h[1:] for h in HOSTILE_CALIBRATIONS], ids=[h[0] for h in HOSTILE_CALIBRATIONS]
)
def test_a_calibration_whose_spread_is_zero_or_not_its_rounds_is_refused(tmp_path, edit, expected):
    """A hand-written spread of 0 once passed and took the between-boot warning out of every gate."""
    doc = json.loads(CALIBRATION.read_text())
    edit(_figure(doc))
    path = tmp_path / CALIBRATION.name
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match=f"field '{re.escape(SPREAD)}.*{expected}") as err:
        load_calibration(path)
    assert str(path) in str(err.value)


def test_a_calibration_with_a_zero_spread_is_never_written(tmp_path):
    from specgate.verdicts.calibration import write_calibration

    doc = json.loads(CALIBRATION.read_text())
    fingerprint = Fingerprint.from_dict(doc.pop("fingerprint"))
    for key in ("format", "deployment"):
        doc.pop(key)
    _figure(doc).update(between_boot_log_sd=0.0, between_boot_log_sd_upper=0.0, boot_medians=[100.0, 100.0])
    with pytest.raises(BaselineError, match="calibration NOT written: .*spread above 0"):
        write_calibration(tmp_path, "sim", fingerprint, doc)
    assert not list(tmp_path.rglob("*.json"))
