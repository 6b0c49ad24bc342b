"""The published ELMo models by name: the registry's facts, the download (resume, the weight check,
one download at a time), the names in every place that takes a model.

Nothing here reaches AllenNLP's server: a local server that answers Range requests
(``range_server.py``) serves files the tests make in the published layout
(``/allennlp/models/elmo/<name>/elmo_<name>_{options.json,weights.hdf5}``) with the shapes of
bilm-tf's small test model (``fixtures/bilm_tf`` of the data root), and the registry entry is
pointed at it, its dimensions those of that model. Each test writes into its own temporary data
root.
"""

import dataclasses
import json
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_model import Elmo, ElmoEmbedder, batch_to_ids, load_bilm
from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.models import published
from elmo_model.models.published import PUBLISHED_MODELS
from probing import data
from probing.data import cli as data_cli
from probing.data import downloads
from probing.data.downloads import DownloadError

NAME = "elmo-small"
SMALL = PUBLISHED_MODELS[NAME]
PREFIX = f"/allennlp/models/elmo/{SMALL.allennlp_name}/elmo_{SMALL.allennlp_name}_"
OPTIONS_PATH, WEIGHTS_PATH = PREFIX + "options.json", PREFIX + "weights.hdf5"
WEIGHTS_NAME = WEIGHTS_PATH.rsplit("/", 1)[1]
SENTENCE = ["The", "bank", "was", "closed", "."]


@pytest.fixture
def fixture_files(data_root) -> tuple[bytes, bytes]:
    """(options.json, weights.hdf5) of bilm-tf's test model, as bytes."""
    folder = data_root / "fixtures" / "bilm_tf"
    return (folder / "options.json").read_bytes(), (folder / "lm_weights.hdf5").read_bytes()


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """A fresh data root, the one load_bilm reads names from ($ELMO_WORKBENCH_DATA)."""
    folder = tmp_path / "root"
    monkeypatch.setenv(data.ENV_VAR, str(folder))
    return folder


def point_registry_at(server, monkeypatch) -> None:
    """elmo-small's entry, its files on ``server`` and its dimensions those of the fixture model."""
    small = dataclasses.replace(SMALL, base_url=server.url("/allennlp/models/elmo"), lstm_dim=64, projection_dim=16,
                                n_highway=2, char_filters=((1, 4), (2, 8), (3, 16), (4, 32), (5, 64)),
                                char_embedding_dim=4)
    monkeypatch.setitem(PUBLISHED_MODELS, NAME, small)


def reshaped(weights: bytes, tmp_path: Path, dataset: str, shape: tuple[int, ...]) -> bytes:
    """The fixture's weight file with ``dataset`` replaced by zeros of ``shape``."""
    path = tmp_path / "reshaped.hdf5"
    path.write_bytes(weights)
    with h5py.File(path, "r+") as f:
        del f[dataset]
        f.create_dataset(dataset, data=np.zeros(shape, dtype=np.float32))
    return path.read_bytes()


def error_line(stderr: str) -> str:
    """The CLI's one error line (the other lines on stderr are the log's)."""
    assert "Traceback" not in stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("error:")]
    return line


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------


