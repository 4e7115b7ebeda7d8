"""The pytest plugin: options, parametrization, ordering, fixtures, report, baselines.

The gate tests themselves live in tests/gate and read like the property they check;
this module is the plumbing around them. Nothing here runs unless a gate test is
collected: the self-tests never read a deployment or boot a server.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specgate import interrupts, options, project
from specgate.atomic import ensure_writable
from specgate.deployment import Deployment, bucket_label, bucket_of_test, bucket_test_id, load_deployment
from specgate.diagnosis.diagnose import diagnose
from specgate.diagnosis.slope import slopes_of, with_slopes
from specgate.equivalence.oracle import REPLAY_FILE, EquivalenceOracle
from specgate.errors import SpecgateError
from specgate.gate_kinds import kind_of_test, planned_gates, run_gates, timing_gates
from specgate.measure.fidelity import check_fidelity, fidelity_of
from specgate.measure.plan import SamplingPlan
from specgate.measure.speed import Measurements, SpeedMeter
from specgate.provenance import commit_info_from_environment, git_commit, provenance
from specgate.report.build import build_report
from specgate.report.ci import append_step_summary, junit_path, mask_junit_xml
from specgate.report.files import (
    interrupted_before_gate,
    late_interruption,
    mark_interrupted,
    refused_input,
    short_markdown,
    write_marked,
    write_report,
    write_short_report,
)
from specgate.report.folder import ReportFolder, ReportFolderError
from specgate.report.folder import claim as claim_folder
from specgate.report.markdown import render_markdown
from specgate.report.model import SCHEMA_VERSION, AnyReport, ErrorReport, Report
from specgate.report.progress import BootDisplay
from specgate.report.visible import visible
from specgate.resources import gate_tests_dir
from specgate.secrets import mask_standard_streams, masked
from specgate.server.orphans import REAPED
from specgate.server.pool import LiveServer
from specgate.server_info import simulated
from specgate.session import GateSession, RunOptions, reference_stored
from specgate.verdicts.baselines import write_baseline
from specgate.verdicts.fingerprint import Fingerprint
from specgate.verdicts.gates import BASELINE_NOT_RECORDED, BASELINE_RECORDED, RunVerdict
from specgate.verdicts.judge import Judge, baseline_document
from specgate.verdicts.outcome import FailedTest, RunFacts
from specgate.verdicts.stored_files import check_stored_documents
from specgate.verdicts.stored_reference import MeasuredView, StoredReference

_DEPLOYMENT = pytest.StashKey[Deployment]()
_SESSION = pytest.StashKey[GateSession]()
_PHASES = pytest.StashKey[dict[str, tuple[str, str]]]()
_REPORT = pytest.StashKey[AnyReport]()
_MESSAGES = pytest.StashKey[list[str]]()
_PREVIOUS_PROJECT = pytest.StashKey[project.Project | None]()
_CANNOT_BOOT = pytest.StashKey[str]()  # why a gate a plain pytest collected cannot run on this host
_FOLDER = pytest.StashKey[ReportFolder]()  # the report folder this run holds (specgate.report.folder)
_OWN_SIGNALS = pytest.StashKey[bool]()  # this pytest installed the stop-signal handler (no CLI around it)
_GATE_DIR = pytest.StashKey[Path]()  # the gate's folder this pytest was asked to collect (a settings file, `specgate run`)
_WAY_IN = pytest.StashKey[frozenset[Path]]()  # the gate folder's parents that pytest alone would not enter
_ASKING_PYTEST = pytest.StashKey[bool]()  # _way_in is asking pytest's own rule: this plugin's answer stays out
_GATE_ITEMS = pytest.StashKey[int]()  # gate tests collected, before any deselection

PHASE_ORDER = {"golden": 0, "equivalence": 1, "sampling": 2, "speed": 3, "gates": 4}
# The fixtures that set up the session (and so boot servers): a user's test asking for one is
# skipped with the gate where the gate cannot run here. specgate_deployment boots nothing.
_SESSION_FIXTURES = frozenset(
    {"specgate", "specgate_plan", "specgate_meter", "specgate_oracle", "specgate_server", "specgate_judge"}
)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_to_pytest(parser.getgroup("specgate", "specgate: speculative-decoding merge gate"))


@pytest.hookimpl(specname="pytest_configure", trylast=True)
def _mask_terminal(config: pytest.Config) -> None:
    """Where the gate runs, everything pytest prints (tracebacks, captured output, the report)
    goes out masked (secrets.py). Its terminal writer exists once the terminal plugin's own
    configure ran, hence trylast; a pytest without the gate is left as it is."""
    if _DEPLOYMENT not in config.stash or not config.pluginmanager.has_plugin("terminalreporter"):
        return
    writer = config.get_terminal_writer()
    writer._file = masked(writer._file)  # pytest's TerminalWriter has no public way to wrap its file


# What the last in-process run refused as bad input (a pytest.UsageError of this plugin's), for
# the CLI's closing line: pytest itself says only "exit code 4".
refused: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    # A stop signal's KeyboardInterrupt that lands where Python cannot raise it (Hypothesis's gc
    # callback) is recorded by specgate.interrupts and ends the run at its next check; pytest's
    # unraisable hook would print it as a traceback above the INTERRUPTED closing line.
    config.addinivalue_line("filterwarnings", "ignore:.*specgate. stopped by SIG:pytest.PytestUnraisableExceptionWarning")
    try:
        _configure(config)
    except pytest.UsageError as exc:
        _refuse(config, str(exc).removeprefix("specgate: "))
        raise


def _refuse(config: pytest.Config, why: str) -> None:
    """Record refused input; where this run already holds its report folder (the previous report
    is gone), the short report says BAD INPUT with the cause, as the exit code (2) does."""
    refused.append(why)
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        messages: list[str] = []
        _write_short(folder.path, refused_input(why, _simulator(config)), messages)
        for message in messages:
            print(f"specgate: {message}", file=sys.stderr)


def _configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "specgate(phase): a gate test of that phase (golden, equivalence, sampling, speed, gates)")
    config.stash[_PHASES] = {}
    config.stash[_MESSAGES] = []
    config.stash[_PREVIOUS_PROJECT] = project._current  # restored at unconfigure (pytester runs nest)
    try:
        # pytest's rootdir first; the folder pytest was started in where the rootdir has no
        # settings (`specgate run` collects the gate tests from the package, whose folder can
        # become the rootdir).
        found = project.find_project(config.rootpath, config.invocation_params.dir)
    except SpecgateError as exc:
        raise pytest.UsageError(f"specgate: {exc}") from None
    project.use(found)
    gate_too = _collects_gate(config, found)
    if gate_too:
        config.args.append(str(gate_tests_dir()))
    if str(gate_tests_dir()) in config.args:
        config.stash[_GATE_DIR] = gate_tests_dir()
        config.stash[_GATE_ITEMS] = 0
    if options.given(config, options.DEPLOYMENT) is not None or gate_too:
        if getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):
            # pytest-xdist would hand the gate's tests to several processes, each with a session of
            # its own: every server booted once per worker, phases out of order, verdicts split.
            raise pytest.UsageError(
                "specgate: the gate runs in one pytest process (one session boots each server once and "
                "orders its phases): drop -n / --numprocesses (pytest-xdist is for specgate's own self-tests)"
            )
        try:
            # A malformed commit time fails now, not in pytest-benchmark's hook after the servers
            # ran; only where specgate runs (the plugin loads in every pytest of its environment).
            commit_info_from_environment()
        except SpecgateError as exc:
            raise pytest.UsageError(f"specgate: {exc}") from None
        mask_standard_streams()  # a usage error below is printed past pytest's terminal writer
        if config.option.collectonly:
            return  # nothing runs: the report folder, its lock and the last report stay as they are
        # First, before the deployment is read: a signal from here on ends the run with an
        # INTERRUPTED report, and the previous run's report never stands beside this one.
        config.stash[_OWN_SIGNALS] = interrupts.install()
        try:
            config.stash[_FOLDER] = claim_folder(report_dir(config), _named_by(config, "report_dir"))
        except ReportFolderError as exc:
            raise pytest.UsageError(f"specgate: {exc}") from None
        config.stash[_MESSAGES].extend(config.stash[_FOLDER].notes)
        dep = deployment(config)  # a bad file named on the command line fails before collection
        if gate_too and not dep.simulator:
            _note_cannot_boot(config, dep, found)
        if _CANNOT_BOOT not in config.stash:  # a gate skipped on this host boots nothing to refuse
            refuse_launch_flags(dep)
        baselines = baselines_dir(config)
        if baselines.exists() and not baselines.is_dir():
            raise pytest.UsageError(
                f"specgate: {_named_by(config, 'baselines_dir')} ({baselines}): is a file, not a folder of stored baselines"
            )
        try:  # a broken stored file fails now, naming it, not as a stack after the measuring
            check_stored_documents(baselines, dep.name)
        except SpecgateError as exc:
            raise pytest.UsageError(f"specgate: {exc}") from None
        if options.given(config, options.UPDATE_BASELINES):
            try:
                ensure_writable(baselines / dep.name)
            except OSError as exc:
                raise pytest.UsageError(
                    f"specgate: {_named_by(config, 'baselines_dir')} ({baselines}): the baseline update could not "
                    f"store its figures there: {exc}"
                ) from None


def refuse_launch_flags(dep: Deployment) -> None:
    """A launch SGLang's parser (or its release's table) refuses is bad input, said before a boot
    that would only fail (specgate.flag_check); what is not certain is `specgate check`'s to warn of."""
    from specgate.flag_check import check_flags

    refusals = check_flags(dep).refusals
    if refusals:
        raise pytest.UsageError("specgate: " + "\nspecgate: ".join(f.text for f in refusals))


