"""Making an EAGLE-3 drafter for SmolLM2 on a GPU host: prompts → distil → train (make.py drives them)."""
