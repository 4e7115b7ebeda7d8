"""`specgate check`: validate a deployment and say what a run of it would do, before anything boots."""

from __future__ import annotations

import argparse
import math
import os
import sys

from specgate import project
from specgate.cli.bucket_cost import context_cost
from specgate.deployment import Deployment, SshSpec, load_deployment
from specgate.errors import SpecgateError
from specgate.gate_kinds import descriptions

# A tie margin past this many nats is no bf16 tie (the shipped H200 deployments use 0.3 to 0.625).
WIDE_TIE_MARGIN = 1.0


def launch_warnings(dep: Deployment) -> list[str]:
    """What would keep the launcher from starting a server on this host: a program that is not
    found, a launch command whose Python (`{python}`, `python3`, `/venv/bin/python`, `env ...
    python`, `bash -c "... python -m sglang..."`) cannot import the module it runs (e.g. a CPU
    machine checking a GPU deployment), an address that does not answer, a key that is not set.
    Warnings, not errors: the file may be meant for another host (specgate.preflight)."""
    from specgate.preflight import boot_problems, credential_problems

    return credential_problems(dep) + [p.text for p in boot_problems(dep)]


def describe_ssh(ssh: SshSpec) -> list[str]:
    if ssh.nodes > 1:
        hosts = f"{ssh.nodes} nodes (SGLang multi-node), rank 0 on {ssh.hosts[0]}, then {', '.join(ssh.hosts[1:])}"
    else:
        hosts = f"on {ssh.hosts[0]}"
    login = ", ".join(
        part
        for part in (
            f"as {ssh.user}" if ssh.user else "",
            f"port {ssh.port}" if ssh.port else "",
            f"key {ssh.identity_file}" if ssh.identity_file else "",
        )
        if part
    )
    reach = (
        "reached through ssh -L (the server listens on the remote loopback)"
        if ssh.reach == "forward"
        else "reached directly at host:port (the server listens on every interface)"
    )
    out = [f"  ssh: {hosts}{' (' + login + ')' if login else ''}; {reach}"]
    out.append(f"    remote python {ssh.python!r}, directory {ssh.directory or '(the login directory)'}")
    if ssh.nodes > 1:
        out.append(
            f"    each node gets --nnodes {ssh.nodes} --node-rank I --dist-init-addr "
            f"{ssh.dist_init_host or ssh.hosts[0]}:PORT (PORT picked per boot)"
        )
    if ssh.forward_env:
        out.append(f"    passed from this environment: {', '.join(ssh.forward_env)}")
    return out


def describe_stored_reference(dep: Deployment) -> list[str]:
    if not dep.launch.reference_stored:
        return []
    out = [
        f"  reference {dep.reference!r} NOT BOOTED by a gate run (launch.reference_from = \"stored\"): its figures and "
        "golden answers come from this machine's stored baseline (same fingerprint, read from a booted speculative "
        "config; same launch digest); `specgate baseline update` boots it and stores them",
        "    not seen: how the reference drifted since the baseline was recorded; a baseline from another machine or "
        "SGLang, or of other reference flags, fails the run closed",
    ]
    if dep.gates.between_boot is None:
        out.append(
            "    timing gates against it need this machine's `specgate calibrate` record or [gates.between_boot]: "
            "without one they are NOT COMPARED"
        )
    return out


def describe_affinity(dep: Deployment) -> list[str]:
    """Where `launch.cpu_affinity = "split"` pins each server on this host (physical cores and
    logical CPUs), or why it cannot."""
    from specgate.server import affinity

    if dep.launch.cpu_affinity != "split":
        return []
    cpus, servers = affinity.available_cpus(), affinity.side_by_side(dep)
    if not servers:
        cores = affinity.physical_cores(cpus)
        held = f" ({len(cores)} physical cores)" if cores is not None else ""
        return [f"  CPU affinity split: servers take turns, each pinned to all {len(cpus)} CPUs this host allows{held}"]
    placed = affinity.placement(servers, cpus)
    if not placed.slices:
        return [
            f"  WARNING: launch.cpu_affinity = \"split\": {len(servers)} servers side by side but {len(cpus)} CPU(s) "
            "here: none is pinned"
        ]
    if placed.whole_cores:
        return [
            "  CPU affinity split by whole physical cores (no core's two threads go to two servers): "
            + ", ".join(
                f"{n} on {affinity.cpu_list(c)} ({placed.cores[n]} core{'s' if placed.cores[n] != 1 else ''}, "
                f"{len(c)} threads)"
                for n, c in placed.slices.items()
            )
        ]
    return [
        f"  CPU affinity split by logical CPU, not whole cores ({placed.why_threads}: the two threads of one core may "
        "go to two servers, which then slow each other as neighbours on one CPU): "
        + ", ".join(f"{n} on {affinity.cpu_list(c)} ({len(c)} threads)" for n, c in placed.slices.items())
    ]


