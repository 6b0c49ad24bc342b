"""Tests for probing.report and probing.figures: a whole report end to end on the bilm-tf fixture
model and small slices of the real data (EWT, CoNLL-2000, SemCor, the Raganato sets, Senseval-2,
the LM corpus), its three files, the HTML opened offline in Chromium in light and dark mode, the
JSON round trip, two runs with the same seed giving the same numbers, and --compare."""

import dataclasses
import json
import shutil
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from elmo_model.bilm.identity import model_identity
from probing.figures import THEMES
from probing.information.run import InformationConfig
from probing.report import ReportConfig, ReportResult, build_report, load_results, main, parse_word, report_figures
from probing.tagging.suite_config import SuiteConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LIMIT = 100  # sentences of every dataset, SemCor's too (its own slice: semcor_limit, 10,000 by default)
TASKS = ["pos", "chunk", "wsd", "lexsample"]
WORDS = ["bank", "play"]
# every part of the report runs; the probes are trained a little less than by default
CONFIG = ReportConfig(suite=SuiteConfig(mix_seeds=2, n_bootstrap=200, max_iter=20, warm_max_iter=10),
                      semcor_limit=LIMIT, lexsample_words=("hard",), word_seeds=1, word_folds=2, word_steps=60,
                      information=InformationConfig(train_limit=30, eval_limit=20, inlp_iterations=2, n_bootstrap=100))


@pytest.fixture(scope="module")
def fixture_model(data_root):
    return data_root / "fixtures/bilm_tf"


@pytest.fixture(scope="module")
def report(fixture_model, data_root, tmp_path_factory):
    """The full report (with PNGs), its progress calls and its folder."""
    out = tmp_path_factory.mktemp("report-a")
    calls = []
    result = build_report(fixture_model, TASKS, out, words=WORDS, data_root=data_root, seed=0, limit=LIMIT,
                          progress=lambda *args: calls.append(args), cache_dir=tmp_path_factory.mktemp("cache-a"),
                          config=CONFIG)
    return result, calls, out


@pytest.fixture(scope="module")
def second_run(fixture_model, data_root, tmp_path_factory):
    """The same report again, seed 0, from an empty cache (nothing reused), without PNGs."""
    out = tmp_path_factory.mktemp("report-b")
    return build_report(fixture_model, TASKS, out, words=WORDS, data_root=data_root, seed=0, limit=LIMIT,
                        cache_dir=tmp_path_factory.mktemp("cache-b"), config=CONFIG, png=False)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_every_section_is_there(report):
    result, _, _ = report
    assert result.model_name == "bilm_tf" and result.tasks == TASKS and result.words == WORDS
    assert [t.task for t in result.suite.tasks] == ["pos", "chunk"]
    assert result.suite.limit == LIMIT and result.semcor["sentences"] == LIMIT
    assert [t.task for t in result.information.tasks] == ["pos", "chunk", "lexsample"]
    assert result.information.tasks[0].n_sentences == {"train": 30, "dev": 20, "test": 20}
    # the lexical sample as its section sampled it: LIMIT contexts of "hard", 60/20/20
    assert result.information.task("lexsample").n_sentences == {"train": 60, "dev": 20, "test": 20}
    assert result.information.config["lexsample_words"] == ["hard"]
    assert {"mdl-pos", "conditional-chunk", "amnesic-pos", "mdl-lexsample"} <= {f.name for f in report_figures(result)}
    for task in result.suite.tasks:
        assert [r.layer for r in task.layers] == [0, 1, 2] and task.mix is not None
        assert task.baselines.random_bilm and task.n_sentences["test"] == LIMIT
    assert [r.representation for r in result.wsd.rows][:3] == ["layer 0", "layer 1", "layer 2"]
    assert "senseval2+senseval3+semeval2013+semeval2015" in result.wsd.columns
    assert [w.word for w in result.lexsample.words] == ["hard"]
    assert result.lexsample.settings["max_instances"] == LIMIT
    # 100 SemCor sentences hold too few "bank"/"play": the panels fall back to the demo sentences
    assert [p.lemma for p in result.projections] == ["bank", "play"]
    for projection in result.projections:
        assert len(projection.points) == 12 and {p.source for p in projection.points} == {"user"}
        assert projection.layers[0].collapsed and projection.layers[2].umap is not None
    assert sum("demo sentences" in n and "bank" in n for n in result.notes) == 1
    # the paper's two "play" sentences; SemCor's first 100 sentences have no "play", so any word
    assert len(result.retrieval) == 2 and result.retrieval[0].word == "play"
    for query in result.retrieval:
        assert [layer.layer for layer in query.layers] == [1, 2]
        assert all(len(layer.neighbours) == CONFIG.retrieval_k for layer in query.layers)
        assert {s.embedding for s in query.static} == {"bilm_tf layer 0", "word2vec (LM corpus)"}
    fitted = {r.lemma: r for r in result.word_senses.results}
    assert set(fitted) == {"bank", "play"} and not result.word_senses.refused
    for r in fitted.values():
        assert r.source == "sentences" and "fitted on the shipped demo sentences" in r.notes[0]
        assert sum(r.weights_mean) == pytest.approx(1.0) and len(r.layer_accuracy_mean) == 3
    assert len(result.contextuality.self_similarity) == 3
    assert result.settings["contextuality_sentences"] == LIMIT


