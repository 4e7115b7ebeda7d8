"""The verdicts: speculation beats the plain baseline, and nothing regressed.

Both are decided on bootstrap intervals, measuring more while undecided; see
specgate/verdicts/gates.py for the rules. A gate that could not compare (NOT COMPARED)
or could not have failed (VACUOUS) is never a pass: it fails the run unless the user
allowed it (--specgate-allow-uncompared, or `[gates] uncompared = "warn"`), and then it
is skipped with the reason, loudly.
"""

import pytest

pytestmark = pytest.mark.specgate("gates")


def _explain(verdict):
    lines = [verdict.summary, *(f"  - {n}" for n in verdict.notes)]
    if verdict.noise:
        lines.append(f"  (interval covers: {verdict.noise})")
    return "\n".join(lines)


def _settle(specgate, verdict):
    if verdict.unjudged:
        what = f"{verdict.status.upper()}: {verdict.summary}"
        if specgate.uncompared_allowed:
            pytest.skip(what)
        pytest.fail(what + "\n(allow with --specgate-allow-uncompared or [gates] uncompared = \"warn\")", pytrace=False)
    assert not verdict.failed, _explain(verdict)


def test_speculation_beats_reference(specgate, beats_gate):
    _settle(specgate, specgate.judge.beats(beats_gate))


def test_accept_length_floor(specgate, accept_gate):
    _settle(specgate, specgate.judge.accept_floor(accept_gate))


def test_no_regression_against_stored_baseline(specgate, regression_target):
    config, concurrency, metric = regression_target
    _settle(specgate, specgate.judge.regression(config, concurrency, metric))
