"""UD treebanks by language: a tiny French treebank written here, served from a local HTTP server
laid out as GitHub's raw files, fetched by name, checked on every read, and probed (POS, the
structural probe) on a small random biLM whose model card says French."""

import hashlib
import json

import pytest
from range_server import RangeServer

from probing.data import DatasetMissing
from probing.data import cli as data_cli
from probing.data.downloads import DownloadError
from probing.data.registry import UD_RELEASE, find_treebank
from probing.data.treebanks import (
    TreebankChanged,
    download_treebank,
    language_treebank,
    read_manifest,
    require_treebank,
    treebank_file,
)
from probing.tagging.tasks import load_task, read_treebank

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (form, UPOS, head, relation) a word; sentences in French, with the heads of a dependency tree
SENTENCES = [
    [("Le", "DET", 2, "det"), ("chat", "NOUN", 3, "nsubj"), ("dort", "VERB", 0, "root"), (".", "PUNCT", 3, "punct")],
    [("La", "DET", 2, "det"), ("banque", "NOUN", 3, "nsubj"), ("ferme", "VERB", 0, "root"), ("tôt", "ADV", 3, "advmod"),
     (".", "PUNCT", 3, "punct")],
    [("Nous", "PRON", 2, "nsubj"), ("marchons", "VERB", 0, "root"), ("près", "ADV", 2, "advmod"),
     ("du", "ADP", 5, "case"), ("fleuve", "NOUN", 3, "obl"), (".", "PUNCT", 2, "punct")],
    [("Un", "DET", 2, "det"), ("enfant", "NOUN", 3, "nsubj"), ("lit", "VERB", 0, "root"), ("un", "DET", 5, "det"),
     ("livre", "NOUN", 3, "obj"), (".", "PUNCT", 3, "punct")],
    [("Elle", "PRON", 2, "nsubj"), ("mange", "VERB", 0, "root"), ("une", "DET", 4, "det"), ("pomme", "NOUN", 2, "obj"),
     ("verte", "ADJ", 4, "amod"), (".", "PUNCT", 2, "punct")],
    [("Les", "DET", 2, "det"), ("oiseaux", "NOUN", 3, "nsubj"), ("chantent", "VERB", 0, "root"), (".", "PUNCT", 3, "punct")],
]


def conllu(sentences, prefix: str) -> bytes:
    """CoNLL-U text of ``sentences``: ten columns, XPOS left empty ("_") as in UD French-GSD."""
    lines = []
    for n, words in enumerate(sentences, 1):
        lines += [f"# sent_id = {prefix}-{n}", "# text = " + " ".join(w[0] for w in words)]
        lines += [f"{i}\t{form}\t{form.lower()}\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"
                  for i, (form, upos, head, rel) in enumerate(words, 1)]
        lines.append("")
    return ("\n".join(lines) + "\n").encode("utf-8")


SPLITS = {"train": SENTENCES * 3, "dev": SENTENCES[:3], "test": SENTENCES[3:]}
SERVED = {f"/UD_French-GSD/{UD_RELEASE}/fr_gsd-ud-{split}.conllu": conllu(s, f"fr-{split}") for split, s in SPLITS.items()}
README = f"/UD_French-GSD/{UD_RELEASE}/README.md"


@pytest.fixture
def server():
    with RangeServer({**SERVED, README: b"# Summary\n\nLicense: CC BY-SA 4.0\nIncludes text: yes\n"}) as running:
        yield running


@pytest.fixture(scope="module")
def french_root(tmp_path_factory):
    """A data root holding the tiny French treebank, fetched from a local server."""
    root = tmp_path_factory.mktemp("root")
    with RangeServer(SERVED) as running:
        download_treebank("fr", root, source=running.url(""))
    return root


def test_the_table_resolves_languages_codes_and_iso_codes():
    assert find_treebank("French").code == find_treebank("ud:fr").code == find_treebank("FR_GSD").code == "fr_gsd"
    assert find_treebank("fr_sequoia").code == "fr_sequoia" and find_treebank("ud:english").code == "en_ewt"
    assert find_treebank("klingon") is None
    assert language_treebank("English") is None and language_treebank("English", "de").code == "de_gsd"
    with pytest.raises(ValueError, match="no UD treebank of Klingon.*french"):
        language_treebank("Klingon")


