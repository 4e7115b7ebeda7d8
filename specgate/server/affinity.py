"""CPU placement of servers booted side by side (`launch.cpu_affinity = "split"`).

A speculative server's draft-verify loop runs more host code per token than plain decoding
(scheduling, draft steps launched from Python), so it may be the one that feels where the kernel
puts its scheduler: beside a neighbour's busy process, or on the other hyperthread of one.
Split gives each server a fixed, disjoint slice of the CPUs this process may use, the same
slice on every boot, so a run's placement is one of the settings it is measured under rather
than luck. SGLang's own SGLANG_SET_CPU_AFFINITY binds by GPU id, which gives every server on
one GPU the same cores.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from specgate.server.supervise import CPUS_ENV, parse_cpu_list

if TYPE_CHECKING:
    from specgate.deployment import Deployment

__all__ = ["CPUS_ENV", "available_cpus", "cpu_list", "parse_cpu_list", "side_by_side", "split"]


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def split(servers: list[str], cpus: list[int]) -> dict[str, list[int]]:
    """Contiguous, disjoint, equal slices in the order given (the left-over CPUs stay unused);
    empty where there are fewer CPUs than servers."""
    if not servers or len(cpus) < len(servers):
        return {}
    size = len(cpus) // len(servers)
    return {name: cpus[i * size : (i + 1) * size] for i, name in enumerate(servers)}


def side_by_side(deployment: Deployment) -> list[str]:
    """Every server that may be up at once (each config, each replicate boot), in a fixed order;
    [] where servers take turns (each then has every CPU)."""
    from specgate.server.pool import server_name  # the pool imports the launcher, which imports this

    launch = deployment.launch
    if not launch.coexist:
        return []
    return [server_name(c, b) for c in deployment.configs for b in range(1, launch.boots + 1)]


def cpu_list(cpus: list[int]) -> str:
    """[0, 1, 2, 5] → "0-2,5" (the kernel's own list syntax, as taskset and /proc print it)."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
