"""Hostile deployment files (issue 11: items 2, 3, 4, 5, 9): each is refused at load time
with the file, the field and what was expected, never a traceback later in the run."""

from __future__ import annotations

import math
import os

import pytest
import tomli_w
from helpers import merge, sim_deployment_dict

from specgate.deployment import load_deployment, parse_deployment
from specgate.errors import DeploymentError
from specgate.project import find_project
from specgate.server.local import LocalLauncher


def write(tmp_path, data):
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(data))
    return path


def renamed_config(old: str, new: str) -> dict:
    data = sim_deployment_dict()
    data["configs"][new] = data["configs"].pop(old)
    data["gates"]["beats"] = [{**g, "config": new} if g["config"] == old else g for g in data["gates"]["beats"]]
    return data


HOSTILE = [
    # 4: names become file names (baselines, golden files, server logs)
    ({"name": "../escape"}, "name", "not a safe name"),
    ({"name": "a/b"}, "name", "not a safe name"),
    ({"name": ""}, "name", "not a safe name"),
    # 5: nan and inf pass every comparison, so every bound
    ({"gates": {"confidence": math.nan}}, "gates.confidence", "finite"),
    ({"launch": {"boot_timeout_s": math.nan}}, "launch.boot_timeout_s", "finite"),
    ({"launch": {"boot_timeout_s": math.inf}}, "launch.boot_timeout_s", "finite"),
    ({"workload": {"request_timeout_s": math.inf}}, "workload.request_timeout_s", "finite"),
    ({"gates": {"tolerance": {"decode_tps": math.nan}}}, "gates.tolerance.decode_tps", "finite"),
    ({"equivalence": {"tie_margin": math.inf}}, "equivalence.tie_margin", "finite"),
    # Durations and fractions past their bounds: a deadline of 1e30 s overflowed the timers under every
    # request, and a tolerance of 1 (100%) put the bar at log(0), both after `check` had passed them
    ({"workload": {"request_timeout_s": 1e30}}, "workload.request_timeout_s", ">= 0.1 and <= 86400"),
    ({"launch": {"boot_timeout_s": 1e308}}, "launch.boot_timeout_s", ">= 0.1 and <= 86400"),
    ({"launch": {"shutdown_timeout_s": 1e9}}, "launch.shutdown_timeout_s", "<= 3600"),
    ({"gates": {"tolerance": {"decode_tps": 1.0}}}, "gates.tolerance.decode_tps", ">= 0 and <= 0.999, got 1"),
    ({"gates": {"beats": [{"config": "eagle3-decode", "ratio": 1e300}]}}, "gates.beats[0].ratio", "<= 100"),
    ({"equivalence": {"tie_margin": 1e9}}, "equivalence.tie_margin", "<= 10"),
    # 2: absurd sizes
    ({"workload": {"max_new_tokens": 100_000_000}}, "workload.max_new_tokens", "<= 1048576"),
    ({"equivalence": {"max_new_tokens": 100_000_000}}, "equivalence.max_new_tokens", "<= 1048576"),
    ({"workload": {"concurrency": [1, 100_000]}}, "workload.concurrency", "<= 4096"),
    # Each count its own bound and message: a repeats of 10**9 was blamed on max_repeats (issue 33, item 14)
    ({"workload": {"repeats": 10**9}}, "workload.repeats", "<= 10000, got 1000000000"),
    ({"workload": {"repeats": 10**9, "max_repeats": 20}}, "workload.repeats", "<= 10000"),
    ({"workload": {"max_repeats": 10**9}}, "workload.max_repeats", "<= 10000"),
    ({"workload": {"warmup": {"max_requests": 10**9}}}, "workload.warmup.max_requests", "<= 10000"),
    ({"workload": {"warmup": {"min_requests": 10**9}}}, "workload.warmup.min_requests", "<= 10000"),
    ({"workload": {"warmup": {"settle_window": 10**9}}}, "workload.warmup.settle_window", "<= 10000"),
    ({"equivalence": {"examples": 10**9}}, "equivalence.examples", "<= 100000"),
    ({"equivalence": {"top_logprobs": 10**9}}, "equivalence.top_logprobs", "<= 1000"),
    ({"gates": {"sample_batch": 10**9}}, "gates.sample_batch", "<= 10000"),
    ({"gates": {"beats": [{"config": "eagle3-decode", "ratio": 1.1, "concurrency": 10**9}]}}, "gates.beats[0].concurrency", "<= 4096"),
    ({"sweep": {"repeats": 10**9}}, "sweep.repeats", "<= 10000"),
    ({"sweep": {"parallel": 10**9}}, "sweep.parallel", "<= 256"),
    ({"sweep": {"num_steps": [1, 10**9]}}, "sweep.num_steps", "<= 256"),
    # 3: a [hardware] value that would crash the fingerprint at session end
    ({"hardware": {"gpu_count": "two"}}, "hardware", "gpu_count: expected a whole number"),
    ({"hardware": {"gpus": "2"}}, "hardware", "unknown key 'gpus'"),
    # 9: an empty prompt list (every speed test divided by zero)
    ({"workload": {"prompt_sets": []}}, "workload.prompt_sets", "at least one prompt set"),
    # 9: a placeholder typo would fail only at boot
    ({"launch": {"command": ["{pyton}", "-m", "specgate.sim"]}}, "launch.command", "unknown placeholder {pyton}"),
]


