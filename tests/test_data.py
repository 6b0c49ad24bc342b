"""Tests for probing.data (data root, registry, download) and probing.tagging.tasks (readers)."""

import gzip
import io
import json
import os
import re
import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from elmo_model.text.reader import TextFileError, read_text_lines
from probing import data
from probing.data import DATASETS, DatasetMissing, downloads
from probing.data import cli as data_cli
from probing.data.downloads import DownloadError
from probing.senses.corpora import read_gold_keys
from probing.tagging.tasks import SPLITS, TaggedSentence, dev_indices, load_task, parse_conllu, read_conll2000, read_ewt

# The 45 PTB tags plus the ones EWT adds (ADD email/URL, AFX, GW, HYPH, NFP).
PTB_TAGS = set(
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM TO UH "
    "VB VBD VBG VBN VBP VBZ WDT WP WP$ WRB $ # `` '' -LRB- -RRB- , . :".split()
) | {"ADD", "AFX", "GW", "HYPH", "NFP"}
UPOS_TAGS = set("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
CHUNK_TYPES = {"NP", "VP", "PP", "ADVP", "SBAR", "ADJP", "PRT", "CONJP", "INTJ", "LST", "UCP"}


# --------------------------------------------------------------------------------------------
# data root and registry
# --------------------------------------------------------------------------------------------


def _put_ewt(root):
    """Empty stand-ins for UD English-EWT's three files: enough for the root rule to see a dataset."""
    for split in ("train", "dev", "test"):
        path = root / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


def test_data_root_falls_back_to_the_shared_folder_beside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    cache = (tmp_path / "xdg" / "elmo-workbench" / "data").resolve()
    sibling = tmp_path / "shared"
    monkeypatch.setattr(data, "SIBLING_ROOT", sibling)
    (sibling / "ud_english_ewt").mkdir(parents=True)  # a folder without a whole dataset: not a root
    assert data.data_root() == cache and "empty" in data.root_origin()
    _put_ewt(sibling)
    assert data.data_root() == sibling.resolve() and "beside the checkout" in data.root_origin()
    # read from, never written to: a download goes to the user cache
    assert data.download_root() == cache and str(cache) in data.download_command("ud_english_ewt")
    _put_ewt(cache)  # what the user downloaded wins over the shared folder
    assert data.data_root() == cache and data.root_origin() == "default user cache directory"
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path / "env"))
    assert data.data_root() == (tmp_path / "env").resolve() and data.root_origin() == data.ENV_VAR


def test_data_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setattr(data, "SIBLING_ROOT", tmp_path / "no-shared-here")
    assert data.data_root() == (tmp_path / "xdg" / "elmo-workbench" / "data").resolve()
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path / "env"))
    assert data.data_root() == (tmp_path / "env").resolve()
    assert data.data_root(tmp_path / "explicit") == (tmp_path / "explicit").resolve()
    assert data.data_root(str(tmp_path / "explicit")) == (tmp_path / "explicit").resolve()


def test_default_cache_root_without_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data.default_cache_root() == tmp_path / ".cache" / "elmo-workbench" / "data"


def test_registry_names_and_files():
    assert set(DATASETS) == {"ud_english_ewt", "conll2000", "senseval", "wordnet",
                             "wsd_framework", "lm_corpus"}
    for dataset in DATASETS.values():
        assert dataset.files and dataset.description and dataset.source
        for spec in dataset.files:
            assert not spec.path.startswith("/") and ".." not in spec.path
            assert spec.sha256 is None or len(spec.sha256) == 64
    for spec in DATASETS["ud_english_ewt"].files:  # pinned commit: strict checksums, one URL each
        assert spec.strict and spec.sha256 and spec.url.startswith("https://raw.githubusercontent.com/")
        assert data.EWT_COMMIT in spec.url
    assert not DATASETS["lm_corpus"].downloadable
    with pytest.raises(ValueError, match="known datasets"):
        data.get_dataset("ptb")


def test_reference_root_is_complete(data_root):
    rows = {row.name: row for row in data.status(data_root)}
    assert all(row.present for row in rows.values()), {n: r.missing for n, r in rows.items()}
    ewt = data.dataset_status("ud_english_ewt", data_root, verify=True)
    assert ewt.verified and ewt.present and not ewt.corrupt and not ewt.differs
    assert data.require("conll2000", data_root) == data_root.resolve()


