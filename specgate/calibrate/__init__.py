"""`specgate calibrate`: A/A runs of a deployment on this host (run → analyse → render)."""