def test_a_treebank_is_fetched_by_language_resumed_and_recorded(server, tmp_path, capsys):
    server.cut_next, server.cut_path = 60, next(iter(SERVED))  # the train file, cut short once
    args = ["download", "ud:french", "--data-root", str(tmp_path), "--from", server.url("")]
    assert data_cli.main(args) == 1
    assert "resume from byte 60" in capsys.readouterr().err
    assert read_manifest("fr", tmp_path) is None and not (tmp_path / "ud" / "fr_gsd").exists()
    assert data_cli.main(args) == 0
    assert (next(iter(SERVED)), "bytes=60-") in server.requests  # resumed, not fetched again
    manifest = read_manifest("french", tmp_path)
    assert manifest["ref"] == UD_RELEASE and manifest["licence"] == "CC BY-SA 4.0" and manifest["licence_from"] == "README"
    for split in ("train", "dev", "test"):
        name = f"fr_gsd-ud-{split}.conllu"
        payload = SERVED[f"/UD_French-GSD/{UD_RELEASE}/{name}"]
        assert (tmp_path / "ud" / "fr_gsd" / name).read_bytes() == payload
        assert manifest["files"][name]["sha256"] == hashlib.sha256(payload).hexdigest()
    assert not list((tmp_path / ".downloads").glob("*.part"))
    assert data_cli.main(["status", "--data-root", str(tmp_path), "--verify"]) == 0
    assert "fr_gsd        present  French, r2.14, CC BY-SA 4.0, sha256 checked" in capsys.readouterr().out


def test_a_read_checks_the_file_against_the_first_fetch(server, tmp_path, capsys):
    download_treebank("ud:fr_gsd", tmp_path, source=server.url(""))
    assert treebank_file("fr", "dev", tmp_path).name == "fr_gsd-ud-dev.conllu"
    dev = tmp_path / "ud" / "fr_gsd" / "fr_gsd-ud-dev.conllu"
    dev.write_bytes(dev.read_bytes().replace(b"chat", b"chien"))  # other bytes, other length
    with pytest.raises(TreebankChanged, match="where its first fetch recorded .*download ud:french .*--force"):
        read_treebank("fr", "dev", data_root=tmp_path)
    dev.write_bytes(dev.read_bytes().replace(b"chien", b"CHAT"))  # the same length, other bytes
    with pytest.raises(TreebankChanged, match="sha256"):
        load_task("upos", "dev", tmp_path, treebank="fr")
    assert data_cli.main(["status", "--data-root", str(tmp_path), "--verify"]) == 1
    assert "DIFFERS FROM THE FIRST FETCH: ud/fr_gsd/fr_gsd-ud-dev.conllu" in capsys.readouterr().out
    requests = len(server.requests)
    download_treebank("fr", tmp_path, source=server.url(""))  # fetched already: nothing asked
    assert len(server.requests) == requests
    download_treebank("fr", tmp_path, source=server.url(""), force=True)
    assert len(read_treebank("fr", "dev", data_root=tmp_path)) == 3


def test_without_the_treebank_the_one_line_names_the_command(tmp_path):
    with pytest.raises(DatasetMissing, match=r"UD French-GSD \(fr_gsd\) is not in the data root .*; fetch it with: "
                                             r"python -m probing\.data download ud:french --data-root"):
        require_treebank("French", tmp_path)
    with pytest.raises(DatasetMissing, match="download ud:french"):
        read_treebank("fr", "train", data_root=tmp_path)


def test_an_answer_that_is_not_conllu_installs_nothing(tmp_path):
    page = {path: b"<html><body>404: Not Found</body></html>\n" for path in SERVED}
    with RangeServer(page) as server:
        with pytest.raises(DownloadError, match="not a CoNLL-U file"):
            download_treebank("fr", tmp_path, source=server.url(""))
    assert read_manifest("fr", tmp_path) is None and not (tmp_path / "ud").exists()


def test_a_second_download_of_a_treebank_waits_for_the_first(server, tmp_path):
    from elmo_model.plumbing.io_safety import output_lock

    (tmp_path / ".downloads").mkdir()
    with output_lock(tmp_path / ".downloads" / "ud_fr_gsd", what="download"):
        with pytest.raises(DownloadError, match="another download of it"):
            download_treebank("fr", tmp_path, source=server.url(""))


def test_a_folder_holding_the_files_is_a_source(tmp_path):
    folder = tmp_path / "UD_French-GSD"
    folder.mkdir()
    for path, payload in SERVED.items():
        (folder / path.rsplit("/", 1)[1]).write_bytes(payload)
    download_treebank("fr", tmp_path / "root", source=str(folder))
    manifest = read_manifest("fr", tmp_path / "root")
    assert manifest["ref"] == f"folder {folder}" and manifest["licence_from"] == "table"
    assert [len(read_treebank("fr", s, data_root=tmp_path / "root")) for s in ("train", "dev", "test")] == [18, 3, 3]


