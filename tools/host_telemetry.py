#!/usr/bin/env python3
"""Host and GPU telemetry beside a GPU run, for finding where speed noise comes from (lab tool).

    python3 tools/host_telemetry.py OUT.jsonl [--hz 2] [--match sglang]

Writes one JSON object per line until SIGTERM or SIGINT:
- {"kind": "host", "t": unix time, "cpu": {field: fraction of all CPUs, steal among them}, "load": [1, 5, 15 min],
   "mhz": [per-CPU MHz], "probe_us": µs of a fixed pure-Python loop, "per_cpu_busy": [fraction per logical CPU]}
- {"kind": "threads", "t": …, "rows": [[pid, tid, comm, cpu fraction of one core, core it last ran on]]}
  for every thread of a matching process (its command line holds --match) that used at least 1% of
  a core in the interval, and every process's main thread always (the scheduler's loop runs there);
- {"kind": "proc", "pid": …, "cmdline": …} once per matching process, when first seen;
- {"kind": "mark", "t": …, "text": …} for every line appended to OUT.jsonl.marks (a run's steps);
- {"kind": "lscpu", "text": …} once at the start;
- {"kind": "note", "t": …, "text": …} where nvidia-smi could not start (OUT.gpu.csv then stays empty).
GPU clocks and power come from `nvidia-smi --query-gpu … -lms`, appended to OUT.gpu.csv beside it
(appended, as OUT.jsonl is: a later call on the same machine adds to both).

/proc/stat's fields are cumulative jiffies; the sampler writes each interval's share, so a reader
sees steal and softirq per interval. No third-party imports: it runs beside SGLang's environment
on a bare machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
TICKS = os.sysconf("SC_CLK_TCK")


def read_stat() -> tuple[list[int], list[list[int]]]:
    total: list[int] = []
    per_cpu: list[list[int]] = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu "):
            total = [int(x) for x in line.split()[1:9]]
        elif line.startswith("cpu"):
            per_cpu.append([int(x) for x in line.split()[1:9]])
    return total, per_cpu


def shares(before: list[int], after: list[int]) -> dict[str, float]:
    delta = [b - a for a, b in zip(before, after)]
    whole = sum(delta) or 1
    return {name: round(d / whole, 4) for name, d in zip(STAT_FIELDS, delta)}


def probe_us() -> float:
    """Microseconds a fixed piece of pure-Python work takes now. In a VM, /proc's MHz is the nominal
    figure and steal shows only time taken away, not a slower core (turbo, a busy neighbour on the
    physical host, memory bandwidth); this shows the speed host code actually gets, which is what a
    speculative server's per-cycle scheduling spends and a GPU-bound plain server barely does."""
    t0 = time.perf_counter()
    total = 0
    for i in range(20000):
        total += i * i
    return round((time.perf_counter() - t0) * 1e6, 1)


def mhz() -> list[float]:
    out = []
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            out.append(round(float(line.split(":")[1]), 1))
    return out


def matching_pids(match: str) -> dict[int, str]:
    """Processes whose command line holds `match`, and their descendants: a server's scheduler
    and detokenizer are started by multiprocessing, whose command lines need not name SGLang."""
    cmdlines: dict[int, str] = {}
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        cmdlines[pid] = cmdline
        parents[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found: dict[int, str] = {}
    for pid, cmdline in cmdlines.items():
        if "host_telemetry" in cmdline:
            continue
        ancestor, hops = pid, 0
        while ancestor > 1 and hops < 32:
            if match in cmdlines.get(ancestor, ""):
                found[pid] = cmdline
                break
            ancestor, hops = parents.get(ancestor, 0), hops + 1
    return found


def thread_times(pid: int) -> dict[int, tuple[str, int, int]]:
    """tid -> (comm, utime + stime in ticks, the CPU it last ran on)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        # comm is in parentheses and may hold spaces: split after its closing one.
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2 :].split()
        # rest[0] is field 3 (state): utime is field 14, stime 15, processor 39.
        out[int(tid)] = (comm, int(rest[11]) + int(rest[12]), int(rest[36]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--hz", type=float, default=2.0)
    parser.add_argument("--match", default="sglang")
    args = parser.parse_args()
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    period = 1.0 / args.hz
    marks = Path(str(args.out) + ".marks")
    gpu_csv = Path(str(args.out).removesuffix(".jsonl") + ".gpu.csv")
    gpu = None
    gpu_missing = ""
    try:
        gpu = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,utilization.gpu,temperature.gpu,clocks_throttle_reasons.active",
             "--format=csv,noheader", f"-lms={int(period * 1000)}"],
            stdout=gpu_csv.open("a"), stderr=subprocess.DEVNULL)
    except OSError as exc:
        gpu_missing = f"no GPU telemetry: nvidia-smi could not start ({exc})"
    try:
        return _sample(args, marks, gpu_missing, lambda: stop)
    finally:
        # Also on an error in the loop: a left nvidia-smi -lms would poll the GPU for the rest of the machine's life.
        if gpu is not None:
            gpu.terminate()
            gpu.wait(timeout=10)


def _sample(args: argparse.Namespace, marks: Path, gpu_missing: str, stopped: Callable[[], bool]) -> int:
    period = 1.0 / args.hz
    with args.out.open("a") as sink:
        def write(record: dict) -> None:
            sink.write(json.dumps(record, separators=(",", ":")) + "\n")

        try:
            write({"kind": "lscpu", "text": subprocess.run(["lscpu", "-e"], capture_output=True, text=True, timeout=10).stdout})
        except (OSError, subprocess.SubprocessError):
            pass
        if gpu_missing:
            write({"kind": "note", "t": round(time.time(), 3), "text": gpu_missing})
        seen: set[int] = set()
        marks_read = 0
        total0, per0 = read_stat()
        threads0: dict[tuple[int, int], tuple[str, int, int]] = {}
        t0 = time.monotonic()
        while not stopped():
            time.sleep(max(0.0, period - (time.monotonic() - t0)))
            t1 = time.monotonic()
            now = time.time()
            total1, per1 = read_stat()
            write({"kind": "host", "t": round(now, 3), "cpu": shares(total0, total1),
                   "load": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
                   "mhz": mhz(), "probe_us": probe_us(),
                   "per_cpu_busy": [round(1 - (s["idle"] + s["iowait"]), 3) for s in (shares(a, b) for a, b in zip(per0, per1))]})
            pids = matching_pids(args.match)
            for pid, cmdline in pids.items():
                if pid not in seen:
                    seen.add(pid)
                    write({"kind": "proc", "t": round(now, 3), "pid": pid, "cmdline": cmdline[:400]})
            threads1 = {}
            rows = []
            span = (t1 - t0) * TICKS
            for pid in pids:
                for tid, (comm, ticks, core) in thread_times(pid).items():
                    threads1[(pid, tid)] = (comm, ticks, core)
                    before = threads0.get((pid, tid))
                    used = (ticks - before[1]) / span if before else 0.0
                    if used >= 0.01 or tid == pid:
                        rows.append([pid, tid, comm, round(used, 3), core])
            if rows:
                write({"kind": "threads", "t": round(now, 3), "rows": rows})
            if marks.exists():
                lines = marks.read_text().splitlines()
                for text in lines[marks_read:]:
                    write({"kind": "mark", "t": round(now, 3), "text": text})
                marks_read = len(lines)
            sink.flush()
            total0, per0, threads0, t0 = total1, per1, threads1, t1
    return 0


if __name__ == "__main__":
    sys.exit(main())