def _collects_gate(config: pytest.Config, found: project.Project) -> bool:
    """A plain `pytest` in a project whose specgate.toml (or [tool.specgate]) asks for it runs
    the gate too; paths named on the command line are run as named, and nothing else."""
    gate_dir = str(gate_tests_dir())
    return (
        found.settings_file is not None
        and found.gate
        and config.args_source != pytest.Config.ArgsSource.ARGS
        and gate_dir not in config.args
    )


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The gate's folder is collected wherever specgate is installed. In a virtualenv inside the
    repository (`python3 -m venv .venv`) it lies under a folder pytest never enters (a virtualenv
    root, a `.*` of norecursedirs), and pytest drops an argument inside another (the repository's
    root): the way down to the gate is let in, and nothing else there is."""
    gate = config.stash.get(_GATE_DIR, None)
    if gate is None or config.stash.get(_ASKING_PYTEST, False):
        return None
    if collection_path == gate or collection_path in gate.parents:
        return False
    if collection_path.parent in _way_in(config, gate):
        return True  # beside the way down, in a folder pytest alone would not have entered
    return None


def _way_in(config: pytest.Config, gate: Path) -> frozenset[Path]:
    """The gate folder's parents from the first that pytest's own rules (and the project's
    conftest and options) would ignore: what lies beside the way down in these stays ignored."""
    if _WAY_IN not in config.stash:
        top_down = list(reversed(gate.parents))
        config.stash[_ASKING_PYTEST] = True
        try:
            ignored = [config.hook.pytest_ignore_collect(collection_path=d, config=config) for d in top_down]
        finally:
            config.stash[_ASKING_PYTEST] = False
        first = next((i for i, answer in enumerate(ignored) if answer), len(top_down))
        config.stash[_WAY_IN] = frozenset(top_down[first:])
    return config.stash[_WAY_IN]


def pytest_itemcollected(item: pytest.Item) -> None:
    if _GATE_ITEMS in item.config.stash and item.get_closest_marker("specgate"):
        item.config.stash[_GATE_ITEMS] += 1


def pytest_collection_finish(session: pytest.Session) -> None:
    """A gate this pytest was asked for that collected no test never passes unseen: it is refused,
    naming its folder, and its report (the previous one is gone) says so."""
    config = session.config
    if config.stash.get(_GATE_ITEMS, 1) or session.testsfailed or config.option.collectonly:
        return  # collection errors: pytest stops the run and names them (sessionfinish writes the report)
    if getattr(config.option, "lf", False):
        return  # --last-failed collects only the files that failed last: a gate that passed is left out, as asked
    why = (
        f"the gate was asked for but pytest collected no gate test from its folder {config.stash[_GATE_DIR]}: "
        "this pytest's settings leave its test_*.py files out (python_files, python_functions, -p no:python, "
        "a conftest.py hook): remove what excludes them, or run `specgate run`"
    )
    _refuse(config, why)
    raise pytest.UsageError(f"specgate: {why}")


def _note_cannot_boot(config: pytest.Config, dep: Deployment, found: project.Project) -> None:
    """A gate that specgate.toml's `gate = true` added to a plain `pytest` runs only where its
    servers can start: on a laptop without SGLang (or where an address does not answer) its tests
    are skipped, with one reason, instead of failing beside the user's own. Where the gate is asked
    for by name (`specgate run`, --specgate-deployment, the gate's folder) a server that cannot
    boot still fails the run."""
    from specgate.preflight import boot_problems

    blocking = [p.text for p in boot_problems(dep) if p.blocks]
    if blocking:
        config.stash[_CANNOT_BOOT] = (
            f"the gate of {dep.name!r} cannot run on this host: {blocking[0]}"
            + (f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else "")
            + f". Skipped, as `gate = true` in {found.settings_file} asks only where it can run; "
            f"`specgate run {dep.path}` on the GPU runner runs it (and fails there if it cannot boot)"
        )
        config.stash[_MESSAGES].append(f"gate SKIPPED: {config.stash[_CANNOT_BOOT]}")


def _named_by(config: pytest.Config, what: str) -> str:
    """Where a folder (`report_dir`, `baselines_dir`) was named, for errors about it: the option,
    the project's settings (whose key drops the `_dir` of `baselines_dir`), or the default."""
    if config.getoption(f"specgate_{what}"):
        return f"--specgate-{what.replace('_', '-')}"
    settings = project.current().settings_file
    key = what.removesuffix("_dir") if what == "baselines_dir" else what
    return f"{key} in {settings}" if settings else f"the default {what.replace('_', ' ')}"


def report_dir(config: pytest.Config) -> Path:
    chosen = options.given(config, options.REPORT_DIR)
    return Path(chosen).resolve() if chosen else project.current().report_dir


def baselines_dir(config: pytest.Config) -> Path:
    chosen = options.given(config, options.BASELINES_DIR)
    return Path(chosen).resolve() if chosen else project.current().baselines_dir


def deployment(config: pytest.Config) -> Deployment:
    if _DEPLOYMENT not in config.stash:
        try:
            config.stash[_DEPLOYMENT] = load_deployment(
                options.given(config, options.DEPLOYMENT) or os.environ.get("SPECGATE_DEPLOYMENT")
            )
        except SpecgateError as exc:
            raise pytest.UsageError(f"specgate: {exc}") from None
        dep = config.stash[_DEPLOYMENT]
        problems = dep.sim_fault_problems(dict(os.environ))
        if problems:
            raise pytest.UsageError("specgate: " + "\nspecgate: ".join(problems))
    return config.stash[_DEPLOYMENT]


# --- parametrization ------------------------------------------------------------------
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = set(metafunc.fixturenames)
    if not names & {"spec_config", "speed_target", "planned_gate"}:
        return
    dep = deployment(metafunc.config)
    # A reference taken from the stored baseline is not measured: no speed test, no regression gate of its own.
    unbooted = _unbooted(dep, metafunc.config)
    if "spec_config" in names:
        metafunc.parametrize("spec_config", dep.speculative_configs, ids=dep.speculative_configs)
    if "speed_target" in names:
        targets: list[tuple] = [(c, n) for n in dep.workload.concurrency for c in dep.configs if c not in unbooted]
        ids = [f"{c}-c{n}" for c, n in targets]
        for tokens in dep.workload.context_buckets:  # measured single-stream (measure.context)
            targets += [(c, 1, tokens) for c in dep.configs if c not in unbooted]
            ids += [bucket_test_id(f"{c}-c1", tokens) for c in dep.configs if c not in unbooted]
        metafunc.parametrize("speed_target", targets, ids=ids)
    if "planned_gate" in names:
        kind = kind_of_test(metafunc.function.__name__)
        if kind is None:
            raise pytest.UsageError(
                f"specgate: {metafunc.function.__name__} asks for planned_gate, but no gate kind has that test "
                "(specgate.gate_kinds)"
            )
        gates = run_gates(kind, dep, unbooted)
        metafunc.parametrize("planned_gate", gates, ids=[g.test_id for g in gates])


def _unbooted(dep: Deployment, config: pytest.Config) -> set[str]:
    return {dep.reference} if reference_stored(dep, options.given(config, options.UPDATE_BASELINES)) else set()


def _item_phase_and_config(item: pytest.Item, dep: Deployment) -> tuple[str, str] | None:
    marker = item.get_closest_marker("specgate")
    if marker is None:
        return None
    phase = marker.args[0]
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if "spec_config" in params:
        config = params["spec_config"]
    elif "speed_target" in params:
        config = params["speed_target"][0]
    elif "planned_gate" in params:
        config = params["planned_gate"].config
    else:
        config = dep.reference
    return phase, config


def _declares_nothing(item: pytest.Item) -> bool:
    """A gate test parametrized over an empty list of declared gates (pytest would skip it)."""
    skip = item.get_closest_marker("skip")
    reason = (skip.kwargs.get("reason") or (skip.args[0] if skip.args else "")) if skip else ""
    return reason.startswith("got empty parameter set")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group gate tests by config (reference first) so that where servers cannot
    coexist each server boots once; gate verdicts come last."""
    gate_positions = [i for i, it in enumerate(items) if it.get_closest_marker("specgate")]
    if not gate_positions:
        return
    if _CANNOT_BOOT in config.stash:
        skip = pytest.mark.skip(reason=f"specgate: {config.stash[_CANNOT_BOOT]}")
        for item in items:
            if item.get_closest_marker("specgate") or _SESSION_FIXTURES & set(getattr(item, "fixturenames", ())):
                item.add_marker(skip)  # before any fixture: nothing boots, no session, no report
        return
    dep = deployment(config)
    rank = {name: i for i, name in enumerate([*dep.references, *dep.speculative_configs])}
    keys: dict[str, tuple[int, int, int]] = {}
    keep, deselected = [], []
    for item in (items[i] for i in gate_positions):
        if _declares_nothing(item):
            deselected.append(item)  # e.g. no [[gates.accept_length]]: nothing to judge, nothing to skip
            continue
        phase, cfg = _item_phase_and_config(item, dep)  # type: ignore[misc]
        stored = reference_stored(dep, options.given(config, options.UPDATE_BASELINES))
        if phase == "golden" and ((dep.launch.coexist and not dep.launch.reference_stored) or stored):
            # The baseline is asked live instead, or its answers are the stored baseline's.
            deselected.append(item)
            continue
        config.stash[_PHASES][item.nodeid] = (phase, cfg)
        keys[item.nodeid] = (1, 0, 0) if phase == "gates" else (0, rank.get(cfg, 99), PHASE_ORDER[phase])
        keep.append(item)
    keep.sort(key=lambda item: keys[item.nodeid])
    positions = set(gate_positions)
    items[:] = [it for i, it in enumerate(items) if i not in positions] + keep
    if deselected:
        config.hook.pytest_deselected(items=deselected)


# --- fixtures -----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def specgate(request: pytest.FixtureRequest) -> Any:
    """The run's GateSession; servers boot on first use and stop at session end. The narrow
    fixtures below (specgate_deployment, _plan, _meter, _oracle, _server, _judge) are views of it."""
    config = request.config
    dep = deployment(config)
    _load_hypothesis_profile(config, dep)
    examples = options.given(config, options.EXAMPLES) or dep.equivalence.examples or _profile_examples()
    run_options = RunOptions(
        report_dir=report_dir(config),
        baselines_dir=baselines_dir(config),
        update_baselines=options.given(config, options.UPDATE_BASELINES),
        allow_fingerprint_mismatch=options.given(config, options.ALLOW_FINGERPRINT_MISMATCH),
        examples=examples,
        allow_uncompared=options.given(config, options.ALLOW_UNCOMPARED),
        seed=options.given(config, options.SEED),
        commit=git_commit(dep.input_files),
        case_seed=options.given(config, options.CASE_SEED),
    )
    display = BootDisplay(config.pluginmanager.getplugin("capturemanager"))
    configs = _configs_in_run(request.session, dep)
    gate = GateSession.create(dep, run_options, display, configs)
    config.stash[_SESSION] = gate
    for killed in gate.pool.reaped:  # said now, and again in the summary and the report
        display.notice(f"specgate: {REAPED} {killed}")
        config.stash[_MESSAGES].append(f"{REAPED} {killed}")
    if dep.launch.coexist:
        # Boot every server this run will use at once (replicate boots too): boots overlap instead of queueing.
        gate.pool.boot(gate.plan.all_servers(configs))
    yield gate
    gate.close()


# Narrow views of the one GateSession, for a test (the gate's or a user's own) that needs one
# part of the run. Each asks for `specgate` and returns what it holds: never a second session,
# and the lifecycle stays `specgate`'s (boot on first use, stop at session end, cleanup after
# Ctrl-C in pytest_sessionfinish). The phase ordering reads a gate test's `specgate` mark and
# parameters, never these names, so a gate test may take them instead of `specgate`.
@pytest.fixture(scope="session")
def specgate_deployment(request: pytest.FixtureRequest) -> Deployment:
    """The run's parsed deployment (`specgate.deployment`, the same object): its configs, launch,
    workload, equivalence and gate settings, as checked from the deployment file. It boots
    nothing and sets up no session: a test that only reads the deployment costs no server (on a
    GPU host a boot is minutes) and writes no report."""
    return deployment(request.config)


@pytest.fixture(scope="session")
def specgate_plan(specgate: GateSession) -> SamplingPlan:
    """The run's sampling plan (`specgate.plan`): it measures the configs' decode speed in
    interleaved rounds (`ensure`) and says why a config could not be measured (`raise_for`).
    Asking for it sets up the `specgate` session if nothing has yet (where the servers coexist,
    `launch.coexist`, that boots every server the run will use at once; otherwise each boots when
    first needed); `ensure` boots the servers it measures where they are not up."""
    return specgate.plan


@pytest.fixture(scope="session")
def specgate_meter(specgate: GateSession) -> SpeedMeter:
    """The run's speed records (`specgate.meter`): per config and concurrency, the requests
    the sampling plan measured (`record`). It sends nothing itself.
    Asking for it sets up the `specgate` session if nothing has yet (where the servers coexist,
    `launch.coexist`, that boots every server the run will use at once; otherwise each boots when
    first needed)."""
    return specgate.meter


@pytest.fixture(scope="session")
def specgate_oracle(specgate: GateSession) -> EquivalenceOracle:
    """The run's greedy-equivalence oracle (`specgate.oracle`): it draws the cases, asks the
    reference and a speculative config for greedy answers, and checks them token by token.
    Asking for it sets up the `specgate` session if nothing has yet (where the servers coexist,
    `launch.coexist`, that boots every server the run will use at once; otherwise each boots when
    first needed); a check boots the servers it asks where they are not up."""
    return specgate.oracle


@pytest.fixture(scope="session")
def specgate_server(specgate: GateSession) -> Callable[[str], LiveServer]:
    """`specgate_server(config)`: that config's running server (booted on first use, the same
    one the gate measures), with `.generate(GenerateRequest(...))`, `.handle.base_url` and what
    SGLang says of itself (`.server_info`). Where the deployment's servers do not coexist,
    asking for one stops the others first, as the gate's own phases do (a server asked for
    earlier then says so when used: ask for it again). A name the deployment does not define is
    an error naming the ones it does."""

    def server(config: str) -> LiveServer:
        if not isinstance(config, str) or config not in specgate.deployment.configs:
            known = ", ".join(specgate.deployment.configs)
            raise SpecgateError(f"specgate_server({config!r}): the deployment {specgate.deployment.name!r} has no such config (it has: {known})")
        return specgate.pool.acquire(config)

    return server


@pytest.fixture(scope="session")
def specgate_judge(specgate: GateSession) -> Judge:
    """The run's verdict judge (`specgate.judge`): it decides the beats, accept-length and
    regression gates against the reference and the stored baselines; the report reads its verdicts.
    Asking for it sets up the `specgate` session if nothing has yet (where the servers coexist,
    `launch.coexist`, that boots every server the run will use at once; otherwise each boots when
    first needed); a verdict measures, and so boots, what it still lacks."""
    return specgate.judge


def _configs_in_run(session: pytest.Session, dep: Deployment) -> list[str]:
    used = {dep.reference}
    for item in session.items:
        found = _item_phase_and_config(item, dep)
        if found is not None:
            used.update({found[1], dep.reference_of(found[1])})
            if found[0] == "gates":
                used.update(dep.configs)
    if reference_stored(dep, options.given(session.config, options.UPDATE_BASELINES)):
        used.discard(dep.reference)  # never booted: the stored baseline stands in for it
    return [c for c in dep.configs if c in used]


def _load_hypothesis_profile(config: pytest.Config, dep: Deployment) -> None:
    from hypothesis import settings

    import specgate.equivalence.profiles  # noqa: F401 - registers the profiles

    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(dep.equivalence.hypothesis_profile)


def _profile_examples() -> int:
    from hypothesis import settings

    return settings().max_examples


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    """A test that fails after a stop signal came was interrupted (interrupts.interruption_wins):
    pytest then ends the session INTERRUPTED instead of recording a failure."""
    with interrupts.interruption_wins():
        return (yield)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A signal that stopped the run stops the session before the next test, also where its
    KeyboardInterrupt was lost (raised inside a gc callback, Python prints and drops it)."""
    gate = item.config.stash.get(_SESSION, None)
    if gate is not None and gate.pool.cancelled:
        raise KeyboardInterrupt("specgate: a signal stopped the run")