def test_the_registry_names_the_published_models_and_their_urls():
    assert list(PUBLISHED_MODELS) == ["elmo-small", "elmo-medium", "elmo-original", "elmo-original-5.5b", "elmo-pubmed"]
    expected = {"elmo-small": "2x1024_128_2048cnn_1xhighway", "elmo-medium": "2x2048_256_2048cnn_1xhighway",
                "elmo-original": "2x4096_512_2048cnn_2xhighway",
                "elmo-original-5.5b": "2x4096_512_2048cnn_2xhighway_5.5B"}
    pubmed = PUBLISHED_MODELS["elmo-pubmed"]  # a contributed model: a folder and file names of its own
    contributed = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/contributed/pubmed/"
    assert (pubmed.options_url, pubmed.weights_url) == (
        contributed + "elmo_2x4096_512_2048cnn_2xhighway_options.json",
        contributed + "elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5")
    assert pubmed.architecture() == PUBLISHED_MODELS["elmo-original"].architecture() and "PubMed" in pubmed.corpus
    assert published.published_name(pubmed.weights_url) == "elmo-pubmed"
    for name, model in PUBLISHED_MODELS.items():
        if name not in expected:
            continue
        allennlp = expected[name]
        assert model.allennlp_name == allennlp
        base = f"https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/{allennlp}/elmo_{allennlp}_"
        assert (model.options_url, model.weights_url) == (base + "options.json", base + "weights.hdf5")
        # the name says the shape: <layers>x<cells>_<projection>_<filters>cnn_<highways>xhighway
        layers, cells = allennlp.split("_")[0].split("x")
        assert (model.n_layers, model.lstm_dim) == (int(layers), int(cells))
        assert model.projection_dim == int(allennlp.split("_")[1])
        assert model.n_filters == int(allennlp.split("_")[2].removesuffix("cnn"))
        assert model.n_highway == int(allennlp.split("_")[3][0])
        # the dimensions give AllenNLP's published parameter count, and float32 weights their size
        assert abs(model.parameters() / 1e6 - model.parameters_millions) < 0.05
        assert model.weights_bytes == 4 * model.parameters()
        card = model.card()
        assert card["licence"].startswith("Apache 2.0") and "Peters" in card["citation"] and "2018" in card["citation"]
    assert "1B Word Benchmark" in PUBLISHED_MODELS["elmo-original"].corpus
    assert "5.5B" in PUBLISHED_MODELS["elmo-original-5.5b"].corpus and "Wikipedia" in PUBLISHED_MODELS[
        "elmo-original-5.5b"].corpus


