"""EAGLE-3 drafters: which weights a config runs (identity), and making one for SmolLM2 (prompts → distil → train)."""
