"""A stop signal during a Hypothesis test ends the run INTERRUPTED (issue 33, item 10). Hypothesis
collected the KeyboardInterrupt of one explicit example into "found 2 distinct failures", and a
signal landing inside a lock's release became a RuntimeError it reported (or, passing on the
retry, called Flaky): the test ended FAILED and the report blamed the equivalence test. The
plugin's pytest_pyfunc_call turns whatever a test raises after the signal into the interruption."""

from __future__ import annotations

import pytest

PREAMBLE = """
import os, signal
import pytest
from hypothesis import example, given, settings, strategies as st
from specgate import interrupts

@pytest.fixture(autouse=True)
def handled():
    interrupts.install()
    yield
    interrupts.uninstall()

def signal_lands_in_a_lock():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
    except KeyboardInterrupt:
        raise RuntimeError("release unlocked lock") from None  # as threading's Condition.wait did
"""

EXPLICIT = """
@settings(database=None)
@example(n=1)  # the first one run (the outermost)
@example(n=2)
@given(st.integers())
def test_equivalence(n):
    if n == 1:
        signal_lands_in_a_lock()
    raise KeyboardInterrupt("specgate: not booting 'eagle3-decode': a signal stopped the run")
"""

FLAKY = """
calls = []

@settings(database=None, derandomize=True)
@given(st.integers())
def test_equivalence(n):
    calls.append(n)
    if len(calls) == 1:
        signal_lands_in_a_lock()
"""


@pytest.mark.parametrize("body", [EXPLICIT, FLAKY], ids=["explicit-examples-group", "flaky"])
def test_a_signal_during_a_hypothesis_test_ends_the_run_interrupted(pytester, body):
    from specgate import interrupts

    pytester.makepyfile(test_signalled=PREAMBLE + body)
    try:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", no_reraise_ctrlc=True)
    finally:
        if interrupts._installed:  # the run's fixture gives the handlers back; never leave ours here
            interrupts.uninstall()
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "KeyboardInterrupt: specgate: stopped by SIGINT" in out, out[-3000:]
    assert "Hypothesis found" not in out and "Flaky" not in out and "1 failed" not in out


def test_a_failure_without_a_signal_stays_a_failure(pytester):
    pytester.makepyfile(test_plain="def test_fails():\n    raise RuntimeError('a real failure')\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 failed*"])
