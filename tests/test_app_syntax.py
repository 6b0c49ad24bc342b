"""The Syntax page through streamlit.testing's AppTest, on the fixture biLM and small EWT slices."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared import MODEL_ENV_VAR

pytestmark = pytest.mark.usefixtures("one_torch_thread")

APP = Path(__file__).resolve().parents[1] / "app.py"
SYNTAX = "app_pages/7_syntax.py"


@pytest.fixture
def open_syntax(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))

    def opener(**state) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=180)
        for key, value in {"sy_train": 200, "sy_rank": 16, **state}.items():
            at.session_state[key] = value
        at.switch_page(SYNTAX)
        return at.run()

    return opener


def _figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_syntax_page_draws_gold_and_predicted_trees_and_the_attribution(open_syntax):
    at = open_syntax(sy_index=0)
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    assert 'st.Page("app_pages/7_syntax.py"' in APP.read_text()
    tree, attribution = _figures(at)
    names = {t.get("name") for t in tree["data"]}
    assert "gold (above)" in names and names & {"predicted, in the gold tree", "predicted, not in the gold tree"}
    words = [t for t in tree["data"] if t.get("mode") == "text"][0]["text"]
    assert words[:3] == ["What", "if", "Google"]
    assert any("gold arcs" in m.value for m in at.markdown)
    assert "bank" in attribution["layout"]["title"]["text"]
    assert {t["name"] for t in attribution["data"]} == {"layer 0", "layer 1", "layer 2"}


def test_syntax_page_with_a_typed_sentence_and_a_missing_word(open_syntax):
    at = open_syntax(sy_source="typed", sy_text="The dog chased the cat", sy_attr_word="canoe",
                     sy_attr_text="the bank of the river")
    assert not at.exception and not at.error
    tree = _figures(at)[0]
    assert "gold (above)" not in {t.get("name") for t in tree["data"]}
    assert sum(1 for t in tree["data"] if t.get("name") == "predicted" or t.get("legendgroup") == "predicted") == 4
    assert any("'canoe' is not among" in w.value for w in at.warning)
