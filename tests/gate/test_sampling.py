"""At temperature > 0, speculative samples follow the reference's distribution.

Speculative sampling (rejection sampling of the drafts) is exact in theory: under the same
sampling parameters its outputs must be distributed as the target's own. For every setting the
deployment lists (`[sampling]`), many continuations per prompt are sampled from the config and
from its reference, scored on the reference, and compared: their likelihood under the target (a
rank test), per-position token frequencies, and tokens that break the setting outright (none
may). Greedy equivalence cannot see a verify that takes the argmax at temperature > 0 or drops a
filter on accepted drafts; this can. See specgate/sampling/check.py.
"""

import pytest

from specgate.sampling.check import failure_sentence
from specgate.verdicts.gates import VACUOUS, Verdict
from specgate.verdicts.vacuity import judge_sampling_row

pytestmark = pytest.mark.specgate("sampling")


def test_speculative_sampling_matches_reference(specgate, spec_config, request):
    why = specgate.sampling_not_checkable
    if why is not None:
        specgate.sampling.not_checked[spec_config] = why
        pytest.skip(f"sampling equivalence NOT CHECKED: {why}")
    dep = specgate.deployment
    # Side by side, or where the servers take turns, drawn while each is up and scored on the reference.
    row = specgate.sampling_row(spec_config)
    # A check that could detect no shift a sampler fault makes is VACUOUS, as a gate that cannot fail
    # is (verdicts.vacuity): never a pass; it fails the run unless allowed, and then it is skipped.
    vacuous = judge_sampling_row(dep.sampling, row)
    failed = [s for s in row["settings"] if s["status"] == "FAIL"]
    if vacuous is not None and not failed:
        verdict = Verdict(f"sampling:{spec_config}", spec_config, VACUOUS, vacuous.summary(dep), test=request.node.name)
        specgate.judge.record(verdict)
        what = f"{VACUOUS.upper()}: {verdict.summary}"
        if specgate.uncompared_allowed:
            pytest.skip(what)
        pytest.fail(what + "\n(allow with --specgate-allow-uncompared or [gates] uncompared = \"warn\")", pytrace=False)
    lines = [
        f"[{spec_config}] {s['setting']} ({s['described']}), prompt {s['prompt']}, seed {s['seed']}: "
        + " | ".join(s["evidence"])
        + (f"\n  reproduce: {s['reproducer']}" if s["reproducer"] else "")
        for s in failed
    ]
    # The first line is what the report's "Why FAIL" keeps: a whole sentence; the detail follows.
    assert not failed, failure_sentence(row) + "\n" + "\n".join(lines)
