"""Verdicts that can be trusted: intervals that say which noise they hold, gates that fail
closed, an equivalence check that cannot pass on nothing, a report that never says PASS
for a run that did not judge everything, and a sampling plan that interleaves."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import sim_deployment_dict

from specgate.calibrate.analyse import _gate_model, _noise
from specgate.client import FinishReason, GenerateRequest, GenerateResult
from specgate.deployment import parse_deployment
from specgate.equivalence.cases import GenerationCase
from specgate.equivalence.check import compare
from specgate.errors import DeploymentError
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.measure.stats import Interval, median_interval, two_level_median, widened
from specgate.report.build import TestTally as Tally  # noqa: I001
from specgate.report.build import overall_verdict
from specgate.verdicts.gates import FAIL, NOT_COMPARED, PASS, VACUOUS, Verdict
from specgate.verdicts.noise import BootSpread, detection, ratio_interval
from specgate.verdicts.regression_gate import _plain_explains


# --- intervals and the noise they hold ---------------------------------------------------
def test_two_level_interval_holds_the_spread_between_boots():
    rng = np.random.default_rng(3)
    boots = [list(1.0 + shift + 0.005 * rng.standard_normal(12)) for shift in (-0.06, 0.0, 0.06)]
    pooled = median_interval([x for b in boots for x in b], 0.95)
    nested = two_level_median(boots, 0.95)
    assert nested.high - nested.low > 2 * (pooled.high - pooled.low)
    one = two_level_median(boots[:1], 0.95)
    assert one == median_interval(boots[0], 0.95)  # one boot: the ordinary bootstrap


def test_widening_adds_the_missing_noise_in_quadrature():
    iv = Interval(1.0, 0.98, 1.02, 0.95)
    wide = widened(iv, 0.05)
    half = math.log(1 / wide.low)
    assert half == pytest.approx(math.hypot(math.log(1 / 0.98), 1.959964 * 0.05), rel=1e-3)
    assert widened(iv, 0.0) == iv


def test_every_interval_says_which_noise_it_holds():
    series = {1: [1.2, 1.21, 1.19, 1.2, 1.22]}
    _, bare = ratio_interval(series, 0.95, None, boots_other=1)
    assert "requests within one boot" in bare and "NOT the between-boot noise" in bare and "calibrate" in bare
    iv, told = ratio_interval(series, 0.95, BootSpread(0.05, "calibration x.json"), boots_other=1)
    assert "between-boot spread 5.0%" in told and "calibration x.json" in told
    assert iv.low < 1.1  # two boots of 5% each: far wider than the requests alone
    _, two = ratio_interval({1: series[1], 2: [1.1, 1.12, 1.11, 1.1, 1.09]}, 0.95, None)
    assert "2 boots (two-level bootstrap" in two


def test_detection_figures_grow_with_the_noise():
    narrow = detection(Interval(1.0, 0.99, 1.01, 0.95), 0.15)
    wide = detection(Interval(1.0, 0.85, 1.17, 0.95), 0.15)
    assert narrow[1] < 0.01 and wide[1] > 0.4  # an unchanged build fails a noisy gate often
    assert narrow[0] == pytest.approx(0.15, abs=0.01)


# --- calibration -------------------------------------------------------------------------
def test_calibration_splits_within_and_between_boot_noise():
    rng = np.random.default_rng(11)
    prompts = rng.normal(0, 0.1, 20)
    rounds = [{1: list(np.exp(rng.normal(0, 0.05) + prompts + rng.normal(0, 0.01, 20)))} for _ in range(12)]
    noise = _noise(rounds)
    assert noise.within_log_sd == pytest.approx(0.01, rel=0.3)
    assert 0.025 < noise.between_boot_log_sd < 0.08
    assert noise.between_boot_log_sd_upper > noise.between_boot_log_sd  # the gates get the cautious figure
    dep = parse_deployment(sim_deployment_dict(), __import__("pathlib").Path("sim.toml"))
    model = _gate_model(noise, 0.15, False, dep)
    # 15% is too tight for 5% per-boot offsets: an unchanged build fails or cannot tell too often
    assert model.false_alarm + model.inconclusive > 0.05 and model.suggested > 0.15


# --- fail closed: a config beating itself is refused (thresholds that cannot fail: test_vacuity) ---
@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ({"config": "eagle3-decode", "over": "eagle3-decode"}, "compared with itself cannot fail"),
    ],
)
def test_check_rejects_gates_that_cannot_fail(gate, message):
    data = sim_deployment_dict()
    data["gates"]["beats"] = [gate]
    with pytest.raises(DeploymentError, match=message):
        parse_deployment(data, __import__("pathlib").Path("x.toml"))


def test_declared_between_boot_spread_needs_its_source():
    data = sim_deployment_dict()
    data["gates"]["between_boot"] = {"decode_tps": 0.05, "speedup": 0.07, "source": " "}
    with pytest.raises(DeploymentError, match="between_boot.source"):
        parse_deployment(data, __import__("pathlib").Path("x.toml"))


# --- the report's overall verdict -----------------------------------------------------------
def _v(status):
    return Verdict("g", "c", status, "s")


@pytest.mark.parametrize(
    ("tally", "verdicts", "completeness", "overall"),
    [
        (Tally(5), [_v(PASS)], {"expected": {"gates": 1}, "ran": {"gates": 1}}, "PASS"),
        (Tally(5, failed=1), [_v(FAIL)], {}, "FAIL"),
        (Tally(1), [_v(PASS)], {"interrupted": True}, "INTERRUPTED"),
        (Tally(4), [], {}, "PARTIAL"),  # -k speed: no gate ran
        (Tally(4), [_v(PASS), _v(NOT_COMPARED)], {"uncompared_allowed": True}, "PARTIAL"),
        (Tally(4, failed=1), [_v(PASS), _v(VACUOUS)], {"uncompared_allowed": False}, "PARTIAL"),
        (Tally(4), [_v(PASS)], {"expected": {"gates": 3}, "ran": {"gates": 1}}, "PARTIAL"),
        (Tally(4), [_v(PASS)], {"equivalence_declared_off": True}, "PARTIAL"),
    ],
)
def test_overall_is_pass_only_when_everything_ran_compared_and_passed(tally, verdicts, completeness, overall):
    got, reasons = overall_verdict(tally, verdicts, completeness)
    assert got == overall
    assert (not reasons) == (overall == "PASS")


def test_the_plain_decoding_note_needs_plain_to_have_moved_alike():
    assert "follows plain decoding" in _plain_explains(1.40, 1.38, 0.15)
    own = _plain_explains(1.419, 1.004, 0.15)  # the case the issue reported
    assert "follows plain" not in own and "config's own" in own
    assert _plain_explains(1.05, 1.0, 0.15) is None


# --- equivalence cannot pass on nothing -----------------------------------------------------
CASE = GenerationCase("chat/0", "hi", 8, (), 1)


def _answer(ids, text="abc", completion=None):
    return GenerateResult(
        request=GenerateRequest(max_new_tokens=8, text="hi"),
        text=text,
        output_ids=tuple(ids),
        prompt_tokens=1,
        completion_tokens=len(ids) if completion is None else completion,
        finish_reason=FinishReason("length"),
        e2e_s=0.1,
        server_e2e_s=None,
    )


def test_an_answer_without_output_ids_fails_instead_of_matching():
    outcome = compare(CASE, _answer([1, 2, 3]), _answer([], completion=3), 0.05, "http://b", "http://s")
    assert not outcome.ok and "no output_ids" in outcome.message


def test_zero_tokens_compared_is_no_pass():
    outcome = compare(CASE, _answer([], text=""), _answer([], text=""), 0.05, "http://b", "http://s")
    assert not outcome.ok and "0 tokens compared" in outcome.message


def test_same_ids_with_other_text_fail():
    outcome = compare(CASE, _answer([1, 2], "ab"), _answer([1, 2], "aX"), 0.05, "http://b", "http://s")
    assert not outcome.ok and "text differs" in outcome.message


# --- interleaving -------------------------------------------------------------------------
class _FakeMeter:
    def __init__(self):
        self.records: dict[str, ConfigSpeed] = {}
        self.calls: list[str] = []

    def record(self, config, concurrency):
        return self.records.setdefault(config, ConfigSpeed(config, concurrency))

    context = 0  # the short workload (SpeedMeter.context: the bucket it measures)

    def prepare(self):  # the pinned requests: the plan builds them before it acquires a server
        pass

    def measure(self, server, concurrency, count):
        self.calls.append(server.name)
        rec = self.record(server.config, concurrency)
        for _ in range(count):
            rec.samples.append(
                SpeedSample(1.0, 0.0, 0.0, 8, 1, None, None, 1, boot=server.boot, index=rec.count(server.boot))
            )


class _FakePool:
    def acquire(self, name):
        config, _, boot = name.partition("@")
        return SimpleNamespace(name=name, config=config, boot=int(boot or 1))


def _plan(coexist, boots=1, seed=7):
    dep = SimpleNamespace(
        configs={"baseline": None, "a": None, "b": None},
        launch=SimpleNamespace(boots=boots, coexist=coexist),
        workload=SimpleNamespace(max_repeats=5),
    )
    meter = _FakeMeter()
    return SamplingPlan(dep, _FakePool(), meter, ["baseline", "a", "b"], seed), meter


def test_coexisting_servers_are_measured_in_rounds_of_fresh_random_order():
    plan, meter = _plan(coexist=True, boots=2)
    plan.ensure(plan.configs, 1, 6)
    servers = sorted(plan.all_servers())
    rounds = [meter.calls[i : i + len(servers)] for i in range(0, len(meter.calls), len(servers))]
    assert len(rounds) == 6 and all(sorted(r) == servers for r in rounds)  # every server once per round
    assert len({tuple(r) for r in rounds}) > 1  # and not the same order every round
    assert plan.log.interleaved and plan.log.rounds == 6


def test_servers_that_cannot_coexist_are_measured_in_blocks():
    plan, meter = _plan(coexist=False)
    plan.ensure(plan.configs, 1, 3)
    assert meter.calls == ["baseline", "a", "b"]  # one block each, in turn
    # to the cap (max_repeats) at once: a later look would boot the server again
    assert all(len(r.samples) == 5 for r in meter.records.values())
    assert not plan.more(plan.configs, 1, cap_per_boot=5, batch=2)
    assert meter.calls == ["baseline", "a", "b"]  # no server asked for again


def test_measuring_more_stops_at_the_cap():
    plan, _ = _plan(coexist=True)
    plan.ensure(["a", "baseline"], 1, 4)
    assert plan.more(["a", "baseline"], 1, cap_per_boot=6, batch=5)
    assert plan.per_boot(["a", "baseline"], 1) == 6
    assert not plan.more(["a", "baseline"], 1, cap_per_boot=6, batch=5)


def test_equivalence_cases_vary_between_commits_and_not_between_reruns():
    from specgate.deployment import load_deployment
    from specgate.equivalence.cases import draw_cases
    from specgate.equivalence.oracle import commit_seed

    dep = load_deployment("sim")
    a1 = draw_cases(dep, 8, commit_seed("a" * 40))
    a2 = draw_cases(dep, 8, commit_seed("a" * 40))
    b = draw_cases(dep, 8, commit_seed("b" * 40))
    assert [c.key for c in a1] == [c.key for c in a2]
    assert [c.key for c in a1] != [c.key for c in b]


# --- known upstream defects and declarations that matched nothing ---------------------------
def test_a_known_defect_is_read_against_the_servers_version():
    from specgate.equivalence.known import PAST_STOP, known_defects_for

    (defect,) = known_defects_for(PAST_STOP)
    assert "PR #23802" in defect.explain("0.5.11") and "without the fix" in defect.explain("0.5.11")
    assert "regression of that fix" in defect.explain("0.5.14")
    assert "regression of that fix" in defect.explain("0.5.17")
    assert "SIMULATOR" in defect.explain("0.1.0-specgate-sim")
    assert known_defects_for(None) == []


def test_stop_shapes_are_named_for_the_known_defects():
    case = GenerationCase("chat/0", "hi", 8, (".",), 1)
    base = replace(_answer([1, 2, 3], "ab"), finish_reason=FinishReason("stop", "."))
    leaked = _answer([1, 2, 3, 4, 5], "ab. cd")  # two tokens past the '.': it left the checked tail
    outcome = compare(case, base, leaked, 0.05, "http://b", "http://s")
    assert not outcome.ok and outcome.shape == "past-stop"
    # A baseline that did not stop there: the run-on cannot be placed, and no PR is named.
    unplaced = compare(case, _answer([1, 2], "ab"), _answer([1, 2, 3], "ab. cd"), 0.05, "http://b", "http://s")
    assert not unplaced.ok and unplaced.shape == "unclassified" and "#23802" not in unplaced.message


def test_a_stop_string_the_last_allowed_token_completes_is_the_servers_behaviour_not_a_run_on():
    """Plain SGLang keeps a stop string that its last allowed token completes (length is checked
    first): after a near-tie flip the speculative answer may end so where the baseline did not."""
    case = GenerationCase("chat/0", "hi", 4, (".",), 1)
    base = _answer([1, 2, 3, 4], "ab cd ef")
    ends_on_stop = _answer([1, 2, 3, 5], "ab cd e.")
    assert compare(case, base, ends_on_stop, 0.05, "http://b", "http://s").kind == "divergence"  # tokens judged
    runs_on = _answer([1, 2, 3, 5], "ab. cd e")
    assert compare(case, base, runs_on, 0.05, "http://b", "http://s").kind == "invariant"
    short = GenerationCase("chat/0", "hi", 8, (".",), 1)
    assert compare(short, base, ends_on_stop, 0.05, "http://b", "http://s").kind == "invariant"  # not at the limit


def test_a_stop_string_missed_in_the_step_that_reaches_max_new_tokens_is_named():
    """SGLang checks max_new_tokens before the stop strings: a verify step that accepts the stop
    string and reaches the limit ends on length with the stop in the text (seen on 0.5.14)."""
    from specgate.equivalence.known import PAST_STOP_AT_LENGTH, known_defects_for

    case = GenerationCase("chat/0", "hi", 8, (".",), 1)
    base = replace(_answer([1, 2, 3, 4, 5, 6, 7], "ab cd"), finish_reason=FinishReason("stop", "."))
    at_limit = _answer([1, 2, 3, 4, 5, 6, 7, 8], "ab cd. Pl")  # 8 = max_new_tokens, finish_reason length
    outcome = compare(case, base, at_limit, 0.05, "http://b", "http://s", max_tokens_per_step=3)
    assert not outcome.ok and outcome.shape == PAST_STOP_AT_LENGTH
    # The stop missed several steps before the limit, or the step size unknown: the older shape.
    early = replace(base, output_ids=(1, 2, 3), completion_tokens=3)
    assert compare(case, early, at_limit, 0.05, "http://b", "http://s", max_tokens_per_step=3).shape == "past-stop"
    # The step size unknown: one token past the stop fits any verify step (two tokens or more).
    assert compare(case, base, at_limit, 0.05, "http://b", "http://s").shape == PAST_STOP_AT_LENGTH
    # Two past it, the step size unknown: one step of three, or a stop missed earlier; not named.
    six = replace(base, output_ids=(1, 2, 3, 4, 5, 6), completion_tokens=6)
    assert compare(case, six, at_limit, 0.05, "http://b", "http://s").shape == "unclassified"
    # Declared known for a config: counted, not failed; but only this shape, not an earlier miss.
    tolerated = compare(case, base, at_limit, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3)
    assert tolerated.ok and tolerated.kind == "tolerated" and tolerated.tokens_compared == 7
    assert 'tolerate = ["past-stop-at-length"]' in outcome.message
    assert not compare(case, early, at_limit, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3).ok
    other_tokens = _answer([1, 2, 3, 4, 5, 9, 7, 8], "ab cd. Pl")
    assert not compare(case, base, other_tokens, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3).ok
    (defect,) = known_defects_for(PAST_STOP_AT_LENGTH)
    assert "#33758" in defect.reference and "#31599" in defect.title
    assert "fixed in SGLang 0.5.18: this server runs 0.5.14, without the fix" in defect.explain("0.5.14")
    assert "regression of that fix" in defect.explain("0.5.18")
    assert "#23802" not in defect.explain("0.5.14")  # not called a regression of the tail-window fix


def test_a_verify_step_completing_two_stop_strings_that_ends_on_the_one_listed_first_is_named():
    """Seen on SGLang 0.5.14 with a trained drafter (long_context-01, stop ['.', '\\n\\n']): the
    baseline stopped on '\\n\\n'; one verify step accepted '\\n\\n', '1', '.', and the speculative
    server ended on '.', listed first, with '\\n\\n1' left in the text."""
    from specgate.equivalence.known import STOP_LIST_ORDER, known_defects_for

    case = GenerationCase("long_context/1", "hi", 40, (".", "\n\n"), 2)
    base = replace(_answer([1, 2, 3, 4], "Facts:"), finish_reason=FinishReason("stop", "\n\n"))
    spec = replace(_answer([1, 2, 3, 4, 5, 6], "Facts:\n\n1"), finish_reason=FinishReason("stop", "."))
    outcome = compare(case, base, spec, 0.05, "http://b", "http://s", max_tokens_per_step=3)
    assert not outcome.ok and outcome.shape == STOP_LIST_ORDER
    assert 'tolerate = ["stop-list-order"]' in outcome.message
    tolerated = compare(case, base, spec, 0.05, "http://b", "http://s", (STOP_LIST_ORDER,), max_tokens_per_step=3)
    assert tolerated.ok and tolerated.kind == "tolerated" and tolerated.tokens_compared == 4
    # Not this shape, so never excused by its declaration: the stop it ended on listed after the
    # baseline's (list order cannot explain it), more than one step's worth of tokens, other tokens
    # before the baseline's stop, the step size unknown, or another stop declared.
    def judged(spec_answer, stops=case.stop, per_step=3, tolerate=(STOP_LIST_ORDER,)):
        return compare(replace(case, stop=stops), base, spec_answer, 0.05, "http://b", "http://s", tolerate, max_tokens_per_step=per_step)

    assert judged(spec, stops=("\n\n", ".")).shape == "past-stop"
    far = replace(_answer([1, 2, 3, 4, 5, 6, 7], "Facts:\n\n1 a"), finish_reason=FinishReason("stop", "."))
    assert not judged(far).ok and judged(far).shape == "past-stop"
    other = replace(spec, output_ids=(1, 2, 9, 4, 5, 6))
    assert not judged(other).ok
    assert not judged(spec, per_step=None).ok
    assert not judged(spec, tolerate=("past-stop-at-length",)).ok
    # What list order cannot produce (found in review): a stop at the first token, which SGLang
    # checks alone; the ending stop left in the text; a stop listed before it in the step's text;
    # an ending stop the baseline's own text would have met first; an empty stop listed first.
    first = replace(_answer([1], ""), finish_reason=FinishReason("stop", "\n\n"))
    after_first = replace(_answer([1, 5, 6], "\n\n1"), finish_reason=FinishReason("stop", "."))
    assert not compare(case, first, after_first, 0.05, "http://b", "http://s", (STOP_LIST_ORDER,), max_tokens_per_step=4).ok
    ran_past = replace(_answer([1, 2, 3, 4, 5, 6], "Facts:\n\n1. x"), finish_reason=FinishReason("stop", "."))
    assert not judged(ran_past).ok
    bang = replace(spec, text="Facts:\n\n1!")
    assert not judged(bang, stops=("!", ".", "\n\n")).ok
    newline = replace(spec, finish_reason=FinishReason("stop", "\n"), text="Facts:\n\n1")
    assert not judged(newline, stops=("\n", "\n\n")).ok
    empty = replace(spec, finish_reason=FinishReason("stop", ""))
    assert not judged(empty, stops=("", "\n\n")).ok
    assert judged(spec, stops=("?", ".", "\n\n")).ok  # an absent stop listed first changes nothing
    # An answer that also breaks max_new_tokens is not named after any defect.
    over = replace(spec, completion_tokens=41)
    assert judged(over).shape == "unclassified" and "PR #" not in judged(over).message
    (defect,) = known_defects_for(STOP_LIST_ORDER)
    assert "_check_str_based_finish" in defect.reference and "no release is known to fix it" in defect.explain("0.5.14")
    assert "#49391" in defect.title


def test_the_simulators_stop_list_order_fault_ends_where_the_known_shape_says():
    """The fault imitates SGLang's list-order stop check: on prompts where one verify step
    completes two stop strings, the faulty server ends on the one listed first, the check names
    the shape, and a healthy speculative server ends where plain decoding does."""
    from specgate.equivalence.known import STOP_LIST_ORDER
    from specgate.sim.cost import CostModel
    from specgate.sim.engine import Generation, GenParams, SpecSettings
    from specgate.sim.faults import Faults, parse_faults

    spec = SpecSettings("EAGLE3", steps=2, topk=1, draft_tokens=3, attention_mode="decode", draft_agreement=0.9)

    def answer(prompt, stops, settings=None, faults=None):
        gen = Generation(prompt, GenParams(max_new_tokens=48, stop=stops), settings, faults or Faults(), CostModel())
        for _ in gen.steps():
            pass
        st = gen.state
        reason = st.finish_reason or {}
        kind = reason.get("type", "length")
        return replace(
            _answer(st.output_ids, st.text), finish_reason=FinishReason(kind, reason.get("matched"))
        )

    fault = parse_faults(["stop-list-order"])
    named = 0
    for p in range(60):
        prompt = [3 + p, 40, 70 + p]
        whole = answer(prompt, ())
        if answer(prompt, (), spec).output_ids != whole.output_ids:
            continue  # a near-tie flip: not this test's business
        words = [w for w in whole.text.split() if w.isalpha()]
        for first, second in zip(words[2:12], words[3:13]):
            if first in second or second in first:
                continue
            stops = (second, first)  # the later word listed first
            plain = answer(prompt, stops)
            assert answer(prompt, stops, spec).output_ids == plain.output_ids  # healthy: ends where plain does
            faulty = answer(prompt, stops, spec, fault)
            if faulty.output_ids == plain.output_ids:
                continue  # the two completed in different steps: list order cannot matter
            case = GenerationCase("sim/0", "hi", 48, stops, 1)
            outcome = compare(case, plain, faulty, 0.05, "http://b", "http://s", max_tokens_per_step=3)
            assert outcome.shape == STOP_LIST_ORDER, outcome.message
            named += 1
    assert named >= 3, named


def test_a_fault_aimed_at_no_config_is_an_error_not_a_silent_green():
    from specgate.sim.faults import unknown_fault_targets

    env = {"SPECGATE_SIM_FAULTS": "eagle3-decod:slowdown=0.3; *:drift=0.1; eagle3-decode@2:slowdown=0.2"}
    assert unknown_fault_targets(env, ["baseline", "eagle3-decode"]) == ["eagle3-decod:slowdown=0.3"]


def test_a_calibration_record_is_checked_for_meaning(tmp_path):
    import json

    from specgate.errors import BaselineError
    from specgate.verdicts.calibration import load_calibration

    good = next(__import__("pathlib").Path(__file__).resolve().parents[2].glob("baselines/*/calibration/*.json"))
    doc = json.loads(good.read_text())
    for edit, field in (
        (lambda d: d["configs"]["baseline"]["decode_tps"].update(between_boot_log_sd_upper=True), "expected a number"),
        (lambda d: d["configs"]["baseline"]["decode_tps"].update(between_boot_log_sd_upper="0.05"), "expected a number"),
        (lambda d: d.update(boots=1), "boots"),
        (lambda d: d.update(configs={}), "configs"),
        (lambda d: d.update(provenance=[]), "provenance"),
    ):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        path = tmp_path / good.name
        path.write_text(json.dumps(bad))
        with pytest.raises(BaselineError, match=field):
            load_calibration(path)
    # The dotted field and what was found, as for a deployment file (read through the document's model).
    bad = json.loads(json.dumps(doc))
    bad["configs"]["baseline"]["decode_tps"]["between_boot_log_sd_upper"] = True
    (tmp_path / good.name).write_text(json.dumps(bad))
    with pytest.raises(BaselineError, match=r"field 'configs\.baseline\.decode_tps\.between_boot_log_sd_upper': expected a number, got True"):
        load_calibration(tmp_path / good.name)
    renamed = tmp_path / "other-machine.json"
    renamed.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match="fingerprint"):
        load_calibration(renamed)


def test_boots_are_bounded():
    data = sim_deployment_dict()
    data["launch"]["boots"] = 1000
    with pytest.raises(DeploymentError, match="at most 32"):
        parse_deployment(data, __import__("pathlib").Path("x.toml"))


def test_two_or_three_boots_still_cover_their_level():
    rng = np.random.default_rng(5)
    for boots in (2, 3):
        covered = 0
        for _ in range(100):
            offsets = rng.normal(0, 0.08, boots)
            series = {k + 1: list(np.exp(offsets[k] + rng.normal(0, 0.02, 9))) for k in range(boots)}
            iv, text = ratio_interval(series, 0.95, None)
            covered += iv.low <= 1 <= iv.high
        assert covered >= 88, (boots, covered)  # a two-level bootstrap alone covered 58-75%
        assert "t-interval on the" in text


def test_the_projects_hypothesis_profiles_extend_hypothesis_own_ci_profile():
    """A failure on CI must print the blob that reproduces it, as Hypothesis' own `ci` does."""
    from hypothesis import settings

    import specgate.equivalence.profiles  # noqa: F401 - registers the profiles

    for name in ("ci", "gpu"):
        profile = settings.get_profile(name)
        assert profile.print_blob and profile.derandomize and profile.database is None and profile.deadline is None


