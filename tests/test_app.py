"""The Streamlit app through streamlit.testing's AppTest: renders, reacts, never shows a traceback.

The model: ``ELMO_WORKBENCH_MODEL`` sets the sidebar's default biLM (a shipped name or a
directory); these tests point it at bilm-tf's fixture model in the data root, so they do not
need ``data/models/elmo-mini``. The sidebar's *a directory…* choice is tested as a user would.

The analysis pages (probes, scalar mix, sense retrieval, layer projections, reports) read the
data root (``ELMO_WORKBENCH_DATA``), keep their activation caches in a temporary
``ELMO_WORKBENCH_CACHE`` and their reports in a temporary ``ELMO_WORKBENCH_REPORTS``. Each test
opens its page with small slices chosen in the page's own widgets (50 sentences a split, the
first 300 SemCor sentences), as a user in a hurry would. Streamlit's caches live for the whole
process, so a page a later test opens again may answer from them: every test asserts what the
page shows, never how fast.
"""

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app_pages.data_setup import REPORTS_ENV_VAR
from app_pages.model_choice import MODEL_ENV_VAR, OTHER_DIRECTORY
from probing.context.playground import load_demo_set

pytestmark = pytest.mark.usefixtures("one_torch_thread")

APP = Path(__file__).resolve().parents[1] / "app.py"
PLAYGROUND = "app_pages/playground.py"
PROBES = "app_pages/probes.py"
INFORMATION = "app_pages/information.py"
SCALAR_MIX = "app_pages/scalar_mix.py"
RETRIEVAL = "app_pages/sense_retrieval.py"
PROJECTIONS = "app_pages/layer_projections.py"
REPORTS = "app_pages/reports.py"
TIMEOUT = 120  # the first run imports torch and nltk and loads the model
SMALL = {"semcor_limit": 300}  # the SemCor slice every page that reads SemCor is opened with


@pytest.fixture(scope="module", autouse=True)
def workbench_env(data_root, tmp_path_factory):
    """The data root, and temporary activation caches and reports for the whole module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
        patch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path_factory.mktemp("activations")))
        patch.setenv(REPORTS_ENV_VAR, str(tmp_path_factory.mktemp("reports")))
        yield


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
    # the only message: the verdict on same vs different senses, with the numbers behind it
    assert all("separate the senses" in plain(m.value) for m in [*app.warning, *app.success])
    assert len([*app.warning, *app.success]) == 1
    table = app.dataframe[-1].value
    assert list(table["layer"]) == ["layer 0", "layer 1", "layer 2"]
    assert table["permutation p"].between(0, 1).all() and table["permutation p"].iloc[0] == 1.0


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
    assert len(figures(app)) == 3  # no sense labels: no same-vs-different panel, and the page says why
    assert any("This chart is hidden: no sentence has a sense label" in plain(m.value) for m in app.info)
    assert app.selectbox(key="pg_demo").value == "my own sentences"  # no longer names a demo word


def test_a_labelled_custom_set_gets_the_same_vs_different_panel(app):
    text = ("The dog began to bark at the postman. | dog\nI heard a dog bark all night. | dog\n"
            "The bark of the birch is white. | tree\nMoss grew on the bark of the old oak. | tree\n"
            "Hear them bark again.")  # an unlabelled line: compared in the heatmaps, left out of the test
    app.text_area(key="pg_text").input(text).run()
    app.text_input(key="pg_word").input("bark").run()
    assert_clean(app)
    assert app.selectbox(key="pg_demo").value == "my own sentences"
    similarity, contrast, *_ = figures(app)
    assert [z.shape for z in heatmaps(similarity)] == [(5, 5)] * 3
    assert contrast["layout"]["yaxis"]["title"]["text"] == "mean cosine similarity (unitless)"
    tokens_table = app.dataframe[0].value
    assert list(tokens_table["sense"]) == ["dog", "dog", "tree", "tree", ""]
    assert "|" not in " ".join(tokens_table["tokens"])  # the label is not part of the sentence
    test = app.dataframe[-1].value
    assert test["permutation p"].between(0, 1).all()
    assert any("4 labelled sentences" in plain(c.value) for c in app.caption)
    app.text_area(key="pg_text").input(text.replace("| tree", "| dog")).run()  # one sense only
    assert any("every labelled sentence has the sense 'dog'" in plain(m.value) for m in app.info)


def test_the_sense_chart_shows_the_anisotropy_baseline_and_reads_against_it(app, fixture_model):
    from elmo_model import load_bilm
    from probing.context.contextuality import anisotropy_baseline

    assert_clean(app)
    expected = anisotropy_baseline(load_bilm(fixture_model, "auto")).cosine  # the sidebar's default precision
    contrast = figures(app)[1]
    baseline = trace(contrast, "random words (anisotropy baseline)")
    assert numbers(baseline["y"]) == pytest.approx(expected)
    assert list(app.dataframe[-1].value["baseline (random words)"]) == pytest.approx(expected, abs=1e-4)
    captions = [plain(c.value) for c in app.caption]
    assert any("anisotropy baseline" in c and f"layer 2 {expected[2]:.2f}" in c for c in captions)
    # bilm-tf's fixture model does not separate bank's senses: the verdict says so, against the baseline
    [verdict] = messages(app.warning)
    assert "does not separate the senses" in verdict
    assert f"Against the anisotropy baseline (the mean cosine of random words in random sentences: layer 1 {expected[1]:.3f}" in verdict
    assert "what makes the occurrences alike is the word, not its sense" in verdict


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
    code = ("import sys, app_pages.data_setup, app_pages.display, app_pages.inputs, app_pages.model_choice, "
            "app_pages.running, probing.context.playground as p; p.load_demo_set('bank'); "
            "p.split_contexts('a\\nb'); print(sorted(m for m in ('torch', 'h5py', 'nltk') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=APP.parent, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_pages_are_not_in_a_folder_named_pages():
    """Streamlit runs a `pages/` folder beside app.py as an old-style multipage app until a
    session has called st.navigation: deep links on a fresh server would skip app.py."""
    assert not (APP.parent / "pages").exists()
    assert (APP.parent / PLAYGROUND).is_file()


# --------------------------------------------------------------------------------------------
# The analysis pages
# --------------------------------------------------------------------------------------------


@pytest.fixture
def open_page(fixture_model, monkeypatch):
    """``open_page(path, **state)``: a fresh session on page ``path`` with widget values preset
    (as if the user had chosen them), run once."""
    monkeypatch.setenv(MODEL_ENV_VAR, str(fixture_model))

    def opener(path: str, timeout: float = TIMEOUT, **state) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=timeout)
        for key, value in state.items():
            at.session_state[key] = value
        at.switch_page(path)
        at.run()
        assert not at.title or not at.title[0].value.startswith("Playground"), f"{path} did not open"
        return at

    return opener


def numbers(value) -> list:
    """A plotly JSON array (a list, or a base64 typed array) as a Python list."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    return list(value)


