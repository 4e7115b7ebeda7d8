"""What the GPUs are, and whether processes still hold their memory.

Read through NVML (nvidia-ml-py's `pynvml`, the library nvidia-smi itself is a client of): no
torch, no scraping of a tool's text. Where NVIDIA's driver library is not there (a CPU machine)
every answer is "no GPU" and waits return at once.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from specgate.errors import GpuQueryFailed, SpecgateError

T = TypeVar("T")
MIB = 1 << 20


@dataclass(frozen=True)
class GpuInfo:
    name: str
    count: int
    driver: str
    cuda: str  # the newest CUDA the driver supports, as nvidia-smi's header prints it ("13.0")
    memory_total_mib: int


def _query(read: Callable[[Any], T], strict: bool = False) -> T | None:
    """`read(pynvml)` between NVML's init and shutdown. None where there is no GPU to ask (no
    driver library, or a driver that is not loaded); an NVML that starts but fails to answer is
    None too, unless `strict`, where it raises GpuQueryFailed (nothing can be confirmed)."""
    try:
        import pynvml
    except ImportError:
        if shutil.which("nvidia-smi"):
            # A GPU host without specgate's own dependencies (a checkout run by PYTHONPATH): saying
            # "no GPU" here would file its figures under the wrong fingerprint, silently.
            raise SpecgateError(
                "nvidia-smi is on this host but nvidia-ml-py (pynvml) is not importable: install specgate's "
                "dependencies (pip install specgate, or pip install nvidia-ml-py)"
            ) from None
        return None
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded):
        return None
    except pynvml.NVMLError as exc:
        if strict:
            raise GpuQueryFailed(f"NVML did not start: {exc}") from None
        return None
    try:
        return read(pynvml)
    except pynvml.NVMLError as exc:
        if strict:
            raise GpuQueryFailed(f"NVML: {exc}") from None
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _text(value: Any) -> str:
    """NVML's strings: str from nvidia-ml-py 11.515 on, bytes from older bindings (a GPU host may
    run whatever its SGLang brought); str() of bytes would file "b'NVIDIA H200'" in a fingerprint."""
    return (value.decode() if isinstance(value, bytes) else str(value)).strip()


def _devices(nvml: Any) -> list[Any]:
    return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]


def _cuda_version(encoded: int) -> str:
    """NVML's 13000 as "13.0", 12080 as "12.8": the form the stored fingerprints hold."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def gpu_info() -> GpuInfo | None:
    def read(nvml: Any) -> GpuInfo | None:
        devices = _devices(nvml)
        if not devices:
            return None
        return GpuInfo(
            name=_text(nvml.nvmlDeviceGetName(devices[0])),
            count=len(devices),
            driver=_text(nvml.nvmlSystemGetDriverVersion()),
            cuda=_cuda_version(int(nvml.nvmlSystemGetCudaDriverVersion())),
            memory_total_mib=int(nvml.nvmlDeviceGetMemoryInfo(devices[0]).total) // MIB,
        )

    return _query(read)


def gpu_uuids() -> list[str] | None:
    """Every GPU's UUID ("GPU-290761d7-..."): what tells lent machines apart."""
    return _query(lambda nvml: [_text(nvml.nvmlDeviceGetUUID(d)) for d in _devices(nvml)])


def pids_holding_gpu_memory() -> set[int] | None:
    """PIDs of compute processes on any GPU; None without a GPU; GpuQueryFailed when NVML fails.
    A device that cannot list its processes lists none, and the memory-in-use signal of
    wait_gpu_released stands for it: NotSupported (containers), NoPermission (a MIG-enabled GPU
    asked as a whole without the privilege to aggregate its instances), FunctionNotFound (a driver
    older than the bindings' call). nvidia-smi printed nothing there rather than fail."""
    cannot_list = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")

    def read(nvml: Any) -> set[int]:
        quiet = tuple(getattr(nvml, name) for name in cannot_list if hasattr(nvml, name))
        pids: set[int] = set()
        for device in _devices(nvml):
            try:
                pids |= {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(device)}
            except quiet:
                continue
        return pids

    return _query(read, strict=True)


def memory_used_mib() -> int | None:
    """Memory in use on all GPUs together; None without a GPU."""
    return _query(lambda nvml: sum(int(nvml.nvmlDeviceGetMemoryInfo(d).used) for d in _devices(nvml)) // MIB)


def wait_gpu_released(pids: set[int], timeout_s: float, idle_used_mib: int | None, poll_s: float = 1.0) -> str | None:
    """Wait until the GPU memory `pids` held is released; returns what still holds it.

    The next config's server must not boot while the last one's memory is still
    mapped: it would size its KV cache against the leftovers or fail to start. Two
    signals, because in a container NVML may list no (or host) PIDs: none of
    `pids` among the compute apps, and, when given, memory in use back to within
    512 MiB of what it was before any server started.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            holding = pids_holding_gpu_memory()
        except GpuQueryFailed as exc:
            if time.monotonic() >= deadline:
                return f"cannot confirm: the GPU did not answer ({exc})"
            time.sleep(poll_s)
            continue
        if holding is None:
            return None  # no GPU to wait for
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