# --- results ------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    found = item.config.stash[_PHASES].get(item.nodeid)
    if found is not None and _SESSION in item.config.stash:
        _record_outcome(item.config.stash[_SESSION], *found, report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A gate test's call: the phase its requests belong to, told to the pool (a server that stops
    answering is said with the phase it stopped in), and timed where a signal ends it: pytest then
    reports no call, and the report would lose what the phase had measured (_phase_seconds adds it back)."""
    found = item.config.stash.get(_PHASES, {}).get(item.nodeid)
    gate = item.config.stash.get(_SESSION, None)
    if found is None or gate is None:
        return (yield)
    gate.pool.phase = found[0]
    if found[0] == "gates":
        gate.lost_before[item.name] = gate.lost_now()
    tokens = bucket_of_test(item.name)
    gate.pool.bucket = bucket_label(tokens) if tokens else ""
    started = time.monotonic()
    try:
        return (yield)
    except KeyboardInterrupt:
        phase, config = found
        gate.cut_short = (phase, stopped_test(config, item.name), time.monotonic() - started)
        raise


def stopped_test(config: str, test: str) -> str:
    """What the report says a signal stopped: the config, and the context bucket where the test
    measured one ("baseline at 2K"): each bucket's test of a config is its own."""
    tokens = bucket_of_test(test)
    return f"{config} at {bucket_label(tokens)}" if tokens else config


