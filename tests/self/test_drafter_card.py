"""The drafter card a config names: read and checked when the deployment is, shown with the
drafter in the report, and its checksum held against the weights the run found."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specgate.errors import DeploymentError
from specgate.measure.drafters import describe, drafter_identity
from tests.self.test_side_by_side import _dep


def _weights(tmp_path: Path, data: bytes = b"weights") -> Path:
    folder = tmp_path / "drafter"
    folder.mkdir(exist_ok=True)
    (folder / "model.safetensors").write_bytes(data)
    return folder


def _card(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(fields))
    return path


def _config(card: Path, args: list[str] | None = None):
    return _dep({"configs": {"eagle3-decode": {"drafter_card": str(card), **({"args": args} if args is not None else {})}}})


def test_a_card_is_read_shown_and_checked_against_the_weights(tmp_path):
    weights = _weights(tmp_path)
    card = _card(
        tmp_path,
        weights=str(weights),
        sha256=hashlib.sha256(b"weights").hexdigest(),
        made="https://example.invalid/how-we-trained-it",
        expected_accept_length=2.4,
    )
    dep = _config(card, ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(weights)])
    assert dep.configs["eagle3-decode"].drafter_card == card
    found = drafter_identity(dep, "eagle3-decode")
    assert found is not None and found["matches_card"] is True
    assert found["card"]["expected_accept_length"] == 2.4 and found["card"]["path"] == str(card)
    said = describe(found)
    assert f"card {card}: made https://example.invalid/how-we-trained-it; expected accept length 2.4" in said
    assert "WEIGHTS DIFFER" not in said
    (weights / "model.safetensors").write_bytes(b"other weights")
    swapped = drafter_identity(dep, "eagle3-decode")
    assert swapped is not None and swapped["matches_card"] is False
    assert "WEIGHTS DIFFER from the drafter card's checksum" in describe(swapped)


def test_a_card_alone_names_the_weights(tmp_path):
    """A config whose flags name no draft path (a launcher that adds it) still says which drafter it ran."""
    weights = _weights(tmp_path)
    found = drafter_identity(_config(_card(tmp_path, weights=str(weights)), ["--speculative-algorithm", "EAGLE3"]), "eagle3-decode")
    assert found is not None and found["path"] == str(weights)
    assert found["sha256"] == hashlib.sha256(b"weights").hexdigest() and "matches_card" not in found


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"sha256": "0" * 64}, "field 'weights': is required but missing"),
        ({"weights": "d", "sha256": "abc"}, "field 'sha256'"),
        ({"weights": "d", "expected_accept_length": 0.5}, "field 'expected_accept_length': expected at least 1"),
        ({"weights": "d", "made_by": "me"}, "field 'made_by'"),
    ],
)
def test_a_bad_card_is_named_with_its_file_field_and_config(tmp_path, fields, message):
    card = _card(tmp_path, **fields)
    with pytest.raises(DeploymentError) as caught:
        _config(card)
    said = str(caught.value)
    assert "configs.eagle3-decode.drafter_card" in said and str(card) in said and message in said, said


def test_a_missing_card_is_named(tmp_path):
    with pytest.raises(DeploymentError, match=r"drafter_card.*nowhere\.json.*cannot read a drafter card"):
        _config(tmp_path / "nowhere.json")