def trace(figure: dict, name: str) -> dict:
    """The first trace of ``figure`` whose name starts with ``name``."""
    found = [t for t in figure["data"] if str(t.get("name", "")).startswith(name)]
    assert found, f"no trace {name!r} among {[t.get('name') for t in figure['data']]}"
    return found[0]


def title(figure: dict) -> str:
    return figure["layout"]["title"]["text"]


def messages(elements) -> list[str]:
    """The texts of message boxes as the user reads them (escapes and bold markers removed)."""
    return [plain(e.value).replace("**", "") for e in elements]


def submit(at: AppTest, label: str) -> AppTest:
    """Click the button labelled ``label`` (a form's submit button has no key) and run."""
    buttons = [b for b in at.button if b.label == label]
    assert len(buttons) == 1, [b.label for b in at.button]
    return buttons[0].click().run()


def test_probes_page_runs_the_suite_and_shows_what_the_backend_computed(open_page, data_root):
    from probing.tagging.suite import run_suite

    at = open_page(PROBES, pr_limit=50)
    assert_clean(at)
    assert "Run the probes" in plain(at.info[0].value) and figures(at) == []
    assert at.multiselect(key="pr_tasks").value == ["pos"] and at.multiselect(key="pr_layers").value == [0, 1, 2]
    submit(at, "Run the probes")
    assert_clean(at)
    layers_fig, selectivity_fig = figures(at)
    assert layers_fig["layout"]["yaxis"]["title"]["text"] == "accuracy (%)"
    assert selectivity_fig["layout"]["yaxis"]["title"]["text"] == "selectivity (accuracy points)"
    # the same call from Python (answered from the probe cache the page filled) gives the numbers shown
    suite = run_suite(str(data_root / "fixtures" / "bilm_tf"), ["pos"], data_root=data_root, seed=0, limit=50)
    task = suite.task("pos")
    probe = trace(layers_fig, "bilm_tf: linear probe")
    np.testing.assert_allclose(numbers(probe["y"]), [100 * r.probe.test.estimate for r in task.layers])
    np.testing.assert_allclose(numbers(trace(layers_fig, "majority class")["y"])[0],
                               100 * task.baselines.majority.estimate)
    assert {t["name"] for t in layers_fig["data"]} >= {"scalar mix (s_j learned; 3 seeds)",
                                                       "Peters et al. (2018), Table 6: biLM layer 1"}
    np.testing.assert_allclose(numbers(selectivity_fig["data"][0]["y"]), [100 * r.selectivity for r in task.layers])
    assert [d.label for d in at.get("download_button")] == ["Download the suite result (JSON)"]
    # the scalar-mix page shows the s_j this run learned
    at.session_state["mx_limit"], at.session_state["semcor_limit"] = 50, 300
    at.switch_page(SCALAR_MIX).run()
    assert_clean(at)
    learned = figures(at)[0]
    np.testing.assert_allclose(numbers(trace(learned, "pos (γ = ")["y"]), task.mix.weights_mean)
    # the run is kept: back on the probes page, it is shown without running again
    at.switch_page(PROBES).run()
    assert_clean(at)
    assert len(figures(at)) == 2 and at.selectbox(key="pr_limit").value == 50


def test_information_page_measures_one_method_and_shows_what_the_backend_computed(open_page, data_root):
    from elmo_model import load_bilm
    from probing.information.run import InformationConfig, run_information

    at = open_page(INFORMATION, in_train=100)
    assert_clean(at)
    assert "Measure" in plain(at.info[0].value) and figures(at) == []
    assert [o.split(":")[0] for o in at.selectbox(key="in_task").options] == [
        "Part of speech (UD English-EWT)", "Universal part of speech (UD English-EWT)", "Chunking (CoNLL-2000)",
        "Word senses"]  # the lexical sample beside the sequence-labelling tasks
    submit(at, "Measure")
    assert_clean(at)
    (mdl,) = figures(at)
    assert title(mdl).startswith("pos: MDL online code per layer")
    # the same call from Python, on the model as the sidebar loads it ("auto" precision), gives the numbers shown
    config = InformationConfig(methods=("mdl",), train_limit=100, eval_limit=50, lm_sentences=50)
    model = load_bilm(data_root / "fixtures" / "bilm_tf", "auto")
    result = run_information(model, ["pos"], layers=[1], config=config, data_root=data_root, seed=0)
    np.testing.assert_allclose(numbers(trace(mdl, "task labels")["y"]),
                               [result.task("pos").codes[0].task.online_bits / 1000])
    assert [d.label for d in at.get("download_button")] == ["Download the result (JSON)"]
    at.selectbox(key="in_method").set_value("conditional")
    at.selectbox(key="in_layer").set_value(0)
    submit(at, "Measure")
    assert messages(at.warning) == ["Conditional probing measures what a layer adds beyond layer 0: pick layer 1 "
                                    "or above."]