def test_require_names_dataset_root_and_command(tmp_path):
    with pytest.raises(DatasetMissing) as info:
        data.require("ud_english_ewt", tmp_path)
    exc = info.value
    assert isinstance(exc, FileNotFoundError)
    message = str(exc)
    assert "ud_english_ewt" in message and str(tmp_path) in message
    assert f"python -m probing.data download ud_english_ewt --data-root {tmp_path}" in message
    assert "en_ewt-ud-train.conllu" in message
    assert exc.dataset == "ud_english_ewt" and exc.root == tmp_path.resolve()
    assert len(exc.missing) == 3


def test_require_without_download_says_so(tmp_path):
    with pytest.raises(DatasetMissing, match="no automatic download"):
        data.require("lm_corpus", tmp_path)


def test_readers_raise_dataset_missing(tmp_path):
    with pytest.raises(DatasetMissing, match="download ud_english_ewt"):
        read_ewt("dev", root=tmp_path)
    with pytest.raises(DatasetMissing, match="download conll2000"):
        read_conll2000("test", root=tmp_path)


def test_use_nltk_data_puts_root_first(data_root):
    import nltk

    folder = data.use_nltk_data(data_root)
    assert folder == data_root.resolve() / "nltk_data"
    data.use_nltk_data(data_root)
    assert nltk.data.path[0] == str(folder)
    assert nltk.data.path.count(str(folder)) == 1


