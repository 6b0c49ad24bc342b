"""The other families' published models by name (ELMoForManyLangs per language, the NLPL ids, Google's
TF Hub modules): the registry's facts, the download (from a local server, as the real ones are
never reached here), the checks before an archive is put in place, and the name in every place
that takes a model.

The archives served are written by the tests: an ELMoForManyLangs model with random weights
(test_elmoformanylangs's writer) zipped as the NLPL repository serves them, and the TF Hub module
fixture (tests/fixtures/tfhub_elmo) as a .tar.gz.
"""

import dataclasses
import json
import re
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from range_server import RangeServer
from test_elmoformanylangs import SENTENCES, _efml_folder

from elmo_model import ElmoEmbedder, load_bilm
from elmo_model.models.names import model_card_rows, model_language
from elmo_model.models.published_archives import NLPL_NAMES, PUBLISHED_ARCHIVES, archive_named
from probing.data import cli as data_cli
from probing.data import downloads
from probing.data.downloads import DownloadError

MODULE = Path(__file__).parent / "fixtures" / "tfhub_elmo"


def test_the_registry_names_each_efml_language_its_nlpl_id_and_googles_modules():
    efml = [a for a in PUBLISHED_ARCHIVES.values() if a.family == "ELMoForManyLangs"]
    assert len(efml) == 44 and len({a.language for a in efml}) == 44
    for entry in efml:
        assert entry.url == f"http://vectors.nlpl.eu/repository/11/{entry.nlpl_id}.zip", entry
        assert NLPL_NAMES[f"nlpl-{entry.nlpl_id}"] == entry.name and archive_named(f"nlpl-{entry.nlpl_id}") is entry
        assert re.fullmatch(r"efml-[a-z]+(-[a-z]+)*", entry.name), entry.name
    assert sorted(a.nlpl_id for a in efml) == list(range(136, 180))
    assert archive_named("efml-english").nlpl_id == 144 and archive_named("efml-norwegian-bokmal").nlpl_id == 165
    hub = [a for a in PUBLISHED_ARCHIVES.values() if a.family == "TF Hub"]
    assert [a.name for a in hub] == ["tfhub-elmo-2", "tfhub-elmo-3"]
    assert all(a.url.startswith("https://tfhub.dev/google/elmo/") and a.suffix == ".tar.gz" for a in hub)
    for entry in PUBLISHED_ARCHIVES.values():  # size, licence, language and source on every card
        card = entry.card()
        assert all(card[k] for k in ("language", "licence", "source", "archive", "training corpus")), entry.name
        assert ("estimated" in entry.size_note or "not published" in entry.size_note) and entry.largest_bytes > 0
    nlpl = {a.nlpl_id: a.language for a in PUBLISHED_ARCHIVES.values() if a.family == "NLPL"}
    assert nlpl == {209: "English", 201: "German", 203: "Latin", 202: "Swedish"}
    assert archive_named("nlpl-209").url == "http://vectors.nlpl.eu/repository/20/209.zip"


def test_a_name_not_downloaded_is_one_line_with_the_command_and_its_card_has_its_language(own_models_home):
    with pytest.raises(ValueError) as caught:
        load_bilm("efml-french")
    message = str(caught.value)
    assert "\n" not in message and "not downloaded" in message
    assert "download efml-french" in message and str(own_models_home / "efml-french.zip") in message
    assert model_language("efml-french") == "French" and model_language("nlpl-150") == "French"
    rows = model_card_rows("efml-french")
    assert rows["language"] == "French" and rows["NLPL repository id"] == "150"
    assert "download efml-french" in rows["on disk"]


def _efml_zip(tmp_path: Path) -> tuple[Path, bytes]:
    folder = _efml_folder(tmp_path / "efml", 20)
    archive = tmp_path / "150.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.iterdir():
            zipped.write(path, "fr.model/" + path.name)
    return folder, archive.read_bytes()


def _serve(monkeypatch, server: RangeServer, name: str, path: str) -> None:
    monkeypatch.setitem(PUBLISHED_ARCHIVES, name, dataclasses.replace(PUBLISHED_ARCHIVES[name], url=server.url(path)))


def test_an_efml_model_downloads_by_name_and_loads_by_its_name_and_nlpl_id(tmp_path, own_models_home, monkeypatch,
                                                                            capsys):
    folder, payload = _efml_zip(tmp_path)
    with RangeServer({"/repository/11/150.zip": payload}) as server:
        _serve(monkeypatch, server, "efml-french", "/repository/11/150.zip")
        assert data_cli.main(["download", "nlpl-150", "--quiet"]) == 0
    assert (own_models_home / "efml-french.zip").read_bytes() == payload
    record = json.loads((own_models_home / "efml-french.download.json").read_text(encoding="utf-8"))
    assert record["bytes"] == len(payload) and record["url"].endswith("/150.zip") and len(record["sha256"]) == 64
    assert record["published"]["language"] == "French"
    reference = ElmoEmbedder(str(folder)).embed_batch(SENTENCES)
    for name in ("efml-french", "nlpl-150"):
        for a, b in zip(reference, ElmoEmbedder(name).embed_batch(SENTENCES)):
            np.testing.assert_array_equal(a, b)
    assert "efml-french" in model_card_rows("efml-french")["on disk"]
    assert data_cli.main(["status"]) == 0
    assert "efml-french  ELMoForManyLangs, French" in capsys.readouterr().out


