"""The sweep's download class: a server that changes its file, and a disk that fills during a download.

A local server (``range_server.py``) serves a file, cuts the first answer short, then serves
another file under the same name. A server that honours ``If-Range`` sends the new file whole; one
that ignores it (some servers and proxies) sent 206 with the new file's tail, which the earlier
code wrote as the whole file (no checksum pinned) or threw away after a checksum mismatch, so a
third attempt was needed. A full file (RLIMIT_FSIZE, SIGXFSZ ignored: the write fails with EFBIG
as a full disk fails with ENOSPC) was reported as a network failure. docs/reliability.md gives
the counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import resource
import signal
from pathlib import Path

import pytest
from range_server import RangeServer

from probing import data
from probing.data import cli as data_cli
from probing.data import downloads
from probing.data.downloads import DownloadError

OLD = bytes((i * 7919 + i // 256) % 251 for i in range(300_000))
CHANGED = {"bigger": bytes((i * 31 + 7) % 253 for i in range(360_000)),
           "the same size": bytes((i * 31 + 7) % 253 for i in range(300_000)),
           "smaller than what was kept": bytes((i * 31 + 7) % 253 for i in range(60_000))}


@contextlib.contextmanager
def file_size_limit(limit: int):
    """This process's writes stop at ``limit`` bytes of a file (EFBIG), as ``ulimit -f`` does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def _fetch(server: RangeServer, root: Path, sha256: str | None = None) -> str:
    return downloads._fetch_url(server.url("/file.bin"), root / "dataset" / "file.bin", label="file.bin",
                                downloads=root / downloads.DOWNLOADS_DIR, sha256=sha256)


@pytest.mark.parametrize("pinned", [False, True], ids=["no checksum", "checksum pinned"])
@pytest.mark.parametrize("change", list(CHANGED))
def test_a_file_changed_on_a_server_that_ignores_if_range_is_fetched_whole_in_one_attempt(tmp_path, change, pinned):
    """100,000 bytes kept, then the server's file changes and the server ignores ``If-Range``: the
    resume gets 206 of the new file (or 416: it is shorter than what was kept). Now that answer is
    never written; the file is asked for again whole in the same attempt."""
    new = CHANGED[change]
    with RangeServer({"/file.bin": OLD}, if_range=False) as server:
        server.cut_next = 100_000
        with pytest.raises(DownloadError, match="resume from byte 100,000"):
            _fetch(server, tmp_path, hashlib.sha256(new).hexdigest() if pinned else None)
        server.files["/file.bin"] = new
        _fetch(server, tmp_path, hashlib.sha256(new).hexdigest() if pinned else None)  # one attempt
        assert server.requests[-2][1] == "bytes=100000-" and server.requests[-1][1] is None
    assert (tmp_path / "dataset" / "file.bin").read_bytes() == new
    assert sorted(p.name for p in (tmp_path / downloads.DOWNLOADS_DIR).iterdir()) == []


def test_a_download_that_meets_the_file_size_limit_says_so_not_the_network(tmp_path, data_root, monkeypatch, capsys):
    """``probing.data download`` under ``ulimit -f``: "could not download …: File too large …
    Check the network connection". Now one line saying what ran out, and the rerun completes."""
    payload = (data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu").read_bytes()
    ewt = data.DATASETS["ud_english_ewt"]
    with RangeServer({"/en_ewt-ud-dev.conllu": payload}) as server:
        files = tuple(dataclasses.replace(f, url=server.url("/en_ewt-ud-dev.conllu")) for f in ewt.files[1:2])
        monkeypatch.setitem(data.DATASETS, "ud_english_ewt", dataclasses.replace(ewt, files=files))
        with file_size_limit(len(payload) // 2):
            code = data_cli.main(["download", "ud_english_ewt", "--data-root", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err
        [line] = [line for line in err.splitlines() if line.startswith("error:")]
        assert "file-size limit" in line and "network" not in line, line
        assert not (tmp_path / "ud_english_ewt").exists()
        assert data_cli.main(["download", "ud_english_ewt", "--data-root", str(tmp_path)]) == 0
    assert (tmp_path / "ud_english_ewt" / "en_ewt-ud-dev.conllu").read_bytes() == payload


def test_a_full_disk_before_a_download_is_named_with_the_room_needed(tmp_path, monkeypatch):
    """The free space is asked for before the body is fetched: a 300,000-byte file on a disk with
    40,960 bytes free stops at once, saying so (it used to fill the disk, then blame the network)."""
    from elmo_model.plumbing import io_safety

    monkeypatch.setattr(io_safety.os, "statvfs", lambda path: type("Full", (), {"f_bavail": 10, "f_frsize": 4096})())
    with RangeServer({"/file.bin": OLD}) as server, pytest.raises(DownloadError) as caught:
        _fetch(server, tmp_path)
    message = str(caught.value)
    assert "the disk is full (40,960 bytes free" in message and "network" not in message, message
    assert not (tmp_path / "dataset").exists()


def test_a_download_without_a_length_cut_by_the_limit_keeps_its_bytes(tmp_path):
    """A server that sends no ``Content-Length``: no room can be asked for ahead, the write itself
    fails (EFBIG). One message saying so and how many bytes are kept; nothing installed."""
    with RangeServer({"/file.bin": OLD}, lengths=False) as server, file_size_limit(120_000), \
            pytest.raises(DownloadError) as caught:
        _fetch(server, tmp_path)
    message = str(caught.value)
    assert "file-size limit" in message and "bytes are kept in" in message and "network" not in message, message
    assert (tmp_path / downloads.DOWNLOADS_DIR / "file.bin.part").stat().st_size > 0
    assert not (tmp_path / "dataset").exists()


def test_a_model_copied_from_a_folder_onto_a_full_disk_is_one_line(tmp_path, data_root, monkeypatch, capsys):
    """``probing.data download elmo-small --from DIR`` with no room for the weight file: an
    ``OSError`` traceback from ``shutil.copyfile``. Now one line, nothing installed."""
    from elmo_model.models.published import PUBLISHED_MODELS

    small = dataclasses.replace(PUBLISHED_MODELS["elmo-small"], lstm_dim=64, projection_dim=16, n_highway=2,
                                char_filters=((1, 4), (2, 8), (3, 16), (4, 32), (5, 64)), char_embedding_dim=4)
    monkeypatch.setitem(PUBLISHED_MODELS, "elmo-small", small)
    usb = tmp_path / "usb"
    usb.mkdir()
    for source, name in (("options.json", "options.json"), ("lm_weights.hdf5", "weights.hdf5")):
        (usb / name).write_bytes((data_root / "fixtures" / "bilm_tf" / source).read_bytes())
    size = (usb / "weights.hdf5").stat().st_size
    with file_size_limit(size // 2):
        code = data_cli.main(["download", "elmo-small", "--from", str(usb), "--models-dir", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err[-2000:]
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "file-size limit" in line and "nothing was installed" in line, line
    assert not (tmp_path / "m" / "elmo-small" / "weights.hdf5").exists()
