"""The verdicts: speculation beats the plain baseline, and nothing regressed.

Both are decided on bootstrap intervals, measuring more while undecided; see
specgate/verdicts/gates.py for the rules.
"""

import pytest

from specgate.verdicts.gates import SKIP

pytestmark = pytest.mark.specgate("gates")


def _explain(verdict):
    return "\n".join([verdict.summary, *(f"  - {n}" for n in verdict.notes)])


def test_speculation_beats_reference(specgate, beats_gate):
    verdict = specgate.judge.beats(beats_gate)
    assert not verdict.failed, _explain(verdict)


def test_no_regression_against_stored_baseline(specgate, regression_target):
    config, concurrency, metric = regression_target
    verdict = specgate.judge.regression(config, concurrency, metric)
    if verdict.status == SKIP:
        pytest.skip(verdict.summary)
    assert not verdict.failed, _explain(verdict)
