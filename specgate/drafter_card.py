"""The drafter card: what a gate run needs to know of a config's drafter, whoever made it.

A small JSON file a config names (`drafter_card = "drafters/mine.json"`): where the weights
are, their checksum, how they were made (free text or a URL), and the accept length expected of
them. The run reads it, checks the weights against its checksum, and shows it in the report;
making drafters is the lab's business (lab/specgate_lab), not the product's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specgate.documents import problem, read_document

EXPECTED = "a drafter card (a JSON object: weights, sha256, made, expected_accept_length)"


class DrafterCard(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: Annotated[str, Field(min_length=1, description="the weights, as --speculative-draft-model-path names them (a folder or a hub id); where the config gives that flag, the flag wins")]
    sha256: Annotated[
        str | None,
        Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the weight files, as specgate computes it"),
    ] = None
    made: Annotated[str | None, Field(description="how the weights were made: free text or a URL")] = None
    # An accept length is at least 1: the verified token is always accepted.
    expected_accept_length: Annotated[float | None, Field(ge=1.0, allow_inf_nan=False)] = None


def load_card(path: Path) -> DrafterCard:
    """The card at `path`; ValueError naming the file and the field otherwise."""
    try:
        data = json.loads(read_document(path, EXPECTED))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read {EXPECTED}: {exc}") from None
    try:
        return DrafterCard.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: drafter card malformed: {problem(exc)}") from None
