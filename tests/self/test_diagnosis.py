"""The diagnosis names the right lever for each diagnosable fault, and none for a healthy config.

One SIMULATOR deployment holds a healthy EAGLE-3 config and one config per slow cause the
simulator reproduces the way SGLang has it: verify on the prefill backend of a hybrid pair,
CUDA graphs off, draft steps the drafter cannot fill, a drafter used past the context it
was trained for, a drafter that accepts nothing. The unit tests below pin the rules
themselves: evidence required, contradicting measurements drop a lever, settings read
defensively.
"""

from __future__ import annotations

import pytest
from helpers import SimDeployment

from specgate.diagnosis.cycle import cycle_model
from specgate.diagnosis.levers import MEASURED, OBSERVED, SETTING, Sibling, Subject, Thresholds, find_levers
from specgate.diagnosis.settings import read_settings
from specgate.measure.speed import ConfigSpeed, SpeedSample
from specgate.measure.stats import Interval
from specgate.report.markdown import render_markdown
from specgate.report.model import Report

EAGLE = [
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "specgate-sim/toy-drafter",
    "--speculative-eagle-topk", "1",
]  # fmt: skip
TWO_STEPS = ["--speculative-num-steps", "2", "--speculative-num-draft-tokens", "3"]

LEVER_CONFIGS = {
    "eagle3-decode": {"args": [*EAGLE, *TWO_STEPS, "--speculative-attention-mode", "decode"]},
    "eagle3-prefill": {"args": [*EAGLE, *TWO_STEPS, "--speculative-attention-mode", "prefill"]},
    "no-graphs": {"args": [*EAGLE, *TWO_STEPS, "--speculative-attention-mode", "decode", "--disable-cuda-graph"]},
    "many-steps": {
        "args": [
            *EAGLE,
            "--speculative-num-steps",
            "5",
            "--speculative-num-draft-tokens",
            "6",
            "--speculative-attention-mode",
            "decode",
            "--sim-draft-agreement",
            "0.3",
        ]
    },  # fmt: skip
    "short-context": {
        "args": [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-eagle-topk",
            "1",
            *TWO_STEPS,
            "--speculative-draft-model-path",
            "{repo}/fixtures/sim-drafts/short-context",
            "--speculative-attention-mode",
            "decode",
        ]
    },  # fmt: skip
}
# The lever each config's diagnosis must rank first (None: healthy, no lever at all).
EXPECTED_FIRST = {
    "eagle3-decode": None,
    "eagle3-prefill": ("attention-mode", "--speculative-attention-mode decode"),
    "no-graphs": ("cuda-graphs", "remove --disable-cuda-graph"),
    "many-steps": ("draft-steps", "--speculative-num-steps"),
    "short-context": ("draft-context", "a drafter trained for longer contexts"),
}


@pytest.fixture(scope="module")
def lever_run(tmp_path_factory):
    """Speed only (no equivalence): long prompts first, so requests run within and past the
    short-context drafter's 256 positions; the short-context config carries a gate it misses."""
    overrides = {
        "configs": {"baseline": {"args": []}, **LEVER_CONFIGS},
        "workload": {"prompt_sets": ["long_context", "chat"], "repeats": 8, "max_repeats": 8},
        "gates": {"beats": [{"config": "eagle3-decode", "ratio": 1.15}, {"config": "short-context", "ratio": 1.15}]},
    }
    d = SimDeployment(tmp_path_factory.mktemp("levers"), overrides)
    result = d.run(None, "-k", "speed")
    assert not d.leftovers()
    assert result.ret == 0, "\n".join(result.outlines[-40:])
    return d.report()


@pytest.mark.parametrize("config", sorted(EXPECTED_FIRST))
def test_each_fault_gets_its_lever_first_and_healthy_gets_none(lever_run, config):
    found = {d["config"]: d for d in lever_run["diagnosis"]}
    diagnosis = found[config]
    expected = EXPECTED_FIRST[config]
    if expected is None:
        assert diagnosis["underperforms"] == [] and diagnosis["levers"] == []
        return
    assert diagnosis["underperforms"], diagnosis
    first = diagnosis["levers"][0]
    assert first["key"] == expected[0], [lv["key"] for lv in diagnosis["levers"]]
    assert first["action"].startswith(expected[1])
    assert first["evidence"], "a lever is never named without evidence"


def test_sibling_measurements_make_levers_measured(lever_run):
    found = {d["config"]: d for d in lever_run["diagnosis"]}
    prefill = found["eagle3-prefill"]["levers"][0]
    assert prefill["strength"] == "measured" and prefill["sibling"] == "eagle3-decode" and prefill["gain"] > 1.3
    assert found["no-graphs"]["levers"][0]["strength"] == "measured"
    assert any("without a graph" in e for e in found["no-graphs"]["levers"][0]["evidence"])  # the log says so too
    steps = found["many-steps"]["levers"][0]
    assert "accept histogram" in steps["evidence"][1] or "accept histogram" in steps["evidence"][0]
    context = found["short-context"]["levers"][0]
    assert any("τ" in e and "on those requests" in e for e in context["evidence"])


