"""`specgate sweep`: boot every combination of speculative settings a deployment lists, with
the plain reference beside them, measure each side by side, and rank them (plan → run → table),
resumable from its JSON state after an interruption."""
