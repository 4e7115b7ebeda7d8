"""The hardware/software fingerprint a stored baseline is valid for.

A figure measured on one GPU, driver, SGLang release or model says nothing about
another, so baselines are filed under their fingerprint and only compared when the
current run's fingerprint is the same (or the user overrides, knowingly).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from specgate.deployment import Deployment
from specgate.hardware import GpuInfo, gpu_info
from specgate.server.ssh_command import remote_gpu_info
from specgate.server_info import lookup


@dataclass(frozen=True)
class Fingerprint:
    gpu: str
    gpu_count: int
    driver: str
    cuda: str
    sglang: str
    model: str

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Fingerprint:
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in d]
        if missing:
            raise KeyError(f"fingerprint lacks {', '.join(missing)}")
        values: dict[str, Any] = {n: (int(d[n]) if n == "gpu_count" else str(d[n])) for n in names}
        return cls(**values)

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()[:8]

    @property
    def slug(self) -> str:
        """A file name a human can read: gpu, count, SGLang version, digest."""
        gpu = re.sub(r"[^a-z0-9]+", "-", self.gpu.lower()).strip("-") or "unknown-gpu"
        sglang = re.sub(r"[^a-z0-9.]+", "-", self.sglang.lower()).strip("-") or "unknown"
        return f"{gpu}-x{self.gpu_count}-sglang-{sglang}-{self.digest}"

    def differences(self, other: Fingerprint) -> list[str]:
        return [
            f"{f.name}: stored {getattr(other, f.name)!r}, now {getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


def unread_fields(now: Fingerprint, stored: Fingerprint) -> list[str]:
    """The fields this run could not read (unknown) that the stored record did: not another machine,
    and a baseline recorded now would be filed under 'unknown', where no later run finds it."""
    def unknown(value: object) -> bool:
        return str(value).startswith("unknown")

    return [f.name for f in fields(now) if unknown(getattr(now, f.name)) and not unknown(getattr(stored, f.name))]


# A server attached by url runs on a machine this client knows nothing of: its GPUs are not this
# host's, and SGLang's /get_server_info names no GPU, driver or CUDA. Said so, never guessed, and
# the same on every run, so baselines of url servers match on what is known (SGLang, model, GPUs
# used) and on what [hardware] declares.
URL_UNKNOWN = "unknown (server attached by url; declare it in [hardware])"


def collect_fingerprint(deployment: Deployment, server_info: dict, model_info: dict) -> Fingerprint:
    """From the deployment's [hardware] overrides, the GPUs (NVML), and the reference server; for
    servers attached by url, only what the server tells and [hardware] declares."""
    hw = deployment.hardware
    if deployment.simulator:  # the host's GPUs are not what ran: never asked
        gpu_name, count, driver, cuda = "none (simulator)", 0, "none", "none"
    elif deployment.launch.launcher == "url":  # this host's GPUs are the client's, not the server's
        gpu_name, count, driver, cuda = URL_UNKNOWN, 0, URL_UNKNOWN, URL_UNKNOWN
    else:
        gpu = _servers_gpu(deployment)
        if isinstance(gpu, str):  # the servers' host could not be asked: never this client's GPU instead
            gpu_name, count, driver, cuda = f"unknown ({gpu})", 0, "unknown", "unknown"
            gpu = None
        else:
            gpu_name = gpu.name if gpu else "no GPU visible"
            count = gpu.count if gpu else 0
            driver = gpu.driver if gpu else "unknown"
            cuda = gpu.cuda if gpu else "unknown"
    # The GPUs the server runs on (tensor x pipeline x data parallel), where it says so: on a host
    # with more GPUs than a deployment uses, the host's count would file a one-GPU baseline under x2.
    used = _gpus_used(server_info)
    if used is not None and not deployment.simulator:
        count = used
    return Fingerprint(
        gpu=hw.get("gpu", gpu_name),
        gpu_count=int(hw.get("gpu_count", count)),
        driver=hw.get("driver", driver),
        cuda=hw.get("cuda", cuda),
        sglang=str(server_info.get("version") or hw.get("sglang") or "unknown"),
        model=str(model_info.get("model_path") or deployment.model or "unknown"),
    )


def _servers_gpu(deployment: Deployment) -> GpuInfo | None | str:
    """The GPUs of the host the servers run on: this one for local servers; for ssh, rank 0's
    host, asked over ssh (this client's GPUs would file the baseline under the wrong machine);
    a string says why that host could not be asked."""
    if deployment.launch.launcher == "ssh" and deployment.launch.ssh is not None:
        return remote_gpu_info(deployment.launch.ssh)
    return gpu_info()


def _gpus_used(server_info: dict) -> int | None:
    """tp x pp x dp as the server reports them (dp ranks share the tp GPUs under DP attention);
    None where it does not report tp_size."""
    tp = lookup(server_info, "tp_size", "tensor_parallel_size")
    if tp is None:
        return None
    try:
        sizes = [max(1, int(v)) for v in (tp, lookup(server_info, "pp_size") or 1, lookup(server_info, "dp_size") or 1)]
    except (TypeError, ValueError):
        return None
    tp, pp, dp = sizes
    if lookup(server_info, "enable_dp_attention"):
        dp = 1
    return tp * pp * dp