def _record_outcome(gate: GateSession, phase: str, config: str, report: pytest.TestReport) -> None:
    if report.when == "call":  # setup holds the boots, which the report counts on their own
        gate.phase_seconds[phase] = gate.phase_seconds.get(phase, 0.0) + report.duration
    outcome = None
    if report.when == "call":
        outcome = "passed" if report.passed else ("failed" if report.failed else "skipped")
    elif report.failed:
        outcome = "error"
    elif report.skipped and report.when == "setup":
        outcome = "skipped"
    if outcome is None:
        return
    counts = gate.config_outcomes.setdefault((phase, config), {})
    counts[outcome] = counts.get(outcome, 0) + 1
    if phase == "speed":
        measured = (config, bucket_of_test(report.nodeid.split("::")[-1]))
        gate.speed_whole[measured] = gate.speed_whole.get(measured, True) and outcome == "passed"
    if outcome in ("failed", "error"):
        # Failures that are no gate verdict (a server that died, a file that cannot be read) must
        # reach the report with their cause, not only pytest's traceback.
        gate.failed_tests.append(FailedTest(report.nodeid.split("::")[-1], _cause(report)))


def _cause(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else "failed")[:400]


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """pytest is handling the first interrupt: a second one raised from here on would escape
    pytest.main and leave no report, so later signals are only recorded (specgate.interrupts)."""
    interrupts.seal()


