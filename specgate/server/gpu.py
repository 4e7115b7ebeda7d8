"""What the GPUs are, and whether processes still hold their memory.

Read through nvidia-smi so that nothing here needs torch or NVML bindings; on a
machine without it every answer is "no GPU" and waits return at once.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass

from specgate.errors import SmiFailed


@dataclass(frozen=True)
class GpuInfo:
    name: str
    count: int
    driver: str
    cuda: str
    memory_total_mib: int


def _smi(*args: str, strict: bool = False) -> str | None:
    """nvidia-smi's output; None when it is not installed. A failing nvidia-smi is
    None too unless `strict`, where it raises SmiFailed."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        if strict:
            raise SmiFailed(str(exc)) from None
        return None
    if out.returncode != 0:
        if strict:
            raise SmiFailed(f"exit {out.returncode}: {out.stderr.strip()[:200]}")
        return None
    return out.stdout


def gpu_info() -> GpuInfo | None:
    out = _smi("--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits")
    if not out or not out.strip():
        return None
    rows = [r.split(", ") for r in out.strip().splitlines()]
    cuda = "unknown"
    header = _smi() or ""
    for part in header.split("|"):
        if "CUDA Version:" in part:
            cuda = part.split("CUDA Version:")[1].strip().split()[0]
    try:
        memory = int(float(rows[0][2]))
    except (IndexError, ValueError):
        memory = 0
    return GpuInfo(
        name=rows[0][0].strip(), count=len(rows), driver=rows[0][1].strip(), cuda=cuda, memory_total_mib=memory
    )


def pids_holding_gpu_memory() -> set[int] | None:
    """PIDs of compute processes on any GPU; None without nvidia-smi; SmiFailed when it fails."""
    out = _smi("--query-compute-apps=pid", "--format=csv,noheader,nounits", strict=True)
    if out is None:
        return None
    return {int(x) for x in out.split() if x.strip().isdigit()}


def memory_used_mib() -> int | None:
    """Memory in use on all GPUs together; None without nvidia-smi."""
    out = _smi("--query-gpu=memory.used", "--format=csv,noheader,nounits")
    if out is None:
        return None
    try:
        return sum(int(float(x)) for x in out.split())
    except ValueError:
        return None


def wait_gpu_released(pids: set[int], timeout_s: float, idle_used_mib: int | None, poll_s: float = 1.0) -> str | None:
    """Wait until the GPU memory `pids` held is released; returns what still holds it.

    The next config's server must not boot while the last one's memory is still
    mapped: it would size its KV cache against the leftovers or fail to start. Two
    signals, because in a container nvidia-smi may list no (or host) PIDs: none of
    `pids` among the compute apps, and, when given, memory in use back to within
    512 MiB of what it was before any server started.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            holding = pids_holding_gpu_memory()
        except SmiFailed as exc:
            if time.monotonic() >= deadline:
                return f"cannot confirm: nvidia-smi failed ({exc})"
            time.sleep(poll_s)
            continue
        if holding is None:
            return None  # no nvidia-smi: no GPU to wait for
        left = pids & holding
        used = memory_used_mib() if idle_used_mib is not None else None
        high = used is not None and idle_used_mib is not None and used > idle_used_mib + 512
        if not left and not high:
            return None
        if time.monotonic() >= deadline:
            parts = [f"processes {sorted(left)} still listed"] if left else []
            if high:
                parts.append(f"{used} MiB in use against {idle_used_mib} MiB before the first boot")
            return "; ".join(parts)
        time.sleep(poll_s)
