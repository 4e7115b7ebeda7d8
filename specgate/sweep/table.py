"""The sweep's verdict for a person: a ranked table, and where speculation starts to win.

Ranked by the paired ratio over the plain reference of the same session and GPU; a point
"beats" the baseline only when its whole interval is above 1 (✓), "loses" when it is
wholly below (✗), and is undecided (~) otherwise.
"""

from __future__ import annotations

import itertools

from specgate.diagnosis.slope import context_name
from specgate.sweep.plan import SweepPlan, SweepPoint, result_name
from specgate.sweep.state import PointResult, SweepState


def _mark(r: PointResult) -> str:
    if not r.ratio:
        return "?"
    return "✓" if r.ratio["low"] > 1.0 else ("✗" if r.ratio["high"] < 1.0 else "~")


def _env_label(axes: dict) -> str:
    return ", ".join(f"{k[4:]}={v}" for k, v in axes.items() if k.startswith("env:")) or "—"


def ranked(state: SweepState) -> list[PointResult]:
    """The short workload's measured results, best first (each bucket's are in _across_context)."""
    measured = [r for r in state.points.values() if r.status == "measured" and not r.axes.get("context")]
    return sorted(measured, key=lambda r: -(r.ratio["estimate"] if r.ratio else -1.0))


def render_sweep(plan: SweepPlan, state: SweepState, complete: bool, simulator: bool = False) -> str:
    """sweep.md; `simulator`: the deployment runs specgate's simulated engine, whose figures the
    table must not pass off as SGLang's."""
    out = [f"# specgate sweep — {state.deployment}" + (" (SIMULATOR run)" if simulator else "") + "\n"]
    if simulator:
        out.append("> **SIMULATOR run.** These figures come from specgate's simulated engine, not SGLang.\n")
    done = sum(1 for p in plan.points if all(state.done(n) for n in plan.results_of(p)))
    failed_n = sum(1 for r in state.points.values() if r.status != "measured")
    status = (
        "complete"
        if done == len(plan.points)
        else (f"every point attempted, {failed_n} failed or unpaired" if complete else "stopped, resumable")
    )
    out.append(
        f"{done} of {len(plan.points)} points measured ({status}); {len(state.sessions)} session(s). Each ratio is "
        "paired per request against the plain reference measured in the same wave, on the same GPU; ✓ beats it "
        "(interval above 1), ✗ loses (below 1), ~ undecided.\n"
    )
    out.append(
        "| rank | point | attention mode | steps | topk | draft tokens | env | decode tok/s | × baseline | τ "
        "| cycle ms | cycle cost (plain steps) | session |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(ranked(state), 1):
        a = r.axes
        ratio = (
            f"{r.ratio['estimate']:.3f} [{r.ratio['low']:.3f}, {r.ratio['high']:.3f}] {_mark(r)}" if r.ratio else "—"
        )
        tau = f"{r.tau['estimate']:.2f}" if r.tau else "—"
        cycle = f"{r.t_c_ms:.2f}" if r.t_c_ms else "—"
        cost = f"{r.cycle_cost:.2f}" if r.cycle_cost else "—"
        out.append(
            f"| {i} | {r.name} | {a['attention_mode']} | {a['num_steps']} | {a['topk']} | {a['draft_tokens']} "
            f"| {_env_label(a)} | {r.median_tps:.1f} | {ratio} | {tau} | {cycle} | {cost} | {r.session}"
            f"{' GPU ' + r.gpu if r.gpu else ''} |"
        )
    failed = [r for r in state.points.values() if r.status != "measured"]
    if failed:
        out.append("\nFailed or unpaired points (retried by the next `specgate sweep` of this state):\n")
        out.extend(f"- {r.name}: {(r.error.strip().splitlines() or ['?'])[0]}" for r in failed)
    if plan.skipped:
        out.append("\nLeft out of the grid:\n")
        out.extend(f"- {s}" for s in plan.skipped)
    out.extend(_replicates(state))
    out.extend(_pivots(plan, state))
    out.extend(_across_context(plan, state))
    missing = [n for p in plan.points for n in plan.results_of(p) if n not in state.points]
    if missing:
        out.append(f"\nNot yet measured: {', '.join(missing)}.")
    return "\n".join(out) + "\n"


SIMULATED_TAU = "env:SGLANG_SIMULATE_ACC_LEN"


def _effective(r: PointResult) -> tuple | None:
    """The settings a point really ran with, where SGLang is known to rewrite the swept value:
    SGLANG_SIMULATE_ACC_LEN is clamped to steps + 1, so 3.0 at one step runs as 2.0 does."""
    a = r.axes
    if SIMULATED_TAU not in a:
        return None
    try:
        tau = max(1.0, min(float(a[SIMULATED_TAU]), a["num_steps"] + 1.0))
    except (TypeError, ValueError):
        return None
    others = tuple(sorted((k, str(v)) for k, v in a.items() if k != SIMULATED_TAU))
    return (others, tau)


def stops_paying(plan: SweepPlan, point: SweepPoint, state: SweepState) -> str:
    """Where along the context axis `point` stops paying: the first context whose ratio is
    wholly below 1 (✗); where none is, the first whose ratio is undecided (~) with its estimate
    below 1, as such (it may lose there: "not within the axis" would claim it pays); "not within
    the axis" where neither is; "?" at a context not measured first."""
    undecided = None
    for i, context in enumerate(plan.contexts):
        r = state.points.get(result_name(point, context))
        if r is None or r.status != "measured" or not r.ratio:
            return "?"
        if _mark(r) == "✗":
            return "never pays (loses at short)" if i == 0 else context_name(context)
        if undecided is None and _mark(r) == "~" and r.ratio["estimate"] < 1.0:
            undecided = context
    if undecided is not None:
        return f"undecided from {context_name(undecided)} (estimate below 1)"
    return "not within the axis"


def _across_context(plan: SweepPlan, state: SweepState) -> list[str]:
    """Per point: its speedup at each context of the axis, and where speculation stops paying."""
    if len(plan.contexts) < 2:
        return []
    out = [
        "\n## Speedup across context length\n",
        "Each point measured at every context on the same server, each ratio against the plain reference "
        "measured at that context in the same wave; ✓ beats it, ✗ loses, ~ undecided.\n",
        "| point | " + " | ".join(context_name(c) for c in plan.contexts) + " | stops paying at |",
        "|---|" + "---|" * (len(plan.contexts) + 1),
    ]
    for point in plan.points:
        cells = []
        for context in plan.contexts:
            r = state.points.get(result_name(point, context))
            if r is None or r.status != "measured" or not r.ratio:
                cells.append("—" if r is None else r.status)
            else:
                cells.append(f"{r.ratio['estimate']:.2f} {_mark(r)}")
        out.append(f"| {point.name} | " + " | ".join(cells) + f" | {stops_paying(plan, point, state)} |")
    return out + _mixed_ratios(plan, state)


def _mixed_ratios(plan: SweepPlan, state: SweepState) -> list[str]:
    """A bucket whose points were built at more than one characters per token (sessions of a
    resumed sweep that counted the tokenizer apart, or a state from before the ratio was kept):
    said under the table, naming each ratio's points, never mixed silently."""
    out = []
    for context in plan.contexts:
        built = state.built_at(context) if context else {}
        if len(built) < 2:
            continue
        said = "; ".join(
            f"{'not recorded' if ratio is None else f'{ratio:.2f}'}: {', '.join(sorted(names))}"
            for ratio, names in sorted(built.items(), key=lambda kv: (kv[0] is None, kv[0] or 0.0))
        )
        out.append(
            f"\n**NOT one workload at {context_name(context)}**: its points' prompts were built at different characters "
            f"per token ({said}). Each ratio is over a reference measured on the same prompts, but the prompts differ "
            "between them: move the state away (or pass another --state) to measure every point at one."
        )
    return out


def _replicates(state: SweepState) -> list[str]:
    """Points that ran identical effective settings: their spread is the between-server noise
    that no single point's interval shows (each interval covers its own requests only)."""
    groups: dict[tuple, list[PointResult]] = {}
    for r in state.points.values():
        key = _effective(r)
        if r.status == "measured" and r.ratio and key is not None:
            groups.setdefault(key, []).append(r)
    pairs = [g for g in groups.values() if len(g) > 1]
    if not pairs:
        return []
    out = [
        "\n## Replicates: the same effective settings booted twice\n",
        "SGLang clamps SGLANG_SIMULATE_ACC_LEN to steps + 1, so these points ran identical settings in separate "
        "servers. Their spread is between-server noise (boot, GPU, placement) that the per-point intervals, "
        "which cover one server's requests, do not include: read differences smaller than this as ties.\n",
    ]
    for g in pairs:
        measured = [(r, r.ratio["estimate"]) for r in g if r.ratio]
        if not measured:
            continue
        ratios = [ratio for _, ratio in measured]
        where = ", ".join(f"{r.name} {ratio:.3f}x{' (GPU ' + r.gpu + ')' if r.gpu else ''}" for r, ratio in measured)
        out.append(f"- {where}: highest / lowest {max(ratios) / min(ratios):.3f}")
    return out


def _pivots(plan: SweepPlan, state: SweepState) -> list[str]:
    """Per attention mode and topk: rows = swept environment, columns = draft steps (and draft
    tokens, where the grid has more than one per step count)."""
    out: list[str] = []
    if not any(p.name in state.points for p in plan.points):
        return out
    columns = sorted({(p.num_steps, p.draft_tokens) for p in plan.points})
    several = len({d for _, d in columns}) > len({s for s, _ in columns})

    def label(col: tuple[int, int]) -> str:
        return f"{col[0]} steps" + (f" / {col[1]} drafts" if several else "")

    envs: list[tuple[tuple[str, str], ...]] = []
    for p in plan.points:
        key = tuple(p.env.items())
        if key not in envs:
            envs.append(key)
    out.append("\n## Where speculation starts to beat the baseline\n")
    for (mode, topk), group in itertools.groupby(
        sorted(plan.points, key=lambda p: (p.attention_mode, p.topk)), key=lambda p: (p.attention_mode, p.topk)
    ):
        cells = {(tuple(p.env.items()), (p.num_steps, p.draft_tokens)): state.points.get(p.name) for p in group}
        out.append(f"\n**attention mode {mode}, topk {topk}** (× baseline)\n")
        out.append("| env | " + " | ".join(label(c) for c in columns) + " | beats the baseline at |")
        out.append("|---|" + "---|" * (len(columns) + 1))
        for env in envs:
            row, beats = [], []
            for col in columns:
                r = cells.get((env, col))
                if r is None or r.status != "measured" or not r.ratio:
                    row.append("—" if r is None else r.status)
                    continue
                row.append(f"{r.ratio['estimate']:.2f} {_mark(r)}")
                if _mark(r) == "✓":
                    beats.append(label(col))
            name = ", ".join(f"{k}={v}" for k, v in env) or "—"
            out.append(f"| {name} | " + " | ".join(row) + f" | {', '.join(beats) or 'nowhere'} |")
    return out