def test_every_difference_a_deployment_may_declare_is_a_shape_the_check_names():
    """TOLERABLE lives with the deployment (which validates `tolerate`), the shapes with the check:
    a declarable name the check never produces would be a declaration that can never match."""
    from specgate.deployment import TOLERABLE
    from specgate.equivalence import known

    shapes = {v for k, v in vars(known).items() if k.isupper() and isinstance(v, str)}
    assert set(TOLERABLE) <= shapes


def test_an_edge_case_sends_one_more_request_than_the_captured_cuda_graphs_hold(tmp_path):
    """Past --cuda-graph-max-bs a speculative server decodes with eager kernels: every run checks
    the stop-string request there (the same request a stored reference answered)."""
    import dataclasses

    from specgate.deployment import load_deployment
    from specgate.equivalence.cases import edge_cases, graph_bounds

    dep = load_deployment("smollm2-eagle3-h200")  # launch.args: --cuda-graph-max-bs 2
    assert graph_bounds(dep) == [2]
    edge = [c for c in edge_cases(dep) if "past the decode graph bound 2" in c.label]
    stops = [c for c in edge_cases(dep) if c.label.endswith("(edge: every stop string)")]
    assert len(edge) == 1 and edge[0].concurrency == 3 and edge[0].key == stops[0].key
    # A config's own value wins over launch.args (SGLang keeps the last one given).
    tree = dep.configs["eagle3-tree"]
    own = dataclasses.replace(tree, args=(*tree.args, "--cuda-graph-max-bs=8"))
    dep2 = dataclasses.replace(dep, configs={**dep.configs, "eagle3-tree": own})
    assert graph_bounds(dep2) == [2, 8]
    # SGLang 0.5.14's name for the option: one option, so the last of either name wins
    renamed = dataclasses.replace(tree, args=(*tree.args, "--cuda-graph-max-bs-decode", "4"))
    dep3 = dataclasses.replace(dep, configs={**dep.configs, "eagle3-tree": renamed})
    assert graph_bounds(dep3) == [2, 4]
    both = dataclasses.replace(tree, args=(*tree.args, "--cuda-graph-max-bs-decode=4", "--cuda-graph-max-bs", "6"))
    dep4 = dataclasses.replace(dep, configs={**dep.configs, "eagle3-tree": both})
    assert graph_bounds(dep4) == [2, 6]