def _interruption(session: pytest.Session, gate: GateSession, exitstatus: int) -> str | None:
    """Why the run has no verdict, where a signal or Ctrl-C came before the report was written."""
    signum = interrupts.received()
    if not (exitstatus == pytest.ExitCode.INTERRUPTED or gate.pool.cancelled or signum is not None):
        return None
    how = interrupts.name(signum) if signum is not None else "a signal or Ctrl-C"
    t = gate.tally()
    if t.passed + t.failed + t.skipped >= len(session.items):
        # Every verdict was reached; the stop came while the servers were being stopped.
        return (
            f"the run was interrupted ({how}) after every test had run, while it stopped its "
            "servers: no verdict, though every gate above was judged"
        )
    return (
        f"the run was interrupted ({how}) before every test ran: no verdict: nothing after the "
        "interruption was judged"
    )


# First: another plugin's own session end (junitxml writing to a path it cannot) may raise, and the
# run's report must be written before that, never lost with it (the CLI then says ERROR).
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    interrupts.seal()  # the run's end: a signal from here on is recorded, and the report says it
    config = session.config
    if _SESSION not in config.stash:
        stopped = exitstatus == pytest.ExitCode.INTERRUPTED and session.testsfailed and not interrupts.received()
        if _FOLDER in config.stash and stopped:
            # pytest's own stop at collection errors (an Interrupted, yet no signal came)
            why = (
                f"pytest stopped at {session.testsfailed} collection error(s), named above, before any gate test "
                "ran: no server was booted"
            )
            error = ErrorReport(schema_version=SCHEMA_VERSION, overall="ERROR", error=why, simulator=_simulator(config))
            config.stash[_REPORT] = error
            _write_short(config.stash[_FOLDER].path, error, config.stash[_MESSAGES])
        elif _FOLDER in config.stash and (exitstatus == pytest.ExitCode.INTERRUPTED or interrupts.received()):
            signum = interrupts.received()
            how = interrupts.name(signum) if signum is not None else "a signal or Ctrl-C"
            why = f"the run was interrupted ({how}) before any gate test started: no server was booted"
            short = interrupted_before_gate(why, _simulator(config))
            config.stash[_REPORT] = short
            _write_short(config.stash[_FOLDER].path, short, config.stash[_MESSAGES])
        return
    gate = config.stash[_SESSION]
    gate.close()  # normally done already by the fixture; after Ctrl-C this is the cleanup
    messages = config.stash[_MESSAGES]
    messages.extend(_replays_not_kept(gate))
    interrupted = _interruption(session, gate, exitstatus)
    _pool_into_history(gate, messages, interrupted)
    report: AnyReport
    try:
        fingerprint, report = _write_report(gate, messages, interrupted)
    except Exception as exc:  # a report must exist and say the run failed, whatever broke it
        report = _write_error_report(gate.options.report_dir, exc, messages, gate.deployment.simulator)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if gate.options.update_baselines:
            messages.append("baseline NOT written: the run's report could not be built")
        config.stash[_REPORT] = report
        _settle(config)
        return
    if gate.options.update_baselines:
        first = report.overall
        lead, not_written = _update_baselines(session, gate, fingerprint, interrupted)
        try:
            # Written again with what was stored (or why nothing was) as its first line; the
            # messages of the first build (chart, diagnosis) are not said twice. An update that
            # stored nothing failed (unless interrupted, which its report says instead).
            built = _build(gate, [], interrupted, lead=lead, not_recorded=not_written)
            built = built.model_copy(update={"standing": report.standing})  # appended once, by the first build
            write_report(gate.options.report_dir, built, chart=built.overall != first, messages=messages)
            report = built
        except Exception as exc:
            messages.append(f"report NOT rewritten with what the baseline update stored: {type(exc).__name__}: {exc}")
    config.stash[_REPORT] = report
    _settle(config)
    if (not_written := append_step_summary(_markdown(config.stash[_REPORT]))) is not None:
        messages.append(not_written)


def _pool_into_history(gate: GateSession, messages: list[str], interrupted: str | None) -> None:
    """A run whose every gate passed adds its boots to the runner's history (verdicts.history),
    before the report is written, so that its gates' notes say what was pooled or why not."""
    if interrupted or gate.options.update_baselines or gate.failed_tests:
        return
    try:
        messages.extend(gate.judge.pool_into_history())
    except (SpecgateError, OSError) as exc:
        messages.append(f"runner history NOT updated: {exc}")


