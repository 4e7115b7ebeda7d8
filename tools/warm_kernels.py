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
import math
import signal
import sys
import time
from pathlib import Path

from specgate.client import GenerateRequest, SglangClient
from specgate.deployment import load_deployment
from specgate.errors import SpecgateError
from specgate.prompts import Message, render
from specgate.secrets import api_key
from specgate.server.local import LocalLauncher

PROMPT = (Message("user", "Explain in a few sentences how a bicycle gear works."),)


def stand_in_args(args: tuple[str, ...], draft: str) -> tuple[str, ...]:
    """The config's arguments with its drafter replaced by `draft` loaded with random weights
    (`--speculative-draft-model-path PATH` or `=PATH`; a config without one is left as it is)."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--speculative-draft-model-path" and i + 1 < len(out):
            out[i + 1] = draft
            return (*out, "--speculative-draft-load-format", "dummy")
        if arg.startswith("--speculative-draft-model-path="):
            out[i] = f"--speculative-draft-model-path={draft}"
            return (*out, "--speculative-draft-load-format", "dummy")
    return tuple(out)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("deployment")
    parser.add_argument("--draft-stand-in", required=True, help="a drafter folder whose config.json is used")
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=None, help="Unix time after which no config is booted")
    args = parser.parse_args()
    if args.deadline is not None and not math.isfinite(args.deadline):
        parser.error(f"--deadline {args.deadline}: expected a Unix time")
    # gpu_run.sh stops this with SIGTERM at its deadline: unwind, so that the servers are stopped
    # in order (their GPU memory released) rather than left to their parent-death signal.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        deployment = load_deployment(args.deployment)
        key = api_key(deployment.launch.api_key_env)
    except SpecgateError as exc:
        print(f"warm_kernels: {exc}", file=sys.stderr)
        return 2
    # The distillation server starts and stops beside these.
    launcher = LocalLauncher(deployment, args.log_dir, shares_the_gpu=True)
    warmed = 0
    try:
        for config in deployment.configs.values():
            if args.deadline is not None and time.time() > args.deadline:
                print(f"warm_kernels: deadline reached before {config.name}", flush=True)
                break
            if launcher.unreleased:
                print(f"warm_kernels: stopping before {config.name}: {launcher.unreleased}", flush=True)
                break
            started = time.monotonic()
            handle = None
            try:
                handle = launcher.start(dataclasses.replace(config, args=stand_in_args(config.args, args.draft_stand_in)))
                launcher.wait_ready(handle, None)
                booted = time.monotonic()
                client = SglangClient(handle.base_url, timeout_s=600, api_key=key)
                prompt = render(PROMPT, deployment.workload.prompt_format)
                client.generate(GenerateRequest(max_new_tokens=64, text=prompt))
                print(f"warm_kernels: {config.name}: booted in {booted - started:.0f} s, "
                      f"first request {time.monotonic() - booted:.0f} s", flush=True)
                warmed += 1
            except SpecgateError as exc:  # a config that cannot be warmed is the gate's to report
                print(f"warm_kernels: {config.name}: not warmed: {_first_line(exc)}", flush=True)
            finally:
                if handle is not None:
                    launcher.stop(handle)
    finally:
        launcher.stop_all()
    return 0 if warmed == len(deployment.configs) else 1


if __name__ == "__main__":
    sys.exit(main())