def test_names_are_read_from_where_the_download_writes(monkeypatch, tmp_path):
    """Without flags a name lives in the models home: $ELMO_WORKBENCH_MODELS, else the user cache's
    models/ (not the data root, which is often another, read-only folder)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.delenv(published.MODELS_ENV_VAR)
    home = (tmp_path / "xdg").resolve() / "elmo-workbench" / "models"
    assert published.published_model_dir(NAME) == data.model_home() / NAME == home / NAME
    monkeypatch.setenv(published.MODELS_ENV_VAR, str(tmp_path / "env"))
    assert published.published_model_dir(NAME) == data.model_home() / NAME == (tmp_path / "env").resolve() / NAME
    assert data.model_home(models_dir=tmp_path / "flag") == (tmp_path / "flag").resolve()
    assert data.model_home(data_root=tmp_path / "root") == (tmp_path / "root").resolve() / "models"


def test_a_name_not_downloaded_gives_one_line_with_the_download_command(root, tmp_path, capsys):
    command = "python -m probing.data download elmo-original"
    for load in (load_bilm, ElmoEmbedder):
        with pytest.raises(ValueError) as info:
            load("elmo-original")
        message = str(info.value)
        assert "\n" not in message and message.endswith(command) and "not downloaded" in message
        assert str(published.models_home() / "elmo-original") in message
    text = tmp_path / "in.txt"
    text.write_text("The bank was closed .\n")
    assert embedder_main([str(text), str(tmp_path / "out.hdf5"), "--model", "elmo-medium"]) == 2
    line = error_line(capsys.readouterr().err)
    assert line.endswith("python -m probing.data download elmo-medium")
    assert not (tmp_path / "out.hdf5").exists()


def test_the_cli_lists_the_model_names(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        data_cli.main(["download", "--help"])
    assert info.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for name in PUBLISHED_MODELS:
        assert name in help_text
    assert data_cli.main(["status", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name, model in PUBLISHED_MODELS.items():
        [row] = [line for line in out.splitlines() if line.startswith(name + " ")]
        assert "missing" in row and model.size_text() in row and model.allennlp_name in row
    assert "python -m probing.data download elmo-small elmo-medium elmo-original elmo-original-5.5b elmo-pubmed\n" in out
    with pytest.raises(SystemExit) as info:
        data_cli.main(["download", "elmo-huge", "--data-root", str(tmp_path)])
    assert info.value.code == 2
    assert "elmo-original-5.5b" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# the download
# --------------------------------------------------------------------------------------------


def test_a_downloaded_model_loads_by_name(root, fixture_files, data_root, monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME, "--data-root", str(root)]) == 0
        assert data_cli.main(["download", NAME, "--data-root", str(root)]) == 0  # present: not fetched again
        assert [path for path, _ in server.requests] == [OPTIONS_PATH, WEIGHTS_PATH]
    folder = root / "models" / NAME
    assert (folder / "options.json").read_bytes() == options and (folder / "weights.hdf5").read_bytes() == weights
    card = json.loads((folder / "model_card.json").read_text())
    assert card["weights_url"].endswith(WEIGHTS_PATH) and card["weights_bytes"] == len(weights)
    assert not list((root / "models" / ".downloads").iterdir())  # nothing left half-way
    model = load_bilm(NAME)
    assert model.name == NAME and model.checksum == card["weights_sha256"]
    reference = load_bilm(data_root / "fixtures" / "bilm_tf")
    np.testing.assert_array_equal(ElmoEmbedder(model).embed_sentence(SENTENCE),
                                  ElmoEmbedder(reference).embed_sentence(SENTENCE))
    assert NAME in published.downloaded_models()
    elmo = Elmo(None, None, 1, dropout=0.0, module=load_bilm(NAME))  # AllenNLP's Elmo over the name
    assert elmo(batch_to_ids([SENTENCE]))["elmo_representations"][0].shape == (1, len(SENTENCE), 32)


def test_the_data_root_flag_is_where_a_name_is_read_from(root, fixture_files, tmp_path, monkeypatch, capsys):
    """``--data-root`` (and ``load_bilm(data_root=)``) is where the probing commands read a
    published name from, as it is where ``probing.data download --data-root`` wrote it. Run against
    commands that passed no data root to load_bilm: the suite's line named $ELMO_WORKBENCH_DATA's
    folder, not the flag's, and the load from the flag's root failed."""
    from range_server import RangeServer

    from probing.senses.wsd import main as wsd_main
    from probing.tagging.suite import main as suite_main

    options, weights = fixture_files
    elsewhere = tmp_path / "elsewhere"
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME, "--data-root", str(elsewhere)]) == 0
    capsys.readouterr()
    with pytest.raises(ValueError, match="not downloaded"):
        load_bilm(NAME)  # $ELMO_WORKBENCH_DATA (root) does not have it
    assert load_bilm(NAME, data_root=elsewhere).checksum == load_bilm(NAME, data_root=str(elsewhere)).checksum
    empty = tmp_path / "empty"
    empty.mkdir()
    for main in (suite_main, wsd_main):
        assert main(["--model", NAME, "--data-root", str(empty), "--cache-dir", str(tmp_path / "cache")]) == 2
        line = error_line(capsys.readouterr().err)
        assert str(empty.resolve() / "models" / NAME) in line and str(published.models_home() / NAME) in line
        assert line.endswith(f"python -m probing.data download {NAME}")  # no second copy in the data root


def test_a_cut_download_resumes_and_nothing_is_in_place_before(root, fixture_files, monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        server.cut_path, server.cut_next = WEIGHTS_PATH, 100_000
        assert data_cli.main(["download", NAME, "--data-root", str(root)]) == 1
        assert "resume from byte 100,000" in error_line(capsys.readouterr().err)
        assert not (root / "models" / NAME).exists()
        with pytest.raises(ValueError, match="not downloaded"):
            load_bilm(NAME)
        seen = []
        downloads.download(NAME, root, progress=lambda *args: seen.append(args))
        assert server.requests[-1] == (WEIGHTS_PATH, "bytes=100000-")
    assert (root / "models" / NAME / "weights.hdf5").read_bytes() == weights
    weight_bars = [args for args in seen if args[0] == f"{NAME} weights.hdf5"]
    assert weight_bars[0][1:] == (100_000, len(weights), "B")
    assert weight_bars[-1][1:] == (len(weights), len(weights), "B")
    checks = [args for args in seen if "checking" in args[0]]
    assert checks[-1][1] == checks[-1][2] > 10  # every dataset of the layout was read
    load_bilm(NAME)


@pytest.mark.parametrize("damage", ["truncated", "wrong shape"])
def test_a_truncated_or_wrong_shaped_weight_file_is_refused(damage, root, fixture_files, tmp_path, monkeypatch,
                                                            capsys):
    """The server sends the whole (damaged) file: the HTTP transfer is complete, the check refuses it
    with one line naming the file and what is wrong, and nothing is moved into place. (Run against a
    copy of probing/data/downloads.py whose check returned after reading the options: both cases fail.)"""
    from range_server import RangeServer

    options, weights = fixture_files
    last = "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"  # the last dataset of the layout: every one is checked
    served = weights[: len(weights) * 2 // 3] if damage == "truncated" else reshaped(weights, tmp_path, last, (64, 8))
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: served}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME, "--data-root", str(root)]) == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {NAME}: {WEIGHTS_NAME}: ") and line.endswith("nothing was installed")
    if damage == "truncated":
        assert "not a complete hdf5 file" in line and "truncated" in line
    else:
        assert f"dataset '{last}' has shape (64, 8), options.json implies (64, 16)" in line
    assert not (root / "models" / NAME).exists()
    staged = root / "models" / ".downloads"
    assert [p for p in staged.rglob("*") if p.is_file()] == []  # the bad file is not kept to resume
    with pytest.raises(ValueError, match="not downloaded"):
        load_bilm(NAME)


def test_a_weight_file_with_an_unreadable_dataset_is_refused(root, fixture_files, tmp_path, monkeypatch):
    """The file opens and every shape is right, but one dataset's compressed bytes are damaged:
    reading every dataset to its end is what finds it. (Run against a copy of probing/data/downloads.py
    that checked shapes without reading the values: it fails.)"""
    from range_server import RangeServer

    options, weights = fixture_files
    damaged_name = "CNN_high_1/W_carry"
    path = tmp_path / "damaged.hdf5"
    path.write_bytes(weights)
    with h5py.File(path, "r+") as f:
        values = f[damaged_name][...]
        del f[damaged_name]
        f.create_dataset(damaged_name, data=values, chunks=values.shape, compression="gzip")
        offset = f[damaged_name].id.get_chunk_info(0).byte_offset
    damaged = bytearray(path.read_bytes())
    damaged[offset:offset + 64] = b"\xff" * 64
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: bytes(damaged)}) as server:
        point_registry_at(server, monkeypatch)
        with pytest.raises(DownloadError) as info:
            downloads.download(NAME, root)
    message = str(info.value)
    assert message.startswith(f"{WEIGHTS_NAME}: dataset '{damaged_name}' cannot be read") and "\n" not in message
    assert not (root / "models" / NAME).exists()


def test_options_of_another_architecture_are_refused(root, fixture_files, monkeypatch):
    from range_server import RangeServer

    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        monkeypatch.setitem(PUBLISHED_MODELS, NAME, dataclasses.replace(PUBLISHED_MODELS[NAME], lstm_dim=1024))
        with pytest.raises(DownloadError, match=r"options\.json: lstm\.dim is 64, but elmo-small has 1024"):
            downloads.download(NAME, root)
    assert not (root / "models" / NAME).exists()


@pytest.mark.parametrize("address", ["localhost:8000/elmo", "mirror.example.org/elmo", "https:///elmo"])
def test_a_mirror_address_that_is_not_a_url_is_one_line_naming_where_it_was_set(address, root, monkeypatch, capsys):
    """urllib reads "localhost:8000/elmo" as the scheme "localhost" and fails as a network error;
    the address is refused as an address, naming the variable or the flag, before any request."""
    monkeypatch.setenv(published.MODELS_URL_ENV_VAR, address)
    assert data_cli.main(["download", NAME]) == 1
    line = error_line(capsys.readouterr().err)
    assert f"{published.MODELS_URL_ENV_VAR} {address}: not a URL" in line and "network" not in line
    assert "https://" in published.PUBLISHED_MODELS[NAME].card()["source"]  # the sidebar's card still opens
    monkeypatch.delenv(published.MODELS_URL_ENV_VAR)
    if "://" in address:
        assert data_cli.main(["download", NAME, "--from", address]) == 1
        assert f"--from {address}: not a URL" in error_line(capsys.readouterr().err)
    else:  # a folder to --from, unless it looks like a host
        assert data_cli.main(["download", NAME, "--from", address]) == 1
        line = error_line(capsys.readouterr().err)
        assert "no such folder" in line and f"a URL needs its scheme: http://{address}" in line
    assert not (root / "models" / NAME).exists()


def test_a_server_announcing_more_than_the_file_can_hold_is_refused_before_writing(root, fixture_files,
                                                                                   monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}, announce={WEIGHTS_PATH: 10 ** 13}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME]) == 1
    line = error_line(capsys.readouterr().err)
    assert "announces 10,000,000,000,000 bytes" in line and "free some space" not in line
    assert f"at most {2 * SMALL.weights_bytes:,}" in line
    assert not list((root / "models").rglob("*.part")) and not (root / "models" / NAME).exists()


def test_a_second_concurrent_download_is_refused(root, fixture_files, monkeypatch):
    """The first download is held inside its weight transfer; a second one of the same model into
    the same root is refused at once, without touching the first one's files; the first then
    finishes and the model loads. (Run against a copy of probing/data/downloads.py without the download's
    lock: it fails.)"""
    from range_server import RangeServer

    options, weights = fixture_files
    inside, release = threading.Event(), threading.Event()
    outcome = {}

    def hold(label, done, total, unit):
        if label.endswith("weights.hdf5") and done:
            inside.set()
            release.wait(30)

    def first():
        try:
            outcome["root"] = downloads.download(NAME, root, progress=hold)
        except Exception as err:  # noqa: BLE001 - handed to the test's thread below
            outcome["error"] = err

    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        worker = threading.Thread(target=first)
        worker.start()
        try:
            assert inside.wait(30), "the first download never reached its weight file"
            with pytest.raises(DownloadError) as info:
                downloads.download(NAME, root)
            message = str(info.value)
            assert "another download of it" in message and "running" in message and "\n" not in message
            assert f"pid {__import__('os').getpid()}" in message
        finally:
            release.set()
            worker.join(60)
        assert [path for path, _ in server.requests].count(WEIGHTS_PATH) == 1  # the refused one fetched nothing
    assert "error" not in outcome, outcome.get("error")
    assert (root / "models" / NAME / "weights.hdf5").read_bytes() == weights
    load_bilm(NAME)


# --------------------------------------------------------------------------------------------
# the app's sidebar
# --------------------------------------------------------------------------------------------


def test_the_sidebar_offers_the_absent_models_fetches_one_and_shows_its_card(root, fixture_files, data_root,
                                                                            monkeypatch):
    """An empty data root: the sidebar offers the four published models with their sizes; pressing
    elmo-small's button fetches it (from the local server) behind a progress bar, the Model list
    then holds it, and choosing it shows its card and loads it on the Playground. A visitor from
    another machine is shown the commands instead of the buttons."""
    from range_server import RangeServer
    from streamlit.testing.v1 import AppTest

    from app_pages.model_choice import MODEL_ENV_VAR

    app = Path(__file__).resolve().parents[1] / "app.py"
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        at = AppTest.from_file(str(app), default_timeout=120).run()
        assert not at.exception
        offered = sorted(b.label for b in at.sidebar.button if b.label.startswith("Fetch elmo-"))
        assert offered == sorted(f"Fetch {m.name} ({m.size_text()})" for m in PUBLISHED_MODELS.values())
        assert "Fetch elmo-original (about 374 MB)" in offered
        assert not set(PUBLISHED_MODELS) & set(at.selectbox(key="model_choice").options)
        with monkeypatch.context() as remote:  # a visitor from another machine gets the commands, not buttons
            remote.setenv("ELMO_WORKBENCH_RESTRICT_MODEL_DIRS", "1")
            seen_remotely = AppTest.from_file(str(app), default_timeout=120).run()
        assert not seen_remotely.exception and not [b for b in seen_remotely.button if "elmo-" in b.label]
        listed = " ".join(m.value for m in seen_remotely.sidebar.markdown).replace("\\", "")
        assert "python -m probing.data download elmo-original`" in listed
        [fetch] = [b for b in at.sidebar.button if b.label.startswith(f"Fetch {NAME} ")]
        fetch.click().run()
        assert not at.exception and not at.error
        assert any(f"{NAME} is in" in s.value.replace("\\", "") and "pick it in the Model list" in s.value
                   for s in at.success)
        assert (published.models_home() / NAME / "weights.hdf5").read_bytes() == weights  # the models home
        assert NAME in at.selectbox(key="model_choice").options
        assert not [b for b in at.sidebar.button if b.label.startswith(f"Fetch {NAME} ")]  # no longer offered
        at.selectbox(key="model_choice").select(NAME).run()
    assert not at.exception and not at.error
    card = " ".join(m.value for m in at.sidebar.markdown)
    for text in ("Apache 2.0", "Peters", "1B Word Benchmark", str(published.models_home() / NAME)):
        assert text in card.replace("\\", "")
    assert at.text_area(key="pg_text").value  # the Playground runs on the fetched model


# --------------------------------------------------------------------------------------------
# one home for models
# --------------------------------------------------------------------------------------------


def test_a_name_downloaded_once_is_used_by_name_everywhere(root, fixture_files, data_root, tmp_path, monkeypatch,
                                                           capsys):
    """``elmo-data download NAME`` with no flags puts the model in the models home, and every entry
    point finds it there by name: ElmoEmbedder, elmo-embed, and elmo-probe-suite with a
    --data-root that is another folder (the datasets' root), with no second copy anywhere."""
    from range_server import RangeServer

    from probing.tagging.suite import main as suite_main

    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME]) == 0
    home = published.models_home()
    assert (home / NAME / "weights.hdf5").read_bytes() == weights
    assert not (root / "models").exists()  # the data root is left alone
    assert NAME in published.downloaded_models()  # the app's Model list reads this
    reference = ElmoEmbedder(data_root / "fixtures" / "bilm_tf").embed_sentence(SENTENCE)
    np.testing.assert_array_equal(ElmoEmbedder(NAME).embed_sentence(SENTENCE), reference)
    # AllenNLP's call with the published URLs is the same model, from the models home
    by_urls = ElmoEmbedder(SMALL.options_url, SMALL.weights_url)
    assert by_urls.model.name == NAME and by_urls.model.precision == "fp32"
    text = tmp_path / "in.txt"
    text.write_text(" ".join(SENTENCE) + "\n")
    assert embedder_main([str(text), str(tmp_path / "out.hdf5"), "--model", NAME]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        np.testing.assert_array_equal(f["0"][...], reference)
    capsys.readouterr()
    assert suite_main(["--model", NAME, "--data-root", str(data_root), "--cache-dir", str(tmp_path / "cache"),
                       "--tasks", "pos", "--limit", "16", "--no-random-bilm"]) == 0
    assert f"biLM {NAME}" in capsys.readouterr().out


def test_the_models_dir_flag_and_cache_dir_keyword(root, fixture_files, tmp_path, monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    mine = tmp_path / "my_models"
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME, "--models-dir", str(mine)]) == 0
    assert (mine / NAME / "weights.hdf5").is_file() and not (published.models_home() / NAME).exists()
    with pytest.raises(ValueError) as info:
        ElmoEmbedder(NAME)
    assert str(info.value).endswith(f"download {NAME}")
    assert ElmoEmbedder(NAME, cache_dir=mine).model.name == NAME
    assert Elmo(NAME, 1, cache_dir=mine).bilm.name == NAME
    text = tmp_path / "in.txt"
    text.write_text("The bank .\n")
    assert embedder_main([str(text), str(tmp_path / "out.hdf5"), "--model", NAME, "--models-dir", str(mine)]) == 0
    assert data_cli.main(["status", "--models-dir", str(mine)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(NAME + " ")]
    assert "present" in row and str(mine.resolve() / NAME) in row


# --------------------------------------------------------------------------------------------
# mirrors, local copies, checks
# --------------------------------------------------------------------------------------------


def changed_weights(weights: bytes, tmp_path: Path) -> bytes:
    """The fixture's weight file with one dataset's values doubled: same shapes, other bytes."""
    path = tmp_path / "changed.hdf5"
    path.write_bytes(weights)
    with h5py.File(path, "r+") as f:
        f["CNN_high_1/W_carry"][...] = 2 * f["CNN_high_1/W_carry"][...]
    return path.read_bytes()


def test_a_mirror_named_by_the_environment_variable(fixture_files, tmp_path, monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    mirrored = {"/mirror/elmo" + OPTIONS_PATH.removeprefix("/allennlp/models/elmo"): options,
                "/mirror/elmo" + WEIGHTS_PATH.removeprefix("/allennlp/models/elmo"): weights}
    with RangeServer(mirrored) as server:
        point_registry_at(server, monkeypatch)
        monkeypatch.setitem(PUBLISHED_MODELS, NAME, dataclasses.replace(PUBLISHED_MODELS[NAME],
                                                                        base_url="http://unreachable.invalid"))
        monkeypatch.setenv(published.MODELS_URL_ENV_VAR, server.url("/mirror/elmo/"))
        assert data_cli.main(["download", NAME]) == 0
        assert sorted(path for path, _ in server.requests) == sorted(mirrored)
    card = json.loads((published.models_home() / NAME / "model_card.json").read_text())
    assert card["weights_url"] == server.url("/mirror/elmo" + WEIGHTS_PATH.removeprefix("/allennlp/models/elmo"))
    assert load_bilm(NAME).checksum == card["weights_sha256"]


def test_from_a_folder_holding_allennlps_file_names(fixture_files, tmp_path, monkeypatch, capsys):
    options, weights = fixture_files
    monkeypatch.setitem(PUBLISHED_MODELS, NAME, dataclasses.replace(
        SMALL, base_url="http://unreachable.invalid", lstm_dim=64, projection_dim=16, n_highway=2,
        char_filters=((1, 4), (2, 8), (3, 16), (4, 32), (5, 64)), char_embedding_dim=4))
    usb = tmp_path / "usb"
    usb.mkdir()
    (usb / OPTIONS_PATH.rsplit("/", 1)[1]).write_bytes(options)
    (usb / WEIGHTS_NAME).write_bytes(weights)
    # the name may be given as AllenNLP's file name, too
    assert data_cli.main(["download", WEIGHTS_NAME, "--from", str(usb)]) == 0
    folder = published.models_home() / NAME
    assert (folder / "weights.hdf5").read_bytes() == weights
    assert json.loads((folder / "model_card.json").read_text())["weights_url"] == str((usb / WEIGHTS_NAME).resolve())
    assert load_bilm(NAME).name == NAME
    with pytest.raises(SystemExit) as info:
        data_cli.main(["download", "ud_english_ewt", "--from", str(usb)])
    assert info.value.code == 2
    assert data_cli.main(["download", "elmo-medium", "--from", str(usb)]) == 1
    assert "no options.json of elmo-medium" in error_line(capsys.readouterr().err)


def test_the_fixture_is_refused_as_elmo_original(data_root, fixture_files, tmp_path, capsys):
    """bilm-tf's 32-dimensional test model, placed by hand (or brought with --from) as
    elmo-original, is not used under that name."""
    options, weights = fixture_files
    placed = published.models_home() / "elmo-original"
    placed.mkdir(parents=True)
    (placed / "options.json").write_bytes(options)
    (placed / "weights.hdf5").write_bytes(weights)
    for load in (load_bilm, ElmoEmbedder, lambda name: Elmo(name, 1)):
        with pytest.raises(ValueError) as info:
            load("elmo-original")
        message = str(info.value)
        assert "lstm.n_layers" in message or "lstm.dim is 64, but elmo-original has 4096" in message
        assert "\n" not in message and "another model" in message
    usb = tmp_path / "usb"
    usb.mkdir()
    (usb / "elmo_2x4096_512_2048cnn_2xhighway_options.json").write_bytes(options)
    (usb / "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5").write_bytes(weights)
    assert data_cli.main(["download", "elmo-original", "--from", str(usb), "--models-dir", str(tmp_path / "m")]) == 1
    assert "lstm.dim is 64, but elmo-original has 4096" in error_line(capsys.readouterr().err)
    assert not (tmp_path / "m" / "elmo-original").exists()


def test_a_file_changed_on_the_server_between_a_cut_and_the_resume_is_not_spliced(root, fixture_files, tmp_path,
                                                                                   monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    newer = changed_weights(weights, tmp_path)
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        server.cut_path, server.cut_next = WEIGHTS_PATH, 100_000
        assert data_cli.main(["download", NAME]) == 1
        server.files[WEIGHTS_PATH] = newer  # the server's file changes before the resume
        assert data_cli.main(["download", NAME]) == 0
        assert server.requests[-1] == (WEIGHTS_PATH, "bytes=100000-") and server.if_ranges[-1]
    assert (published.models_home() / NAME / "weights.hdf5").read_bytes() == newer


def test_status_verify_checks_each_models_recorded_sha256(root, fixture_files, monkeypatch, capsys):
    from range_server import RangeServer

    options, weights = fixture_files
    with RangeServer({OPTIONS_PATH: options, WEIGHTS_PATH: weights}) as server:
        point_registry_at(server, monkeypatch)
        assert data_cli.main(["download", NAME]) == 0
    assert data_cli.main(["status", "--verify"]) == 0  # the data root: an empty folder
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(NAME + " ")]
    assert "present" in row and "sha256 checked" in row
    path = published.models_home() / NAME / "weights.hdf5"
    tampered = bytearray(path.read_bytes())
    tampered[-100] ^= 0xFF
    path.write_bytes(bytes(tampered))
    assert data_cli.main(["status"]) == 0  # without --verify: only that the files are there
    assert data_cli.main(["status", "--verify"]) == 1
    out = capsys.readouterr().out.split("published ELMo models")[-1]
    [row] = [line for line in out.splitlines() if line.startswith(NAME + " ")]
    assert "DAMAGED" in row
    assert f"python -m probing.data download {NAME} --force" in out
