"""specgate: the merge gate for speculative decoding in SGLang.

Flow: deployment (what to boot) → server (one per config) → requests (client) →
measurements (speed, equivalence) → verdicts (gates, baselines) → report.
"""

__version__ = "0.1.0"
