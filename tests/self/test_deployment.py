"""Deployment files: the default loads; every kind of bad input names file and field."""

from __future__ import annotations

import pytest
import tomli_w
from helpers import merge, sim_deployment_dict
from hypothesis import given, settings
from hypothesis import strategies as st

from specgate.deployment import load_deployment, resolve_deployment_path
from specgate.errors import DeploymentError


def write(tmp_path, data):
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return path


def test_default_deployment_is_the_simulator():
    dep = load_deployment(None)
    assert dep.name == "sim" and dep.simulator
    assert dep.reference == "baseline"
    assert dep.speculative_configs == ["eagle3-prefill", "eagle3-decode"]
    assert all(dep.configs[c].speculative for c in dep.speculative_configs)
    assert not dep.configs["baseline"].speculative


@pytest.mark.parametrize(
    ("overrides", "field", "expected"),
    [
        ({"workload": {"max_new_token": 10}}, "workload.max_new_token", "did you mean 'max_new_tokens'"),
        ({"workload": {"max_new_tokens": "64"}}, "workload.max_new_tokens", "expected an integer"),
        ({"workload": {"concurrency": []}}, "workload.concurrency", "non-empty list"),
        # [1, 1] planned every gate twice: the gate kinds' own-bug error, naming no field (hypothesis found it).
        ({"workload": {"concurrency": [1, 1]}}, "workload.concurrency", "lists 1 more than once"),
        ({"equivalence": {"concurrency": [4, 1, 4]}}, "equivalence.concurrency", "lists 4 more than once"),
        ({"workload": {"prompt_sets": ["poetry"]}}, "workload.prompt_sets", "unknown prompt set 'poetry'"),
        ({"launch": {"launcher": "k8s"}}, "launch.launcher", "expected one of local, url, ssh"),
        ({"launch": {"launcher": "ssh"}}, "launch.ssh", "is required but missing"),
        (
            {"launch": {"launcher": "ssh", "ssh": {"hosts": ["a", "b"]}, "args": ["--nnodes", "2"]}},
            "launch.args",
            "the ssh launcher gives every node --nnodes",
        ),
        ({"launch": {"args": ["--port", "1234"]}}, "launch.args", "must not set --port"),
        ({"launch": {"boot_timeout_s": -1}}, "launch.boot_timeout_s", ">= 0.1"),
        ({"reference": "plain"}, "reference", "not under [configs]"),
        ({"reference": "eagle3-decode"}, "reference", "speculative"),
        ({"gates": {"beats": [{"config": "eagle4", "ratio": 1.1}]}}, "gates.beats[0].config", "not under [configs]"),
        ({"gates": {"tolerance": {"decode_tps": 2}}}, "gates.tolerance.decode_tps", "<= 0.999"),
        ({"equivalence": {"top_logprobs": 1}}, "equivalence.top_logprobs", ">= 2"),
        ({"configs": {"baseline": {"argz": []}}}, "configs.baseline.argz", "did you mean 'args'"),
        ({"gpu": "h200"}, "gpu", "unknown field"),
        # Its short-workload tests ("…-beats-ref-at-2K") read as the 2K bucket's (bucket_of_test).
        ({"configs": {"ref-at-2K": {"args": []}}}, "configs.ref-at-2K", "ends like a context bucket's test id"),
        ({"launch": {"env": {"A=B": "1"}}}, "launch.env", "cannot name an environment variable"),
        ({"configs": {"baseline": {"env": {"": "1"}}}}, "configs.baseline.env", "cannot name an environment variable"),
    ],
)
def test_bad_field_is_named(tmp_path, overrides, field, expected):
    path = write(tmp_path, merge(sim_deployment_dict(), overrides))
    with pytest.raises(DeploymentError) as err:
        load_deployment(str(path))
    message = str(err.value)
    assert str(path) in message
    assert f"field '{field}'" in message
    assert expected in message


def test_url_launcher_needs_a_url_per_config(tmp_path):
    data = merge(sim_deployment_dict(), {"launch": {"launcher": "url"}})
    with pytest.raises(DeploymentError, match=r"configs\.baseline\.url.*required"):
        load_deployment(str(write(tmp_path, data)))


def test_url_servers_cannot_be_told_to_take_turns(tmp_path):
    # They are up together by definition, so they are always interleaved: a `coexist = false`
    # would be overridden in silence, so it is refused, naming the field.
    data = merge(sim_deployment_dict(), {"launch": {"launcher": "url", "coexist": False}})
    for name, cfg in data["configs"].items():
        cfg["url"] = f"http://127.0.0.1:1/{name}"
    with pytest.raises(DeploymentError, match=r"launch\.coexist.*always measured interleaved"):
        load_deployment(str(write(tmp_path, data)))


