#!/usr/bin/env python3
"""The no-regression gate as users run it, run many times: unchanged runs and runs with a known
slowdown of the candidate, alternating, and the false-alarm and detection rates they give (lab tool,
issue 50, run 4).

    python3 tools/gate_trials.py run [--sim] [--runs N] [--slowdown F] [--first K] [--deadline-s S]
                                     [--run-s S] [--deployment TOML] [--out DIR]
    python3 tools/gate_trials.py analyse DIR [DIR ...]

`run` runs `specgate run` of the A/B deployment (fixtures/deployments/llama8b-dummy-h200-ab.toml:
the candidate eagle3-decode against an identical base booted beside it) N times from trial K, odd
trials unchanged and even ones slowed, every run booting its servers afresh with an EMPTY baselines folder of its
own, so that every run is judged by the deployment's kept calibration alone ([gates.between_boot]),
never by a history the earlier trials wrote. A slowed run sets SPECGATE_INJECT_SLOWDOWN=F and
SPECGATE_INJECT_ONLY=eagle3-decode for tools/inject (on the servers' PYTHONPATH: tools/gpu_gate_trials.sh
puts it there), so the candidate decodes at (1 - F) of its speed. No run is started unless ~--run-s
seconds are left before the deadline. After every run its line is appended to OUT/trials.jsonl and
its report folder kept under OUT/, so a killed call keeps what finished.

`--sim` runs the same design on the SIMULATOR instead: the deployment rewritten for `specgate.sim`
(same configs, workload, gates and kept calibration), the H200's noise shape drawn by its
`h200-noise` fault, and the slowdown by its `slowdown` fault on the candidate alone. It proves the
trial loop and the analysis on CPU and predicts the rates under the noise model; its figures are
the simulator's, never the GPU's.

`analyse` pools every trials.jsonl given (several calls, several machines: each line names its
host) and prints, per kind of run, how often the A/B speed gate FAILed (false alarms among the
unchanged, detections among the slowed) among the runs it reached a verdict in, with their 95%
Clopper-Pearson intervals, the other verdicts, the runs of no verdict (refused, broken, a server
lost: apart, never in a rate), and the GPU time a verdict took.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specgate.exits import Exit  # noqa: E402

DEPLOYMENT = REPO / "fixtures" / "deployments" / "llama8b-dummy-h200-ab.toml"
CANDIDATE = "eagle3-decode"
UNCHANGED, SLOWED = "unchanged", "slowed"
# The A/B speed gate's statuses that are a verdict on the pair (the rates' denominators).
JUDGED = ("pass", "fail", "inconclusive")


def kind_of(trial: int) -> str:
    """Odd trials run unchanged, even ones slowed: by the trial's own number, so that calls of one
    trial each (tools/gpu_noise.sh packs after every one) alternate as one call of many does."""
    return UNCHANGED if trial % 2 == 1 else SLOWED


def sim_deployment(source: Path, out: Path) -> Path:
    """The A/B deployment for the simulator: its configs, workload, gates and kept calibration,
    launched as `specgate.sim` with the toy model (the simulator drafts, verifies and draws the
    H200's noise; it knows nothing of SGLang's memory or kernel flags)."""
    import tomllib

    import tomli_w

    doc = tomllib.loads(source.read_text())
    doc["name"] = f"{doc['name']}-sim"
    doc["description"] = "SIMULATOR twin of " + doc["description"]
    doc["simulator"] = True
    doc["model"] = "specgate-sim/toy-1k"
    doc["launch"] = {
        "launcher": "local",
        "command": ["{python}", "-m", "specgate.sim"],
        "args": ["--model-path", "specgate-sim/toy-1k", "--prefill-attention-backend", "flashinfer",
                 "--decode-attention-backend", "triton", "--cuda-graph-max-bs-decode", "4", "--enable-metrics"],
        "boot_timeout_s": 30,
        "coexist": True,
        "shutdown_timeout_s": 10,
        "gpu_release_timeout_s": 0,
    }  # fmt: skip
    for config in doc["configs"].values():
        config.pop("env", None)  # SGLang's simulated accept length and the inject scope: not the simulator's
        if config.get("args"):
            config["args"] = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "specgate-sim/toy-drafter",
                              "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
                              "--speculative-num-draft-tokens", "3", "--speculative-attention-mode", "decode"]  # fmt: skip
    # The toy's answers are its own and short: what matters is the request count, not their length.
    doc["workload"]["max_new_tokens"] = min(int(doc["workload"].get("max_new_tokens", 64)), 64)
    doc["workload"]["request_timeout_s"] = 30
    doc["equivalence"] = {"enabled": False, "skip_reason": "a speed-gate trial: equivalence is not what it measures"}
    out.write_text(
        "# SIMULATOR twin of "
        + source.name
        + ", written by tools/gate_trials.py --sim: figures are the simulator's.\n"
        + tomli_w.dumps(doc)
    )
    return out


def trial_env(kind: str, slowdown: float, sim: bool, candidate: str = CANDIDATE) -> dict[str, str]:
    """The environment of one trial's `specgate run`: a slowed trial slows `candidate` alone (the
    A/B gate's config), by the simulator's fault or tools/inject."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPECGATE_INJECT_SLOWDOWN", "SPECGATE_INJECT_ONLY", "SPECGATE_SIM_FAULTS")
    }
    if sim:
        faults = ["*:h200-noise"]
        if kind == SLOWED:
            # slowdown=X makes every step cost (1 + X): the candidate at (1 - F) of its speed.
            faults.append(f"{candidate}:slowdown={slowdown / (1 - slowdown):.6f}")
        env["SPECGATE_SIM_FAULTS"] = ";".join(faults)
    elif kind == SLOWED:
        env["SPECGATE_INJECT_SLOWDOWN"] = f"{slowdown}"
        env["SPECGATE_INJECT_ONLY"] = candidate
    return env