def test_progress_runs_to_100_percent(report):
    _, calls, _ = report
    done = [c[1] for c in calls]
    assert all(c[2] == 100.0 and c[3] == "%" for c in calls)
    assert done == sorted(done) and done[-1] == 100.0
    labels = " ".join(c[0] for c in calls)
    for section in ("probing suite", "information probes", "SemCor index", "all-words WSD", "lexical sample", "projections",
                    "nearest neighbours", "learned s_j per lemma", "contextuality", "writing"):
        assert section in labels


def test_files_markdown_and_pngs(report):
    result, _, out = report
    files = result.files
    assert Path(files.html) == out / "report.html" and Path(files.markdown) == out / "report.md"
    assert Path(files.json) == out / "results.json"
    names = [f.name for f in report_figures(result)]
    assert set(files.figures) == set(names) and len(names) == 21
    assert {"pos-layers", "chunk-layers", "selectivity", "mix-weights", "wsd-layers", "wsd-sets", "lexical-sample",
            "projection-bank", "projection-play", "separability", "word-senses", "contextuality",
            "mdl-pos", "mdl-chunk", "conditional-pos", "conditional-chunk", "amnesic-pos", "amnesic-chunk",
            "mdl-lexsample", "conditional-lexsample", "amnesic-lexsample"} == set(names)
    assert files.png_renderer.startswith("kaleido")
    markdown = Path(files.markdown).read_text(encoding="utf-8")
    for name in names:
        width, height = png_size(out / "figures" / f"{name}.png")
        assert width == 1100 and height >= 260
        assert f"](figures/{name}.png)" in markdown
    assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(f"{n}.png" for n in names)
    assert not list(out.glob("**/*.tmp")) and not list(out.glob("**/.png-*"))
    # the tables are there, with the numbers of the result
    pos = result.suite.task("pos")
    assert f"{100 * pos.layer(1).probe.test.estimate:.1f} \\[" in markdown  # Markdown-escaped bracket
    assert "| WordNet first sense |" in markdown and "| biLM layer 2 (Peters et al. 2018) |" in markdown
    assert "nearest word types to “play”" in markdown


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_has_no_external_reference(report):
    result, _, _ = report
    text = Path(result.files.html).read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(text)
    for tag, attrs in parser.tags:
        for key in ("src", "href", "data", "poster"):
            value = attrs.get(key) or ""
            assert not value.lower().startswith(("http:", "https:", "//")), (tag, key, value)
        assert tag not in ("iframe", "embed", "object", "base")
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts and all("src" not in attrs for attrs in scripts)
    assert "@import" not in text and text.count("plotly.js, inlined") == 1
    assert len(text) > 3_000_000  # plotly.js itself is inside
    for figure in report_figures(result):
        assert f'id="fig-{figure.name}"' in text


