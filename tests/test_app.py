"""The Streamlit app through streamlit.testing's AppTest: renders, reacts, never shows a traceback.

The model: ``ELMO_WORKBENCH_MODEL`` sets the sidebar's default biLM (a shipped name or a
directory); these tests point it at bilm-tf's fixture model in the data root, so they do not
need ``data/models/elmo-mini``. The sidebar's *a directory…* choice is tested as a user would.
"""

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from app_pages.shared import MODEL_ENV_VAR, OTHER_DIRECTORY
from probing.playground import load_demo_set

APP = Path(__file__).resolve().parents[1] / "app.py"
PLAYGROUND = "app_pages/1_playground.py"
TIMEOUT = 120  # the first run imports torch and nltk and loads the model


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The app runs torch on one intra-op thread (app.py sets OMP_NUM_THREADS=1, which only
    acts before torch is imported; here torch may already be loaded). Restored afterwards."""
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        torch.set_num_threads(1)
        yield
    torch.set_num_threads(threads)


@pytest.fixture
def fixture_model(data_root) -> Path:
    return data_root / "fixtures" / "bilm_tf"


@pytest.fixture
def app(fixture_model, monkeypatch) -> AppTest:
    """A fresh session on the default page, with the fixture model as the default biLM."""
    monkeypatch.setenv(MODEL_ENV_VAR, str(fixture_model))
    return AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()


def figures(at: AppTest) -> list[dict]:
    """The plotly figures on the page, as plotly JSON."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def heatmaps(figure: dict) -> list[np.ndarray]:
    """The z matrices of a figure's heatmaps (plotly JSON may pack arrays as base64 typed arrays)."""
    def array(value) -> np.ndarray:
        if isinstance(value, dict) and "bdata" in value:
            shape = [int(n) for n in str(value["shape"]).split(",")]
            return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
        return np.asarray(value, dtype=float)

    return [array(trace["z"]) for trace in figure["data"] if trace["type"] == "heatmap"]


def plain(markdown: str) -> str:
    """Markdown as the user reads it: backslash escapes removed."""
    return re.sub(r"\\(.)", r"\1", markdown)