def test_probes_page_lexical_sample_and_bad_settings(open_page):
    at = open_page(PROBES, pr_limit=50, pr_tasks=[], pr_contexts=50, pr_words=["hard"])
    submit(at, "Run the probes")
    assert_clean(at)
    assert messages(at.warning) == ["Pick at least one task."]
    at.multiselect(key="pr_tasks").set_value(["pos"])
    at.multiselect(key="pr_layers").set_value([])
    submit(at, "Run the probes")
    assert messages(at.warning) == ["Pick at least one layer to probe."]
    at.multiselect(key="pr_tasks").set_value(["wsd_lexical_sample"])
    at.multiselect(key="pr_words").set_value([])
    submit(at, "Run the probes")
    assert "Pick at least one lexical-sample word" in messages(at.warning)[0]
    at.multiselect(key="pr_words").set_value(["hard"])
    submit(at, "Run the probes")
    assert_clean(at)
    (lexical,) = figures(at)
    assert lexical["layout"]["yaxis"]["title"]["text"] == "accuracy (%)"
    assert [t["name"] for t in lexical["data"]][:3] == ["hard (n = 50)", "hard: control task", "hard: majority sense"]
    table = at.dataframe[0].value
    assert list(table["representation"]) == ["majority sense", "layer 0 (character CNN)", "layer 1 (LSTM 1)",
                                             "layer 2 (LSTM 2)"]
    assert table["95% interval (Wilson)"].iloc[1:].str.match(r"^\d+\.\d – \d+\.\d$").all()


def test_a_data_root_without_any_dataset_gets_one_guidance_screen(open_page, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(tmp_path))  # an empty data root
    for path in (PROBES, SCALAR_MIX, RETRIEVAL, PROJECTIONS):
        at = open_page(path)
        assert not at.exception and not at.error
        assert "No datasets found" in plain(at.warning[0].value) and str(tmp_path) in plain(at.warning[0].value)
        text = " ".join(plain(m.value) for m in at.markdown)
        assert "What works without data: the Playground" in text.replace("**", "")
        assert "ELMO_WORKBENCH_DATA=/path/to/data streamlit run app.py" in text
        needs = at.dataframe[0].value.set_index("page")
        assert needs.loc["Playground", "needs"] == "nothing"
        assert "wsd_framework" in needs.loc["Sense retrieval", "missing"]
        assert not at.get("plotly_chart")  # nothing else on the page but the fetch buttons
        assert [b.label.split(" (")[0] for b in at.main.button] == [  # the sidebar offers the published models
            "Fetch UD English-EWT", "Fetch CoNLL-2000 chunking", "Fetch Senseval-2 lexical sample",
            "Fetch WordNet 3.0", "Fetch WSD Evaluation Framework"], [b.label for b in at.main.button]
    at = open_page(REPORTS)  # saved reports need no data: the page goes on below the guidance
    assert not at.exception and "No datasets found" in plain(at.warning[0].value)
    assert any(b.label == "Build the report" for b in at.button), [b.label for b in at.button]


def test_probes_page_names_a_missing_dataset(open_page, tmp_path, monkeypatch, data_root):
    (tmp_path / "ud_english_ewt").symlink_to(data_root / "ud_english_ewt")  # one dataset, not conll2000
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(tmp_path))
    at = open_page(PROBES, pr_limit=50, pr_tasks=["chunk"], pr_random=False)
    submit(at, "Run the probes")
    assert not at.exception
    assert "a dataset is missing" in plain(at.error[0].value)
    assert "python -m probing.data download conll2000" in at.code[0].value
    assert at.code[0].proto.wrap_lines  # a long path wraps in the box instead of running off its right edge
    assert str(tmp_path) in plain(at.caption[0].value)  # the data root the page reads


def test_scalar_mix_sliders_change_the_probe_and_the_neighbours(open_page):
    at = open_page(SCALAR_MIX, mx_limit=50, mix_hand_asked=True, **SMALL)
    assert_clean(at)
    (hand,) = figures(at)  # no learned s_j yet: only the hand-set panel has a figure
    assert numbers(trace(hand, "your s_j")["y"]) == [0.33, 0.33, 0.33] or \
        np.allclose(numbers(trace(hand, "your s_j")["y"]), 1 / 3)
    neighbours = at.dataframe[0].value
    assert len(neighbours) == 5 and neighbours["sense"].str.startswith("play%").all()
    assert neighbours["sentence"].str.contains(r"\[play", regex=True).all()
    at.button(key="mx_only1").click().run()
    assert_clean(at)
    assert [at.slider(key=f"mx_s{j}").value for j in range(3)] == [0.0, 1.0, 0.0]
    scores = trace(figures(at)[0], "probe score")
    y = dict(zip(scores["x"], numbers(scores["y"])))
    assert y["your mix"] == pytest.approx(y["layer 1"])  # all weight on layer 1 is layer 1's probe
    assert at.dataframe[0].value["cosine"].is_monotonic_decreasing
    for j in range(3):
        at.slider(key=f"mx_s{j}").set_value(0.0)
    at.run()
    assert_clean(at)
    assert messages(at.warning) == ["Every s_j is 0: give at least one layer a weight above 0."]
    at.slider(key="mx_s2").set_value(0.5).run()
    at.text_input(key="mx_word").input("dog").run()
    assert_clean(at)
    assert messages(at.warning) == ["'dog' is not a word of the query sentence: no neighbours"]
    at.text_input(key="mx_sentence").input("🎉 " * 3000).run()
    at.text_input(key="mx_word").input("🎉").run()
    assert_clean(at)
    assert "Only the first 1,000 characters of the sentence are used." in messages(at.caption)
    # a word the slice does not hold: said with the panel's controls, and a wider slice one click away
    assert messages(at.warning) == ["No SemCor sentence in the first 300 holds a sense-tagged '🎉' to compare "
                                    "with: widen the slice (SemCor sentences) or type another word."]
    assert at.button(key="mx_widen").label == "Search the first 10,000 SemCor sentences"