@pytest.mark.parametrize(("overrides", "field", "expected"), HOSTILE, ids=[h[1] + ":" + h[2] for h in HOSTILE])
def test_hostile_field_is_refused_with_file_and_field(tmp_path, overrides, field, expected):
    path = write(tmp_path, merge(sim_deployment_dict(), overrides))
    with pytest.raises(DeploymentError) as err:
        load_deployment(str(path))
    assert err.value.field == field
    assert str(path) in str(err.value) and expected in str(err.value)


@pytest.mark.parametrize("name", ["../../etc", "eagle3/decode", "..", ".hidden", "a b"])
def test_config_names_that_are_not_safe_file_names_are_refused(tmp_path, name):
    path = write(tmp_path, renamed_config("eagle3-decode", name))
    with pytest.raises(DeploymentError, match="not a safe name") as err:
        load_deployment(str(path))
    assert err.value.field == f"configs.{name}"


def test_utf16_deployment_file_is_named_not_a_traceback(tmp_path):
    path = tmp_path / "dep.toml"
    path.write_text(tomli_w.dumps(sim_deployment_dict()), encoding="utf-16")
    with pytest.raises(DeploymentError, match="not UTF-8") as err:
        load_deployment(str(path))
    assert err.value.path == path


def test_json_valued_flags_need_no_escaping(tmp_path):
    flag = '{"rope_scaling": {"type": "yarn", "factor": 2.0}}'
    data = merge(sim_deployment_dict(), {"configs": {"baseline": {"args": ["--json-model-override-args", flag]}}})
    dep = parse_deployment(data, tmp_path / "dep.toml")
    command = LocalLauncher(dep, tmp_path).command_for(dep.configs["baseline"], 1234, 1235)
    assert flag in command
    assert "{python}" not in " ".join(command) and "{repo}" not in " ".join(command)


def test_gpu_count_given_as_a_number_string_is_accepted(tmp_path):
    dep = parse_deployment(merge(sim_deployment_dict(), {"hardware": {"gpu_count": "2"}}), tmp_path / "d.toml")
    assert dep.hardware["gpu_count"] == "2"


def test_a_utf8_byte_order_mark_is_named_not_invalid_statement(tmp_path):
    path = tmp_path / "dep.toml"
    path.write_bytes(b"\xef\xbb\xbf" + tomli_w.dumps(sim_deployment_dict()).encode())
    with pytest.raises(DeploymentError, match="starts with a byte-order mark") as err:
        load_deployment(str(path))
    assert err.value.path == path


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_deployment_that_is_no_regular_file_is_named_for_what_it_is(tmp_path, kind):
    """A FIFO is never opened (that would wait for a writer forever); neither is "no such file"."""
    path = tmp_path / "dep.toml"
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    expected = "is a directory" if kind == "directory" else "is not a regular file"
    for given in (str(path), str(tmp_path)) if kind == "directory" else (str(path),):
        with pytest.raises(DeploymentError, match=expected):
            load_deployment(given)


def test_nul_in_specgate_toml_is_named_not_a_traceback(tmp_path):
    (tmp_path / ".git").mkdir()  # the project's root: its settings are never a parent folder's
    settings = tmp_path / "specgate.toml"
    settings.write_bytes(b'deployment = "sim"\x00\n')
    with pytest.raises(DeploymentError, match=r"holds a NUL byte \(line 1\)"):
        find_project(tmp_path)
    for key in ("deployment", "deployments", "baselines", "report_dir"):
        settings.write_text(f'{key} = "a\\u0000b.toml"\n')  # TOML's escape: a NUL inside a string
        with pytest.raises(DeploymentError, match="holds a NUL character") as err:
            find_project(tmp_path)
        assert err.value.field == key and err.value.path == settings


def test_nul_in_a_deployment_string_is_refused_at_load(tmp_path):
    data = merge(sim_deployment_dict(), {"configs": {"baseline": {"args": ["--x", "a\x00b"]}}})
    with pytest.raises(DeploymentError, match="holds a NUL character") as err:
        load_deployment(str(write(tmp_path, data)))
    assert err.value.field == "configs.baseline.args[1]"
