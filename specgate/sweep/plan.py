"""The grid a deployment's [sweep] table asks for, as server configs to boot.

Each point starts from the base config's args and env, with the four speculative
settings replaced and the swept environment added. Points SGLang would not run as asked
(topk 1 with other than steps + 1 draft tokens: SGLang rewrites it) are left out with the
reason, so no row of the table claims settings that did not run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass

from specgate.deployment import Deployment, ServerConfig, SweepSpec, bucket_label
from specgate.errors import DeploymentError

REPLACED_FLAGS = (
    "--speculative-attention-mode",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)


@dataclass(frozen=True)
class SweepPoint:
    name: str
    attention_mode: str
    num_steps: int
    topk: int
    draft_tokens: int
    env: dict[str, str]  # the swept variables only
    config: ServerConfig

    def axes(self) -> dict[str, object]:
        return {
            "attention_mode": self.attention_mode,
            "num_steps": self.num_steps,
            "topk": self.topk,
            "draft_tokens": self.draft_tokens,
            **{f"env:{k}": v for k, v in self.env.items()},
        }


@dataclass(frozen=True)
class SweepPlan:
    points: tuple[SweepPoint, ...]
    skipped: tuple[str, ...]  # combinations left out, with why
    digest: str  # identifies the grid and the args behind it: a state file is resumed only under it
    # The context axis: 0 (the short workload) first, then each bucket every point is measured at.
    contexts: tuple[int, ...] = (0,)

    def results_of(self, point: SweepPoint) -> list[str]:
        """The names the state keeps `point`'s results under, one per context (result_name)."""
        return [result_name(point, c) for c in self.contexts]


def result_name(point: SweepPoint, context: int) -> str:
    """A point's result at one context: its own name for the short workload (states of sweeps
    before the context axis resume as they were), "NAME@8K" for a bucket."""
    return f"{point.name}@{bucket_label(context)}" if context else point.name


def _without_flags(args: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            if not arg.startswith("--"):
                continue
        name = arg.split("=", 1)[0]
        if name in flags:
            skip_value = "=" not in arg
            continue
        out.append(arg)
    return out


def _env_suffix(env: dict[str, str]) -> str:
    return "".join(f"-{k.removeprefix('SGLANG_').lower()}{v}" for k, v in env.items())


def plan_sweep(deployment: Deployment) -> SweepPlan:
    spec: SweepSpec | None = deployment.sweep
    if spec is None:
        raise DeploymentError(deployment.path, "sweep", "is missing: `specgate sweep` needs a [sweep] table")
    base = deployment.configs[spec.base]
    template = _without_flags(base.args, REPLACED_FLAGS)
    env_axes = [[(k, v) for v in values] for k, values in spec.env.items()]
    points, skipped = [], []
    for mode, steps, topk, env_pairs in itertools.product(
        spec.attention_mode, spec.num_steps, spec.topk, itertools.product(*env_axes) if env_axes else [()]
    ):
        env = dict(env_pairs)
        for draft in spec.draft_tokens or (steps + 1,):
            label = f"{mode}-s{steps}-k{topk}-d{draft}{_env_suffix(env)}"
            if topk == 1 and draft != steps + 1:
                skipped.append(f"{label}: with topk 1 SGLang runs steps + 1 = {steps + 1} draft tokens")
                continue
            if draft > steps * topk + 1:
                skipped.append(f"{label}: more draft tokens than steps x topk + 1 = {steps * topk + 1}")
                continue
            args = (
                *template,
                "--speculative-attention-mode", mode,
                "--speculative-num-steps", str(steps),
                "--speculative-eagle-topk", str(topk),
                "--speculative-num-draft-tokens", str(draft),
            )  # fmt: skip
            config = ServerConfig(
                name=label,
                args=args,
                env={**base.env, **env},
                url=None,
                description=f"sweep point of {spec.base}: {label}",
            )
            points.append(SweepPoint(label, mode, steps, topk, draft, env, config))
    # Everything a stored point's figure depends on: resuming under any other would rank
    # figures of two different sweeps together.
    reference = deployment.configs[deployment.reference]
    w = deployment.workload
    blob = json.dumps(
        {
            "deployment": deployment.name,
            "points": [[list(p.config.args), p.config.env] for p in points],
            "reference": [list(reference.args), reference.env],
            "launch": [list(deployment.launch.command), list(deployment.launch.args), deployment.launch.env],
            "measure": [
                spec.repeats,
                spec.max_new_tokens,
                w.ignore_eos,  # answers alone or fixed lengths: different figures
                list(w.prompt_sets),
                w.prompt_format,
                # The user's prompt files by content: an edited file is another workload.
                *([[p.label, [[m.role, m.content] for m in p.messages]] for p in w.prompts()] if w.prompt_files else []),
                # The order requests are sent in: the first `repeats` of it are what a point measures.
                [p.label for p in w.speed_sequence()],
            ],
            "warmup": [w.warmup.min_requests, w.warmup.max_requests, w.warmup.settle_window, w.warmup.settle_tolerance],
            # Only where there is an axis: the digest of a sweep without one stays what it was.
            **({"contexts": list(spec.context_buckets)} if spec.context_buckets else {}),
        },
        sort_keys=True,
    )
    digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return SweepPlan(tuple(points), tuple(skipped), digest, (0, *spec.context_buckets))