def test_the_treebank_reads_as_upos_and_refuses_an_empty_xpos(french_root):
    test = read_treebank("fr", "test", data_root=french_root)
    assert test[0].tokens == ("Un", "enfant", "lit", "un", "livre", ".")
    assert test[0].tags == ("DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT") and test[0].sent_id == "fr-test-1"
    assert load_task("upos", "test", french_root, treebank="french") == test
    with pytest.raises(ValueError, match="no XPOS tags .*upos"):
        load_task("pos", "test", french_root, treebank="fr")


def test_the_pos_probe_reads_the_french_treebank_and_keeps_its_own_cache(french_root, french_model, tmp_path):
    from elmo_model import load_bilm
    from probing.tagging.suite import run_suite
    from probing.tagging.suite_config import SuiteConfig

    config = SuiteConfig(mix=False, halves=False, random_bilm=False, n_bootstrap=50)
    result = run_suite(load_bilm(french_model), ["upos"], layers=[0, 1], data_root=french_root,
                       cache_dir=tmp_path, config=config, treebank="french")
    task = result.tasks[0]
    assert task.dataset == "ud_fr_gsd" and task.n_sentences == {"train": 18, "dev": 3, "test": 3}
    assert task.n_tokens["test"] == 16 and not task.baselines.reference  # the paper's PTB numbers are English
    assert all(0.0 <= layer.probe.test_accuracy <= 1.0 for layer in task.layers)
    assert any("ud_fr_gsd" in path.name for path in tmp_path.rglob("*.h5*"))  # never EWT's activations


def test_the_suite_command_probes_a_french_model_on_its_treebank_or_names_the_fetch(french_root, french_model,
                                                                                    tmp_path, capsys):
    from probing.tagging.suite import main

    common = ["--model", str(french_model), "--layers", "1", "--limit", "6", "--no-random-bilm", "--mix-seeds", "0",
              "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    assert main([*common, "--data-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "python -m probing.data download ud:french --data-root" in err
    assert main([*common, "--data-root", str(french_root), "--out", str(tmp_path / "fr.json")]) == 0
    saved = json.loads((tmp_path / "fr.json").read_text())
    assert [(t["task"], t["dataset"]) for t in saved["tasks"]] == [("upos", "ud_fr_gsd")]  # upos: French has no XPOS


def test_the_structural_probe_learns_the_french_trees(french_root, french_model, tmp_path):
    from elmo_model import load_bilm
    from probing.syntax.structural import SyntaxConfig, run_structural

    config = SyntaxConfig(treebank="fr", ranks=(4,), max_epochs=2, random_bilm=False)
    assert config.treebank == "fr_gsd" and config.dataset == "ud_fr_gsd"
    result = run_structural(load_bilm(french_model), layers=[1], data_root=french_root, cache_dir=tmp_path, config=config)
    assert result.treebank == "fr_gsd" and result.n_sentences == {"train": 18, "dev": 3, "test": 3}
    assert 0.0 <= result.model[0].uuas <= 1.0 and result.nonsense and "UD French-GSD test" in result.table()
    names = sorted(path.name for path in tmp_path.rglob("*.h5*"))
    assert names and all("ud_fr_gsd" in name for name in names)
    with pytest.raises(ValueError, match="no UD treebank 'klingon'"):
        SyntaxConfig(treebank="klingon")


def test_the_probes_and_syntax_pages_run_a_french_model_on_its_treebank(french_root, french_model, tmp_path,
                                                                        monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(french_model))
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(french_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    at = AppTest.from_file(str(Path(__file__).parents[1] / "app.py"), default_timeout=120)
    for key, value in {"pr_limit": 50, "pr_random": False, "pr_mix_seeds": 0, "sy_train": 200, "sy_rank": 16,
                       "syntax_train_asked": True}.items():
        at.session_state[key] = value
    at.switch_page("app_pages/probes.py").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert any("part of speech is probed on UD French-GSD" in c.value for c in at.caption)
    tasks = at.multiselect(key="pr_tasks")
    assert tasks.value == ["upos"] and tasks.options == ["Universal part of speech (UD French-GSD)"]
    [run] = [b for b in at.button if b.label == "Run the probes"]
    run.click().run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert [s.value for s in at.subheader][0] == "Universal part of speech (UD French-GSD)" and at.get("plotly_chart")
    at.switch_page("app_pages/syntax.py").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert any("gold trees of UD French-GSD" in c.value for c in at.caption)
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any("gold tree (above)" in t for t in titles)