def idle_neighbour_warnings(dep: Deployment) -> list[str]:
    """A WARNING naming the configs that run side by side on one host without --sleep-on-idle
    where their release has it (specgate.server.idle)."""
    from specgate.server.idle import SLEEP_ON_IDLE, spinning_configs

    spinning = spinning_configs(dep)
    if not spinning:
        return []
    by_release: dict[str, list[str]] = {}
    for found in spinning:
        release = f"SGLang {found.release}" + ("" if found.declared else ", the newest release specgate knows")
        by_release.setdefault(release, []).append(found.config)
    named = " and ".join(f"{', '.join(configs)} ({release})" for release, configs in by_release.items())
    return [
        f"  WARNING: {dep.path}: servers run side by side on one host, and configs {named} boot without "
        f"{SLEEP_ON_IDLE}, which that release has: an idle SGLang scheduler spins on a host core, so idle neighbours poll on the host cores "
        f"the measured server's draft-verify cycle needs. Add \"{SLEEP_ON_IDLE}\" to launch.args: it changes how a "
        "server idles, not what it computes (the launch digest leaves it out: stored baselines stay comparable)"
    ]


# Examples a Hypothesis profile draws where the deployment sets none (equivalence/profiles.py).
PROFILE_EXAMPLES = {"ci": 40, "gpu": 12, "dev": 100}


def equivalence_cost(dep: Deployment) -> str:
    """What greedy equivalence will ask, before anything boots: its requests and, where this runner's
    calibration records the configs' decode speeds, about how long they take on the GPU."""
    eq = dep.equivalence
    cases = eq.examples or PROFILE_EXAMPLES.get(eq.hypothesis_profile, 40)
    configs = dep.speculative_configs
    per_case = sum(eq.concurrency) / len(eq.concurrency)  # copies a case sends to the config, on average
    requests = round(len(configs) * cases * per_case + cases)  # and each case's answer of the reference, once
    features = ", ".join(getattr(eq, "features", ()) or ()) or "none"
    said = (
        f"  greedy equivalence: up to {cases} case(s) per speculative config ({len(configs)}), about {requests} "
        f"request(s) of up to {eq.max_new_tokens} tokens with the reference's answers; request features: {features}"
    )
    from specgate.verdicts.planned import decode_speeds

    speeds = decode_speeds(dep, project.current().baselines_dir)
    if speeds:
        seconds = sum(
            cases * (per_case if c in configs else 1) * eq.max_new_tokens / tps for c, tps in speeds.items()
        )
        said += f"; about {seconds / 60:.1f} GPU-minute(s) at this runner's calibrated decode speeds, boots not counted"
    else:
        said += "; GPU time not stated (no calibration of this runner's decode speeds)"
    return said