def test_scalar_mix_first_look_then_the_chosen_slice_without_embedding_twice(open_page, monkeypatch, tmp_path,
                                                                               caplog):
    """A fresh server: the figure comes first from 50 sentences a split, then from the 100 chosen,
    whose first 50 are copied from the first look's caches, not embedded again."""
    import logging

    import streamlit as st

    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    st.cache_resource.clear()
    st.cache_data.clear()
    with caplog.at_level(logging.INFO, logger="probing.engine"):
        at = open_page(SCALAR_MIX, mx_limit=100, mx_sentence="", mix_hand_asked=True, **SMALL)
    assert_clean(at)
    (hand,) = figures(at)  # the first look's figure is replaced, not kept beside
    assert "A first look" not in " ".join(messages(at.caption))
    copied = [r.getMessage() for r in caplog.records if "the first 50 sentences copied" in r.getMessage()]
    assert len(copied) == 3, copied  # train, dev, test
    assert trace(hand, "probe score")


def test_scalar_mix_learned_weights_and_per_lemma_mixes(open_page):
    at = open_page(SCALAR_MIX, mx_limit=50, mx_learn_limit=50, mix_hand_asked=True, **SMALL)
    assert at.button(key="mx_use_learned").disabled
    submit(at, "Learn s_j")
    assert_clean(at)
    learned, gamma, hand = figures(at)[:3]
    assert learned["layout"]["yaxis"]["title"]["text"] == "s_j (softmax weight, sums to 1)"
    weights = numbers(trace(learned, "pos")["y"])
    assert sum(weights) == pytest.approx(1.0, abs=1e-6)
    assert gamma["data"][0]["x"] == ["pos"] and numbers(gamma["data"][0]["y"])[0] > 0
    assert gamma["layout"]["yaxis"]["title"]["text"] == "γ (scale of the mix, unitless)"
    assert f"γ = {numbers(gamma['data'][0]['y'])[0]:.2f}" in trace(learned, "pos")["name"]  # the same run
    assert numbers(trace(hand, "learned s_j")["y"]) == pytest.approx(weights)
    at.button(key="mx_use_learned").click().run()
    assert [at.slider(key=f"mx_s{j}").value for j in range(3)] == [round(w, 2) for w in weights]
    # a new browser session with the same settings finds the learned s_j (kept on disk), no click
    fresh = open_page(SCALAR_MIX, mx_limit=50, mx_learn_limit=50, **SMALL)
    assert not [m for m in messages(fresh.info) if m.startswith("No learned s_j yet")]
    assert numbers(trace(figures(fresh)[0], "pos")["y"]) == pytest.approx(weights)
    # learned s_j per lemma, from the demo sentences; a word without demo sentences is refused
    at.radio(key="mx_source").set_value("demo").run()
    assert at.multiselect(key="mx_lemmas").options == ["bank", "play", "bark"]
    at.multiselect(key="mx_lemmas").set_value(["bank"])
    at.text_input(key="mx_more").input("nosuchword")
    submit(at, "Learn s_j per lemma")
    assert_clean(at)
    assert messages(at.warning) == ["nosuchword: no demo sentences for 'nosuchword' (demo sets: bank, bark, play); "
                                    "use SemCor for other words"]
    per_lemma = figures(at)[-1]
    bars = trace(per_lemma, "bank: s_j")
    assert sum(numbers(bars["y"])) == pytest.approx(1.0, abs=1e-6)
    assert len(numbers(trace(per_lemma, "bank: single-layer accuracy")["y"])) == 3
    row = at.dataframe[-1].value.iloc[0]
    assert row["lemma"] == "bank" and row["occurrences"] == 12 and row["senses"] == 2


def test_scalar_mix_default_lemmas_have_enough_occurrences(open_page):
    at = open_page(SCALAR_MIX, mx_limit=50, **SMALL)
    assert at.radio(key="mx_source").value == "demo" and at.multiselect(key="mx_lemmas").value == ["bank", "play"]
    at.radio(key="mx_source").set_value("semcor").run()  # SemCor's slice: its own commonest two-sense words
    chosen = at.multiselect(key="mx_lemmas").value
    assert len(chosen) == 2 and not set(chosen) & {"bank", "play", "bark"}
    submit(at, "Learn s_j per lemma")
    assert_clean(at)
    assert not at.warning  # neither is refused
    assert all(trace(figures(at)[-1], f"{lemma}: s_j") for lemma in chosen)