@pytest.mark.parametrize("served", ["a zip of something else", "a cut zip", "not a zip"])
def test_an_archive_that_holds_no_model_is_refused_and_nothing_is_installed(served, tmp_path, own_models_home,
                                                                            monkeypatch):
    _, payload = _efml_zip(tmp_path)
    if served == "a zip of something else":
        other = tmp_path / "other.zip"
        with zipfile.ZipFile(other, "w") as zipped:
            zipped.writestr("README.txt", "vectors")
        payload = other.read_bytes()
    elif served == "a cut zip":
        payload = payload[: len(payload) // 2]
    else:
        payload = b"<html>moved</html>"
    with RangeServer({"/150.zip": payload}) as server:
        _serve(monkeypatch, server, "efml-french", "/150.zip")
        with pytest.raises(DownloadError, match="nothing was installed") as caught:
            downloads.download("efml-french")
    assert "\n" not in str(caught.value)
    assert not (own_models_home / "efml-french.zip").exists()
    assert not (own_models_home / "efml-french.download.json").exists()


def test_a_server_announcing_more_than_the_archive_can_hold_is_refused_before_writing(tmp_path, own_models_home,
                                                                                        monkeypatch):
    _, payload = _efml_zip(tmp_path)
    with RangeServer({"/150.zip": payload}, announce={"/150.zip": 10 * 2**40}) as server:
        _serve(monkeypatch, server, "efml-french", "/150.zip")
        with pytest.raises(DownloadError, match="announces 10,995,116,277,760 bytes"):
            downloads.download("efml-french")
    assert not (own_models_home / "efml-french.zip").exists()


def test_a_cut_archive_download_resumes(tmp_path, own_models_home, monkeypatch):
    _, payload = _efml_zip(tmp_path)
    with RangeServer({"/150.zip": payload}) as server:
        _serve(monkeypatch, server, "efml-french", "/150.zip")
        server.cut_next = len(payload) // 3
        with pytest.raises(DownloadError, match="cut short"):
            downloads.download("efml-french")
        assert not (own_models_home / "efml-french.zip").exists()
        downloads.download("efml-french")
        assert server.requests[-1][1] == f"bytes={len(payload) // 3}-"  # the second request resumed
    assert (own_models_home / "efml-french.zip").read_bytes() == payload


def test_googles_tf_hub_module_downloads_by_name_and_is_converted_on_first_load(tmp_path, own_models_home,
                                                                               monkeypatch):
    archive = tmp_path / "3.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(MODULE, arcname=".")
    with RangeServer({"/google/elmo/3": archive.read_bytes()}) as server:
        _serve(monkeypatch, server, "tfhub-elmo-3", "/google/elmo/3")
        downloads.download("tfhub-elmo-3")
    assert (own_models_home / "tfhub-elmo-3.tar.gz").is_file() and model_language("tfhub-elmo-3") == "English"
    model = load_bilm("tfhub-elmo-3")
    assert model.config.lstm.n_layers == 2 and model.name


def test_from_is_refused_for_an_archive_in_one_line(own_models_home, capsys):
    with pytest.raises(DownloadError, match="--from is for AllenNLP's models"):
        downloads.download("efml-french", source="/tmp")


def test_an_nlpl_model_downloads_by_its_id_and_loads_as_the_folder_it_holds(data_root, tmp_path, own_models_home,
                                                                             monkeypatch):
    fixture = data_root / "fixtures" / "bilm_tf"
    archive = tmp_path / "209.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # the NLPL repository's layout: one folder, model.hdf5
        zipped.write(fixture / "options.json", "209/options.json")
        zipped.write(fixture / "lm_weights.hdf5", "209/model.hdf5")
    with RangeServer({"/repository/20/209.zip": archive.read_bytes()}) as server:
        _serve(monkeypatch, server, "nlpl-209", "/repository/20/209.zip")
        downloads.download("nlpl-209")
    sentence = [["The", "bank", "was", "closed", "."]]
    ours = ElmoEmbedder("nlpl-209").embed_batch(sentence)[0]
    np.testing.assert_array_equal(ours, ElmoEmbedder(str(fixture)).embed_batch(sentence)[0])
    assert model_language("nlpl-209") == "English"
    with RangeServer({"/repository/20/209.zip": _efml_zip(tmp_path)[1]}) as server:  # another family's zip
        _serve(monkeypatch, server, "nlpl-209", "/repository/20/209.zip")
        with pytest.raises(DownloadError, match="holds no NLPL ELMo model"):
            downloads.download("nlpl-209", force=True)