def test_cycle_model_decomposes_the_measured_speedup(lever_run):
    """τ·t_d/t_c is built from the same timings as the paired speedup: it must multiply out to it
    (up to τ varying across prompts), or the decomposition explains a different number."""
    for d in lever_run["diagnosis"]:
        c = d["cycle"]
        assert c["predicted_speedup"] == pytest.approx(c["tau"]["estimate"] / c["cycle_cost"], rel=1e-3)
        assert abs(c["model_gap"]) < 0.15, d["config"]  # the simulator spends its time in cycles


def test_report_names_the_flag_and_the_healthy_config(lever_run):
    md = render_markdown(Report.model_validate(lever_run))
    assert "## Diagnosis" in md
    assert "**`--speculative-attention-mode decode`** (measured" in md
    assert "**Healthy**" in md


def test_a_drafter_that_accepts_nothing_is_named(sim_deployment, pytester):
    d = sim_deployment({"gates": {"beats": [{"config": "eagle3-decode", "ratio": 1.15}]}})
    d.run(pytester, "-k", "speed", faults="eagle3-decode:accept-collapse")
    found = {x["config"]: x for x in d.report()["diagnosis"]}
    assert found["eagle3-decode"]["levers"][0]["key"] == "drafter"


# --- rules, on constructed figures ------------------------------------------------------------


def _record(config: str, tps: list[float], tau: float | None, hist: tuple[int, ...] | None = None) -> ConfigSpeed:
    rec = ConfigSpeed(config, 1)
    for v in tps:
        verify = round(100 / tau) if tau else None
        rec.samples.append(
            SpeedSample(
                decode_tps=v, ttft_s=0.01, e2e_s=0.2, completion_tokens=100, prompt_tokens=20, verify_ct=verify,
                server_e2e_s=None, chunks=10, accept_histogram=hist,
            )
        )  # fmt: skip
    return rec


def _subject(config: str, info: dict, tps: list[float], tau: float, hist=None) -> Subject:
    record = _record(config, tps, tau, hist)
    model = cycle_model(record, _record("baseline", [100.0] * len(tps), None), 0.95)
    assert model is not None
    return Subject(config, 1, read_settings(info), {}, model, record, histogram=hist)


PREFILL_INFO = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 2,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 3,
    "speculative_attention_mode": "prefill",
    "prefill_attention_backend": "flashinfer",
    "decode_attention_backend": "triton",
    "disable_cuda_graph": False,
}


def test_cycle_model_arithmetic():
    s = _subject("x", PREFILL_INFO, [150.0] * 6, 2.0)
    m = s.model
    assert m.t_d_ms.estimate == pytest.approx(10.0)
    assert m.t_c_ms.estimate == pytest.approx(1000 * 2.0 / 150.0)
    assert m.cycle_cost == pytest.approx(2.0 / 1.5)
    assert m.predicted == pytest.approx(1.5) and m.measured.estimate == pytest.approx(1.5)


def test_attention_mode_on_one_backend_is_not_a_lever():
    """SGLang's mode only picks between the two backends of a hybrid pair."""
    single = {**PREFILL_INFO, "prefill_attention_backend": "triton"}
    levers = find_levers(_subject("x", single, [80.0] * 6, 2.0), [], Thresholds())
    assert "attention-mode" not in [lv.key for lv in levers]
    hybrid = find_levers(_subject("x", PREFILL_INFO, [80.0] * 6, 2.0), [], Thresholds())
    assert hybrid[0].key == "attention-mode" and hybrid[0].strength == SETTING


def test_a_sibling_measured_slower_drops_the_lever():
    """Evidence cuts both ways: decode mode measured slower here contradicts the lever."""
    subject = _subject("prefill", PREFILL_INFO, [80.0] * 6, 2.0)
    decode = _subject("decode", {**PREFILL_INFO, "speculative_attention_mode": "decode"}, [60.0] * 6, 2.0)
    slower = Sibling(decode, Interval(0.75, 0.7, 0.8, 0.95))
    assert "attention-mode" not in [lv.key for lv in find_levers(subject, [slower], Thresholds())]
    faster = Sibling(decode, Interval(1.3, 1.2, 1.4, 0.95))
    lever = find_levers(subject, [faster], Thresholds())[0]
    assert lever.key == "attention-mode" and lever.strength == MEASURED and lever.gain == 1.3