def _keep_results(gate: GateSession, report: Report, messages: list[str]) -> Report:
    """A completed run's figures appended to the results history (specgate.history.records),
    and where they stand among the earlier runs there said on the report's first screen."""
    from specgate.history.records import append_results, load_results, records_of, results_path
    from specgate.history.standing import standing
    from specgate.history.trend import trend_chart

    try:
        records, left_out = records_of(report, gate.deployment, {**gate.plan.errors, **gate.pool.failed}, gate.measured_whole())
        messages.extend(left_out)
        if not records:
            return report.model_copy(update={"standing": left_out}) if left_out else report
        fingerprint = Fingerprint.from_dict(report.fingerprint.model_dump())  # type: ignore[union-attr]  # records_of: not None
        path = results_path(gate.options.baselines_dir, gate.deployment.name, fingerprint)
        earlier = load_results(path, gate.deployment.name)
        messages.extend(append_results(path, records, gate.deployment.history.keep))
    except (SpecgateError, OSError, ValueError) as exc:  # ValueError: pydantic's, a figure the record refuses
        messages.append(f"results history NOT updated: {exc}")
        return report
    said = standing(records, earlier)
    if said:
        try:
            trend_chart(gate.options.report_dir / "history.png", records, earlier, gate.deployment.history)
        except (OSError, ValueError) as exc:
            messages.append(f"history.png NOT drawn: {type(exc).__name__}: {exc}")
    return report.model_copy(update={"standing": [*said, *left_out]})


def _markdown(report: AnyReport) -> str:
    return short_markdown(report) if isinstance(report, ErrorReport) else render_markdown(report)


def _settle(config: pytest.Config) -> None:
    """A signal that came after the report was written (while it was written, while the session
    ended): the report on disk is written again as INTERRUPTED, so it says what the exit says."""
    report = config.stash.get(_REPORT, None)
    signum = interrupts.received()
    if report is None or signum is None or report.overall == RunVerdict.INTERRUPTED or _FOLDER not in config.stash:
        return
    marked = mark_interrupted(report, late_interruption(interrupts.name(signum)))
    config.stash[_REPORT] = marked
    messages = config.stash[_MESSAGES]
    try:
        write_marked(config.stash[_FOLDER].path, marked, messages)
    except OSError as exc:
        messages.append(f"report NOT marked INTERRUPTED after the late {interrupts.name(signum)}: {exc}")


def _write_short(out: Path, report: ErrorReport, messages: list[str], detail: str = "") -> None:
    try:
        write_short_report(out, report, detail)
    except OSError as exc:
        messages.append(f"{report.overall} report NOT written to {out}: {exc}")


def _build(
    gate: GateSession,
    messages: list[str],
    interrupted: str | None,
    lead: str | None = None,
    not_recorded: str | None = None,
) -> Report:
    """The report of the run as it stands; `lead` is its first line (model.LEADS): by default the
    next step where no stored baseline was there to compare with."""
    return build_report(
        gate.deployment,
        _measured(gate),
        gate.all_verdicts(),
        gate.oracle.stats,
        gate.pool.boots,
        gate.judge.fingerprint_if_known(),  # the run is over: never boot for it
        provenance(launcher=gate.deployment.launch.launcher, inputs=gate.deployment.input_files),
        gate.tally(),
        _phase_seconds(gate, interrupted),
        gate.pool.server_infos,
        gate.oracle.baseline_problems,
        gate.oracle.margin_summary().as_dict() if gate.oracle.baseline_margins else None,
        _fidelity(gate),
        _diagnoses(gate, messages),
        facts=_run_facts(gate, interrupted, not_recorded),
        # The pool's reason wins: it says what became of the server (died, stopped answering after
        # N requests), where the measurement's error is only the request that found it so.
        failed_servers={**gate.plan.errors, **gate.pool.failed},
        measured=gate.measured_whole(),
        lost_before=gate.lost_before,
        buckets={tokens: b.meter for tokens, b in gate.buckets.items()},
        context_prompts=gate.density.found.as_dict() if gate.density and gate.density.found else None,
        plan=gate.plan.log.as_dict(),
        calibration=_calibration_name(gate),
        failed_tests=gate.failed_tests,
        stand_in=_stand_in(gate),
        interrupted=interrupted,
        drafters=gate.judge.drafters(),
        lead=lead if lead is not None else gate.judge.next_step(),
        sampling=gate.sampling.report_rows() if gate.sampling else [],
        unavailable=gate.pool.unavailable,
        reaped=gate.pool.reaped,
    )


def _phase_seconds(gate: GateSession, interrupted: str | None) -> dict[str, float]:
    """Each phase's time in its tests' calls, with the time the test a signal stopped had run:
    pytest reports no call it interrupted, yet that time was spent measuring."""
    seconds = dict(gate.phase_seconds)
    if interrupted and gate.cut_short is not None:
        phase, _, ran = gate.cut_short
        seconds[phase] = seconds.get(phase, 0.0) + ran
    return seconds


def _write_report(gate: GateSession, messages: list[str], interrupted: str | None) -> tuple[Any, Report]:
    """Build and write report.json/md and the chart; returns the fingerprint the report names."""
    report = _build(gate, messages, interrupted)
    if not gate.deployment.simulator and (reported := simulated(gate.pool.server_infos)):
        named = ", ".join(f"{name} reports version {version!r}" for name, version in reported.items())
        messages.append(
            f"SIMULATOR run: {named}; the figures are specgate's simulated engine's, not SGLang's "
            f"(so labelled in the report, though {gate.deployment.path} does not say simulator = true)"
        )
    if report.simulator and (faults := report.provenance.get("sim_faults")):
        messages.append(f"SIMULATOR faults injected (SPECGATE_SIM_FAULTS): {faults}: a failure this run reports is the fault's, on purpose")
    if interrupted is None:
        report = _keep_results(gate, report, messages)
    write_report(gate.options.report_dir, report, chart=True, messages=messages)
    return gate.judge.fingerprint_if_known(), report


def _simulator(config: pytest.Config) -> bool | None:
    """The deployment's simulator flag, where this run read its deployment."""
    dep = config.stash.get(_DEPLOYMENT, None)
    return dep.simulator if dep is not None else None


def _write_error_report(out: Path, exc: Exception, messages: list[str], simulator: bool | None = None) -> ErrorReport:
    """The verdict when the report itself could not be built: ERROR, with the cause."""
    import traceback

    cause = f"{type(exc).__name__}: {exc}"
    where = "".join(traceback.format_exception(exc)[-3:])
    messages.append(f"report NOT built, run counted as failed: {cause}")
    error = ErrorReport(schema_version=SCHEMA_VERSION, overall="ERROR", error=cause, simulator=simulator)
    _write_short(out, error, messages, detail=f"```\n{where}```\n\n")
    return error


