"""`python -m specgate.sim`: SIMULATOR entry point taking SGLang's launch flags.

The SGLang flags that change behaviour here (speculative settings, attention mode,
CUDA graphs) are read; other SGLang flags are accepted and listed in the log as
ignored, so a deployment's real flag set boots unchanged. `--sim-*` flags belong to
the simulator alone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from specgate.sglang_cli import ReleaseTable, parse_release, table_for
from specgate.sim import SIM_LABEL, SIM_VERSION
from specgate.sim.cost import FLAT, CostModel, Growth, parse_growth
from specgate.sim.engine import SpecSettings
from specgate.sim.faults import Faults, faults_from_env, parse_faults
from specgate.sim.nodes import DEFAULT_DIST_TIMEOUT_S, follow_leader, gather_followers, split_addr
from specgate.sim.noise import RequestNoise, boot_offsets, request_noise
from specgate.sim.server import SimServerState, log, serve

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE", "NEXTN")


DEFAULT_MODEL = "specgate-sim/toy-1k"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specgate.sim", description=SIM_LABEL)
    # SGLang flags (same names and meanings as sglang.launch_server)
    p.add_argument("--model-path", default=DEFAULT_MODEL)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--nccl-port", type=int, default=None)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    # Multi-node, as SGLang: every node runs the same command with its own rank (specgate/sim/nodes.py)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr", default=None)
    p.add_argument("--dist-timeout", type=int, default=None)
    p.add_argument("--speculative-algorithm", choices=SPEC_ALGORITHMS, default=None)
    p.add_argument("--speculative-draft-model-path", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--speculative-attention-mode", choices=("prefill", "decode"), default="prefill")
    p.add_argument("--attention-backend", default="triton")
    p.add_argument("--prefill-attention-backend", default=None)
    p.add_argument("--decode-attention-backend", default=None)
    p.add_argument("--disable-cuda-graph", action="store_true")
    # The decode graph bound under every release's names, as SGLang takes them: --cuda-graph-max-bs
    # up to 0.5.13, from 0.5.14 --cuda-graph-max-bs-decode or --cuda-graph-config's decode.max_bs (the
    # old name an alias until 0.5.19; a claimed release refuses what its parser refuses: _refusal).
    p.add_argument("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs", type=int, default=None)
    p.add_argument("--cuda-graph-config", type=_graph_config, default=None)
    p.add_argument("--cuda-graph-backend-decode", choices=("full", "breakable", "tc_piecewise", "disabled"), default=None)
    p.add_argument("--disable-decode-cuda-graph", action="store_true")
    # SGLang's flag; its default is the model's own length, the toy model's is this.
    p.add_argument("--context-length", type=int, default=4096)
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    # Simulator-only flags
    p.add_argument("--sim-fault", action="append", default=[], help="inject a fault (see specgate/sim/faults.py)")
    p.add_argument("--api-key", default=None, help="as SGLang: every endpoint but /health* wants it as a bearer token")
    p.add_argument(
        "--sim-release", default=None, help="the SGLang release this server claims to be (another install, side by side)"
    )
    p.add_argument("--sim-draft-agreement", type=float, default=0.7, help="P(draft top-1 == target top-1)")
    p.add_argument("--sim-step-ms", type=float, default=2.0, help="cost of one plain decode step")
    p.add_argument("--sim-draft-step-ms", type=float, default=0.3, help="cost of one draft step")
    p.add_argument("--sim-prefill-verify-factor", type=float, default=2.4)
    # Growth of each step with the request's KV length (sim/cost.py's Growth): ms per 1,000 KV tokens,
    # piecewise from given lengths on. 0: a step costs the same at every context length.
    p.add_argument("--sim-step-ms-per-1k", type=_growth("--sim-step-ms-per-1k"), default=FLAT,
                   help="plain decode step's growth: MS[,FROM:MS...] ms per 1,000 KV tokens (default 0)")
    p.add_argument("--sim-decode-verify-ms-per-1k", type=_growth("--sim-decode-verify-ms-per-1k"), default=FLAT,
                   help="decode-path verify's growth (decode attention mode, or one backend for both)")
    p.add_argument("--sim-prefill-verify-ms-per-1k", type=_growth("--sim-prefill-verify-ms-per-1k"), default=FLAT,
                   help="prefill-path verify's growth (prefill attention mode on a hybrid backend pair)")
    p.add_argument("--sim-boot-s", type=float, default=0.0, help="pretend boot time before serving")
    p.add_argument("--incremental-streaming-output", "--stream-output", dest="incremental_stream", action="store_true")
    p.add_argument(
        "--sim-meta-names",
        choices=("latest", "0.5.11", "0.5.8", "0.5.3"),
        default="0.5.11",
        help="which SGLang release's names for the spec_* counters to send",
    )
    return p


def _growth(flag: str) -> Callable[[str], Growth]:
    def parse(text: str) -> Growth:
        try:
            return parse_growth(text, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return parse


def _graph_config(text: str) -> dict:
    """--cuda-graph-config as SGLang 0.5.14 on parses it: JSON, per phase ("decode", "prefill")."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _claimed_table(text: str | None) -> ReleaseTable | None:
    """The parser table of the release this server claims to be (None: it claims none, or one
    specgate has no table for: then it takes every spelling, as before any table)."""
    return table_for(parse_release(text))