def test_odd_cuda_graph_bounds_never_break_the_edge_cases():
    import dataclasses

    from specgate.deployment import load_deployment
    from specgate.equivalence.cases import edge_cases, graph_bounds

    dep = load_deployment("sim")
    for args, expected in ((("--cuda-graph-max-bs",), []), (("--cuda-graph-max-bs", "²"), []),
                           (("--cuda-graph-max-bs=0",), []), (("--cuda-graph-max-bs", "+8"), [8])):  # fmt: skip
        launch = dataclasses.replace(dep.launch, args=args)
        odd = dataclasses.replace(dep, launch=launch)
        assert graph_bounds(odd) == expected, args
        edge_cases(odd)


def test_a_shorter_stop_inside_the_final_stop_at_the_limit_is_no_run_on():
    case = GenerationCase("chat/0", "hi", 3, ("\n", "\n\n"), 1)
    base = _answer([1, 2, 3], "ab cd")
    spec = _answer([1, 2, 4], "ab\n\n")
    assert compare(case, base, spec, 0.05, "http://b", "http://s").kind == "divergence"  # tokens decide


def test_an_answer_read_in_one_piece_is_sent_again_then_named(monkeypatch):
    """A client starved of CPU can read a whole stream at once (seen on the 2-core CI machine in a
    sweep): that round is sent again; a server that never streams fails with a SpecgateError that
    says why (a sweep records the point as failed, a gate test fails), never a bare traceback."""
    from specgate.errors import SpecgateError, UntimeableAnswer
    from specgate.measure.speed import UNTIMED_TRIES, SpeedMeter

    calls: list[int] = []

    def once_then_fine(self, server, concurrency, index):
        calls.append(index)
        if len(calls) < 2:
            raise UntimeableAnswer("arrived as one")
        return ["timed"]

    monkeypatch.setattr(SpeedMeter, "_round_once", once_then_fine)
    meter = SpeedMeter.__new__(SpeedMeter)
    assert meter._round(None, 1, 7) == ["timed"] and calls == [7, 7]

    def never(self, server, concurrency, index):
        calls.append(index)
        raise UntimeableAnswer("arrived as one: decoding cannot be timed")

    calls.clear()
    monkeypatch.setattr(SpeedMeter, "_round_once", never)
    with pytest.raises(SpecgateError, match="cannot be timed"):
        meter._round(None, 1, 0)
    assert len(calls) == UNTIMED_TRIES