def test_find_file_finds_the_gzipped_copy_and_the_reader_gunzips_it(tmp_path):
    (tmp_path / "a").mkdir()
    with gzip.open(tmp_path / "a" / "x.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("héllo\nworld\n")
    found = data.find_file("a/x.txt", tmp_path)
    assert found == tmp_path.resolve() / "a" / "x.txt.gz"
    assert data.find_file("a/missing.txt", tmp_path) is None
    assert list(read_text_lines(found)) == ["héllo\n", "world\n"]


def test_dataset_readers_name_the_file_and_line_of_bytes_that_are_not_utf8(tmp_path):
    """The CoNLL-U and gold-key readers go through the one strict reader: a Latin-1 byte is
    refused naming the file and line, not decoded into a replacement character or a bare
    UnicodeDecodeError."""
    gold = tmp_path / "x.gold.key.txt"
    gold.write_bytes("d000.s000.t000 bank%1:14:00::\nd000.s000.t001 caf\xe9%1:13:00::\n".encode("latin-1"))
    with pytest.raises(TextFileError, match=rf"^{re.escape(str(gold))}:2: not valid UTF-8"):
        read_gold_keys(gold)


def test_status_cli_prints_table(data_root, capsys):
    assert data_cli.main(["status", "--data-root", str(data_root)]) == 0
    out = capsys.readouterr().out
    assert str(data_root.resolve()) in out
    datasets, _, models = out.partition("published ELMo models")
    for name in DATASETS:
        assert name in datasets
    assert "missing" not in datasets
    assert all(name in models for name in data.MODELS)  # the reference root holds no published model


def test_status_cli_lists_missing_and_the_fix(tmp_path, capsys):
    assert data_cli.main(["status", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "missing" in out and "python -m probing.data download" in out


# --------------------------------------------------------------------------------------------
# download (no network here: urlopen is replaced)
# --------------------------------------------------------------------------------------------


def _offline(*args, **kwargs):
    raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")


def _files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


def test_download_network_failure_is_clear(monkeypatch, tmp_path):
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    with pytest.raises(DownloadError) as info:
        downloads.download("ud_english_ewt", tmp_path)
    message = str(info.value)
    assert "could not download https://raw.githubusercontent.com/UniversalDependencies" in message
    assert "name resolution" in message and "offline" in message
    assert _files_under(tmp_path) == []  # nothing half-written


def test_download_cli_network_failure(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    assert data_cli.main(["download", "ud_english_ewt", "wsd_framework", "--data-root", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "error: ud_english_ewt: could not download" in captured.err
    assert "error: wsd_framework: could not download http://lcl.uniroma1.it/" in captured.err
    assert "FAILED" in captured.out
    assert _files_under(tmp_path) == []


def test_download_nltk_network_failure(monkeypatch, tmp_path):
    import nltk.downloader

    monkeypatch.setattr(nltk.downloader, "urlopen", _offline)
    with pytest.raises(DownloadError, match="NLTK package 'conll2000'.*name resolution"):
        downloads.download("conll2000", tmp_path)
    assert _files_under(tmp_path) == []


def test_download_refuses_lm_corpus(tmp_path):
    with pytest.raises(ValueError, match="no automatic download"):
        downloads.download("lm_corpus", tmp_path)


class _FakeResponse(io.BytesIO):
    def __init__(self, payload: bytes):
        super().__init__(payload)
        self.headers = {"Content-Length": str(len(payload))}


def _serve(mapping):
    """A urlopen stand-in serving bytes by URL suffix."""

    def urlopen(request, timeout=None):
        url = request.full_url if hasattr(request, "full_url") else request
        for suffix, payload in mapping.items():
            if url.endswith(suffix):
                return _FakeResponse(payload)
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)

    return urlopen


def test_download_rejects_checksum_mismatch(monkeypatch, tmp_path):
    monkeypatch.setattr(urllib.request, "urlopen", _serve({".conllu": b"# not the treebank\n"}))
    with pytest.raises(DownloadError, match="checksum mismatch.*expected sha256"):
        downloads.download("ud_english_ewt", tmp_path)
    assert _files_under(tmp_path) == []


def test_download_files_verifies_and_installs(monkeypatch, tmp_path, data_root):
    served = {f"en_ewt-ud-{s}.conllu": (data_root / f"ud_english_ewt/en_ewt-ud-{s}.conllu").read_bytes()
              for s in SPLITS}
    monkeypatch.setattr(urllib.request, "urlopen", _serve(served))
    seen = []
    downloads.download("ud_english_ewt", tmp_path, progress=lambda *a: seen.append(a))
    for name, payload in served.items():
        assert (tmp_path / "ud_english_ewt" / name).read_bytes() == payload
    assert seen[-1][1] == seen[-1][2]  # the last report of a file: done == total
    assert sorted(p.name for p in (tmp_path / "ud_english_ewt").iterdir()) == sorted(served)
    # present now: a second download fetches nothing
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    downloads.download("ud_english_ewt", tmp_path)


def test_download_zip_extracts_only_the_framework(monkeypatch, tmp_path, data_root):
    framework = data_root / "wsd" / "WSD_Evaluation_Framework"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        for path in (framework / "Evaluation_Datasets").rglob("*"):
            if path.is_file():
                zf.write(path, "WSD_Evaluation_Framework/" + path.relative_to(framework).as_posix())
        # the official archive ships SemCor uncompressed, with its own instance ids
        semcor = "WSD_Evaluation_Framework/Training_Corpora/SemCor/"
        zf.writestr(semcor + "semcor.data.xml", "<corpus lang='en' source='semcor'></corpus>\n")
        zf.writestr(semcor + "semcor.gold.key.txt", "d000.s000.t000 long%3:00:02::\n")
        zf.writestr("WSD_Evaluation_Framework/../escaped.txt", "outside\n")
        zf.writestr("__MACOSX/._junk", "junk")
    monkeypatch.setattr(urllib.request, "urlopen", _serve({"WSD_Evaluation_Framework.zip": buffer.getvalue()}))
    downloads.download("wsd_framework", tmp_path)
    assert data.is_present("wsd_framework", tmp_path)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "wsd" / "escaped.txt").exists()
    assert not (tmp_path / "__MACOSX").exists()
    assert [p.name for p in (tmp_path / "wsd").iterdir()] == ["WSD_Evaluation_Framework"]  # no temp left
    assert data.dataset_status("wsd_framework", tmp_path, verify=True).present


# --------------------------------------------------------------------------------------------
# UD English-EWT
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("split, n_sentences", [("train", 12544), ("dev", 2001), ("test", 2077)])
def test_ewt_sentence_counts(data_root, split, n_sentences):
    sentences = read_ewt(split, root=data_root)
    assert len(sentences) == n_sentences
    assert all(len(s) > 0 and len(s.tags) == len(s.tokens) for s in sentences)
    assert len({s.sent_id for s in sentences}) == n_sentences


def test_ewt_xpos_is_ptb_and_upos_is_universal(data_root):
    xpos = read_ewt("dev", "xpos", root=data_root, limit=300)
    upos = read_ewt("dev", "upos", root=data_root, limit=300)
    xtags = {t for s in xpos for t in s.tags}
    utags = {t for s in upos for t in s.tags}
    assert xtags <= PTB_TAGS and {"NN", "NNP", "VBZ", "DT", "IN", "."} <= xtags
    assert utags <= UPOS_TAGS and {"NOUN", "VERB", "PUNCT"} <= utags
    assert [s.tokens for s in xpos] == [s.tokens for s in upos]
    assert all(s.pos == s.tags for s in xpos) and all(u.pos == x.tags for u, x in zip(upos, xpos))
    first = xpos[0]
    assert first.tokens == ("From", "the", "AP", "comes", "this", "story", ":")
    assert first.tags == ("IN", "DT", "NNP", "VBZ", "DT", "NN", ":")


def test_ewt_skips_multiword_tokens_and_empty_nodes_on_real_data(data_root):
    path = data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
    word_lines = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            first = line.split("\t", 1)[0]
            if "\t" in line and "-" not in first and "." not in first:
                word_lines += 1
    sentences = read_ewt("dev", root=data_root)
    assert sum(len(s) for s in sentences) == word_lines
    tokens = [t for s in sentences for t in s.tokens]
    assert "n't" in tokens and "don't" not in tokens


def test_parse_conllu_handles_multiword_and_empty_nodes():
    text = (
        "# sent_id = s1\n"
        "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
        "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n"
        "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
        "3.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t3:conj\tCopyOf=3\n"
        "\n"
        "# sent_id = s2\n"
        "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"
    )
    parsed = list(parse_conllu(io.StringIO(text)))
    assert parsed == [("s1", ["do", "n't", "go"], ["AUX", "PART", "VERB"], ["VBP", "RB", "VB"]),
                      ("s2", ["Hi"], ["INTJ"], ["UH"])]
    with pytest.raises(ValueError, match=r"bad\.conllu:2: expected 10"):
        list(parse_conllu(io.StringIO("# x\n1\tonly\tthree\n"), "bad.conllu"))


def test_ewt_reads_gzipped_files(tmp_path, data_root):
    folder = tmp_path / "ud_english_ewt"
    folder.mkdir()
    for split in ("train", "test"):
        os.symlink(data_root / f"ud_english_ewt/en_ewt-ud-{split}.conllu",
                   folder / f"en_ewt-ud-{split}.conllu")
    with open(data_root / "ud_english_ewt/en_ewt-ud-dev.conllu", "rb") as src, \
            gzip.open(folder / "en_ewt-ud-dev.conllu.gz", "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)
    assert read_ewt("dev", root=tmp_path, limit=50) == read_ewt("dev", root=data_root, limit=50)
    assert len(read_ewt("dev", root=tmp_path)) == 2001


def test_readers_validate_arguments(data_root):
    with pytest.raises(ValueError, match="unknown split"):
        read_ewt("valid", root=data_root)
    with pytest.raises(ValueError, match="unknown tagset"):
        read_ewt("dev", "ptb", root=data_root)
    with pytest.raises(ValueError, match="limit"):
        read_ewt("dev", root=data_root, limit=-1)
    with pytest.raises(ValueError, match="dev_fraction"):
        read_conll2000("dev", root=data_root, dev_fraction=1.5)


# --------------------------------------------------------------------------------------------
# CoNLL-2000
# --------------------------------------------------------------------------------------------


def test_conll2000_splits_are_disjoint_complete_and_deterministic(data_root):
    train = read_conll2000("train", root=data_root)
    dev = read_conll2000("dev", root=data_root)
    test = read_conll2000("test", root=data_root)
    assert len(train) + len(dev) == 8936 and len(dev) == 894 and len(test) == 2012
    train_ids, dev_ids = {s.sent_id for s in train}, {s.sent_id for s in dev}
    assert not train_ids & dev_ids
    assert train_ids | dev_ids == {f"conll2000/train.txt#{i}" for i in range(8936)}
    assert all(s.sent_id.startswith("conll2000/test.txt#") for s in test)
    # the file's order is kept within a split
    assert [int(s.sent_id.split("#")[1]) for s in dev] == sorted(int(i.split("#")[1]) for i in dev_ids)
    assert read_conll2000("dev", root=data_root) == dev
    assert dev_indices(8936, 0.1, 0) == dev_indices(8936, 0.1, 0)
    other = read_conll2000("dev", root=data_root, seed=1)
    assert len(other) == len(dev) and {s.sent_id for s in other} != dev_ids


def test_conll2000_tags_are_bio_chunks_with_pos(data_root):
    test = read_conll2000("test", root=data_root)
    first = test[0]
    assert first.tokens[:3] == ("Rockwell", "International", "Corp.")
    assert first.tags[:3] == ("B-NP", "I-NP", "I-NP")
    assert first.pos[:3] == ("NNP", "NNP", "NNP")
    tags = {t for s in test for t in s.tags}
    assert "O" in tags
    prefixes = {t.split("-", 1)[0] for t in tags if t != "O"}
    types = {t.split("-", 1)[1] for t in tags if t != "O"}
    assert prefixes == {"B", "I"} and {"NP", "VP", "PP", "SBAR", "ADVP"} <= types <= CHUNK_TYPES
    # CoNLL-2000 writes brackets as ( and ), where EWT writes -LRB- and -RRB-
    assert {p for s in test for p in s.pos} <= PTB_TAGS | {"(", ")"}


# --------------------------------------------------------------------------------------------
# tasks and the sentence type
# --------------------------------------------------------------------------------------------


def test_load_task_dispatches_and_limits(data_root):
    pos = load_task("pos", "dev", root=data_root, limit=5)
    assert pos == read_ewt("dev", "xpos", root=data_root)[:5]
    upos = load_task("upos", "test", root=data_root, limit=3)
    assert len(upos) == 3 and upos[0].tags[0] in UPOS_TAGS
    chunk = load_task("chunk", "train", root=data_root, limit=7)
    assert chunk == read_conll2000("train", root=data_root)[:7]
    assert load_task("chunk", "test", root=data_root, limit=0) == []
    with pytest.raises(ValueError, match="unknown task 'ner'"):
        load_task("ner", "dev", root=data_root)


def test_tagged_sentence_validates_and_round_trips():
    sentence = TaggedSentence(("a", "dog"), ("DT", "NN"), ("DT", "NN"), "s1")
    assert len(sentence) == 2
    assert TaggedSentence.from_dict(json.loads(json.dumps(sentence.to_dict()))) == sentence
    with pytest.raises(ValueError, match="2 tokens but 1 tags"):
        TaggedSentence(("a", "dog"), ("DT",))
    with pytest.raises(AttributeError):
        sentence.tags = ("X", "Y")  # frozen


# --------------------------------------------------------------------------------------------
# Resumable downloads (a local server that answers Range requests, and file:// URLs)
# --------------------------------------------------------------------------------------------


def _payload(n: int = 300_000) -> bytes:
    return bytes((i * 7919 + i // 256) % 251 for i in range(n))


def _fetch(url, root, payload=None, **kwargs):
    import hashlib

    sha = hashlib.sha256(payload).hexdigest() if payload is not None else None
    return downloads._fetch_url(url, root / "dataset" / "file.bin", label="file.bin",
                           downloads=root / downloads.DOWNLOADS_DIR, sha256=sha, **kwargs)


def test_an_interrupted_download_resumes_with_a_range_request(tmp_path):
    from range_server import RangeServer

    payload = _payload()
    with RangeServer({"/file.bin": payload}) as server:
        server.cut_next = 100_000
        with pytest.raises(DownloadError, match="resume from byte 100,000"):
            _fetch(server.url("/file.bin"), tmp_path, payload)
        assert not (tmp_path / "dataset").exists()  # nothing in the dataset's place
        part = tmp_path / ".downloads" / "file.bin.part"
        assert part.read_bytes() == payload[:100_000]
        manifest = json.loads((tmp_path / ".downloads" / "file.bin.manifest.json").read_text())
        assert manifest["url"] == server.url("/file.bin") and manifest["size"] == len(payload)
        seen = []
        _fetch(server.url("/file.bin"), tmp_path, payload, progress=lambda *a: seen.append(a))
        assert server.requests[-1] == ("/file.bin", "bytes=100000-")
    assert (tmp_path / "dataset" / "file.bin").read_bytes() == payload
    assert seen[0][1:3] == (100_000, len(payload)) and seen[-1][1:3] == (len(payload), len(payload))
    assert _files_under(tmp_path / ".downloads") == []


def test_a_changed_manifest_or_a_server_without_ranges_starts_over(tmp_path):
    from range_server import RangeServer

    payload = _payload()
    with RangeServer({"/file.bin": payload}) as server:
        server.cut_next = 50_000
        with pytest.raises(DownloadError):
            _fetch(server.url("/file.bin"), tmp_path, payload)
        manifest = tmp_path / ".downloads" / "file.bin.manifest.json"
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "sha256": "0" * 64}))
        _fetch(server.url("/file.bin"), tmp_path, payload)
        assert server.requests[-1] == ("/file.bin", None)  # no Range: the manifest did not match
    assert (tmp_path / "dataset" / "file.bin").read_bytes() == payload
    (tmp_path / "dataset" / "file.bin").unlink()
    with RangeServer({"/file.bin": payload}, ranges=False) as server:  # answers 200 to a Range request
        server.cut_next = 70_000
        with pytest.raises(DownloadError):
            _fetch(server.url("/file.bin"), tmp_path, payload)
        _fetch(server.url("/file.bin"), tmp_path, payload)
        assert server.requests[-1] == ("/file.bin", "bytes=70000-")  # asked, got the whole file
    assert (tmp_path / "dataset" / "file.bin").read_bytes() == payload


def test_file_urls_download_and_a_leftover_part_starts_over(tmp_path):
    payload = _payload(20_000)
    source = tmp_path / "served" / "file.bin"
    source.parent.mkdir()
    source.write_bytes(payload)
    url = source.as_uri()
    downloads = tmp_path / "root" / ".downloads"
    downloads.mkdir(parents=True)
    (downloads / "file.bin.part").write_bytes(b"stale bytes from an earlier attempt")
    (downloads / "file.bin.manifest.json").write_text(json.dumps({"url": url, "size": None, "sha256": None}))
    _fetch(url, tmp_path / "root")
    assert (tmp_path / "root" / "dataset" / "file.bin").read_bytes() == payload
    assert _files_under(downloads) == []


def test_a_checksum_mismatch_discards_the_part(tmp_path):
    from range_server import RangeServer

    with RangeServer({"/file.bin": b"not what was expected"}) as server:
        with pytest.raises(DownloadError, match="checksum mismatch"):
            _fetch(server.url("/file.bin"), tmp_path, _payload(100))
    assert _files_under(tmp_path) == []


def test_the_download_cli_resumes_a_dataset(tmp_path, data_root, monkeypatch, capsys):
    import dataclasses

    from range_server import RangeServer

    served = {f"/en_ewt-ud-{s}.conllu": (data_root / f"ud_english_ewt/en_ewt-ud-{s}.conllu").read_bytes()
              for s in ("dev", "test")}
    dev_only = dataclasses.replace(data.DATASETS["ud_english_ewt"], files=data.DATASETS["ud_english_ewt"].files[1:])
    with RangeServer(served) as server:
        files = tuple(dataclasses.replace(f, url=server.url("/" + f.path.split("/")[-1])) for f in dev_only.files)
        monkeypatch.setitem(data.DATASETS, "ud_english_ewt", dataclasses.replace(dev_only, files=files))
        server.cut_next = 600_000
        assert data_cli.main(["download", "ud_english_ewt", "--data-root", str(tmp_path)]) == 1
        assert "resume from byte 600,000" in capsys.readouterr().err
        assert not (tmp_path / "ud_english_ewt").exists()
        assert data_cli.main(["download", "ud_english_ewt", "--data-root", str(tmp_path)]) == 0
        assert ("/en_ewt-ud-dev.conllu", "bytes=600000-") in server.requests
    for name, payload in served.items():
        assert (tmp_path / "ud_english_ewt" / name.lstrip("/")).read_bytes() == payload
    assert data.dataset_status("ud_english_ewt", tmp_path, verify=True).present