def verdicts(report: Path) -> dict:
    """The gates of one run, read from its report.json: status and figures, by gate name."""
    data = json.loads(report.read_text())
    out = {"overall": data.get("overall"), "host_id": (data.get("provenance") or {}).get("host_id"), "gates": {}}
    for gate in data.get("gates") or []:
        figures = gate.get("figures") or {}
        ratio = figures.get("ratio") or figures.get("accept_ratio") or {}
        out["gates"][gate["gate"]] = {
            "status": gate.get("status"),
            "estimate": ratio.get("estimate"),
            "low": ratio.get("low"),
            "high": ratio.get("high"),
            "required": figures.get("required"),
        }
    out["boot_s"] = {b.get("config", "?"): b.get("seconds") for b in data.get("boots") or [] if isinstance(b, dict)}
    return out


def _run_forwarding_signals(command: list[str], env: dict[str, str], log) -> subprocess.CompletedProcess:  # noqa: ANN001
    """`specgate run`, with SIGTERM and SIGINT passed on to it: it then stops its servers and
    writes what it measured, where a killed trial loop would leave it running on its own."""
    child = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    stopped: list[int] = []

    def forward(sig: int, _frame: object) -> None:
        stopped.append(sig)
        child.send_signal(sig)

    for sig in previous:
        signal.signal(sig, forward)
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopped or code == Exit.INTERRUPTED:
        raise KeyboardInterrupt  # the loop stops: a trial that was stopped is no trial
    return subprocess.CompletedProcess(command, code)


