"""The attribution panel through streamlit.testing's AppTest: in the Playground, for "bank" in the
canoe sentence, on the fixture biLM."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared import MODEL_ENV_VAR

pytestmark = pytest.mark.usefixtures("one_torch_thread")

APP = Path(__file__).resolve().parents[1] / "app.py"
SENTENCE = "We pulled the canoe onto the muddy bank of the river"
REFERENCE = "They fished from the grassy bank of the stream"


@pytest.fixture
def playground(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))

    def opener(**state) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=300)
        for key, value in {"pg_demo": "my own sentences", "pg_text": f"{SENTENCE}\n{REFERENCE}", "pg_word": "bank",
                           **state}.items():
            at.session_state[key] = value
        return at.run()

    return opener


def _attribution(at):
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return [f for f in figures if "move" in f["layout"].get("title", {}).get("text", "")]


def test_panel_is_off_until_asked_for(playground):
    at = playground()
    assert not at.exception and not at.error
    assert at.toggle(key="pg_attr_on").value is False and not _attribution(at)


def test_panel_draws_a_bar_per_context_word_and_layer_for_bank(playground):
    at = playground(pg_attr_on=True)
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    (fig,) = _attribution(at)
    assert "bank" in fig["layout"]["title"]["text"] and "grassy" in fig["layout"]["title"]["text"]
    words = SENTENCE.split()
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert {t["name"] for t in bars} == {"layer 0", "layer 1", "layer 2"}
    assert len(bars) == 6  # leave one out and gradient x input, each layer
    assert all(len(t["x"]) == len(words) for t in bars)
    assert at.selectbox(key="pg_attr_ref").value == 1  # the other sentence with "bank"
    top = at.dataframe[-1].value
    assert list(top["layer"]) == [0, 1, 2]
    assert all(w.split(" (")[0] in words for cell in top["moved most by (leave one out)"][1:] for w in cell.split(", "))

    at.selectbox(key="pg_attr_ref").set_value("no reference (leave one out only)").run()
    assert not at.exception and not at.error
    (fig,) = _attribution(at)
    assert len([t for t in fig["data"] if t["type"] == "bar"]) == 3  # leave one out only