def test_html_renders_offline_in_light_and_dark(report):
    """Chromium opens report.html with every non-file request blocked: all figures draw, no
    script error, and the figures' text follows the colour scheme."""
    from playwright.sync_api import sync_playwright

    result, _, _ = report
    browser_path = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(browser_path).is_file(), "Debian's chromium is needed: bash scripts/install_browser.sh"
    n_figures = len(report_figures(result))
    blocked, fills = [], {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
        try:
            for scheme in ("light", "dark"):
                context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
                page = context.new_page()
                errors = []
                page.on("pageerror", lambda err: errors.append(str(err)))

                def route(r):
                    if r.request.url.startswith("file:"):
                        r.continue_()
                    else:
                        blocked.append(r.request.url)
                        r.abort()

                page.route("**/*", route)
                page.goto(Path(result.files.html).as_uri())
                page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {n_figures}",
                                       timeout=60_000)
                page.wait_for_function("document.querySelector('.js-plotly-plot .gtitle') !== null")
                assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == n_figures
                fills[scheme] = page.evaluate(
                    "getComputedStyle(document.querySelector('.js-plotly-plot .gtitle')).fill")
                assert not errors, errors
                context.close()
        finally:
            browser.close()
    assert blocked == []

    def rgb(hex_colour):
        h = hex_colour.lstrip("#")
        return "rgb({}, {}, {})".format(*(int(h[k:k + 2], 16) for k in (0, 2, 4)))

    assert fills == {"light": rgb(THEMES["light"]["font"]), "dark": rgb(THEMES["dark"]["font"])}


def test_results_json_round_trips(report):
    result, _, out = report
    again = ReportResult.from_json(out / "results.json")
    assert again == result
    assert again.to_json() == result.to_json()
    assert load_results(out) == result  # a folder means its results.json
    assert ReportResult.from_json(result.to_json()).numbers() == result.numbers()
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert data["format"] == "elmo-workbench/report" and data["config"]["word_folds"] == 2
    with pytest.raises(ValueError, match="not a probe report"):
        ReportResult.from_dict({**data, "format": "something else"})


def test_same_seed_same_numbers(report, second_run):
    result, _, _ = report
    assert second_run.files.figures == {} and second_run.files.png_renderer is None
    assert second_run.numbers() == result.numbers()
    assert second_run.created and second_run.timings["total"] > 0
    assert "timings" not in json.dumps(result.numbers())


def delta_cells(markdown: str) -> list[str]:
    """The cells of every Markdown table column whose header starts with "Δ"."""
    cells, columns = [], None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        row = [c.strip() for c in line.strip("|").split(" | ")]
        if columns is None:
            columns = [k for k, header in enumerate(row) if header.startswith("Δ")]
        elif not set(line) <= set("|-: "):
            cells += [row[k] for k in columns]
    return cells


def test_compare_two_saved_results(report, second_run, tmp_path, capsys):
    result, _, out_a = report
    out = tmp_path / "a-vs-b"
    code = main(["--compare", str(out_a / "results.json"), str(Path(second_run.files.json)), "--out", str(out),
                 "--labels", "run A", "run B", "--no-png"])
    assert code == 0
    assert "wrote" in capsys.readouterr().out
    markdown = (out / "report.md").read_text(encoding="utf-8")
    html_text = (out / "report.html").read_text(encoding="utf-8")
    for name in ("compare-pos", "compare-chunk", "compare-mix-weights", "compare-wsd", "compare-separability",
                 "compare-word-senses", "compare-contextuality"):
        assert f'id="fig-{name}"' in html_text
    assert "| probe | run A \\[95% CI\\] | run B \\[95% CI\\] | Δ (B − A) |" in markdown
    pos_layer1 = result.suite.task("pos").layer(1).probe.test.estimate
    assert f"| layer 1 | {100 * pos_layer1:.1f} \\[" in markdown and "| +0.0 |" in markdown
    deltas = delta_cells(markdown)
    assert len(deltas) > 20 and set(deltas) <= {"+0.0", "–"}  # identical runs: every difference is zero
    comparison = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["labels"] == ["run A", "run B"] and comparison["a"] == comparison["b"]


def test_compare_a_report_with_a_probe_suite_result(report, tmp_path):
    result, _, out_a = report
    suite_json = tmp_path / "suite.json"
    result.suite.to_json(suite_json)
    assert main(["--compare", str(out_a), str(suite_json), "--out", str(tmp_path / "cmp"), "--no-png",
                 "--quiet"]) == 0
    text = (tmp_path / "cmp" / "report.md").read_text(encoding="utf-8")
    assert "## Probing tasks" in text and "Word-sense disambiguation" not in text  # the suite has no WSD