def test_scalar_mix_semcor_lemmas_refuse_too_few_occurrences(open_page):
    at = open_page(SCALAR_MIX, mx_limit=50, mx_source="semcor", mx_lemmas=["bank"], mx_more="say, 🎉", **SMALL)
    assert "say" in at.multiselect(key="mx_lemmas").options  # suggested: 48 occurrences, 2 senses
    submit(at, "Learn s_j per lemma")
    assert_clean(at)
    refusals = messages(at.warning)
    assert any(m.startswith("bank: only 5 labelled occurrence(s) (semcor)") for m in refusals), refusals
    assert any(m.startswith("🎉: only 0 labelled occurrence(s)") for m in refusals), refusals
    assert trace(figures(at)[-1], "say: s_j")


def test_sense_retrieval_lists_neighbours_per_layer_and_static_words(open_page):
    at = open_page(RETRIEVAL, **SMALL)
    assert_clean(at)
    (neighbours_fig,) = figures(at)
    assert neighbours_fig["layout"]["yaxis"]["title"]["text"] == "cosine similarity to the query word (−1…1)"
    assert set(neighbours_fig["layout"]["xaxis"]["categoryarray"]) == {"layer 0", "layer 1", "layer 2"}
    tables = [df.value for df in at.dataframe]
    per_layer, static = tables[:3], tables[3:]
    for table in per_layer:
        assert list(table.columns) == ["rank", "cosine", "sentence", "sense", "gloss"]
        assert len(table) == 5 and table["sense"].str.startswith("play%").all()
        assert table["cosine"].is_monotonic_decreasing
    assert len(static) == 2 and all(len(t) == 10 for t in static)  # layer 0 over the vocabulary, word2vec
    assert "play" not in set(static[1]["word"])
    # every layer's cosines beside that layer's anisotropy baseline
    from elmo_model import load_bilm
    from probing.context.contextuality import anisotropy_baseline

    expected = anisotropy_baseline(load_bilm(Path(os.environ[MODEL_ENV_VAR]))).cosine
    scale = [plain(c.value) for c in at.caption if "anisotropy baseline" in c.value]
    assert [f"score {b:.2f} on average at this layer" in s for b, s in zip(expected, scale)] == [True] * 3
    at.selectbox(key="rt_example").select("a bank for money").run()
    assert_clean(at)
    assert at.text_input(key="rt_word").value == "bank"
    assert all(df.value["sense"].str.startswith("bank%").all() for df in at.dataframe[:3])


def test_sense_retrieval_shows_ties_as_ties(open_page):
    at = open_page(RETRIEVAL, **SMALL)  # "play" in 300 SemCor sentences: spellings tie at layer 0
    assert_clean(at)
    (fig,) = figures(at)
    layer0 = [(trace["name"], label) for trace in fig["data"]
              for x, label in zip(trace["x"], trace["text"]) if x == "layer 0"]
    tied = [int(label[1:]) for _, label in layer0 if label]
    assert tied and all(n > 1 for n in tied)  # one marker per tie, labelled with its size
    per_layer = [df.value for df in at.dataframe[:3]]
    assert sum(int(label[1:]) if label else 1 for _, label in layer0) == len(per_layer[0])  # every neighbour counted
    layer0_cosines = per_layer[0]["cosine"]
    assert layer0_cosines.duplicated().any()
    texts = [plain(m.value) for m in at.markdown]
    ties = [t for t in texts if t.startswith("**Ties:**")]
    assert len(ties) == 1 and "no commonest sense is claimed" in ties[0]  # layer 0's tab only
    assert not [t for t in texts if "100%; most neighbours share it" in t]


def test_sense_retrieval_bad_inputs(open_page):
    at = open_page(RETRIEVAL, **SMALL)
    at.text_input(key="rt_word").input("dog").run()
    assert_clean(at)
    assert messages(at.warning)[0].startswith("Looking up the word: 'dog' is not a token of the query sentence")
    assert figures(at) == []
    at.text_input(key="rt_word").input("river bank").run()
    assert messages(at.warning) == ["Type a single word of the sentence (no spaces)."]
    at.text_area(key="rt_sentence").input("  ").run()
    assert messages(at.info) == ["Type a sentence (or pick an example)."]
    at.text_area(key="rt_sentence").input("Party 🎉 tonight, 中文 and عربي").run()
    at.text_input(key="rt_word").input("🎉").run()
    assert_clean(at)
    assert figures(at) == []  # nothing to draw: no empty axes, the reason in the page's words
    assert messages(at.warning) == ["No SemCor sentence in the first 300 holds a sense-tagged '🎉': widen the "
                                    "slice (SemCor sentences)."]
    at.text_area(key="rt_sentence").input(" ".join(["word"] * 5000)).run()
    at.text_input(key="rt_word").input("word").run()
    assert_clean(at)
    assert "Only the first 1,000 characters of the sentence are used." in messages(at.caption)


def test_sense_retrieval_says_an_empty_slice_in_its_own_words_and_widens_it_in_one_click(open_page):
    """The lecturer's empty page: 'play' first occurs in SemCor's 191st sentence, so the first 100
    hold none. The page draws no empty axes, says so with its own controls' names (no Python
    argument), and one click searches the default slice."""
    at = open_page(RETRIEVAL, semcor_limit=100)
    assert_clean(at)
    assert figures(at) == []
    assert messages(at.warning) == ["No SemCor sentence in the first 100 holds a sense-tagged 'play': widen the "
                                    "slice (SemCor sentences)."]
    widen = at.button(key="rt_widen")
    assert widen.label == "Search the first 10,000 SemCor sentences"
    widen.click().run()
    assert_clean(at)
    assert at.selectbox(key="rt_semcor_limit").value == 10_000 and not at.warning
    assert len(figures(at)) == 1 and at.dataframe[0].value["sense"].str.startswith("play%").all()
    assert "searched the first 10,000 SemCor sentences" in " ".join(messages(at.caption))
    shown = " ".join(messages([*at.caption, *at.markdown, *at.info, *at.warning]))
    assert "scope=" not in shown and "pos=" not in shown and "morphy" not in shown
    # a part of speech the slice lacks: the fix names the page's Part of speech box
    at.selectbox(key="rt_semcor_limit").select(300).run()
    at.selectbox(key="rt_example").select("a bank for money").run()
    at.selectbox(key="rt_pos").select("VERB").run()
    assert_clean(at)
    assert figures(at) == []
    assert messages(at.warning) == ["No SemCor sentence in the first 300 holds a sense-tagged 'bank' as a verb: "
                                    "widen the slice (SemCor sentences) or set Part of speech to any."]