def sglang_argv(argv: list[str]) -> list[str]:
    """The SGLang part of a simulator command line: without the --sim-* flags (the simulator's
    own, each taking one value) and their values."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith("--sim-"):
            skip = "=" not in arg
        else:
            out.append(arg)
    return out


def _refusal(table: ReleaseTable | None, argv: list[str]) -> str | None:
    """What the claimed release's own parser says of the SGLang part of `argv`: the same words as
    SGLang at boot, from the release's table."""
    return None if table is None else table.refusal(sglang_argv(argv))


def _decode_graph(args: argparse.Namespace) -> tuple[bool, int | None]:
    """(decode graphs on, their bound), resolved as SGLang 0.5.14 does: JSON over the per-phase
    flags over the legacy ones."""
    decode = (args.cuda_graph_config or {}).get("decode")
    decode = decode if isinstance(decode, dict) else {}
    off = args.disable_cuda_graph or args.disable_decode_cuda_graph
    backend = decode.get("backend") or args.cuda_graph_backend_decode
    if backend is not None:
        off = backend == "disabled"
    bound = decode.get("max_bs") if isinstance(decode.get("max_bs"), int) else args.cuda_graph_max_bs
    return not off, bound


def _graph_fields(
    table: ReleaseTable | None, args: argparse.Namespace, on: bool, bound: int | None
) -> dict[str, object]:
    """The graph fields /get_server_info reports, under the names of the release the server claims
    to be: `cuda_graph_max_bs` up to 0.5.13 (and without --sim-release); from 0.5.14, where the
    parser has `--cuda-graph-max-bs-decode`, that flag's own field `cuda_graph_max_bs_decode` (None
    where the bound came from the JSON) and the resolved `cuda_graph_config`."""
    if table is None or table.option("--cuda-graph-max-bs-decode") is None:
        return {"cuda_graph_max_bs": bound}
    return {
        "cuda_graph_max_bs_decode": args.cuda_graph_max_bs,
        "cuda_graph_config": {"decode": {"backend": "full" if on else "disabled", "max_bs": bound}, "prefill": {}},
    }


def _simulated_accept_length() -> float | None:
    """SGLANG_SIMULATE_ACC_LEN as SGLang reads it: a float, off when negative or unset."""
    raw = os.environ.get("SGLANG_SIMULATE_ACC_LEN", "")
    try:
        value = float(raw)
    except ValueError:
        return None
    if value <= 0:  # SGLang: off when negative (and it refuses 0)
        return None
    log(f"SIMULATOR: accept length fixed at {value} (SGLANG_SIMULATE_ACC_LEN)")
    return value


