"""CPU placement of servers booted side by side (`launch.cpu_affinity = "split"`).

A speculative server's draft-verify loop runs more host code per token than plain decoding
(scheduling, draft steps launched from Python), so it may be the one that feels where the kernel
puts its scheduler: beside a neighbour's busy process, or on the other hyperthread of one.
Split gives each server a fixed, disjoint slice of the CPUs this process may use, the same
slice on every boot, so a run's placement is one of the settings it is measured under rather
than luck. SGLang's own SGLANG_SET_CPU_AFFINITY binds by GPU id, which gives every server on
one GPU the same cores.

The slices are whole physical cores: the two hyperthreads (SMT siblings) of one core share its
execution units and caches, so a neighbour on the other thread of the measured server's core
slows it as much as one on the same thread would. The kernel says which logical CPUs are one
core in sysfs (`cpuN/topology/core_cpus_list`, older kernels `thread_siblings_list`); psutil
counts cores but does not say which threads they hold. Where that cannot be read (not Linux, a
container hiding /sys), the split falls back to slices of logical CPU ids, and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specgate.server.supervise import CPUS_ENV, parse_cpu_list

if TYPE_CHECKING:
    from specgate.deployment import Deployment

__all__ = [
    "CPUS_ENV",
    "SYSFS_CPU",
    "Placement",
    "available_cpus",
    "cpu_list",
    "parse_cpu_list",
    "physical_cores",
    "placement",
    "side_by_side",
    "split",
]

# Where the kernel describes each logical CPU (tests point it at a fake tree).
SYSFS_CPU = Path("/sys/devices/system/cpu")
# A core's logical CPUs, newest name first (thread_siblings_list is the deprecated one).
_SIBLINGS_FILES = ("core_cpus_list", "thread_siblings_list")


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def physical_cores(cpus: list[int], sysfs: Path | None = None) -> list[list[int]] | None:
    """`cpus` grouped by physical core (SMT siblings together), each core's CPUs ascending and the
    cores in the order of their first CPU; a core some of whose threads this process may not use
    holds only those it may. None where a CPU's siblings cannot be read or contradict another's."""
    root = sysfs if sysfs is not None else SYSFS_CPU
    groups: dict[frozenset[int], list[int]] = {}
    for cpu in sorted(set(cpus)):
        siblings = _siblings(root / f"cpu{cpu}" / "topology")
        if siblings is None or cpu not in siblings:
            return None
        groups.setdefault(frozenset(siblings), []).append(cpu)
    named: set[int] = set()
    for core_cpus in groups:
        if named & core_cpus:
            return None  # two CPUs name overlapping but different sibling sets
        named |= core_cpus
    return sorted(groups.values(), key=lambda core: core[0])


def _siblings(topology: Path) -> set[int] | None:
    for name in _SIBLINGS_FILES:
        try:
            return parse_cpu_list((topology / name).read_text().strip())
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
    return None


@dataclass(frozen=True)
class Placement:
    """Each server's CPU slice, and whether the slices are whole physical cores."""

    slices: dict[str, list[int]]  # {} where there are fewer CPUs than servers: nobody pinned
    cores: dict[str, int]  # physical cores in each slice; {} where the topology was not read
    whole_cores: bool
    why_threads: str  # why the slices are logical CPUs, not whole cores ("" where they are cores)


def placement(servers: list[str], cpus: list[int], sysfs: Path | None = None) -> Placement:
    """Contiguous, disjoint, equal slices of whole physical cores in the order given (the left-over
    cores stay unused): no core's two threads go to two servers. Where the topology cannot be
    read, or there are fewer cores than servers, equal slices of logical CPU ids instead, saying
    why; nobody is pinned where there are fewer CPUs than servers."""
    if not servers or len(cpus) < len(servers):
        return Placement({}, {}, False, "")
    cores = physical_cores(cpus, sysfs)
    if cores is not None and len(cores) >= len(servers):
        size = len(cores) // len(servers)
        mine = {name: cores[i * size : (i + 1) * size] for i, name in enumerate(servers)}
        return Placement(
            {name: sorted(cpu for core in own for cpu in core) for name, own in mine.items()},
            {name: len(own) for name, own in mine.items()},
            True,
            "",
        )
    if cores is None:
        why = f"which CPUs share a physical core cannot be read from {sysfs if sysfs is not None else SYSFS_CPU}"
    else:
        why = f"{len(cores)} physical core(s) for {len(servers)} servers"
    size = len(cpus) // len(servers)
    return Placement({name: cpus[i * size : (i + 1) * size] for i, name in enumerate(servers)}, {}, False, why)


def split(servers: list[str], cpus: list[int], sysfs: Path | None = None) -> dict[str, list[int]]:
    """Each server's CPU slice (`placement`): {} where there are fewer CPUs than servers."""
    return placement(servers, cpus, sysfs).slices


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
