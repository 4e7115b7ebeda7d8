"""`workload.prompt_files`: the user's own prompts (accept length depends on the traffic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specgate.deployment import parse_deployment
from specgate.errors import DeploymentError
from tests.self.helpers import merge, sim_deployment_dict

MINE = [
    {"id": "ask-1", "messages": [{"role": "user", "content": "How do I reset a forgotten router password?"}]},
    {"id": "ask-2", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name three rivers in Africa."}]},
]  # fmt: skip


def _write(folder: Path, name: str, rows: list, raw: str | None = None) -> Path:
    path = folder / name
    path.write_text(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in rows))
    return path


def _dep(folder: Path, workload: dict):
    data = merge(sim_deployment_dict(), {"workload": workload})
    data["workload"].pop("prompt_sets", None) if "prompt_sets" not in workload else None
    return parse_deployment(data, folder / "deployment.toml")


def test_a_prompt_file_beside_the_deployment_is_the_whole_workload(tmp_path):
    _write(tmp_path, "support.jsonl", MINE)
    dep = _dep(tmp_path, {"prompt_files": ["support.jsonl"]})
    assert [p.label for p in dep.workload.prompts()] == ["support/ask-1", "support/ask-2"]
    both = _dep(tmp_path, {"prompt_files": ["support.jsonl"], "prompt_sets": ["math"]})
    labels = [p.label for p in both.workload.prompts()]
    assert labels[0].startswith("math/") and labels[-1] == "support/ask-2"


@pytest.mark.parametrize(
    "raw, message",
    [
        (None, "cannot read the prompt file"),
        ("", "prompt set is empty"),
        ('{"id": 1, "messages": "hi"}\n', "support.jsonl:1: expected"),
        ('{"id": 1, "messages": []}\n', "support.jsonl:1: expected"),
        ("not json\n", "support.jsonl:1: expected"),
        ('{"id": 1, "messages": [{"role": "user", "content": "a"}]}\n' * 2, "support.jsonl:2: id '1' appears twice"),
    ],
)
def test_a_bad_prompt_file_is_refused_with_its_file_and_line(tmp_path, raw, message):
    if raw is not None:
        _write(tmp_path, "support.jsonl", [], raw)
    with pytest.raises(DeploymentError) as err:
        _dep(tmp_path, {"prompt_files": ["support.jsonl"]})
    assert "workload.prompt_files" in str(err.value) and message in str(err.value), str(err.value)


def test_a_prompt_file_named_like_a_set_is_refused(tmp_path):
    _write(tmp_path, "math.jsonl", MINE)
    with pytest.raises(DeploymentError, match="already a prompt set"):
        _dep(tmp_path, {"prompt_files": ["math.jsonl"], "prompt_sets": ["math"]})


def test_the_gate_sends_the_users_prompts_and_a_changed_file_is_another_workload(sim_deployment, pytester, tmp_path):
    path = _write(tmp_path, "support.jsonl", MINE)
    d = sim_deployment({"workload": {"prompt_files": [str(path)], "repeats": 4}})
    d.data["workload"].pop("prompt_sets", None)
    d.path.write_text(__import__("tomli_w").dumps(d.data))
    d.run(pytester, "--specgate-update-baselines", "-k", "speed or equivalence")
    report = d.report()
    assert {row["config"] for row in report["speed"]} >= {"baseline", "eagle3-decode"}
    path.write_text(path.read_text().replace("rivers", "mountains"))
    d.run(pytester, "-k", "regression and baseline")
    gate = next(g for g in d.report()["gates"] if g["gate"] == "regression:baseline:c1:decode_tps")
    assert gate["status"] == "not compared" and "workload" in gate["summary"]