def _run_facts(gate: GateSession, interrupted: str | None, not_recorded: str | None) -> RunFacts:
    """What ran of what the deployment asks for: the run's outcome (verdicts.outcome) reads this,
    so a run that was cut short, or selected only some tests, never says PASS."""
    dep = gate.deployment
    measured = [c for c in dep.configs if not (gate.reference_stored and c == dep.reference)]
    expected = {
        "equivalence": len(dep.speculative_configs) if dep.equivalence.enabled else 0,
        # Where samples cannot be compared here the report's sampling section says why instead.
        "sampling": 0 if gate.sampling_not_checkable else len(dep.speculative_configs),
        # Each context bucket is one more speed test per config (at concurrency 1).
        "speed": len(measured) * (len(dep.workload.concurrency) + len(dep.workload.context_buckets)),
        "gates": len(planned_gates(dep, {dep.reference} if gate.reference_stored else set())),
    }
    ran = {
        phase: sum(
            counts.get(o, 0)
            for (p, _), counts in gate.config_outcomes.items()
            if p == phase
            for o in ("passed", "failed", "error")
        )
        for phase in expected
    }
    return RunFacts(
        interrupted=interrupted,
        expected=expected,
        ran=ran,
        equivalence_declared_off=not dep.equivalence.enabled,
        sampling_not_checked=sampling_not_waived(dep, gate.sampling_not_checkable),
        uncompared_allowed=gate.uncompared_allowed,
        # A reference not booted whose stored stand-in could not be used, and equivalence cases that
        # had no stored answer: never a PASS, whatever else passed.
        stand_in_problem=gate.judge.stand_in_problem() if gate.reference_stored else None,
        equivalence_not_checked={c: len(s.not_checked) for c, s in gate.oracle.stats.items() if s.not_checked},
        # Edge requests a speculative config refused that its reference answered: compared nothing.
        equivalence_refused={c: list(s.refused) for c, s in gate.oracle.stats.items() if s.refused},
        baseline_not_written=not_recorded,
        cut_short={gate.cut_short[0]: gate.cut_short[1]} if interrupted and gate.cut_short is not None else {},
    )


def sampling_not_waived(dep: Deployment, why: str | None) -> str | None:
    """Why sampling equivalence did not run, where the deployment did not turn it off itself
    (`[sampling] enabled = false`, every setting skipped, or greedy equivalence declared off,
    which says so on its own); None where it ran or was turned off."""
    waived = not dep.sampling.enabled or not dep.sampling.settings or not dep.equivalence.enabled
    return None if waived else why


def _calibration_name(gate: GateSession) -> str | None:
    try:
        found = gate.judge.calibration() if gate.judge.fingerprint_if_known() else None
    except SpecgateError:
        return None
    return str(found.path.name) if found else None


def _stored_reference(gate: GateSession) -> StoredReference | None:
    """The stored stand-in for the unbooted reference, where it was usable (never boots for it)."""
    if not gate.reference_stored or gate.judge.fingerprint_if_known() is None:
        return None
    try:
        return gate.judge.stored_reference()
    except SpecgateError:
        return None


def _measured(gate: GateSession) -> Measurements:
    """What the report and diagnosis read: this run's records, plus the stored reference's."""
    stand_in = _stored_reference(gate)
    if stand_in is None:
        return gate.meter
    if stand_in.baseline.workload_digest != gate.meter.workload_digest:
        # Its requests sent other prompts (an older order, another workload): pairing them with
        # ours by index would be a ratio of different traffic. The gates say NOT COMPARED.
        return gate.meter
    return MeasuredView({**stand_in.records(), **gate.meter.results}, gate.meter)


def _stand_in(gate: GateSession) -> dict | None:
    """What the report says, at its top, about a reference that was not booted."""
    if not gate.reference_stored:
        return None
    dep = gate.deployment
    stand_in = _stored_reference(gate)
    problem = gate.judge.stand_in_problem()
    if stand_in is None and problem is None:
        problem = "no speculative server answered, so this machine's fingerprint and the stored baseline were never matched"
    # Which noise the intervals of the timing gates that crossed boots hold (beats, decode regression).
    timed = timing_gates(dep)
    timing = [v for v in gate.all_verdicts() if v.gate in timed]
    noise = {v.gate: v.noise for v in timing if v.noise}
    stored_boot = None
    if stand_in is not None:
        stored_boot = next((f.boot_seconds for f in stand_in.figures.values() if f.boot_seconds is not None), None)
    golden = stand_in.baseline.golden if stand_in is not None else None
    return {
        "reference": dep.reference,
        "baseline_file": str(stand_in.path) if stand_in else None,
        "commit": stand_in.commit if stand_in else None,
        "recorded": str(stand_in.baseline.provenance.get("date", "?")) if stand_in else None,
        "host": str(stand_in.baseline.provenance.get("host", "?")) if stand_in else None,
        "fingerprint_from": gate.judge.fingerprint_source(),
        "args_digest": dep.configs[dep.reference].args_digest(dep.launch),
        "golden_cases": len(golden.entries) if golden else None,
        "note": stand_in.note if stand_in else "",
        "problem": problem,
        "noise": noise,
        "boots_saved": dep.launch.boots,
        "stored_boot_seconds": stored_boot,
        "not_checked": {c: s.not_checked for c, s in gate.oracle.stats.items() if s.not_checked},
    }


def _diagnoses(gate: GateSession, messages: list[str]) -> list[dict]:
    """Why each speculative config is as fast as it is (specgate.diagnosis)."""
    try:
        found = [d.as_dict() for d in diagnose(gate.deployment, _measured(gate), gate.pool.server_infos, gate.pool.log_dir)]
        if gate.buckets:
            meters = {0: gate.meter, **{tokens: b.meter for tokens, b in gate.buckets.items()}}
            with_slopes(found, slopes_of(gate.deployment, meters, gate.pool.server_infos))
    except Exception as exc:  # say so loudly, but never lose the verdicts and figures with it
        messages.append(f"diagnosis FAILED, report written without it: {type(exc).__name__}: {exc}")
        return []
    return found


def _fidelity(gate: GateSession) -> list[dict]:
    """The suite's single-stream figures against the server's own log and meta_info."""
    out = []
    for (config, concurrency), record in sorted(gate.meter.results.items()):
        found = fidelity_of(record, gate.pool.log_dir / f"{config}.log")
        if found is not None:
            checked = check_fidelity(config, concurrency, found)
            out.append({**found.as_dict(), "state": checked.state, "witness": checked.witness, "check_note": checked.why})
    return out