def _boot_factor(sd: float) -> float:
    """This boot's own speed, drawn once: exp(N(0, sd)). SPECGATE_SIM_SEED (with the server's
    name, CONFIG or CONFIG@K) makes the draw reproducible; without it every boot differs."""
    if not sd:
        return 1.0
    import math
    import random

    seed = os.environ.get("SPECGATE_SIM_SEED")
    rng = random.Random(f"{seed}:{os.environ.get('SPECGATE_CONFIG', '')}") if seed is not None else random.Random()
    factor = math.exp(rng.gauss(0.0, sd))
    log(f"SIMULATOR fault boot-offset: this boot runs every step {factor:.3f}x as long")
    return factor


def _h200_noise(scale: float, speculative: bool) -> tuple[float, RequestNoise | None]:
    """Fault h200-noise: this boot's speed factor (the run's shared offset and the server's own)
    and its requests' AR(1) process; (1.0, None) where the fault is off."""
    if not scale:
        return 1.0, None
    offsets = boot_offsets(os.environ, speculative, scale)
    log(
        f"SIMULATOR fault h200-noise={scale:g}: this boot runs every step {offsets.factor:.4f}x as long "
        f"(run-shared log offset {offsets.run:+.4f}, own {offsets.own:+.4f}; run {os.environ.get('SPECGATE_RUN_ID', '-')})"
    )
    return offsets.factor, request_noise(os.environ, speculative, scale)


