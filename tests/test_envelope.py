"""The JSON envelope shared by the small result types."""

import pytest

from probing.engine.envelope import from_tagged_json, to_tagged_json


def test_round_trip_keeps_the_payload_and_does_not_modify_it():
    data = {"lemma": "bank", "layers": [0.5, 0.25], "note": "ü"}
    text = to_tagged_json("projection", 1, data)
    assert "kind" not in data
    assert from_tagged_json(text, "projection", 1) == data


@pytest.mark.parametrize("kind, version", [("retrieval", 1), ("projection", 2)])
def test_another_kind_or_version_is_refused_with_what_was_found(kind, version):
    text = to_tagged_json("projection", 1, {"x": 1})
    with pytest.raises(ValueError, match="found kind 'projection', version 1"):
        from_tagged_json(text, kind, version)
