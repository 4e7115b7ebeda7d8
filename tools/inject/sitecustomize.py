"""Lab tool: a known slowdown injected into real SGLang's speculative decoding, on the GPU.

Put this folder first on PYTHONPATH of a server and set SPECGATE_INJECT_SLOWDOWN=F (0 < F < 0.9):
every call of the EAGLE worker's forward_batch_generation (one draft-verify cycle) is followed,
on the stream it ran on, by a GPU spin (torch.cuda._sleep) of F/(1-F) times the cycle's period,
so the cycle takes 1/(1-F) as long and the server decodes at (1-F) of its speed, measured
from the server's own side (its meta_info latencies slow down with the client's clock). The
period is an average of the wall time between consecutive calls while decoding (gaps over 50
ms, between requests, are left out). A spin on the forward stream, not a CPU sleep: SGLang's
overlap scheduler would hide a CPU sleep behind the GPU's work. Plain servers never call this
worker, so the same PYTHONPATH leaves them alone.

Every 2000 cycles it writes a line to stderr (the server's log): the period, the spin and the
cycles patched, so a run's logs show what was injected.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import time

_FRACTION = float(os.environ.get("SPECGATE_INJECT_SLOWDOWN", "0") or 0)
# SPECGATE_INJECT_ONLY=NAME slows only servers whose environment says SPECGATE_INJECT_SCOPE=NAME (a
# config's `env` in the deployment), so one speculative config is slowed beside untouched ones.
_ONLY = os.environ.get("SPECGATE_INJECT_ONLY")
if _ONLY and os.environ.get("SPECGATE_INJECT_SCOPE") != _ONLY:
    _FRACTION = 0.0
_TARGETS = {
    "sglang.srt.speculative.eagle_worker": "EAGLEWorker",
    "sglang.srt.speculative.eagle_worker_v2": "EAGLEWorkerV2",
}


class _State:
    last = 0.0
    period = 0.0
    cycles_per_s = 0.0
    calls = 0


def _cycles_per_second(torch) -> float:  # noqa: ANN001 - torch module, imported late
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)  # first launch: not timed
    start.record()
    torch.cuda._sleep(2_000_000)
    end.record()
    end.synchronize()
    return 2_000_000 / (start.elapsed_time(end) / 1000.0)


def _wrap(method):  # noqa: ANN001, ANN202
    import torch

    def forward_batch_generation(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        result = method(self, *args, **kwargs)
        now = time.perf_counter()
        gap = now - _State.last
        _State.last = now
        if 0 < gap < 0.05:
            # The period with the spin in it: spinning F of it makes the cycle 1/(1-F) of its own.
            _State.period = gap if _State.period == 0 else 0.95 * _State.period + 0.05 * gap
        if _State.period > 0:
            if _State.cycles_per_s == 0:
                _State.cycles_per_s = _cycles_per_second(torch)
            torch.cuda._sleep(int(_FRACTION * _State.period * _State.cycles_per_s))
            _State.calls += 1
            if _State.calls % 2000 == 1:
                print(
                    f"specgate-inject: slowdown {_FRACTION:.3f}: period {_State.period * 1e3:.3f} ms, spin "
                    f"{_FRACTION * _State.period * 1e3:.3f} ms, {_State.calls} cycles patched",
                    file=sys.stderr,
                    flush=True,
                )
        return result

    return forward_batch_generation


class _Patcher(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name not in _TARGETS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):  # noqa: ANN001, ANN202
            exec_module(module)
            cls = getattr(module, _TARGETS[name], None)
            if cls is not None and hasattr(cls, "forward_batch_generation"):
                cls.forward_batch_generation = _wrap(cls.forward_batch_generation)
                print(f"specgate-inject: {name}.{_TARGETS[name]} slowed by {_FRACTION:.3f}", file=sys.stderr, flush=True)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if 0 < _FRACTION < 0.9:
    sys.meta_path.insert(0, _Patcher())
