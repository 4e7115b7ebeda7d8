#!/usr/bin/env python3
"""Read tools/gpu_noise.sh's rounds and say where the speed noise sits (lab tool, issue 50).

    python3 tools/noise_rounds.py DIR [DIR ...]     (each DIR an unpacked results.tar.gz)

Per round: each config's median decode tok/s, and the paired per-prompt ratios E/plain, E/E-twin.
Across rounds of one machine: the spread of each config's log median, of log(E/E-twin), and the
correlation of E's and E-twin's round offsets (a shared, host-side part shows as a high r and an
E/E-twin spread well under each one's own). Within rounds: the prompt's own effect (one prompt is
as fast or slow in every config) and the lag-1 autocorrelation of what is left, in send order.
Host signals per round, from telemetry.jsonl.gz between the round's marks: steal, busy CPUs, load,
GPU SM clock and power, and the working threads (>= 30% of a core) of every SGLang process, plain
or speculative, with the cores the busiest ran on.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

CONFIGS = ("baseline", "eagle3-decode", "eagle3-decode-twin", "eagle3-decode-drawn")
SHORT = {"baseline": "P", "eagle3-decode": "E", "eagle3-decode-twin": "T", "eagle3-decode-drawn": "D"}


def gpu_of(folder: Path) -> str:
    """The first GPU's uuid in provenance.txt's nvidia-smi lines ("0, NVIDIA H100 80GB HBM3, driver,
    memory, uuid"), whatever the model: an H200 alone was matched, so every other machine's rounds
    read "?" and pooled as one machine's frame."""
    for line in (folder / "provenance.txt").read_text().splitlines():
        fields = line.split(", ")
        if len(fields) >= 5 and fields[0].strip().isdigit() and fields[1].startswith("NVIDIA") and fields[4].startswith("GPU-"):
            return fields[4].strip()
    return "?"


def rounds(folder: Path) -> list[dict]:
    host = next((line.split("boot-id ")[1].strip() for line in (folder / "provenance.txt").read_text().splitlines() if "boot-id" in line), "?")
    gpu = gpu_of(folder)
    out = []
    for bench in sorted(folder.glob("round-*/benchmark.json")):
        name = bench.parent.name
        per = {}
        for b in json.loads(bench.read_text())["benchmarks"]:
            e = b["extra_info"]
            # A prompt sent more than once in a round (repeats > the prompts) keeps every sending,
            # paired across configs by its occurrence: a dict on the label alone kept the last one.
            seen: dict[str, int] = defaultdict(int)
            keyed = {}
            for label, tps in zip(e["prompt"], e["decode_tps"]):
                seen[label] += 1
                keyed[label if seen[label] == 1 else f"{label}#{seen[label]}"] = tps
            per[e["config"]] = keyed
        missing = [c for c in CONFIGS if c not in per]
        if missing:
            print(f"{name}: left out, no figures of {', '.join(missing)} (a server that failed?)", file=sys.stderr)
            continue
        out.append({"name": name, "variant": name.split("-", 2)[2], "host": host[:8], "gpu": gpu[:12], "per": per, "folder": folder})
    return out


def median(xs):
    return statistics.median(xs)


def sd(xs):
    return statistics.stdev(xs) if len(xs) > 1 else float("nan")


def corr(a, b):
    if len(a) < 3:
        return float("nan")
    return statistics.correlation(a, b)


def lag1(xs):
    if len(xs) < 4:
        return float("nan")
    m = statistics.fmean(xs)
    num = sum((x - m) * (y - m) for x, y in zip(xs, xs[1:]))
    den = sum((x - m) ** 2 for x in xs)
    return num / den if den else float("nan")


def marks(folder: Path) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    path = folder / "telemetry.jsonl.marks"
    if not path.exists():
        return {}
    for line in path.read_text().splitlines():
        t, what, name, *_ = line.split()
        spans.setdefault(name, [0.0, 0.0])[0 if what == "start" else 1] = float(t)
    return {k: (v[0], v[1]) for k, v in spans.items()}


def telemetry(folder: Path, span: tuple[float, float]) -> dict:
    path = folder / "telemetry.jsonl.gz"
    if not path.exists():
        return {}
    steal, busy, load, probe = [], [], [], []
    spec_cpu: dict[int, list[float]] = defaultdict(list)
    spec_cores: dict[int, set[int]] = defaultdict(set)
    with gzip.open(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            t = r.get("t", 0)
            if not (span[0] <= t <= span[1]):
                continue
            if r["kind"] == "host":
                steal.append(r["cpu"]["steal"])
                busy.append(sum(r["per_cpu_busy"]))
                load.append(r["load"][0])
                if "probe_us" in r:
                    probe.append(r["probe_us"])
            elif r["kind"] == "threads":
                for _pid, tid, _comm, used, core in r["rows"]:
                    if used >= 0.3:  # a thread that works (a scheduler's loop), not an idle helper
                        spec_cpu[tid].append(used)
                        spec_cores[tid].add(core)
    sm, power = [], []
    gpu_csv = folder / "telemetry.gpu.csv"
    if gpu_csv.exists():
        for row in csv.reader(gpu_csv.open()):
            try:
                t = datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
            except ValueError:
                continue
            if span[0] <= t <= span[1]:
                sm.append(float(row[2].split()[0]))
                power.append(float(row[4].split()[0]))
    busiest = sorted(spec_cpu.items(), key=lambda kv: -sum(kv[1]))[:6]
    return {
        "steal_mean": statistics.fmean(steal) if steal else float("nan"),
        "steal_max": max(steal) if steal else float("nan"),
        "busy_cpus": statistics.fmean(busy) if busy else float("nan"),
        "load1": statistics.fmean(load) if load else float("nan"),
        "sm_mhz_median": median(sm) if sm else float("nan"),
        "sm_mhz_min_busy": min((s for s, p in zip(sm, power) if p > 150), default=float("nan")),
        "power_w_median": median(power) if power else float("nan"),
        "working_threads": len(spec_cpu),
        "probe_us": median(probe) if probe else float("nan"),
        "busiest_cores": [len(spec_cores[tid]) for tid, _ in busiest],
    }


def rounds_of(folders: list[Path]) -> list[dict]:
    """Every round of `folders`, each once: a later call's archive packs the same machine's folder
    again with the earlier rounds in it (gpu_noise.sh packs its whole work folder), and a round
    counted twice narrows the spread between rounds and adds degrees of freedom it does not have.
    A round is the same where its machine, name and figures are."""
    out, seen = [], set()
    for folder in folders:
        for r in rounds(folder):
            key = (r["gpu"], r["name"], json.dumps(r["per"], sort_keys=True))
            if key in seen:
                print(f"{folder}: {r['name']} left out, the same round as in an earlier folder", file=sys.stderr)
                continue
            seen.add(key)
            out.append(r)
    return out


def main(folders: list[Path]) -> None:
    all_rounds = rounds_of(folders)
    print("## Per round (median decode tok/s per config; paired per-prompt ratios)\n")
    print("| round | machine | P | E | T (twin) | D | E/P | T/P | E/T | E/T per-prompt sd |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in all_rounds:
        per = r["per"]
        med = {c: median(per[c].values()) for c in CONFIGS if c in per}
        prompts = [p for p in per["eagle3-decode"] if p in per["eagle3-decode-twin"]]
        et = [per["eagle3-decode"][p] / per["eagle3-decode-twin"][p] for p in prompts]
        r["med"] = med
        r["et_pairs"] = et
        print(f"| {r['name']} | {r['gpu']} | {med['baseline']:.1f} | {med['eagle3-decode']:.1f} | {med['eagle3-decode-twin']:.1f} | "
              f"{med['eagle3-decode-drawn']:.1f} | {med['eagle3-decode'] / med['baseline']:.3f} | "
              f"{med['eagle3-decode-twin'] / med['baseline']:.3f} | {med['eagle3-decode'] / med['eagle3-decode-twin']:.3f} | "
              f"{100 * sd([math.log(x) for x in et]):.1f}% |")
    by_host: dict[str, list[dict]] = defaultdict(list)
    for r in all_rounds:
        by_host[r["gpu"]].append(r)
    print("\n## Across rounds of one machine (sd of the log of each round's median, in %)\n")
    for gpu, rs in by_host.items():
        if len(rs) < 2:
            print(f"- {gpu}: {len(rs)} round: no spread")
            continue
        logs = {c: [math.log(r["med"][c]) for r in rs] for c in CONFIGS}
        line = ", ".join(f"{SHORT[c]} {100 * sd(logs[c]):.2f}%" for c in CONFIGS)
        et = [a - b for a, b in zip(logs["eagle3-decode"], logs["eagle3-decode-twin"])]
        ep = [a - b for a, b in zip(logs["eagle3-decode"], logs["baseline"])]
        print(f"- {gpu} ({len(rs)} rounds: {', '.join(r['variant'] for r in rs)}): {line}; "
              f"log(E/T) {100 * sd(et):.2f}%; log(E/P) {100 * sd(ep):.2f}%; "
              f"r(E, T) = {corr(logs['eagle3-decode'], logs['eagle3-decode-twin']):.2f}, "
              f"r(E, D) = {corr(logs['eagle3-decode'], logs['eagle3-decode-drawn']):.2f}, "
              f"r(E, P) = {corr(logs['eagle3-decode'], logs['baseline']):.2f}")
        for variant in sorted({r["variant"] for r in rs}):
            sub = [r for r in rs if r["variant"] == variant]
            print(f"  - {variant}: " + ", ".join(f"{SHORT[c]} {statistics.fmean(r['med'][c] for r in sub):.1f}" for c in CONFIGS)
                  + f" tok/s (mean of {len(sub)} round medians); E/P {statistics.fmean(r['med']['eagle3-decode'] / r['med']['baseline'] for r in sub):.3f}")
    print("\n## Within rounds: the prompt's own effect and what is left\n")
    # A prompt's effect: its log speed less the round's median, averaged over rounds, per config.
    for c in CONFIGS:
        effects: dict[str, list[float]] = defaultdict(list)
        resid_lag, within_sd, left_sd = [], [], []
        for r in all_rounds:
            vals = r["per"][c]
            m = math.log(median(vals.values()))
            for p, v in vals.items():
                effects[p].append(math.log(v) - m)
        effect = {p: statistics.fmean(v) for p, v in effects.items()}
        for r in all_rounds:
            vals = r["per"][c]
            m = math.log(median(vals.values()))
            raw = [math.log(v) - m for v in vals.values()]
            left = [math.log(v) - m - effect[p] for p, v in vals.items()]
            within_sd.append(sd(raw))
            left_sd.append(sd(left))
            resid_lag.append(lag1(left))
        slow = sorted(effect.items(), key=lambda kv: kv[1])[:2]
        print(f"- {SHORT[c]} ({c}): request sd within a round {100 * statistics.fmean(within_sd):.1f}%, "
              f"{100 * statistics.fmean(left_sd):.1f}% once each prompt's own effect is removed; "
              f"lag-1 of what is left {statistics.fmean(resid_lag):+.2f} (mean over {len(resid_lag)} rounds); "
              f"slowest prompts: " + ", ".join(f"{p} {100 * e:+.1f}%" for p, e in slow))
    # Do the configs' leftovers move together request by request? Interleaved, a config's k-th
    # request is sent within seconds of every other config's k-th: a host-side slowdown that
    # comes and goes within a round shows as a positive correlation here.
    print("\n## Within rounds: do the configs' leftovers move together, request by request?\n")
    effects_by_config = {}
    for c in CONFIGS:
        acc: dict[str, list[float]] = defaultdict(list)
        for r in all_rounds:
            m = math.log(median(r["per"][c].values()))
            for p, v in r["per"][c].items():
                acc[p].append(math.log(v) - m)
        effects_by_config[c] = {p: statistics.fmean(v) for p, v in acc.items()}

    def leftover(r, c):
        m = math.log(median(r["per"][c].values()))
        return {p: math.log(v) - m - effects_by_config[c][p] for p, v in r["per"][c].items()}

    for a, b in (("eagle3-decode", "eagle3-decode-twin"), ("eagle3-decode", "eagle3-decode-drawn"),
                 ("eagle3-decode", "baseline"), ("eagle3-decode-twin", "baseline")):
        xs, ys = [], []
        for r in all_rounds:
            la, lb = leftover(r, a), leftover(r, b)
            for p in la:
                if p in lb:
                    xs.append(la[p])
                    ys.append(lb[p])
        print(f"- r({SHORT[a]}, {SHORT[b]}) over {len(xs)} paired requests: {corr(xs, ys):+.2f}")
    print("\n## Host signals per round (between the round's marks)\n")
    print("| round | steal mean / max | busy CPUs | load 1 min | GPU SM MHz median / min while busy | power W | working threads | cores used by the busiest threads | CPU probe µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in all_rounds:
        span = marks(r["folder"]).get(r["name"])
        if not span:
            continue
        t = telemetry(r["folder"], span)
        if not t:
            continue
        print(f"| {r['name']} | {100 * t['steal_mean']:.2f}% / {100 * t['steal_max']:.1f}% | {t['busy_cpus']:.2f} | {t['load1']:.2f} | "
              f"{t['sm_mhz_median']:.0f} / {t['sm_mhz_min_busy']:.0f} | {t['power_w_median']:.0f} | {t['working_threads']} | {t['busiest_cores']} | {t['probe_us']:.0f} |")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