def test_the_sense_pages_share_one_semcor_slice_whichever_page_came_first(open_page):
    """Scalar mix, then Sense retrieval: the order in which a lecturer saw the slice drop from
    1,000 to 100 sentences (one widget key on several pages: Streamlit's widget id includes the
    page, so the second page's selector started at its first option). The slice shown, and the
    one searched, is the default; a change on one sense page holds on the next."""
    from app_pages.inputs import DEFAULT_SEMCOR_LIMIT

    at = open_page(SCALAR_MIX, mx_limit=50)
    assert_clean(at)
    assert at.selectbox(key="mx_semcor_limit").value == DEFAULT_SEMCOR_LIMIT
    at.switch_page(RETRIEVAL).run()
    assert_clean(at)
    assert at.selectbox(key="rt_semcor_limit").value == DEFAULT_SEMCOR_LIMIT
    # what the page searched, not only what its selector says
    assert f"searched the first {DEFAULT_SEMCOR_LIMIT:,} SemCor sentences" in " ".join(messages(at.caption))
    at.selectbox(key="rt_semcor_limit").select(300).run()
    at.switch_page(PROJECTIONS).run()
    assert_clean(at)
    assert at.selectbox(key="pj_semcor_limit").value == 300
    at.switch_page(RETRIEVAL).run()
    assert at.selectbox(key="rt_semcor_limit").value == 300
    assert "searched the first 300 SemCor sentences" in " ".join(messages(at.caption))


def test_sense_retrieval_scores_1nn_wsd_per_layer(open_page):
    at = open_page(RETRIEVAL, **SMALL)
    at.button(key="rt_wsd").click().run()
    assert_clean(at)
    _, layers_fig, sets_fig = figures(at)
    assert layers_fig["layout"]["yaxis"]["title"]["text"] == "F1 (%)"
    assert trace(layers_fig, "WordNet first sense, 4 test sets")
    assert trace(layers_fig, "Peters et al. (2018): biLM layer 2 (4 test sets)")["y"] == [69.0]
    table = at.dataframe[-1].value
    assert list(table["representation"])[:4] == ["WordNet first sense", "layer 0", "layer 1", "layer 2"]
    assert "Centroids from the first 300 SemCor sentences only" in " ".join(messages(at.caption))


def test_layer_projections_ring_the_users_sentences(open_page):
    at = open_page(PROJECTIONS, **SMALL)
    assert_clean(at)
    scatter, separability = figures(at)
    rings = [t for t in scatter["data"] if t["name"] == "your sentences"]
    assert len(rings) == 3 and all(len(numbers(t["x"])) == 2 for t in rings)  # two sentences, three layers
    assert "drifted towards the [bank] of the river" in rings[0]["text"][0]
    # one legend entry per sense: the demo's and the typed "river"/"money" are SemCor's sense keys
    legend = [t["name"] for t in scatter["data"] if t["name"] != "your sentences" and t.get("showlegend", True)]
    assert not [n for n in legend if n.startswith(("river", "money"))], legend
    assert [len([n for n in legend if n.startswith(key)]) for key in ("bank%1:17:01::", "bank%1:14:00::")] == [1, 1]
    money = [t for t in scatter["data"] if t["name"].startswith("bank%1:14:00::")][0]
    assert {h.split("</b> (")[1].split(")")[0] for h in money["text"]} == {"semcor", "user"}  # one colour, two sources
    assert separability["layout"]["yaxis"]["title"]["text"] == "accuracy (%)"
    table = at.dataframe[0].value
    assert list(table["layer"]) == [0, 1, 2] and table["distinct points"].iloc[0] < table["distinct points"].iloc[2]
    # layer 0: one point per spelling, SemCor's float16 copy of "bank" included
    spellings = {h.split("[")[1].split("]")[0] for t in scatter["data"]
                 if t["name"] != "your sentences" and not t["name"].startswith("shape: ") for h in t["text"]}
    assert table["distinct points"].iloc[0] == len(spellings), spellings
    # this slice's SemCor holds one sense of bank: no within-SemCor score, and the page says why
    assert "SemCor only: 1-NN (%)" not in table.columns
    assert any("only one sense of 'bank' among its SemCor occurrences" in c for c in messages(at.caption))


def test_layer_projections_switching_the_lemma_drops_the_old_lemmas_sentences(open_page):
    at = open_page(PROJECTIONS, pj_semcor=False, **SMALL)
    at.text_area(key="pj_text").input("The bank was closed. | money\nThey play chess. | game\n"
                                      "We played all day.").run()
    at.selectbox(key="pj_choice").select("play").run()
    assert_clean(at)
    assert at.text_area(key="pj_text").value == "They play chess. | game\nWe played all day."
    assert "1 line(s) that do not use 'play' were removed." in messages(at.caption)
    assert not [c for c in messages(at.caption) if "not found in sentence" in c]
    scatter = figures(at)[0]
    assert len([t for t in scatter["data"] if t["name"] == "your sentences"]) == 3