def assert_clean(at: AppTest) -> None:
    """No traceback and no error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_defaults_show_the_bank_demo_on_the_fixture_model(app, fixture_model):
    assert_clean(app)
    assert app.selectbox(key="model_choice").value == str(fixture_model)
    assert app.selectbox(key="pg_demo").value == "bank" and app.text_input(key="pg_word").value == "bank"
    assert app.text_area(key="pg_text").value == load_demo_set("bank").text
    assert "bilm_tf" in plain(app.caption[0].value)
    similarity, contrast, norms, tokens = figures(app)
    layers = heatmaps(similarity)
    assert [z.shape for z in layers] == [(12, 12)] * 3
    np.testing.assert_allclose(layers[0], 1.0, atol=1e-6)  # layer 0 is static
    assert layers[2].min() < 0.999  # the top layer is contextual
    assert similarity["layout"]["xaxis"]["title"]["text"] == "occurrence of 'bank'"
    assert contrast["layout"]["yaxis"]["title"]["text"] == "mean cosine similarity (unitless)"
    assert norms["layout"]["yaxis"]["title"]["text"] == "L2 norm of the vector (unitless)"
    assert heatmaps(tokens)[0].shape == (15, 15)  # the first sentence: 14 words and a full stop
    assert not app.warning


def test_switching_to_the_page_by_path_works(app):
    app.switch_page(PLAYGROUND).run()
    assert_clean(app)
    assert len(figures(app)) == 4


def test_typing_sentences_updates_the_figures(app):
    app.text_area(key="pg_text").input("The dog began to bark.\nThe bark of the birch is white.").run()
    app.text_input(key="pg_word").input("Bark").run()
    assert_clean(app)
    assert not app.warning
    similarity = figures(app)[0]
    assert [z.shape for z in heatmaps(similarity)] == [(2, 2)] * 3
    assert similarity["layout"]["xaxis"]["title"]["text"] == "occurrence of 'Bark'"
    assert len(figures(app)) == 3  # no sense labels: no same-vs-different panel


def test_picking_a_demo_set_fills_the_sentences_and_the_word(app):
    app.selectbox(key="pg_demo").select("play").run()
    assert_clean(app)
    assert app.text_input(key="pg_word").value == "play"
    assert app.text_area(key="pg_text").value == load_demo_set("play").text
    assert heatmaps(figures(app)[0])[0].shape == (12, 12)


def test_the_token_matrix_follows_the_chosen_sentence(app):
    app.selectbox(key="pg_focus").select(2).run()
    assert_clean(app)
    assert "Token by token within sentence S3" in plain(app.main.subheader[-1].value)
    assert plain(app.caption[-1].value) == load_demo_set("bank").texts[2]


def test_empty_text_asks_for_sentences(app):
    app.text_area(key="pg_text").input("   \n  ").run()
    assert_clean(app)
    assert "Type at least one sentence" in plain(app.info[0].value)
    assert figures(app) == []


def test_word_not_in_the_sentences_says_so(app):
    app.text_area(key="pg_text").input("The cat sat on the mat.").run()
    assert_clean(app)
    assert "'bank' not found in sentence 1." in plain(app.warning[0].value)
    assert "'bank' is in none of the sentences" in plain(app.info[0].value)
    assert len(figures(app)) == 1  # the token-by-token matrix is still there


def test_empty_word_and_a_multi_word_target_are_explained(app):
    app.text_input(key="pg_word").input("").run()
    assert_clean(app)
    assert "No target word" in plain(app.warning[0].value)
    app.text_input(key="pg_word").input("river bank").run()
    assert_clean(app)
    assert "type a single word" in plain(app.warning[0].value)


def test_emoji_and_other_scripts(app):
    app.text_area(key="pg_text").input("Party time 🎉 tonight\n中文 🎉 テキスト\nعربي 🎉").run()
    app.text_input(key="pg_word").input("🎉").run()
    assert_clean(app)
    assert not app.warning
    assert [z.shape for z in heatmaps(figures(app)[0])] == [(3, 3)] * 3


def test_five_thousand_words_are_capped_with_a_note(app):
    app.text_area(key="pg_text").input(" ".join(["word"] * 2500 + ["bank"] + ["word"] * 2500)).run()
    assert_clean(app)
    assert "5,001 tokens; only tokens 2451-2550" in plain(app.warning[0].value)
    assert len(figures(app)) == 3


def test_a_model_directory_that_does_not_exist_is_an_error_box_not_a_traceback(app, tmp_path):
    app.selectbox(key="model_choice").select(OTHER_DIRECTORY).run()
    assert not app.exception
    assert "Type the path of a biLM directory" in plain(app.info[0].value)
    missing = tmp_path / "no-such-model"
    app.text_input(key="model_dir").input(str(missing)).run()
    assert not app.exception
    assert "Could not load the biLM" in plain(app.error[0].value) and str(missing) in plain(app.error[0].value)
    assert figures(app) == []
    # and back to a working model
    app.selectbox(key="model_choice").select(app.selectbox(key="model_choice").options[0]).run()
    assert_clean(app)
    assert len(figures(app)) == 4


def test_a_broken_model_directory_is_an_error_box(app, tmp_path, fixture_model):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "options.json").write_text((fixture_model / "options.json").read_text())
    (broken / "weights.hdf5").write_bytes(b"not an hdf5 file")
    app.selectbox(key="model_choice").select(OTHER_DIRECTORY).run()
    app.text_input(key="model_dir").input(str(broken)).run()
    assert not app.exception
    assert "Could not load the biLM" in plain(app.error[0].value)
    assert figures(app) == []


def test_default_model_missing_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv(MODEL_ENV_VAR, str(tmp_path / "elmo-gone"))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert "Could not load the biLM" in plain(at.error[0].value)
    assert at.text_area(key="pg_text").value  # the inputs still render


def test_markdown_characters_in_sentences_are_shown_literally(app):
    sentence = "It cost $5, not $6 *today* # _really_."
    app.text_area(key="pg_text").input(sentence + "\nShe paid $3.").run()
    app.text_input(key="pg_word").input("$").run()
    assert_clean(app)
    assert [z.shape for z in heatmaps(figures(app)[0])] == [(3, 3)] * 3
    assert plain(app.caption[-1].value) == sentence


def test_what_the_first_paint_imports_does_not_pull_in_torch():
    """The sidebar and the page widgets paint before torch (2+ s to import) is needed."""
    code = ("import sys, app_pages.shared, probing.playground as p; p.load_demo_set('bank'); "
            "p.split_contexts('a\\nb'); print(sorted(m for m in ('torch', 'h5py', 'nltk') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=APP.parent, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_pages_are_not_in_a_folder_named_pages():
    """Streamlit runs a `pages/` folder beside app.py as an old-style multipage app until a
    session has called st.navigation: deep links on a fresh server would skip app.py."""
    assert not (APP.parent / "pages").exists()
    assert (APP.parent / PLAYGROUND).is_file()
