"""Why is speculation slow? The cycle model, the server's effective settings, and the levers.

settings → what SGLang says it runs; cycle → τ, t_d, t_c and the speedup they predict;
signals → the other witnesses (server log, accept histogram, draft config); levers → the
ranked list of changes that measurements or settings support; diagnose → one per config.
"""