def test_not_toml_and_missing_file_are_named(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(DeploymentError, match="broken.toml: not valid TOML"):
        load_deployment(str(bad))
    with pytest.raises(DeploymentError, match="no such deployment file"):
        load_deployment(str(tmp_path / "absent.toml"))
    with pytest.raises(DeploymentError, match="no deployment named 'nope'; known: .*sim"):
        resolve_deployment_path("nope")


_FIELDS = [
    ("workload", "max_new_tokens"),
    ("workload", "repeats"),
    ("workload", "concurrency"),
    ("equivalence", "tie_margin"),
    ("equivalence", "stop_strings"),
    ("launch", "coexist"),
    ("launch", "command"),
    ("gates", "confidence"),
]
_VALUES = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=5),
    st.booleans(),
    st.lists(st.integers(-2, 3), max_size=3),
    st.lists(st.text(max_size=3), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(where=st.sampled_from(_FIELDS), value=_VALUES)
def test_any_value_anywhere_loads_or_names_its_field(tmp_path_factory, where, value):
    """Property: whatever a user types into a field, the loader either accepts it or
    raises DeploymentError naming that very field; never a traceback."""
    table, key = where
    data = merge(sim_deployment_dict(), {table: {key: value}})
    path = write(tmp_path_factory.mktemp("dep"), data)
    try:
        load_deployment(str(path))
    except DeploymentError as exc:
        assert f"{table}.{key}" in str(exc) or exc.field and exc.field.startswith(table), str(exc)


def test_check_lists_every_problem_of_a_file_not_only_the_first(tmp_path):
    import subprocess
    import sys

    from specgate.resources import SOURCE_ROOT as REPO_ROOT

    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "bad one"\nrefrence = "baseline"\n[launch]\nboots = 0\n[configs.baseline]\nargs = []\n'
        '[workload]\nprompt_sets = ["nope"]\n[equivalence]\ntie_margin = -1\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "check", str(bad)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert run.returncode == 2 and "5 problems" in run.stderr, run.stderr
    for field in ("'name'", "'launch.boots'", "'workload.prompt_sets'", "'equivalence.tie_margin'"):
        assert f"field {field}" in run.stderr
    assert "field 'refrence': unknown field (did you mean 'reference'?)" in run.stderr


def test_check_lists_every_broken_config_and_every_broken_gate(tmp_path):
    from specgate.errors import DeploymentErrors
    from tests.self.test_side_by_side import _dep

    with pytest.raises(DeploymentErrors) as err:
        _dep({"configs": {"baseline": {"args": ["--port", "1"]}, "eagle3-prefill": {"typo": 1}}})
    assert len(err.value.errors) == 2
    with pytest.raises(DeploymentErrors) as err:
        _dep({"gates": {"beats": [{"config": "ghost"}, {"config": "eagle3-decode", "ratio": -1}],
                        "accept_length": [{"config": "baseline", "at_least": 2}]}})  # fmt: skip
    assert [e.field for e in err.value.errors] == ["gates.beats[0].config", "gates.beats[1].ratio", "gates.accept_length[0].config"]


def test_the_speed_sequence_takes_the_sets_in_turn_so_every_prefix_weighs_them_alike():
    workload = load_deployment("sim").workload
    sequence = workload.speed_sequence()
    assert sorted(p.label for p in sequence) == sorted(p.label for p in workload.prompts())
    sets = workload.prompt_sets
    # A check stops at `repeats` requests (12 here): set by set that would be chat and code only.
    first = [p.set_name for p in sequence[: len(sets) * 2]]
    assert all(first.count(name) == 2 for name in sets), first
    # Sets shorter than the others drop out of the turn when they run out, and nothing repeats.
    assert len({p.label for p in sequence}) == len(sequence)


def test_accept_length_by_set_pools_tokens_over_verify_steps_per_set():
    from specgate.measure.speed import ConfigSpeed, SpeedSample
    from specgate.measure.summary import accept_by_set

    def sample(index: int, tokens: int, steps: int | None) -> SpeedSample:
        return SpeedSample(100.0, 0.01, 1.0, tokens, 10, steps, None, 5, index=index)

    record = ConfigSpeed("eagle3", 1, [sample(0, 100, 50), sample(1, 100, 25), sample(2, 100, 40), sample(3, 9, None)])
    labels = ["chat/chat-00", "code/code-00", "chat/chat-01", "math/math-00"]
    figures = accept_by_set(record, lambda s: labels[s.index])
    assert figures == {"chat": {"accept_length": 2.222, "requests": 2}, "code": {"accept_length": 4.0, "requests": 1}}


def test_the_committed_schema_is_the_one_the_parser_describes_and_every_shipped_deployment_fits_it():
    """docs/deployment.schema.json is generated (`specgate schema -o ...`) from the parser's own
    reads; a parser change without regenerating it fails here, as does a shipped file it rejects."""
    import json
    import tomllib
    from pathlib import Path

    import jsonschema

    from specgate.resources import builtin_deployments_dir
    from specgate.schema import deployment_schema

    committed = Path(__file__).resolve().parents[2] / "docs" / "deployment.schema.json"
    schema = deployment_schema()
    assert json.loads(committed.read_text()) == schema, "run: specgate schema -o docs/deployment.schema.json"
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(builtin_deployments_dir().glob("*.toml")):
        assert not list(validator.iter_errors(tomllib.loads(path.read_text()))), path.name


def test_the_schema_knows_every_field_the_parser_reads_and_rejects_what_the_parser_rejects(tmp_path):
    """Completeness: every literal key deployment.py reads is a property somewhere in the schema
    (a branch no shipped file takes needs a sketch in specgate.schema). And a typo, a wrong type
    and an unknown choice fail the schema as they fail the parser."""
    import json
    import re
    import tomllib

    import jsonschema

    import specgate.deployment
    from specgate.schema import deployment_schema

    schema = deployment_schema()
    source = open(specgate.deployment.__file__).read()
    method = r"(?:text|flag|name|integer|number|str_list|int_list|str_map|table|table_list)"
    # t.text("key", ...) and attempt(top.text, "key", ...)
    read = set(re.findall(rf'\.{method}\(\s*"(\w+)"', source)) | set(re.findall(rf'\.{method},\s*"(\w+)"', source))
    named: set[str] = set()

    def walk(node) -> None:  # noqa: ANN001
        if isinstance(node, dict):
            named.update(node.get("properties", {}) if isinstance(node.get("properties"), dict) else {})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert read and read <= named, sorted(read - named)
    validator = jsonschema.Draft202012Validator(schema)
    base = sim_deployment_dict()
    for overrides in (
        {"workload": {"max_new_token": 5}},
        {"launch": {"launcher": "lcoal"}},
        {"workload": {"repeats": "many"}},
        {"configs": {"baseline": {"argz": []}}},
        {"gates": {"beats": [{"over": "baseline"}]}},  # no config
        {"configs": {"baseline": {"tolerate": ["stop-overshot"]}}},
        {"workload": {"prompt_sets": ["chta"]}},
        {"hardware": {"gpu_cout": "1"}},
        {"configs": {"plain next": {"args": []}}},  # a config name becomes a file name
        {"workload": {"repeats": 9, "max_repeats": 2}},
    ):
        data = merge(base, overrides)
        assert list(validator.iter_errors(json.loads(json.dumps(data)))), overrides
        path = tmp_path / "dep.toml"
        path.write_text(tomli_w.dumps(data))
        with pytest.raises(DeploymentError):
            load_deployment(str(path))
    assert not list(validator.iter_errors(tomllib.loads(tomli_w.dumps(base))))
    # What the parser accepts, the schema must too: an empty table left with its header only.
    empty = merge(base, {"gates": {"between_boot": {}}})
    path = tmp_path / "empty.toml"
    path.write_text(tomli_w.dumps(empty))
    load_deployment(str(path))
    assert not list(validator.iter_errors(tomllib.loads(path.read_text())))


def test_check_warns_of_a_tie_margin_wider_than_any_bf16_tie(tmp_path, capsys):
    from specgate import cli

    path = write(tmp_path, merge(sim_deployment_dict(), {"equivalence": {"tie_margin": 10.0}}))
    assert cli.main(["check", str(path)]) == 0
    assert "equivalence.tie_margin = 10 nats excuses a parting" in capsys.readouterr().out


def test_the_committed_schema_takes_a_logit_bias_on_any_token_id():
    """logit_bias's keys are the user's token ids: the schema once allowed none at all (it listed
    the ids the shipped files used), so an editor flagged every valid bias as an error."""
    import json
    from pathlib import Path

    import jsonschema

    from tests.self.helpers import merge, sim_deployment_dict

    committed = json.loads((Path(__file__).resolve().parents[2] / "docs" / "deployment.schema.json").read_text())
    data = merge(sim_deployment_dict(), {"sampling": {"settings": [{"name": "bias", "temperature": 1.0, "logit_bias": {"42": -5.0}}]}})
    assert not list(jsonschema.Draft202012Validator(committed).iter_errors(data))
    data["sampling"]["settings"][0]["logit_bias"] = {"42": 500.0}
    assert list(jsonschema.Draft202012Validator(committed).iter_errors(data))
