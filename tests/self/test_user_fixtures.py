"""A user's own tests take the plugin's narrow fixtures (issue 14): specgate_deployment,
specgate_plan, specgate_meter, specgate_oracle, specgate_server and specgate_judge are views of the one
GateSession that `specgate` yields, never a second one (specgate_deployment reads the parsed
file and boots nothing), and a test that asks for one of them alone still has its servers
stopped at the end of the run (the `sim_deployment` fixture
checks that no process of the run is left, whatever the test asserted)."""

from __future__ import annotations

# Two tests of one session: the first takes only narrow fixtures (and so sets the session up
# through them), the second `specgate` itself; the objects must be the same ones.
SAME_OBJECTS = """
seen = {}


def test_narrow_fixtures_first(specgate_deployment, specgate_judge):
    seen.update(deployment=specgate_deployment, judge=specgate_judge)
    assert specgate_deployment.name == "sim" and specgate_deployment.simulator


def test_they_are_the_sessions_own(specgate, specgate_deployment, specgate_judge, specgate_plan,
                                   specgate_meter, specgate_oracle):
    assert seen["deployment"] is specgate_deployment is specgate.deployment
    assert seen["judge"] is specgate_judge is specgate.judge
    assert specgate_plan is specgate.plan
    assert specgate_meter is specgate.meter
    assert specgate_oracle is specgate.oracle
"""

# A test that asks for the deployment alone: it reads the parsed file and boots nothing (on a GPU
# host a boot is minutes). The simulators of the run are found, as helpers.processes_with finds
# them, by the tag in their environment.
DEPLOYMENT_ALONE = """
import os


def _running_simulators():
    tag = os.environ["SPECGATE_TEST_TAG"]
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().decode(errors="replace")
        except OSError:
            continue
        if "specgate.sim" in cmdline and tag in environ:
            found.append(cmdline)
    return found


def test_only_the_deployment(specgate_deployment):
    assert specgate_deployment.reference == "baseline" and specgate_deployment.launch.coexist
    assert not _running_simulators(), "reading the deployment booted a server"
"""


# A user's test that asks a config's server itself: the gate's own server (the pool's), which
# answers a /generate; a config the deployment does not define is named with the ones it does.
SERVER_BY_CONFIG = """
import pytest

from specgate.client import GenerateRequest
from specgate.errors import SpecgateError


def test_a_server_by_config(specgate, specgate_server):
    server = specgate_server("eagle3-decode")
    assert server is specgate.pool.acquire("eagle3-decode")
    answer = server.generate(GenerateRequest(max_new_tokens=4, text="The harbour at dawn"))
    assert 1 <= len(answer.output_ids) <= 4 and answer.spec is not None and answer.spec.verify_ct >= 1
    with pytest.raises(SpecgateError, match=r"has no such config \\(it has: baseline, "):
        specgate_server("eagle3-typo")
"""


# Where the servers take turns, asking for a second config stops the first: a handle kept from
# before says so when used (httpx would only say its client is closed), and asking again works.
TAKING_TURNS = """
import pytest

from specgate.client import GenerateRequest
from specgate.errors import ServerDiedError


def test_a_kept_handle_of_a_stopped_server(specgate_server):
    first = specgate_server("baseline")
    specgate_server("eagle3-decode")
    request = GenerateRequest(max_new_tokens=2, text="The harbour at dawn")
    with pytest.raises(ServerDiedError, match="'baseline': this server was stopped .*do not coexist.*ask for it again"):
        first.generate(request)
    assert specgate_server("baseline").generate(request).output_ids
"""


def _users_tests_pass(sim_deployment, pytester, source: str, passed: int, overrides: dict | None = None):
    """Run `source` as a user's test file against a simulator deployment: every test passes and
    no process of the run is left (the `sim_deployment` fixture checks that again at teardown)."""
    d = sim_deployment(overrides)
    result = d.run(pytester, tests=pytester.makepyfile(test_mine=source))
    assert result.ret == 0, result.stdout.str()[-4000:]
    assert result.parseoutcomes() == {"passed": passed}
    assert not d.leftovers(), f"processes left behind: {d.leftovers()}"
    return d


def test_a_kept_handle_of_a_server_that_took_its_turn_says_so(sim_deployment, pytester):
    _users_tests_pass(sim_deployment, pytester, TAKING_TURNS, 1, {"launch": {"coexist": False}})


def test_a_users_test_asks_a_configs_server_by_name(sim_deployment, pytester):
    _users_tests_pass(sim_deployment, pytester, SERVER_BY_CONFIG, 1)


def test_a_users_test_gets_the_sessions_own_objects(sim_deployment, pytester):
    _users_tests_pass(sim_deployment, pytester, SAME_OBJECTS, 2)


def test_the_deployment_alone_boots_nothing_and_writes_no_report(sim_deployment, pytester):
    d = _users_tests_pass(sim_deployment, pytester, DEPLOYMENT_ALONE, 1)
    assert not (d.report_dir / "report.json").exists()  # no session, so no report of one