def test_draft_steps_from_the_histogram_or_its_bound():
    info = {**PREFILL_INFO, "speculative_attention_mode": "decode", "speculative_num_steps": 3,
            "speculative_num_draft_tokens": 4}  # fmt: skip
    # 100 cycles: 40 accepted none, 45 one, 14 two, 1 all three -> step 3 in 1% of cycles, step 2 in 15%
    levers = find_levers(_subject("x", info, [80.0] * 6, 1.76, (40, 45, 14, 1)), [], Thresholds())
    steps = next(lv for lv in levers if lv.key == "draft-steps")
    assert steps.strength == OBSERVED and steps.action == "--speculative-num-steps 1 --speculative-num-draft-tokens 2"
    # A healthy histogram: no lever
    assert not [lv for lv in find_levers(_subject("x", info, [80.0] * 6, 2.8, (10, 20, 30, 40)), [], Thresholds())
                if lv.key == "draft-steps"]  # fmt: skip
    # No histogram (an older SGLang): only the bound (tau-1)/steps may name it
    levers = find_levers(_subject("x", info, [80.0] * 6, 1.3), [], Thresholds())
    assert any(lv.key == "draft-steps" and "at most" in lv.evidence[0] for lv in levers)


def test_settings_are_read_defensively():
    nested = read_settings({"server_args": {"speculative_algorithm": "EAGLE", "cuda_graph_bs": [1, 2, 8]}})
    assert nested.algorithm == "EAGLE" and nested.cuda_graph_max_bs == 8
    old = read_settings({"attention_backend": "flashinfer", "speculative_topk": "4", "disable_cuda_graph": "true"})
    assert old.prefill_backend == old.decode_backend == "flashinfer" and not old.hybrid
    assert old.topk == 4 and old.cuda_graph_disabled is True
    empty = read_settings({})
    assert empty.algorithm is None and empty.attention_mode is None and not empty.speculative
    # SGLang 0.5.14 renamed the option (--cuda-graph-max-bs-decode) and reports the resolved
    # per-phase graphs (its server_info on the H200, results/2026-12-02-h200-refine)
    resolved = {"cuda_graph_max_bs_decode": 2, "disable_cuda_graph": False,
                "cuda_graph_config": {"decode": {"backend": "full", "max_bs": 2, "bs": [1, 2]},
                                      "prefill": {"backend": "disabled", "max_bs": 8192, "bs": [4, 8192]}}}
    assert read_settings(resolved).cuda_graph_max_bs == 2 and read_settings(resolved).cuda_graph_disabled is False
    assert read_settings({"cuda_graph_max_bs_decode": 16}).cuda_graph_max_bs == 16
    off = {**resolved, "cuda_graph_config": {"decode": {"backend": "disabled", "max_bs": 2}}}
    assert read_settings(off).cuda_graph_disabled is True
    assert read_settings({"cuda_graph_config": "garbage", "cuda_graph_max_bs": 4}).cuda_graph_max_bs == 4


def _with(subject: Subject, **changes) -> Subject:
    from dataclasses import replace

    return replace(subject, **changes)


def test_a_default_spelled_out_is_no_difference():
    """One config passing --cuda-graph-max-bs 2, the value the other gets by default: the servers
    report the same setting, so a decode-mode sibling measured slower still drops the lever."""
    subject = _with(_subject("prefill", {**PREFILL_INFO, "cuda_graph_max_bs": 2}, [80.0] * 6, 2.0),
                    flags={"--cuda-graph-max-bs": "2"})  # fmt: skip
    decode = _subject("decode", {**PREFILL_INFO, "speculative_attention_mode": "decode", "cuda_graph_max_bs": 2},
                      [60.0] * 6, 2.0)  # fmt: skip
    slower = Sibling(decode, Interval(0.75, 0.7, 0.8, 0.95))
    assert "attention-mode" not in [lv.key for lv in find_levers(subject, [slower], Thresholds())]