def test_layer_projections_bad_inputs(open_page):
    at = open_page(PROJECTIONS, pj_choice="type a lemma…", **SMALL)
    assert_clean(at)
    assert messages(at.info) == ["Type a lemma to project (one word, or words joined by _ for a multiword lemma)."]
    at.text_input(key="pj_typed").input("xyzzy").run()
    assert_clean(at)
    assert messages(at.warning) == ["No SemCor sentence in the first 300 holds a sense-tagged 'xyzzy': widen the "
                                    "slice (SemCor sentences)."]
    assert at.button(key="pj_widen").label == "Search the first 10,000 SemCor sentences" and figures(at) == []
    at.text_input(key="pj_typed").input("🎉").run()
    assert_clean(at)
    assert "holds a sense-tagged '🎉'" in messages(at.warning)[0]
    at.text_input(key="pj_typed").input("say").run()
    at.text_area(key="pj_text").input("\n".join(["They say so. | claim"] * 40) + "\n" + "say " * 3000).run()
    assert_clean(at)
    assert "41 lines given; the first 32 are used." in messages(at.caption)
    assert len(figures(at)) == 2
    at.checkbox(key="pj_semcor").uncheck()
    at.text_area(key="pj_text").input("")
    at.run()
    assert messages(at.info) == ["Choose at least one source of occurrences: SemCor, the demo sentences, or your "
                                 "own sentences."]


def test_layer_projections_with_umap(open_page):
    # the first UMAP of a process compiles numba's kernels: about a minute alone on 2 cores, past the
    # usual 120 s on a loaded CI machine (where this test timed out); what is checked is unchanged
    at = open_page(PROJECTIONS, timeout=600, pj_method="both", pj_semcor=False, **SMALL)
    assert_clean(at)
    scatter = figures(at)[0]
    titles = [a["text"] for a in scatter["layout"]["annotations"]]
    assert any("· UMAP" in t for t in titles) and any("· PCA" in t for t in titles)
    # PCA for every layer; UMAP for the LSTM layers only: layer 0 gives one point per spelling
    assert len([t for t in scatter["data"] if t["name"] == "your sentences"]) == 3 + 2
    assert any(a["text"].startswith("UMAP skipped") for a in scatter["layout"]["annotations"])


def test_a_fresh_servers_first_visit_embeds_only_the_lemmas_semcor_sentences(open_page, monkeypatch, tmp_path,
                                                                             data_root):
    """Layer projections, then sense retrieval on the same word, on a fresh server and cache: neither
    waits for the whole SemCor slice, and the second embeds nothing the first did."""
    import h5py
    import streamlit as st

    from probing.senses.semcor_index import semcor_sentences

    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = open_page(PROJECTIONS, pj_demo=False, **SMALL)
    assert_clean(at)
    assert len(figures(at)) == 2
    holding = [s for s in semcor_sentences(data_root, SMALL["semcor_limit"])
               if any(i.lemma == "bank" for i in s.instances)]

    def embedded() -> list[int]:
        out = []
        for path in sorted(tmp_path.rglob("semcor-*.h5")):
            if not path.name.startswith("semcor-index"):
                with h5py.File(path, "r") as f:
                    out.append(int(f.attrs["n_sentences"]))
        return out

    assert embedded() == [len(holding)] and 0 < len(holding) < SMALL["semcor_limit"] // 10
    at = open_page(RETRIEVAL, rt_example="my own sentence", rt_sentence="She deposited her wages at the bank on Friday.", rt_word="bank", **SMALL)
    assert_clean(at)
    assert figures(at) and at.dataframe[0].value["sense"].str.startswith("bank%").all()
    assert sum(embedded()) <= 2 * len(holding)  # the word's lemmas' sentences, never the slice


def test_reports_page_builds_shows_downloads_and_compares(open_page):
    at = open_page(REPORTS, rp_limit=50, rp_context=False)
    assert_clean(at)
    assert "No saved reports yet" in messages(at.info)[0]
    submit(at, "Build the report")
    assert_clean(at)
    assert messages(at.success)[0].startswith("Report written to")
    names = at.selectbox(key="reports_selected").options
    assert len(names) == 1
    folder = Path(os.environ[REPORTS_ENV_VAR]) / names[0]
    assert {p.name for p in folder.iterdir()} >= {"report.html", "report.md", "results.json"}
    shown = figures(at)
    assert [title(f).split(":")[0] for f in shown[:2]] == ["pos", "Selectivity per layer"]
    assert [d.label for d in at.get("download_button")] == [
        "Download report.html", "Download report.md", "Download results.json", "Download everything (.zip)"]
    at.number_input(key="rp_seed").set_value(1)
    submit(at, "Build the report")
    assert_clean(at)
    assert len(at.selectbox(key="reports_selected").options) == 2
    compared = [f for f in figures(at) if title(f).startswith("pos: A: ")]
    assert len(compared) == 1 and len([t for t in compared[0]["data"] if t["name"].startswith(("A: ", "B: "))]) == 4
    at.button(key="rp_write_compare").click().run()
    assert_clean(at)
    assert [d.label for d in at.get("download_button")][-3:] == [
        "Download comparison HTML", "Download comparison Markdown", "Download comparison.json"]
    # a file that is not a result is refused with a message
    at.selectbox(key="rp_cmp_a").select("upload a file…").run()
    at.file_uploader(key="rp_upload_a").set_value(("notes.json", b"not json", "application/json")).run()
    assert not at.exception
    assert messages(at.warning)[0].startswith("Reading a result to compare: probe report or probe-suite result is "
                                              "not valid JSON")
    at.multiselect(key="rp_tasks").set_value([])
    submit(at, "Build the report")
    assert "Pick at least one task." in messages(at.warning)


