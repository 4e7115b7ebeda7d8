"""Speculative greedy output is the plain greedy output, token for token.

Strict at every position where the baseline is decisive; at a near-tie (top-1/top-2
margin below the deployment's tie margin) the two may legitimately part ways, and
every such flip is listed in the report with its margin. Cases vary between commits
(seeded by the commit, the same on a rerun of one commit); a case that failed once is
kept in the replay file beside the baselines and tried first on every later run.
"""

import pytest
from hypothesis import example, given, seed, settings

from specgate.equivalence.cases import generation_cases
from specgate.errors import EquivalenceFailure, SpecgateError
from specgate.verdicts.stored_reference import StoredReferenceError

pytestmark = pytest.mark.specgate("equivalence")


class _ServerGone(BaseException):
    """Not an Exception, so Hypothesis stops at once: a case whose only fault is the server
    (dead, hung) must not be retried and shrunk, each try waiting out a timeout again."""


def _skip_unless_checkable(deployment):
    eq = deployment.equivalence
    if not eq.enabled:
        pytest.skip(f"greedy equivalence NOT CHECKED (the deployment says: {eq.skip_reason})")


def _not_checked(specgate, why):
    """Cases that could not be checked are never a pass: the test fails, or where the user allows
    uncompared gates, is skipped saying so (and the report says PARTIAL)."""
    what = f"greedy equivalence NOT CHECKED: {why}"
    if specgate.uncompared_allowed:
        pytest.skip(what)
    pytest.fail(what + "\n(allow with --specgate-allow-uncompared or [gates] uncompared = \"warn\")", pytrace=False)


def _not_checked_if_refused(specgate, config):
    """An edge request the reference answered and this config refused compared nothing."""
    stats = specgate.oracle.stats.get(config)
    if stats is not None and stats.refused:
        _not_checked(specgate, f"[{config}] {'; '.join(stats.refused)}")


@pytest.mark.specgate("golden")
def test_record_baseline_golden(specgate_deployment, specgate_oracle):
    """Where servers cannot coexist: record the baseline's answers (with top-2
    logprobs) for a fixed, Hypothesis-drawn list of cases before it is stopped. Invariants
    the baseline itself breaks are its server's behaviour: listed in the report, as when the
    servers run side by side, and held against a speculative answer only where it differs."""
    _skip_unless_checkable(specgate_deployment)
    recorded = specgate_oracle.record_golden()
    assert recorded > 0, "no cases were drawn"


def test_speculative_output_is_greedy_baseline(specgate, spec_config):
    _skip_unless_checkable(specgate.deployment)
    oracle = specgate.oracle
    if oracle.live:
        # Both servers are up: a real property test, shrinking to the smallest failing case.
        server_errors = []

        def speculative_matches_baseline(case):
            try:
                oracle.assert_equivalent(spec_config, case)
            except EquivalenceFailure:
                raise  # the finding itself: Hypothesis shrinks it and reports the example
            except SpecgateError as exc:
                # A server error is the finding, not the example: never shrink or retry on it
                # (each try would wait out a dead or frozen server again).
                server_errors.append(exc)
                raise _ServerGone() from exc

        test = given(case=generation_cases(specgate.deployment))(speculative_matches_baseline)
        for case in reversed(oracle.explicit_cases()):
            test = example(case=case)(test)
        # The rest from the deployment's profile; the seed, not derandomize, picks the cases.
        test = settings(max_examples=specgate.options.examples, derandomize=False)(test)
        test = seed(oracle.seed)(test)
        try:
            test()
        except BaseException:
            if server_errors:
                # A wrong answer found before the server failed is the verdict's headline (the
                # failure may have followed from it: a second request about the parting, say).
                found = oracle.stats.get(spec_config)
                if found is not None and found.failure_details:
                    raise EquivalenceFailure(
                        f"[{spec_config}] {found.failure_details[0]}\n(afterwards the server failed: "
                        f"{(str(server_errors[0]).splitlines() or [type(server_errors[0]).__name__])[0]})"
                    ) from None
                raise server_errors[0] from None
            raise
        _not_checked_if_refused(specgate, spec_config)
    else:
        # The baseline ran earlier and left its answers, or (the reference taken from the stored
        # baseline) they were stored with it: check every case that has one.
        try:
            cases, unanswered = oracle.cases_with_answers(spec_config)
        except StoredReferenceError as exc:
            cases, unanswered, unusable = [], [], str(exc)
        else:
            unusable = None
        if unusable is not None:
            _not_checked(specgate, unusable)  # outside the except: the reason alone, not a chained traceback
        failures = [
            outcome.message
            for case in cases
            for outcome in oracle.check_and_remember(spec_config, case)
            if not outcome.ok
        ]
        assert not failures, f"[{spec_config}] {len(failures)} decisive failure(s); first:\n{failures[0]}"
        _not_checked_if_refused(specgate, spec_config)
        if unanswered:
            labels = "; ".join(c.label for c in unanswered[:5])
            _not_checked(
                specgate,
                f"[{spec_config}] {len(unanswered)} case(s) have no stored answer of the reference (they failed "
                f"since the baseline was recorded; a baseline update stores their answers): {labels}",
            )
