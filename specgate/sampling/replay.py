"""Sampling cases that once failed, kept beside the greedy replay file
(`baselines/<deployment>/equivalence/sampling-replay.json`; commit it) and asked first, under
their setting, on every later run. A file of its own: the greedy oracle rewrites replay.json
with its own cases only.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from specgate.atomic import write_json_atomic
from specgate.documents import problem, read_json
from specgate.errors import BaselineError
from specgate.resources import package_data
from specgate.sampling_spec import SamplingSetting
from specgate.shared_files import locked

if TYPE_CHECKING:
    from specgate.sampling.check import SamplingPrompt

SAMPLING_REPLAY_FILE = "equivalence/sampling-replay.json"


class ReplayCase(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    config: str
    setting: str
    params: dict[str, float]
    prompt: str  # the prompt's label
    text: str
    seed: int
    first_failed: str
    why: str


class ReplayDocument(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    deployment: str
    cases: list[ReplayCase]


def load_sampling_replay(path: Path) -> list[ReplayCase]:
    """The file's cases ([] where there is none); BaselineError names the file and the field.
    Read before anything boots (verdicts/stored_files.py), so a broken file is refused up front
    and is never rewritten: `remember` appends to what this read, which raises first."""
    if not path.exists():  # not is_file(): a FIFO or a folder there is refused by name
        return []
    try:
        raw = read_json(path, "the sampling replay file (a JSON file)")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BaselineError(path, f"sampling replay file cannot be read as JSON: {str(exc)[:200]}") from None
    try:
        return ReplayDocument.model_validate(raw).cases
    except ValidationError as exc:
        raise BaselineError(path, f"sampling replay file malformed: {problem(exc)}") from None


class SamplingReplay:
    def __init__(self, path: Path, deployment: str) -> None:
        self.path = path
        self.deployment = deployment
        self._cases: list[ReplayCase] | None = None
        self.added = 0  # cases this run wrote to the file (a failed baseline update still changed it)
        self.not_kept = 0  # failing cases not written: the file is specgate's own shipped data

    @property
    def cases(self) -> list[ReplayCase]:
        if self._cases is None:
            self._cases = self._load()
        return self._cases

    def _load(self) -> list[ReplayCase]:
        return load_sampling_replay(self.path)

    def prompts(self, setting: str) -> list[SamplingPrompt]:
        from specgate.sampling.check import SamplingPrompt

        seen: dict[str, SamplingPrompt] = {}
        for case in self.cases:
            if case.setting == setting:
                seen.setdefault(case.prompt, SamplingPrompt(case.prompt, case.text))
        return list(seen.values())

    def remember(self, config: str, setting: SamplingSetting, prompt: SamplingPrompt, seed: int, why: str) -> None:
        """Keep a failing case (atomic write; never fatal: the failure is reported either way).
        Never into specgate's own shipped baselines (resources.package_data): a project's are kept."""
        if package_data(self.path):
            self.not_kept += 1  # said at the run's end (plugin)
            return
        if any(c.config == config and c.setting == setting.name and c.prompt == prompt.label for c in self.cases):
            return
        case = ReplayCase(
            config=config,
            setting=setting.name,
            params={k: float(v) for k, v in setting.sampling_params().items()},
            prompt=prompt.label,
            text=prompt.text,
            seed=seed,
            first_failed=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            why=why[:300],
        )
        self.cases.append(case)
        try:
            # Read again under the lock: another run sharing these baselines may have added cases since.
            with locked(self.path):
                stored = load_sampling_replay(self.path)
                if any(c.config == config and c.setting == setting.name and c.prompt == prompt.label for c in stored):
                    return
                document = ReplayDocument(deployment=self.deployment, cases=[*stored, case])
                write_json_atomic(self.path, document.model_dump())
            self.added += 1
        except (OSError, BaselineError):
            pass  # the failure itself is reported either way; only its replay is lost (a file broken meanwhile stays)