def test_cli_quick_report_and_errors(fixture_model, data_root, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["--model", str(fixture_model), "--tasks", "upos", "--limit", "30", "--data-root", str(data_root),
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--no-png", "--no-contextuality",
                 "--no-random-bilm", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "upos" in printed and "report.html" in printed
    result = load_results(out / "results.json")
    assert result.tasks == ["upos"] and result.wsd is None and result.contextuality is None
    assert result.projections == [] and not result.suite.task("upos").baselines.random_bilm
    assert not (out / "figures").exists()
    # bad input: a clear message, exit code 2, nothing written
    assert main(["--model", str(tmp_path / "nope"), "--tasks", "pos", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "no such shipped model" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["--compare", str(tmp_path / "a.json"), str(out), "--out", str(tmp_path / "y")]) == 2
    assert "no probe report or probe-suite result" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--tasks", "ner", "--out", str(tmp_path / "z")])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0 and "--compare" in capsys.readouterr().out


def test_parse_word_and_bad_arguments(fixture_model, tmp_path):
    assert parse_word("bank") == ("bank", None)
    assert parse_word("play:v") == ("play", "VERB") and parse_word("play:NOUN") == ("play", "NOUN")
    with pytest.raises(ValueError, match="part of speech"):
        parse_word("play:xyz")
    with pytest.raises(ValueError, match="unknown or no tasks"):
        build_report(fixture_model, ["pos", "ner"], tmp_path / "r")
    with pytest.raises(ValueError, match="limit"):
        build_report(fixture_model, ["pos"], tmp_path / "r", limit=0)
    with pytest.raises(ValueError, match="projection_source"):
        ReportConfig(projection_source="web")
    assert ReportConfig.from_dict(CONFIG.to_dict()) == CONFIG
    assert not (tmp_path / "r").exists()


def test_semcor_has_a_slice_of_its_own_10000_sentences_unless_told():
    """The report's SemCor sections index SemCor's first 10,000 sentences unless told otherwise (the
    sense pages' default slice too); --limit cuts the other datasets, not SemCor; 0 on the command
    line is all of SemCor; the Reproduce line names the slice a run indexed when it is not the
    default (a report written when --limit cut SemCor too says so in its settings)."""
    from app_pages.inputs import DEFAULT_SEMCOR_LIMIT
    from probing.report import cli
    from probing.report.blocks import reproduce_command

    assert ReportConfig().semcor_limit == DEFAULT_SEMCOR_LIMIT == 10_000
    parse = cli._parser().parse_args
    assert parse(["--out", "x", "--limit", "50"]).semcor_limit == 10_000
    assert parse(["--out", "x", "--semcor-limit", "0"]).semcor_limit == 0
    assert "default: 10000" in " ".join(cli._parser().format_help().split())
    with pytest.raises(SystemExit):
        parse(["--out", "x", "--semcor-limit", "-3"])

    def line(settings: dict, config: ReportConfig = ReportConfig()) -> str:
        return reproduce_command(ReportResult(
            model_name="m", model_identity="0" * 64, model_config={}, tasks=["wsd"], words=[], seed=0, limit=50,
            config=config, settings=settings, created="", versions={}, timings={}))

    assert "--semcor-limit" not in line({"semcor_sentences": 10_000})
    assert line({"semcor_sentences": 300}, ReportConfig(semcor_limit=300)).endswith("--semcor-limit 300 --out DIR")
    assert line({"semcor_sentences": None}, ReportConfig(semcor_limit=None)).endswith("--semcor-limit 0 --out DIR")
    assert line({"semcor_sentences": 50}, ReportConfig(semcor_limit=None)).endswith("--semcor-limit 50 --out DIR")


def test_a_rerun_reads_the_learned_s_j_from_the_cache(fixture_model, data_root, tmp_path, monkeypatch):
    import probing.senses.word_senses as word_senses
    from probing.report import run_report

    fits = []
    real = word_senses.learn_word_senses
    monkeypatch.setattr(word_senses, "learn_word_senses", lambda *a, **k: fits.append(a) or real(*a, **k))
    config = dataclasses.replace(CONFIG, contextuality=False)
    first = run_report(fixture_model, ["wsd"], ["bank"], data_root, seed=0, limit=LIMIT, cache_dir=tmp_path,
                       config=config)
    n_first = len(fits)
    assert n_first >= 1 and first.word_senses.results
    second = run_report(fixture_model, ["wsd"], ["bank"], data_root, seed=0, limit=LIMIT, cache_dir=tmp_path,
                        config=config)
    assert len(fits) == n_first, "the second run should read the cached fit"
    assert len(list((tmp_path / "word_senses").glob("*.json"))) == 1
    assert second.word_senses.to_json() == first.word_senses.to_json()
    # another seed is another fit, not a cache hit
    run_report(fixture_model, ["wsd"], ["bank"], data_root, seed=1, limit=LIMIT, cache_dir=tmp_path, config=config)
    assert len(fits) > n_first


def test_missing_chromium_stops_before_the_work(fixture_model, data_root, tmp_path, capsys, monkeypatch):
    """Without Chromium a PNG report fails at once, naming the fix, not after its cold run."""
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    cache, out = tmp_path / "cache", tmp_path / "out"
    assert main(["--model", str(fixture_model), "--tasks", "upos", "--limit", "5", "--data-root", str(data_root),
                 "--cache-dir", str(cache), "--out", str(out), "--no-contextuality", "--no-random-bilm",
                 "--quiet"]) == 2
    assert "PNG figures need Chromium" in capsys.readouterr().err
    assert not out.exists() and not cache.exists()  # nothing computed, nothing written


def test_the_syntax_training_slices_reach_the_report_config(monkeypatch, tmp_path):
    import probing.report.cli as cli
    from probing.report.config import ReportConfig
    from probing.syntax.structural import SyntaxConfig

    seen = []
    monkeypatch.setattr(cli, "build_report", lambda *a, **k: seen.append(k["config"]) or (_ for _ in ()).throw(
        ValueError("stop here")))
    assert cli.main(["--out", str(tmp_path / "r"), "--tasks", "structural", "--syntax-train-sentences", "2000",
                     "--edge-train-sentences", "0", "--quiet"]) == 2
    assert seen[0].syntax.train_sentences == 2000 and seen[0].syntax.edge_train_sentences is None  # 0: all
    assert cli.main(["--out", str(tmp_path / "r"), "--tasks", "structural", "--quiet"]) == 2
    assert seen[1].syntax == SyntaxConfig()
    assert seen[1].information == ReportConfig().information is not None
    assert cli.main(["--out", str(tmp_path / "r"), "--tasks", "pos", "--no-information", "--quiet"]) == 2
    assert seen[2].information is None
    assert cli.main(["--out", str(tmp_path / "r"), "--tasks", "pos", "--erasure", "--quiet"]) == 2
    assert seen[3].information.methods == (*ReportConfig().information.methods, "erasure")
    with pytest.raises(SystemExit):  # --erasure adds to sections --no-information leaves out: one argparse line
        cli.main(["--out", str(tmp_path / "r"), "--erasure", "--no-information", "--quiet"])
    config = ReportConfig(syntax=SyntaxConfig(train_sentences=7, ranks=(4,)))
    assert ReportConfig.from_dict(config.to_dict()) == config
    assert ReportConfig.from_dict({k: v for k, v in config.to_dict().items() if k != "syntax"}).syntax == SyntaxConfig()


def test_a_report_on_a_given_model_gives_it_back_in_its_own_precision(data_root, tmp_path):
    """The app hands the report its cached model, whose precision the user chose in the sidebar:
    the report computes in its own precision and leaves the model's alone."""
    from elmo_model import load_bilm
    from elmo_model.bilm.precision import EMULATED_BF16
    from probing.report import run_report

    model = load_bilm(data_root / "fixtures/bilm_tf")
    config = ReportConfig(suite=SuiteConfig(precision=EMULATED_BF16, control=False, random_bilm=False, halves=False,
                                            mix=False, n_bootstrap=20), contextuality=False, information=None)
    result = run_report(model, ["pos"], data_root=data_root, limit=20, cache_dir=tmp_path, config=config)
    assert model.precision == "fp32"
    with model.computing_in(EMULATED_BF16):
        assert result.model_identity == model_identity(model)
    assert result.model_identity != model_identity(model)