def _update_baselines(
    session: pytest.Session, gate: GateSession, fingerprint: Any, interrupted: str | None
) -> tuple[str, str | None]:
    """Store this run's figures where they may be stored; returns the report's first line (what
    was stored: file, configs, samples; or why nothing was) and, where nothing was stored and the
    run was not interrupted, why (the run then fails: an update that stored nothing failed)."""
    messages = session.config.stash[_MESSAGES]
    # Figures of an interrupted run are partial: writing them would replace a good baseline.
    reason = interrupted or gate.why_no_baseline()
    if reason is None and fingerprint is None:
        reason = "no fingerprint (no server answered /get_server_info)"
    if reason is None:
        excluded = gate.excluded_from_baseline()
        golden = gate.oracle.golden_answers() if gate.deployment.launch.reference_stored else None
        document = baseline_document(
            gate.judge,
            provenance(launcher=gate.deployment.launch.launcher, inputs=gate.deployment.input_files),
            excluded,
            golden,
            tuple(b.judge for b in gate.buckets.values()),
        )
        signum = interrupts.received()
        if gate.pool.cancelled or signum is not None:  # a signal while the report was written
            how = interrupts.name(signum) if signum is not None else "a signal"
            reason = interrupted = f"the run was interrupted ({how}) before the baseline was written"
    if reason is None:
        try:
            path = write_baseline(gate.deployment.name, fingerprint, document, gate.options.baselines_dir)
        except SpecgateError as exc:
            reason = str(exc)
        except OSError as exc:
            reason = f"{options.BASELINES_DIR.said} {gate.options.baselines_dir}: {exc}"
        else:
            messages.append(f"baseline written: {path}")
            for name, why in excluded.items():
                messages.append(f"baseline holds no figures for {name}: {why}")
            return _recorded(path, document, excluded, gate.deployment.gates.against_stored), None
    messages.append(f"baseline NOT written: {reason}")
    if not interrupted:  # an interrupted run keeps pytest's exit status for an interrupt
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return f"{BASELINE_NOT_RECORDED}{reason}; {_replays_changed(gate)}", None if interrupted else reason


def _replays_changed(gate: GateSession) -> str:
    """What a baseline update that stored no baseline still changed: its failing cases joined the
    replay files (a tracked file the user must commit, or the next update finds the tree dirty)."""
    added = [(gate.oracle.replay_added, gate.oracle.replay_path)]
    if gate.sampling is not None and gate.sampling.replay is not None:
        added.append((gate.sampling.replay.added, gate.sampling.replay.path))
    changed = [f"{n} failing case(s) joined {path}" for n, path in added if n and path is not None]
    if not changed:
        return "nothing stored changed"
    return "the stored baseline is unchanged; " + "; ".join(changed) + " (commit it: later runs try those first)"


def _replays_not_kept(gate: GateSession) -> list[str]:
    """Failing cases a run did not keep because the replay file is specgate's own shipped data
    (resources.package_data): said, so that nobody looks for them there."""
    skipped = [(gate.oracle.replay_not_kept, gate.oracle.replay_path)]
    if gate.sampling is not None and gate.sampling.replay is not None:
        skipped.append((gate.sampling.replay.not_kept, gate.sampling.replay.path))
    return [
        f"{n} failing case(s) NOT kept in {path}: it is specgate's own shipped baseline, which a run never "
        "writes (the next wheel would carry it); a project made by `specgate init` keeps its own"
        for n, path in skipped
        if n and path is not None
    ]


def _recorded(path: Path, document: dict, excluded: dict[str, str], compared: bool = True) -> str:
    """What a baseline update stored, as the report's first line says it; `compared`: whether
    the deployment's gates compare with a stored baseline (`[gates] against_stored`)."""
    configs = []
    total = 0
    for name, entry in document["configs"].items():
        counts = {int(c): figures["n"] for c, figures in entry["concurrency"].items()}
        total += sum(counts.values())
        at = ", ".join(f"{n} at concurrency {c}" for c, n in sorted(counts.items()))
        configs.append(f"{name} ({at})")
    golden = document.get("golden")
    also = f"; the reference's golden answers ({len(golden.get('cases', []))} cases)" if isinstance(golden, dict) else ""
    left = "".join(f"; no figures for {name}: {why}" for name, why in excluded.items())
    replay = path.parent / REPLAY_FILE  # the equivalence cases that once failed, replayed first by every run
    files = f"{path} (and {replay}, the cases replayed first)" if replay.is_file() else str(path)
    return (
        f"{BASELINE_RECORDED}{path}: {total} samples of {len(configs)} config(s), {'; '.join(configs)}{also}{left}. "
        + (
            f"Commit {files}: later runs on this machine compare against it"
            if compared
            else "No gate of this deployment compares against it ([gates] against_stored = false): its runs need none"
        )
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    report = config.stash.get(_REPORT, None)
    if report is not None:
        terminalreporter.write_sep("=", "specgate report")
        _settle(config)  # a signal while the session ended: the report it prints says so too
        report = config.stash[_REPORT]
        terminalreporter.write(_markdown(report))
        out = report_dir(config)
        terminalreporter.write_line(f"report: {out / 'report.md'} (also report.json, report.png, logs/)")
    for message in config.stash.get(_MESSAGES, []):
        terminalreporter.write_line(visible(f"specgate: {message}"), bold=True, red="NOT" in message)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION in config.stash:
        config.stash[_SESSION].close()
    _settle(config)
    junit = getattr(config.option, "xmlpath", None)
    if junit and _DEPLOYMENT in config.stash:  # written whole by now: every plugin's session end ran
        if (not_masked := mask_junit_xml(junit_path(junit))) is not None:
            print(f"specgate: {not_masked}", file=sys.stderr)
    if _FOLDER in config.stash:
        config.stash[_FOLDER].release()  # the manifest of what this run wrote; the lock let go
        del config.stash[_FOLDER]
    if config.stash.get(_OWN_SIGNALS, False):
        interrupts.uninstall()
    if _PREVIOUS_PROJECT in config.stash:
        project.use(config.stash[_PREVIOUS_PROJECT])


# --- pytest-benchmark: what machine the figures are from -----------------------------------
@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    if _SESSION not in config.stash:
        return
    gate = config.stash[_SESSION]
    fp = gate.judge.fingerprint_if_known()
    machine_info["specgate"] = {
        "deployment": gate.deployment.name,
        "simulator": gate.deployment.simulator,
        "fingerprint": fp.as_dict() if fp else None,
        "python": sys.version.split()[0],
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_commit_info(config: pytest.Config, commit_info: dict) -> None:
    """The commit the figures are from, as every specgate record names it: on the GPU host the
    tree is a copy whose git metadata, if any, is not the commit that ran (SPECGATE_COMMIT is)."""
    commit = git_commit()
    commit_info["id"] = commit.removesuffix("+dirty")
    commit_info["dirty"] = commit.endswith("+dirty")
    commit_info["source"] = "SPECGATE_COMMIT" if os.environ.get("SPECGATE_COMMIT") else "git"
    if os.environ.get("SPECGATE_COMMIT"):
        # What pytest-benchmark read from a git in the copy (a stale one, or none) describes another
        # commit: seen naming one commit with an older commit's time. Only the named commit stands,
        # with what the caller says of it (checked at configure: commit_info_from_environment).
        for key in ("time", "author_time", "project", "branch"):
            commit_info[key] = None
        try:
            commit_info.update(commit_info_from_environment())
        except SpecgateError:  # refused at configure where specgate runs; elsewhere left unnamed
            pass