def test_reports_page_reads_saved_results_without_a_model(open_page, monkeypatch, tmp_path, data_root):
    from probing.tagging.suite import run_suite
    from probing.tagging.suite_config import SuiteConfig

    suite = run_suite(str(data_root / "fixtures" / "bilm_tf"), ["pos"], layers=[1], data_root=data_root, limit=30,
                      config=SuiteConfig(control=False, random_bilm=False, halves=False, mix=False))
    monkeypatch.setenv(REPORTS_ENV_VAR, str(tmp_path))
    (tmp_path / "from-the-probes-page").mkdir()
    suite.to_json(tmp_path / "from-the-probes-page" / "results.json")
    monkeypatch.setenv(MODEL_ENV_VAR, str(tmp_path / "no-such-model"))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page(REPORTS).run()
    assert_clean(at)
    assert title(figures(at)[0]).startswith("pos: accuracy per layer")
    assert [t for t in at.toggle if t.key.startswith("rp_pin_")]  # the host pins from the page
    submit(at, "Build the report")
    assert not at.exception
    assert "Could not load the biLM" in plain(at.error[0].value)
    assert figures(at)  # the saved report is still shown
    # pins are the host's: a visitor from another machine sees whether it is pinned, and no switch
    monkeypatch.setenv("ELMO_WORKBENCH_PUBLIC", "1")
    remote = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    remote.switch_page(REPORTS).run()
    assert not remote.exception and figures(remote)
    assert not [t for t in remote.toggle if t.key.startswith("rp_pin_")]
    assert any("disk budget may remove it" in c.value for c in remote.caption)


def test_the_apps_own_config_caps_uploads():
    import tomllib

    config = tomllib.loads((APP.parent / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["maxUploadSize"] <= 16  # MB; Streamlit's default is 200


@pytest.mark.parametrize("page", [PROBES, SCALAR_MIX, RETRIEVAL, PROJECTIONS])
def test_analysis_pages_explain_a_missing_model(page, monkeypatch, tmp_path):
    monkeypatch.setenv(MODEL_ENV_VAR, str(tmp_path / "no-such-model"))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page(page).run()
    assert not at.exception
    assert "Could not load the biLM" in plain(at.error[0].value)
    assert figures(at) == []


def test_every_page_is_registered_in_the_navigation():
    source = APP.read_text()
    for page in (PLAYGROUND, PROBES, INFORMATION, SCALAR_MIX, RETRIEVAL, PROJECTIONS, REPORTS):
        assert f'st.Page("{page}"' in source and (APP.parent / page).is_file()


def test_a_new_sessions_first_figure_waits_for_the_shell_only_once(monkeypatch):
    """display.let_the_shell_paint: the first heavy element of a session's first run is held until
    SHELL_SECONDS after the run started; never again in that session, and not at all when the
    page already took longer."""
    from app_pages import display

    clock = {"now": 100.0}
    slept = []
    monkeypatch.setattr(display.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(display.time, "sleep", slept.append)
    monkeypatch.setattr(display, "SHELL_SECONDS", 1.0)
    monkeypatch.setattr(display.st, "session_state", {})
    display.note_session_start()
    clock["now"] += 0.25  # the page's text and widgets took 0.25 s
    display.let_the_shell_paint()
    display.note_session_start()  # a later run of the same session
    display.let_the_shell_paint()
    assert slept == [pytest.approx(0.75)]

    monkeypatch.setattr(display.st, "session_state", {})  # a new session whose page computed for 3 s
    display.note_session_start()
    clock["now"] += 3.0
    display.let_the_shell_paint()
    assert slept[1:] == [0.0]


def test_the_sidebar_loads_the_scripts_that_draw_figures_and_tables_ahead(app):
    """display.prefetch_figure_scripts: every page comes with one script that prefetches Streamlit's
    own plotly and table-grid scripts and imports plotly's: files the installed Streamlit serves,
    under the names its browser bundle imports them by (a renamed or moved script would be
    fetched and run for nothing), plotly's first."""
    import streamlit

    (element,) = [h for h in app.sidebar.html if "__wbFigureScripts" in h.value]
    assert element.proto.unsafe_allow_javascript  # else Streamlit strips the script
    names = json.loads(re.search(r"const urls = (\[.*?\])\.map", element.value).group(1))
    assert [Path(n).name.split(".")[0] for n in names] == ["PlotlyChart", "DataFrame", "arrowFormatUtils"], names
    assert "import(urls[0])" in element.value  # plotly's is the one run ahead
    folder = Path(streamlit.__file__).parent / "static" / "static" / "js"
    assert all((folder / name).is_file() for name in names)
    entry = re.search(r'src="\./static/js/(index\.[^"]+\.js)"', (folder.parent.parent / "index.html").read_text())
    bundle = (folder / entry.group(1)).read_text(encoding="utf-8")
    assert all(f"import(`{name}`)" in bundle for name in names[:2])  # the URLs Streamlit imports them by


def test_model_key_reads_the_weights_once_per_model_until_they_change(fixture_model, monkeypatch):
    import torch

    from app_pages.model_choice import model_key
    from elmo_model import load_bilm
    from elmo_model.bilm import identity

    calls = []
    real = identity.model_identity
    monkeypatch.setattr(identity, "model_identity", lambda m: calls.append(1) or real(m))
    model = load_bilm(fixture_model)
    first = model_key(model)
    assert [model_key(model) for _ in range(5)] == [first] * 5 and len(calls) == 1
    with torch.no_grad():
        next(model.parameters()).add_(1.0)  # an edit in place: the key follows the weights
    assert model_key(model) != first and len(calls) == 2
