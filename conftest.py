"""specgate's pytest wiring: the gate plugin, and pytester for the self-tests."""

pytest_plugins = ["specgate.plugin", "pytester"]