def describe(dep: Deployment) -> str:
    lines = [f"deployment {dep.name!r} ({dep.path})" + ("  [SIMULATOR]" if dep.simulator else "")]
    if dep.description:
        lines.append(f"  {dep.description}")
    lines.append(
        f"  launcher {dep.launch.launcher}, servers {'side by side' if dep.launch.coexist else 'one at a time'}"
    )
    if dep.launch.ssh is not None:
        lines.extend(describe_ssh(dep.launch.ssh))
    lines.extend(describe_affinity(dep))
    lines.extend(idle_neighbour_warnings(dep))
    lines.extend(describe_stored_reference(dep))
    for name, cfg in dep.configs.items():
        if name in dep.references:
            mark = " (reference)"
        else:
            mark = f" (compared with {dep.reference_of(name)})" if dep.reference_of(name) != dep.reference else ""
        lines.append(f"  config {name}{mark}: {' '.join(cfg.args) or '(no extra args)'}")
        if cfg.command is not None:
            lines.append(f"    launched with its own command: {' '.join(cfg.command)}")
        if cfg.tolerate:
            lines.append(f"    declared known differences (counted, not failed): {', '.join(cfg.tolerate)}")
    lines.extend(descriptions(dep))
    lines.append(
        f"  {dep.launch.boots} boot(s) per config; gates that cannot compare or cannot fail: "
        + ("fail their tests: the run ends PARTIAL, exit 4" if dep.gates.uncompared == "fail" else "warn only ([gates] uncompared = \"warn\")")
    )
    if dep.gates.between_boot is not None:
        b = dep.gates.between_boot
        lines.append(f"  declared between-boot spread: decode {b.decode_tps_log_sd:.1%}, speedup {b.speedup_log_sd:.1%} ({b.source})")
    from specgate.verdicts.judge import SIMULATED_TAU_ENV, simulated_tau
    from specgate.verdicts.vacuity import vacuities

    for found in vacuities(dep):
        # The file, the field, the value and why: a gate that cannot fail is said before anything boots.
        lines.append(f"  WARNING: {dep.path}: {found.field} = {found.value:g} makes its gate VACUOUS: {found.why}")

    if dep.equivalence.tie_margin > WIDE_TIE_MARGIN:
        # Not VACUOUS (a flip between tokens further apart still fails), but near it: every such
        # parting is excused as a tie, and bf16's own ties are far narrower.
        lines.append(
            f"  WARNING: {dep.path}: equivalence.tie_margin = {dep.equivalence.tie_margin:g} nats excuses a parting "
            f"wherever the two tokens are within {math.exp(dep.equivalence.tie_margin):.0f}x of each other in "
            f"probability: greedy equivalence then fails on almost nothing (the shipped H200 deployments use 0.3 to "
            "0.625; `specgate calibrate --numerics` measures this runner's)"
        )
    for name in dep.speculative_configs:
        if simulated_tau(dep, name) is not None:
            lines.append(
                f"  WARNING: {name}'s accept-length gate is VACUOUS: {SIMULATED_TAU_ENV} fixes its accept length"
            )
    if dep.launch.launcher == "url":
        for name in dep.speculative_configs:
            if not dep.configs[name].speculative:
                # Its args are only a declaration of what runs there: none means plain decoding.
                lines.append(
                    f"  WARNING: {dep.path}: configs.{name}.args declare no --speculative-algorithm, so {name} has "
                    "NO accept-length gate (nothing declares that it speculates) and its server's speculative settings "
                    "are not checked: write the flags its server runs with (`specgate init --url` reads them from "
                    "its /get_server_info)"
                )
    lines.extend(context_cost(dep))
    if not dep.equivalence.enabled:
        lines.append(f"  greedy equivalence NOT CHECKED: {dep.equivalence.skip_reason}")
    else:
        lines.append(equivalence_cost(dep))
    from specgate.sampling.live import why_not_checkable

    sampling_why = why_not_checkable(dep, dep.launch.reference_stored)
    if sampling_why is not None:
        lines.append(f"  sampling equivalence NOT CHECKED: {sampling_why}")
    else:
        # What the test will draw, so that a reader sees each setting (penalties, logit_bias) it holds the configs to.
        sampling = dep.sampling
        lines.append(
            f"  sampling equivalence: {len(sampling.settings)} setting(s), {sampling.prompts} prompt(s) x "
            f"{sampling.samples} sample(s) per side of up to {sampling.max_new_tokens} tokens per setting and speculative "
            f"config ({len(dep.speculative_configs)}), at most {sampling.false_alarm_rate:.1%} false alarms per config: "
            + "; ".join(f"{s.name} ({s.describe()})" for s in sampling.settings)
        )
    if sampling_why is None and not dep.launch.coexist:
        spec = len(dep.speculative_configs)
        refs = len({dep.reference_of(c) for c in dep.speculative_configs})
        lines.append(
            "  sampling equivalence in turns (launch.coexist = false): each speculative config draws its samples "
            f"while it is up, then its reference boots to score them: up to {spec + refs} more boot(s) than the "
            "other phases need ([sampling] enabled = false waives it, said in every report)"
        )
    if dep.sweep is not None:
        from specgate.sweep.plan import plan_sweep

        plan = plan_sweep(dep)
        from specgate.diagnosis.slope import context_name

        axis = (
            f", each at {', '.join(context_name(c) for c in plan.contexts)} context on the same server"
            if len(plan.contexts) > 1
            else ""
        )
        lines.append(
            f"  sweep: {len(plan.points)} points from {dep.sweep.base} ({len(plan.skipped)} left out), "
            f"{dep.sweep.parallel} servers per GPU{axis}"
        )
    return "\n".join(lines)


def check_command(args: argparse.Namespace) -> int:
    try:
        dep = load_deployment(args.deployment)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    problems = dep.sim_fault_problems(dict(os.environ))  # what the run would refuse at its start
    from specgate.flag_check import check_flags

    flags = check_flags(dep)
    problems += [f.text for f in flags.refusals]
    if problems:
        print("specgate: error: " + "\nspecgate: error: ".join(problems), file=sys.stderr)
        return 2
    print(describe(dep))
    print("\n".join(f"  {line}" for line in flags.judged_by))
    for warning in [*(f.text for f in flags.findings), *launch_warnings(dep)]:
        print(f"  WARNING: {warning}")
    from specgate.verdicts.planned import sensitivity_lines
    from specgate.verdicts.stored_files import check_stored_documents

    try:  # what a run would refuse at its start (specgate.plugin), refused here too
        stored = check_stored_documents(project.current().baselines_dir, dep.name)
    except SpecgateError as exc:
        print(f"specgate: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(sensitivity_lines(dep, project.current().baselines_dir)))
    print(f"  stored documents under {project.current().baselines_dir / dep.name}: {stored} read, all usable")
    return 0