def test_an_eos_accepted_in_the_step_that_reaches_max_new_tokens_is_the_same_known_shape():
    """Seen on SGLang 0.5.14 with a trained drafter: the baseline stopped on EOS (id 2) at token
    11; the speculative answer holds the same 11 tokens, EOS included, then '\\n' up to
    max_new_tokens 12 (finish_reason length): length is checked before stop tokens too."""
    from specgate.equivalence.known import PAST_STOP_AT_LENGTH

    case = GenerationCase("translation/3", "hi", 12, (), 1)
    eleven = list(range(10, 20)) + [2]
    base = replace(_answer(eleven, "The cat sleeps."), finish_reason=FinishReason("stop", 2))
    spec = _answer([*eleven, 5], "The cat sleeps.\n")
    outcome = compare(case, base, spec, 0.05, "http://b", "http://s", max_tokens_per_step=3)
    assert not outcome.ok and outcome.shape == PAST_STOP_AT_LENGTH and "past the stop at the limit" in outcome.message
    assert 'tolerate = ["past-stop-at-length"]' in outcome.message
    tolerated = compare(case, base, spec, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3)
    assert tolerated.ok and tolerated.kind == "tolerated" and tolerated.tokens_compared == 11
    # Ran on for more than one verify step's worth, or short of the limit: an ordinary failure.
    far = replace(case, max_new_tokens=16)
    runs_on = _answer([*eleven, 5, 6, 7, 8, 9], "The cat sleeps.\nAnd")
    assert compare(far, base, runs_on, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3).kind == "divergence"
    # The step size unknown: one token past the EOS fits any verify step; two do not tell.
    assert compare(case, base, spec, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,)).kind == "tolerated"
    two_past = replace(case, max_new_tokens=13)
    spec_13 = _answer([*eleven, 5, 6], "The cat sleeps.\nA")
    assert compare(two_past, base, spec_13, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,)).kind == "divergence"
    assert compare(two_past, base, spec_13, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3).ok
    # Only where the baseline ended on its own stop and the speculative text continues it.
    for odd_base, odd_spec in (
        (base, replace(spec, text="The dog sleeps.\n")),  # same ids, other text
        (replace(base, finish_reason=FinishReason("stop")), spec),  # a stop without a matched stop
        (replace(base, finish_reason=FinishReason("stop", 7)), spec),  # a stop id that is not its last token
    ):
        odd = compare(case, odd_base, odd_spec, 0.05, "http://b", "http://s", (PAST_STOP_AT_LENGTH,), max_tokens_per_step=3)
        assert not odd.ok, (odd_base.finish_reason, odd_spec.text)