def _draft_context(draft_path: str | None) -> int | None:
    """max_position_embeddings of a draft given as a folder with a config.json (else None)."""
    if not draft_path:
        return None
    try:
        value = json.loads((Path(draft_path) / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError):
        return None
    return int(value) if isinstance(value, int) else None


def main(argv: list[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(argv)
    table = _claimed_table(args.sim_release)
    if refused := _refusal(table, sys.argv[1:] if argv is None else argv):
        print(f"sglang serve: error: {refused} (SGLang {args.sim_release}, as the SIMULATOR claims)", file=sys.stderr)
        return 2
    graphs_on, graph_bound = _decode_graph(args)
    try:
        faults = parse_faults([*args.sim_fault, *faults_from_env(dict(os.environ))])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problem := _multi_node_problem(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    # SGLang stops on SIGTERM; do the same through the normal shutdown path.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log(f"{SIM_LABEL} starting; args: {' '.join(sys.argv[1:] if argv is None else argv)}")
    if unknown:
        log(f"SIMULATOR ignores these SGLang flags: {' '.join(unknown)}")
    spec = _spec_settings(args, _simulated_accept_length())
    prefill_backend, decode_backend = _backends(args)
    boot_factor, requests = _h200_noise(faults.h200_noise, spec is not None)
    cost = replace(
        _cost_model(args, faults),
        boot_factor=_boot_factor(faults.boot_offset) * boot_factor,
        drift_per_min=faults.drift,
    )
    server_args = {
        "model_path": args.model_path,
        "host": args.host,
        "port": args.port,
        "nccl_port": args.nccl_port,
        "tp_size": args.tp_size,
        "nnodes": args.nnodes,
        "node_rank": args.node_rank,
        "dist_init_addr": args.dist_init_addr,
        "speculative_algorithm": args.speculative_algorithm,
        "speculative_draft_model_path": args.speculative_draft_model_path,
        "speculative_num_steps": spec.steps if spec else None,
        "speculative_eagle_topk": spec.topk if spec else None,
        "speculative_num_draft_tokens": spec.draft_tokens if spec else None,
        "speculative_attention_mode": args.speculative_attention_mode,
        "attention_backend": args.attention_backend,
        "prefill_attention_backend": prefill_backend,
        "decode_attention_backend": decode_backend,
        "disable_cuda_graph": args.disable_cuda_graph,
        **_graph_fields(table, args, graphs_on, graph_bound),
        "disable_overlap_schedule": args.disable_overlap_schedule,
        "context_length": args.context_length,
        # As SGLang's scheduler reports it where the KV pool is larger: max_req_len (the context
        # length less one) less 5 (tp_worker.get_worker_info).
        "max_req_input_len": args.context_length - 6,
    }
    state = SimServerState(
        server_args=server_args,
        spec=spec,
        faults=faults,
        cost=cost,
        meta_names=args.sim_meta_names,
        incremental_stream=args.incremental_stream,
        enable_metrics=args.enable_metrics,
        release=args.sim_release or SIM_VERSION,
        api_key=args.api_key,
        weights="" if args.model_path == DEFAULT_MODEL else args.model_path,
        request_noise=requests,
    )
    if faults.boot_crash_once and not Path(faults.boot_crash_once).exists():
        Path(faults.boot_crash_once).touch()
        log("SIMULATOR fault boot-crash-once: RuntimeError: Not enough memory (as SGLang when neighbours boot at once)")
        return 1
    if args.sim_boot_s:
        log(f"SIMULATOR pretending to load weights and capture CUDA graphs for {args.sim_boot_s:.1f} s")
        time.sleep(args.sim_boot_s)
    if args.nnodes > 1:
        if faults.node_crash == args.node_rank:
            log(
                f"SIMULATOR fault node-crash={args.node_rank}: RuntimeError: CUDA error: no CUDA-capable device is detected"
            )
            return 1
        timeout = float(args.dist_timeout or DEFAULT_DIST_TIMEOUT_S)
        try:
            if args.node_rank > 0:
                follow_leader(args.dist_init_addr, args.node_rank, args.nnodes, timeout)  # returns only by exiting
                return 0
            gather_followers(args.dist_init_addr, args.nnodes, timeout)
        except KeyboardInterrupt:
            return 0
    serve(args.host, args.port, state)
    return 0


def _spec_settings(args: argparse.Namespace, simulate_acc_len: float | None) -> SpecSettings | None:
    if not args.speculative_algorithm:
        return None
    steps = args.speculative_num_steps or 3
    return SpecSettings(
        algorithm=args.speculative_algorithm,
        steps=steps,
        topk=args.speculative_eagle_topk or 1,
        draft_tokens=args.speculative_num_draft_tokens or steps + 1,
        attention_mode=args.speculative_attention_mode,
        draft_agreement=args.sim_draft_agreement,
        draft_context=_draft_context(args.speculative_draft_model_path),
        simulate_acc_len=simulate_acc_len,
    )


def _backends(args: argparse.Namespace) -> tuple[str, str]:
    """(prefill, decode) attention backends, as SGLang resolves them: each falls back to --attention-backend."""
    return args.prefill_attention_backend or args.attention_backend, args.decode_attention_backend or args.attention_backend


def _cost_model(args: argparse.Namespace, faults: Faults) -> CostModel:
    """The cost model the flags and faults set, before this boot's own draws (noise, drift)."""
    prefill_backend, decode_backend = _backends(args)
    graphs_on, graph_bound = _decode_graph(args)
    return CostModel(
        decode_step_ms=args.sim_step_ms,
        draft_step_ms=args.sim_draft_step_ms,
        prefill_verify_factor=args.sim_prefill_verify_factor,
        step_growth=args.sim_step_ms_per_1k,
        decode_verify_growth=args.sim_decode_verify_ms_per_1k,
        prefill_verify_growth=args.sim_prefill_verify_ms_per_1k,
        prefill_path_from=faults.prefill_verify_past,
        slowdown=faults.slowdown,
        cuda_graph=graphs_on,
        hybrid_attention=prefill_backend != decode_backend,
        cuda_graph_max_bs=graph_bound,
    )


def configured(argv: list[str]) -> tuple[CostModel, SpecSettings | None]:
    """The cost model and speculative settings a simulator command line (its arguments, the
    faults among them) sets, without this boot's random draws: what sim/curve.py reads."""
    args, _ = build_parser().parse_known_args(argv)
    return _cost_model(args, parse_faults(args.sim_fault)), _spec_settings(args, None)


def _multi_node_problem(args: argparse.Namespace) -> str | None:
    if args.nnodes < 1:
        return f"--nnodes {args.nnodes}: expected at least 1"
    if not 0 <= args.node_rank < args.nnodes:
        return f"--node-rank {args.node_rank}: expected 0 to {args.nnodes - 1} (--nnodes {args.nnodes})"
    if args.nnodes > 1:
        if not args.dist_init_addr:
            return f"--nnodes {args.nnodes} needs --dist-init-addr HOST:PORT (where node 0 gathers the others)"
        try:
            split_addr(args.dist_init_addr)
        except ValueError as exc:
            return str(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
