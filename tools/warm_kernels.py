"""Compile a deployment's JIT kernels (FlashInfer, Triton) before its gate run, beside other work.

On a fresh H200, FlashInfer compiled its kernels for 259 s at the first SGLang boot and another
113 s at the first request: half a 10-minute device call. tools/gpu_run.sh runs this in the
background while the drafter's data is distilled (a GPU job that leaves most CPU cores idle), so
that the gate's later boots find the kernels in the on-disk caches. Nothing is measured here.

    python3 tools/warm_kernels.py DEPLOYMENT --draft-stand-in DIR --log-dir DIR [--deadline UNIX_TIME]

Each config of DEPLOYMENT is booted in turn, exactly as the gate boots it (the deployment's own
launcher and arguments), except that its drafter is DIR's config with random weights
(`--speculative-draft-load-format dummy`: the kernels depend on shapes, not on weights; the trained
drafter may not exist yet). One short request runs prefill, draft and verify once; the server is
stopped. Exit 0 when every config was warmed, 1 otherwise (the gate then compiles what is left).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import httpx

from specgate.deployment import load_deployment
from specgate.prompts import Message, render
from specgate.server.local import LocalLauncher

PROMPT = (Message("user", "Explain in a few sentences how a bicycle gear works."),)


def stand_in_args(args: tuple[str, ...], draft: str) -> tuple[str, ...]:
    """The config's arguments with its drafter replaced by `draft` loaded with random weights."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--speculative-draft-model-path":
            out[i + 1] = draft
            return (*out, "--speculative-draft-load-format", "dummy")
    return tuple(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("deployment")
    parser.add_argument("--draft-stand-in", required=True, help="a drafter folder whose config.json is used")
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=None, help="Unix time after which no config is booted")
    args = parser.parse_args()
    deployment = load_deployment(args.deployment)
    launcher = LocalLauncher(deployment, args.log_dir)
    # Other servers (the distillation server) start and stop beside this one: total GPU memory in
    # use says nothing about whether ours released its share, so only its processes are watched.
    launcher._idle_used_mib = None  # noqa: SLF001
    warmed = 0
    try:
        for config in deployment.configs.values():
            if args.deadline is not None and time.time() > args.deadline:
                print(f"warm_kernels: deadline reached before {config.name}", flush=True)
                break
            started = time.monotonic()
            handle = launcher.start(dataclasses.replace(config, args=stand_in_args(config.args, args.draft_stand_in)))
            try:
                launcher.wait_ready(handle, None)
                booted = time.monotonic()
                body = {"text": render(PROMPT, deployment.workload.prompt_format),
                        "sampling_params": {"temperature": 0.0, "max_new_tokens": 64}}
                httpx.post(f"{handle.base_url}/generate", json=body, timeout=600).raise_for_status()
                print(f"warm_kernels: {config.name}: booted in {booted - started:.0f} s, "
                      f"first request {time.monotonic() - booted:.0f} s", flush=True)
                warmed += 1
            except Exception as exc:  # noqa: BLE001 - a config that cannot be warmed is the gate's to report
                print(f"warm_kernels: {config.name}: not warmed: {str(exc).splitlines()[0]}", flush=True)
            finally:
                launcher.stop(handle)
                launcher.unreleased = None
    finally:
        launcher.stop_all()
    return 0 if warmed == len(deployment.configs) else 1


if __name__ == "__main__":
    sys.exit(main())