def test_benchmark_commit_info_names_only_the_commit_given_on_a_copy(monkeypatch, tmp_path):
    """On the GPU host the tree is a copy: pytest-benchmark's git lookup there (a stale .git)
    gave one commit's id beside another commit's time. With SPECGATE_COMMIT only it stands.
    (A copy: a folder without .git; in a git checkout, git says whether the tree is that commit.)"""
    from specgate import project
    from specgate.plugin import pytest_benchmark_update_commit_info

    (tmp_path / "specgate.toml").write_text('deployment = "sim"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(project, "_current", None)  # found again from the copy; the suite's own given back after

    info = {"id": "e94f2ea", "time": "2026-12-01T04:46:24+00:00", "author_time": "x", "project": "main", "branch": "main"}
    monkeypatch.setenv("SPECGATE_COMMIT", "efa29302b81e68ea08d90afb13de5eecf9d4a1bd")
    pytest_benchmark_update_commit_info(None, info)
    assert info == {"id": "efa29302b81e68ea08d90afb13de5eecf9d4a1bd", "dirty": False, "source": "SPECGATE_COMMIT",
                    "time": None, "author_time": None, "project": None, "branch": None}
    # what the caller says of the named commit (its time from its own git) fills them at the source
    monkeypatch.setenv("SPECGATE_COMMIT_TIME", "2026-12-01T22:41:00+00:00")
    monkeypatch.setenv("SPECGATE_BRANCH", "main")
    pytest_benchmark_update_commit_info(None, info)
    assert (info["time"], info["author_time"], info["branch"], info["project"]) == (
        "2026-12-01T22:41:00+00:00", "2026-12-01T22:41:00+00:00", "main", None)


def test_a_commit_time_that_names_no_commit_or_no_instant_is_refused_before_the_run(pytester, monkeypatch):
    """SPECGATE_COMMIT_TIME is checked at configure where specgate runs (a usage error naming the
    variable and the form expected), not in pytest-benchmark's hook after every server has run."""
    from specgate.errors import SpecgateError
    from specgate.provenance import commit_info_from_environment

    monkeypatch.setenv("SPECGATE_COMMIT", "efa29302b81e68ea08d90afb13de5eecf9d4a1bd")
    for bad in ("yesterday", "2026-12-01T22:41:00"):  # not a time; a time without its zone
        monkeypatch.setenv("SPECGATE_COMMIT_TIME", bad)
        with pytest.raises(SpecgateError, match=f"SPECGATE_COMMIT_TIME='{bad}': expected the commit's ISO 8601 time"):
            commit_info_from_environment()
    monkeypatch.setenv("SPECGATE_COMMIT_TIME", "  ")  # blank is not set
    assert commit_info_from_environment() == {}
    monkeypatch.delenv("SPECGATE_COMMIT")
    monkeypatch.setenv("SPECGATE_COMMIT_TIME", "2026-12-01T22:41:00+00:00")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess("--specgate-deployment=sim")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*SPECGATE_COMMIT_TIME set without SPECGATE_COMMIT*"])
    # The plugin loads in every pytest of its environment: a run that does not use specgate
    # is none of its business.
    assert pytester.runpytest_subprocess().ret == pytest.ExitCode.OK


def test_the_gate_refuses_to_be_spread_over_xdist_workers(pytester):
    """Each worker would have a session of its own (every server booted per worker, phases out
    of order): the gate says so at configure, before anything boots."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess("-n", "2", "--specgate-deployment=sim")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the gate runs in one pytest process*drop -n*"])


def test_the_tie_margin_calibration_measures_how_far_a_server_moves_its_references_gaps():
    """Every gap between the reference's top token and another both list, up to and including
    the first parting; the suggestion covers the largest shift with one step to spare."""
    from specgate.calibrate.numerics import gap_shifts, quantum, summarise
    from specgate.client import FinishReason, GenerateRequest, GenerateResult

    def answer(ids, tops):
        return GenerateResult(
            request=GenerateRequest(max_new_tokens=4, text="p"), text="", output_ids=tuple(ids), prompt_tokens=1,
            completion_tokens=len(ids), finish_reason=FinishReason("length"), e2e_s=0.0, server_e2e_s=None,
            top_logprobs=tuple(tuple(t) for t in tops),
        )

    ref = answer([1, 2, 3, 4], [[(1, -0.1), (5, -2.0)], [(2, -0.5), (6, -0.625), (7, -3.0)], [(3, -0.2), (8, -0.3)], [(4, -0.1), (9, -1.0)]])
    spec = answer([1, 2, 8, 4], [[(1, -0.1), (5, -2.0)], [(2, -0.5), (6, -0.5)], [(8, -0.25), (3, -0.25)], [(4, -0.1), (9, -9.0)]])
    shifts, positions, unlisted = gap_shifts(ref, spec)
    assert positions == 3  # the fourth token follows another prefix: not compared
    assert [round(x, 4) for x in shifts] == [0.0, 0.125, 0.1] and unlisted == 1  # 7: not listed by the speculative server
    assert quantum([ref, spec]) == pytest.approx(0.125)  # positions listing three tokens or more: their smallest difference
    fine = [answer([1], [[(1, -0.1), (2, -0.1625), (3, -0.5)]])] * 9 + [answer([1], [[(1, -0.1), (2, -0.1044), (3, -0.5)]])]
    assert quantum(fine) == pytest.approx(0.0625)  # one finer position does not set the step (10th percentile)
    assert quantum([answer([1], [[(1, -0.1), (2, -0.975)]])]) is None  # two listed: their margin, not a step
    told = summarise(shifts, 0.125, 0.3, positions)
    assert (told["largest"], told["suggested_tie_margin"], told["beyond_tie_margin"]) == (0.125, 0.25, 0)
    assert summarise([0.25 + 1e-6], 0.125, 0.3, 1)["suggested_tie_margin"] == 0.375  # float noise is no extra step
    assert told["histogram"] == {"0": 1, "0.1": 1, "0.125": 1}
    assert summarise([], None, 0.3, 0) == {"positions": 0, "pairs": 0, "tie_margin": 0.3}


def test_a_known_defects_line_in_report_md_names_only_the_shapes_that_defect_has():
    """A config with past-stop and stop-list-order answers: the PR #23802 line is about the
    past-stop ones, the list-order line about the others (issue 32, item 5: no PR pinned on
    answers of another shape)."""
    from specgate.equivalence.known import PAST_STOP, STOP_LIST_ORDER, UNCLASSIFIED, known_defects_for
    from specgate.report.markdown import _answers_of_the_shapes
    from specgate.report.model import EquivalenceRow

    version = "0.5.14"
    (pr, listed) = (known_defects_for(PAST_STOP)[0].explain(version), known_defects_for(STOP_LIST_ORDER)[0].explain(version))
    row = EquivalenceRow(
        config="standalone", cases=1, requests=3, exact_matches=0, near_tie_flips=0, decisive_failures=2,
        tokens_compared=0, flips=[], failures=[], server_version=version,
        shapes={PAST_STOP: 1, STOP_LIST_ORDER: 1, UNCLASSIFIED: 1}, known_defects=[pr, listed],
    )
    assert _answers_of_the_shapes(row, pr) == f"its {PAST_STOP} answers"
    assert _answers_of_the_shapes(row, listed) == f"its {STOP_LIST_ORDER} answers"
    assert _answers_of_the_shapes(row, "worded by an older table").startswith("answers of one of its shapes (")


def test_a_stream_read_in_a_burst_is_no_measurement_and_its_round_is_sent_again():
    """Seen on the loaded CI machine: a client starved of CPU read most of a simulated ~800 tok/s
    answer at once and timed it at 269,030 tok/s, which made a calibration's within-boot spread
    140%. A figure over BURST_FACTOR times the server's own per-request one cannot be a
    measurement: the answer is untimeable, so the round is sent again (test above)."""
    from specgate.errors import UntimeableAnswer
    from specgate.measure.speed import BURST_FACTOR, SpeedSample

    timed = replace(_answer(list(range(64))), ttft_s=0.01, decode_s=0.08, first_chunk_tokens=1, chunks=64, server_decode_tps=800.0)
    assert SpeedSample.of(timed).decode_tps == pytest.approx(63 / 0.08)
    burst = replace(timed, decode_s=63 / (BURST_FACTOR * 800.0 * 1.01), chunks=3)
    with pytest.raises(UntimeableAnswer, match="read late, in a burst") as caught:
        SpeedSample.of(burst)
    assert not caught.value.ended_on_its_own
    # Without the server's own figure (no --enable-metrics) the client's stands, as before.
    assert SpeedSample.of(replace(burst, server_decode_tps=None)).decode_tps > BURST_FACTOR * 800
