"""The verdicts: one test per gate kind (specgate.gate_kinds), parametrized by the gates the
deployment asks of it (the plugin's `planned_gate`): speculation beats the plain reference, the
accept length holds its floor, nothing regressed against the stored baseline, and any kind added.

Each is decided on bootstrap intervals, measuring more while undecided; see
specgate/verdicts/gates.py for the rules. A gate that could not compare (NOT COMPARED)
or could not have failed (VACUOUS) is never a pass: it fails the run unless the user
allowed it (--specgate-allow-uncompared, or `[gates] uncompared = "warn"`), and then it
is skipped with the reason, loudly.
"""

import pytest

from specgate.gate_kinds import kinds

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


def _gate_test(kind):
    def test(specgate, planned_gate, request):
        # A context bucket's gate is decided by that bucket's judge (gate_kinds.run_gates).
        _settle(specgate, specgate.judge_for(planned_gate.context).decide(planned_gate, test=request.node.name))

    test.__name__ = test.__qualname__ = kind.test
    test.__doc__ = type(kind).__doc__
    return test


# The kind's test name is its own (users select gates with `-k`): one module-level test per kind.
for _kind in kinds():
    globals()[_kind.test] = _gate_test(_kind)
