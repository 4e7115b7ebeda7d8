"""Hypothesis profiles for the equivalence property.

- `ci`: the simulator; many examples, derandomized so a merge gate never flips on
  which random examples it happened to draw.
- `gpu`: real servers; few examples (each is a real generation), deadline off
  (a request's time is the server's, not the test's), shrinking on so a failure is
  reported on the smallest prompt that still diverges. Derandomized too.
- `dev`: random exploration with the example database, for hunting new failures.

`ci` and `gpu` extend Hypothesis' own `ci` profile (derandomized, no database, no deadline,
`print_blob` so a failure prints the blob that reproduces it) rather than replace it.
"""

from hypothesis import HealthCheck, Phase, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]
# Hypothesis registers "ci" itself at import; read it before ours takes the name.
_HYPOTHESIS_CI = settings.get_profile("ci")

settings.register_profile(
    "ci",
    parent=_HYPOTHESIS_CI,
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    "gpu",
    parent=_HYPOTHESIS_CI,
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=_SLOW_OK,
)
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=_SLOW_OK)
