"""Sampling equivalence: at temperature > 0 a speculative config's samples must follow the
distribution of its reference's under the same sampling parameters (see check.py)."""