def test_simulated_accept_length_is_no_evidence_for_steps_and_no_lever():
    info = {**PREFILL_INFO, "speculative_attention_mode": "decode"}
    simulated = _with(_subject("x", info, [80.0] * 6, 2.0, (0, 100)), env={"SGLANG_SIMULATE_ACC_LEN": "2.0"})
    assert "draft-steps" not in [lv.key for lv in find_levers(simulated, [], Thresholds())]
    other_tau = _with(_subject("y", info, [120.0] * 6, 3.0), env={"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    faster = Sibling(other_tau, Interval(1.5, 1.4, 1.6, 0.95))
    assert not [lv for lv in find_levers(simulated, [faster], Thresholds()) if lv.sibling == "y"]


def test_only_a_sibling_at_the_suggested_step_count_measures_the_steps_lever():
    info = {**PREFILL_INFO, "speculative_attention_mode": "decode", "speculative_num_steps": 3,
            "speculative_num_draft_tokens": 4}  # fmt: skip
    subject = _subject("s3", info, [80.0] * 6, 1.76, (40, 45, 14, 1))  # suggests 1 step
    two = _subject("s2", {**info, "speculative_num_steps": 2, "speculative_num_draft_tokens": 3}, [100.0] * 6, 1.7)
    lever = next(lv for lv in find_levers(subject, [Sibling(two, Interval(1.25, 1.2, 1.3, 0.95))], Thresholds())
                 if lv.key == "draft-steps")  # fmt: skip
    assert lever.strength == OBSERVED and lever.sibling is None  # 2 steps measured, 1 suggested: not credited


def test_a_sibling_with_another_accept_length_is_not_credited_to_the_attention_mode():
    """Decode mode vs prefill mode should not change τ; where τ differs (a drafter broken in one
    server), the faster sibling says nothing about the mode."""
    subject = _subject("decode", {**PREFILL_INFO, "speculative_attention_mode": "decode"}, [80.0] * 6, 1.0)
    prefill = _subject("prefill", PREFILL_INFO, [95.0] * 6, 2.2)
    levers = find_levers(subject, [Sibling(prefill, Interval(1.19, 1.1, 1.3, 0.95))], Thresholds())
    assert [lv.key for lv in levers][:1] == ["drafter"] and not any(lv.sibling == "prefill" for lv in levers)


def test_a_mode_sglang_switched_to_decode_by_itself_is_said_not_recommended():
    """SGLang 0.5.17 on switches speculative_attention_mode to decode by itself in some cases; the
    server's report is the effective mode: no lever for a flag already in effect, a note instead."""
    from specgate.diagnosis.diagnose import _notes

    switched = {**PREFILL_INFO, "speculative_attention_mode": "decode"}
    for flags in ({"--speculative-attention-mode": "prefill"}, {}):
        subject = _with(_subject("x", switched, [80.0] * 6, 2.0), flags=flags)
        assert "attention-mode" not in [lv.key for lv in find_levers(subject, [], Thresholds())]
        assert any("switched speculative_attention_mode to decode by itself" in n for n in _notes(subject)), flags
    asked = _with(_subject("x", switched, [80.0] * 6, 2.0), flags={"--speculative-attention-mode": "decode"})
    assert not any("by itself" in n for n in _notes(asked))


def test_where_the_server_does_not_report_the_mode_the_flag_given_is_taken_as_in_effect():
    unreported = {k: v for k, v in PREFILL_INFO.items() if k != "speculative_attention_mode"}
    decode = _with(_subject("x", unreported, [80.0] * 6, 2.0), flags={"--speculative-attention-mode": "decode"})
    assert "attention-mode" not in [lv.key for lv in find_levers(decode, [], Thresholds())]
    default = _subject("x", unreported, [80.0] * 6, 2.0)
    assert find_levers(default, [], Thresholds())[0].key == "attention-mode"


def test_the_prefill_mode_lever_names_the_plan_steps_host_sync_and_graphs_only_from_the_log():
    from specgate.diagnosis.signals import GraphUse

    subject = _subject("x", PREFILL_INFO, [80.0] * 6, 2.0)
    lever = find_levers(subject, [], Thresholds())[0]
    assert lever.key == "attention-mode"
    assert "plan step" in lever.why and "host sync" in lever.why and "PR #32317" in lever.why
    assert not any("without a graph" in e for e in lever.evidence)
    logged = find_levers(_with(subject, graphs=GraphUse(1, 5)), [], Thresholds())[0]
    assert any("5 of 6 decode-batch lines" in e and "without a graph" in e for e in logged.evidence)


@pytest.mark.parametrize(
    ("info", "action"),
    [
        ({"version": "0.5.11", "cuda_graph_max_bs": 2}, "--cuda-graph-max-bs 4"),
        ({"version": "0.5.14", "cuda_graph_max_bs_decode": 2}, "--cuda-graph-max-bs-decode 4"),
        ({"version": "0.5.20", "cuda_graph_max_bs_decode": None, "cuda_graph_config": {"decode": {"max_bs": 2}}},
         "--cuda-graph-max-bs-decode 4"),
    ],
)  # fmt: skip
def test_the_graph_bound_lever_is_spelled_as_the_servers_release_takes_it(info, action):
    decode = {**PREFILL_INFO, "speculative_attention_mode": "decode", **info}
    subject = _with(_subject("x", decode, [80.0] * 6, 2.0), concurrency=4)
    levers = [lv for lv in find_levers(subject, [], Thresholds()) if lv.key == "cuda-graph-batch"]
    assert [lv.action for lv in levers] == [action]
