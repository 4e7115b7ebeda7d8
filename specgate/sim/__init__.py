"""SIMULATOR — a stand-in for SGLang, for machines without a GPU.

`python -m specgate.sim` serves the part of SGLang's HTTP API that specgate uses and
accepts SGLang's own launch flags, so the suite runs unchanged against it. Behind the
API is a deterministic toy language model with a real draft-then-verify loop and a
cost model for time. Nothing it measures says anything about SGLang's real speed: it
exists so the gates can be proven to pass and to fail (see `faults.py`).
"""

SIM_VERSION = "0.1.0"
SIM_LABEL = f"specgate-sim {SIM_VERSION} (SIMULATOR, not SGLang)"