def run_trials(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.deadline_s
    deployment = Path(args.deployment)
    if args.sim:
        deployment = sim_deployment(deployment, out / "deployment-sim.toml")
    commit = os.environ.get("SPECGATE_COMMIT", "unknown")
    for i in range(args.first, args.first + args.runs):
        kind = kind_of(i)
        left = deadline - time.monotonic()
        if left < args.run_s:
            print(f"trial {i:02d} ({kind}): NOT STARTED (needs ~{args.run_s:.0f} s, {left:.0f} s left)", flush=True)
            break
        name = f"trial-{i:02d}-{kind}"
        report_dir = out / name
        with tempfile.TemporaryDirectory(prefix="specgate-trial-baselines-") as baselines:
            command = [sys.executable, "-m", "specgate.cli", "run", str(deployment),
                       "--report-dir", str(report_dir), "--baselines-dir", baselines]  # fmt: skip
            start = time.monotonic()
            with (out / f"{name}.out").open("w") as log:
                done = _run_forwarding_signals(command, trial_env(kind, args.slowdown, args.sim, args.candidate), log)
            seconds = time.monotonic() - start
        line = {
            "trial": i,
            "kind": kind,
            "slowdown": args.slowdown if kind == SLOWED else 0.0,
            "simulator": bool(args.sim),
            "exit": done.returncode,
            "seconds": round(seconds, 1),
            "commit": commit,
            "command": " ".join(command[1:]),
        }
        report = report_dir / "report.json"
        if report.is_file():
            line.update(verdicts(report))
        else:
            line["error"] = f"no report.json (exit {done.returncode}): see {name}.out"
        with (out / "trials.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")
        print(f"{name}: exit {done.returncode} in {seconds:.0f} s; A/B speed {speed_said(line)}", flush=True)
        if done.returncode == Exit.BAD_INPUT:
            # What `specgate run` refused once it refuses in every trial: no trial more is started.
            print(f"stopped: {name}'s run was refused (exit {done.returncode}): see {out / name}.out", file=sys.stderr)
            return int(Exit.BAD_INPUT)
    return 0


def ab_gate(line: dict, half: str) -> dict | None:
    """One trial's A/B gate half ("speed" or "accept"), as `verdicts` read it; None where absent."""
    return next(
        (g for n, g in (line.get("gates") or {}).items() if n.startswith("ab:") and n.endswith(f":{half}")), None
    )


def speed_said(line: dict) -> str:
    speed = ab_gate(line, "speed")
    if speed and speed.get("estimate") is not None:
        return f"{speed['status']} {speed['estimate']:.3f} [{speed['low']:.3f}, {speed['high']:.3f}]"
    return line.get("error", "no A/B speed gate")


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def analyse(folders: list[Path]) -> int:
    lines = []
    seen: set[str] = set()
    for folder in folders:
        path = folder / "trials.jsonl" if folder.is_dir() else folder
        if not path.is_file():
            print(f"{path}: no trials.jsonl", file=sys.stderr)
            return 2
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                print(
                    f"{path}:{number}: not a JSON line ({exc.msg}): is it a trials.jsonl of tools/gate_trials.py run?",
                    file=sys.stderr,
                )
                return 2
            if not isinstance(line, dict) or line.get("kind") not in (UNCHANGED, SLOWED) or "trial" not in line:
                print(
                    f"{path}:{number}: expected a trial line with 'trial' and 'kind' ({UNCHANGED} or {SLOWED})",
                    file=sys.stderr,
                )
                return 2
            # gpu_noise.sh keeps one trials folder per machine and packs it whole after every round,
            # so a later call's archive holds the earlier calls' lines again: each trial counts once.
            key = json.dumps(line, sort_keys=True)
            if key in seen:
                print(
                    f"{path}:{number}: trial {line['trial']:02d} left out, the same line as in an earlier file",
                    file=sys.stderr,
                )
                continue
            seen.add(key)
            lines.append(line)
    if not lines:
        print("no trials", file=sys.stderr)
        return 1
    sim = {bool(x.get("simulator")) for x in lines}
    if len(sim) > 1:
        print("the trials mix the simulator and real servers: analyse them apart", file=sys.stderr)
        return 2
    print(
        ("SIMULATOR trials (the noise model's figures, not a GPU's)" if sim.pop() else "trials on real servers")
        + f": {len(lines)}"
    )
    hosts: dict[str, int] = {}
    for x in lines:
        hosts[str(x.get("host_id"))] = hosts.get(str(x.get("host_id")), 0) + 1
    print("hosts: " + ", ".join(f"{h} ({n} runs)" for h, n in hosts.items()))
    print(
        "\n| runs | n judged | A/B speed FAIL | rate [95% CI] | PASS | INCONCLUSIVE | no verdict (not in n) | A/B accept "
        "| median s a verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in (UNCHANGED, SLOWED):
        runs = [x for x in lines if x["kind"] == kind]
        if not runs:
            continue
        statuses = []
        accept = {}
        for x in runs:
            speed, tau = ab_gate(x, "speed"), ab_gate(x, "accept")
            statuses.append(speed["status"] if speed else "missing")
            if tau:
                accept[tau["status"]] = accept.get(tau["status"], 0) + 1
        fails = statuses.count("fail")
        # The rates are over runs whose A/B speed gate reached a verdict: a run that broke, was
        # refused or lost a server (its gate NOT RUN) neither false-alarmed nor detected anything.
        judged = sum(status in JUDGED for status in statuses)
        other = len(runs) - judged
        if not judged:
            print(f"| {kind} | 0 | - | - | 0 | 0 | {other} | - | - |")
            continue
        low, high = clopper_pearson(fails, judged)
        slow = sorted({x["slowdown"] for x in runs})
        label = kind if kind == UNCHANGED else f"{kind} by {', '.join(f'{s:.0%}' for s in slow)}"
        seconds = sorted(x["seconds"] for x, status in zip(runs, statuses) if status in JUDGED)
        print(
            f"| {label} | {judged} | {fails} | {fails / judged:.0%} [{low:.0%}, {high:.0%}] | {statuses.count('pass')} "
            f"| {statuses.count('inconclusive')} | {other} | {', '.join(f'{k} {v}' for k, v in sorted(accept.items())) or '-'} "
            f"| {seconds[len(seconds) // 2]:.0f} |"
        )
    print("\nper run:")
    for x in lines:
        print(
            f"  trial {x['trial']:02d} {x['kind']:9s} host {str(x.get('host_id'))[:16]:16s} exit {x['exit']} {x['seconds']:5.0f} s  A/B speed {speed_said(x)}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/gate_trials.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="run unchanged and slowed trials, alternating")
    run.add_argument("--sim", action="store_true", help="on the simulator (its figures, labelled so)")
    run.add_argument("--runs", type=int, default=10)
    run.add_argument("--slowdown", type=float, default=0.10)
    run.add_argument("--first", type=int, default=1, help="number the trials from K (later calls do not overwrite)")
    run.add_argument("--deadline-s", type=float, default=570.0)
    run.add_argument("--run-s", type=float, default=150.0, help="no trial is started with less than this left")
    run.add_argument("--deployment", default=str(DEPLOYMENT))
    run.add_argument("--out", default=os.environ.get("OUT", "/tmp/out"))
    ana = sub.add_parser("analyse", help="false-alarm and detection rates over trials.jsonl files")
    ana.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.what == "analyse":
        return analyse(args.folders)
    try:
        return _checked_run(parser, args)
    except KeyboardInterrupt:
        print(
            "stopped: the trial under way was interrupted and is not recorded; trials.jsonl keeps the ones that finished",
            file=sys.stderr,
        )
        return int(Exit.INTERRUPTED)


def _checked_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not 0 < args.slowdown < 0.9:
        parser.error(f"--slowdown {args.slowdown}: expected a fraction above 0 and below 0.9")
    if args.runs < 1 or args.first < 1:
        parser.error("--runs and --first: expected at least 1")
    if not args.deadline_s > 0 or not args.run_s >= 0:
        parser.error(
            f"--deadline-s {args.deadline_s:g} --run-s {args.run_s:g}: expected a deadline above 0 s and a run time of 0 s or more"
        )
    if Path(args.out).exists() and not Path(args.out).is_dir():
        parser.error(f"--out {args.out}: not a folder (the trials' report folders, logs and trials.jsonl go there)")
    if not Path(args.deployment).is_file():
        parser.error(f"--deployment {args.deployment}: no such file")
    # Checked as `specgate run` checks it, before any trial: a deployment every trial would refuse
    # (or one with no A/B gate to count) would otherwise fill trials.jsonl with runs of no verdict.
    from specgate.deployment import load_deployment
    from specgate.errors import SpecgateError

    try:
        dep = load_deployment(args.deployment)
    except SpecgateError as exc:
        parser.error(f"--deployment {args.deployment}: {exc}")
    ab = dep.gates.of("ab")
    if len(ab) != 1:
        parser.error(
            f"--deployment {args.deployment}: {len(ab)} [[gates.ab]]: expected one, whose config the slowed "
            "trials slow and whose speed gate the trials count"
        )
    # The slowed trials slow the A/B gate's candidate, whatever its name: a fixed "eagle3-decode"
    # slowed nothing in a deployment that names it otherwise, and every slowed trial ran unchanged.
    args.candidate = ab[0].config
    taken = taken_trials(Path(args.out))
    clash = sorted(taken & set(range(args.first, args.first + args.runs)))
    if clash:
        # A trial's report folder and log would be overwritten, and trials.jsonl would hold its number twice.
        parser.error(
            f"--first {args.first} --runs {args.runs}: trial(s) {', '.join(f'{i:02d}' for i in clash)} already in "
            f"{args.out} (a report folder, log or trials.jsonl line): pass --first {max(taken) + 1} or another --out"
        )
    return run_trials(args)


def taken_trials(out: Path) -> set[int]:
    """The trial numbers `out` already holds: a trials.jsonl line, a report folder or a log."""
    taken = set()
    for path in out.glob("trial-*"):
        number = path.name.split("-")[1].split(".")[0]
        if number.isdigit():
            taken.add(int(number))
    trials = out / "trials.jsonl"
    if trials.is_file():
        for text in trials.read_text().splitlines():
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(line, dict) and isinstance(line.get("trial"), int):
                taken.add(line["trial"])
    return taken


if __name__ == "__main__":
    sys.exit(main())
