"""specgate's pytest wiring for this checkout.

The plugins come from pyproject.toml's `addopts` (`-p pytester` for the self-tests, `-p
specgate.plugin` for copies that are not installed, such as the tree sent to a GPU host) and,
once installed, from the `pytest11` entry point. Nothing is defined here: this file is also
above the gate tests that a user's repository collects from an editable install, where pytest
refuses `pytest_plugins` outside the rootdir.
"""
