"""Models of the NLPL repository (and simple_elmo): options.json, model.hdf5 and vocab.txt, in a folder
or a zip, read through the AllenNLP path and giving the same layers."""

import shutil
import zipfile

import numpy as np
import pytest

from elmo_model import ElmoEmbedder, load_bilm

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["Money", "in", "the", "bank"]]


def _nlpl_folder(data_root, folder):
    """The bilm-tf fixture laid out as the NLPL repository ships its models."""
    source = data_root / "fixtures" / "bilm_tf"
    folder.mkdir()
    shutil.copy(source / "options.json", folder / "options.json")
    shutil.copy(source / "lm_weights.hdf5", folder / "model.hdf5")
    shutil.copy(source / "vocab_test.txt", folder / "vocab.txt")
    return folder


def _layers(model):
    return ElmoEmbedder(model).embed_batch(SENTENCES)


@pytest.mark.parametrize("inner", ["", "224/"])  # files at the archive's top, or in one folder
def test_an_nlpl_folder_and_its_zip_load_with_the_same_layers(data_root, tmp_path, inner):
    reference = _layers(load_bilm(data_root / "fixtures" / "bilm_tf"))
    folder = _nlpl_folder(data_root, tmp_path / "224")
    for a, b in zip(reference, _layers(load_bilm(folder))):
        np.testing.assert_array_equal(a, b)
    archive = tmp_path / "224.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.iterdir():
            zipped.write(path, inner + path.name)
    for _ in range(2):  # unzipped once, then read from the unzipped copy
        for a, b in zip(reference, _layers(load_bilm(archive))):
            np.testing.assert_array_equal(a, b)


def test_a_folder_or_archive_of_no_layout_read_here_is_one_line_naming_the_layouts(tmp_path):
    many_langs = tmp_path / "zh.model"
    many_langs.mkdir()
    (many_langs / "config.json").write_text("{}")
    (many_langs / "encoder.pkl").write_bytes(b"x")
    with pytest.raises(ValueError, match="holds no model of a layout read here .*model.hdf5 \\(NLPL\\)") as err:
        load_bilm(many_langs)
    assert "\n" not in str(err.value)
    not_zip = tmp_path / "broken.zip"
    not_zip.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable zip"):
        load_bilm(not_zip)
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as zipped:
        zipped.writestr("README", "nothing")
    with pytest.raises(ValueError, match="0 model folders"):
        load_bilm(empty)
