"""The environment variables: one table in code and docs, and the folder settings' checks."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_model.plumbing.settings import SETTINGS, folder_setting

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_the_code_reads_is_in_the_table_and_the_docs():
    code = set()
    for folder in ("elmo_model", "probing", "app_pages"):
        for path in (ROOT / folder).rglob("*.py"):
            code |= set(re.findall(r"ELMO_WORKBENCH_[A-Z_]+", path.read_text(encoding="utf-8")))
    code |= set(re.findall(r"ELMO_WORKBENCH_[A-Z_]+", (ROOT / "app.py").read_text(encoding="utf-8")))
    assert code == set(SETTINGS), (code ^ set(SETTINGS))
    docs = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = docs[docs.index("## Settings"):docs.index("## House style")]
    for name, (default, meaning) in SETTINGS.items():
        assert f"| `{name}` | {default} | {meaning} |" in table, name


@pytest.mark.parametrize("name, reader", [
    ("ELMO_WORKBENCH_DATA", "elmo_model.models.published:default_data_root"),
    ("ELMO_WORKBENCH_DATA", "probing.data:data_root"),
    ("ELMO_WORKBENCH_MODELS", "elmo_model.models.published:default_models_home"),
    ("ELMO_WORKBENCH_CACHE", "probing.engine.activations:default_cache_dir"),
    ("ELMO_WORKBENCH_REPORTS", "app_pages.data_setup:reports_dir"),
])
def test_a_folder_setting_that_names_a_file_or_loops_is_one_line_naming_it(name, reader, tmp_path, monkeypatch):
    import importlib

    module, function = reader.split(":")
    read = getattr(importlib.import_module(module), function)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    for value, expected in ((a_file, "a file, not a folder"), (loop / "inside", "cannot be resolved")):
        monkeypatch.setenv(name, str(value))
        with pytest.raises(ValueError, match=re.escape(name) + ".*" + expected) as err:
            read()
        assert "\n" not in str(err.value)
    monkeypatch.setenv(name, str(tmp_path / "new-folder"))
    assert Path(read()) == (tmp_path / "new-folder").resolve()  # a folder not made yet is fine


def test_the_data_command_names_the_variable_set_to_a_file(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    done = subprocess.run([sys.executable, "-m", "probing.data", "status"], cwd=ROOT, capture_output=True, text=True,
                          env={"ELMO_WORKBENCH_DATA": str(a_file), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                          timeout=300)
    assert done.returncode != 0 and "ELMO_WORKBENCH_DATA" in done.stderr and "a file, not a folder" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_without_the_variable_the_default_is_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("ELMO_WORKBENCH_REPORTS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert folder_setting("ELMO_WORKBENCH_REPORTS", "reports") == (tmp_path / "elmo-workbench" / "reports").resolve()
    assert folder_setting("ELMO_WORKBENCH_REPORTS") is None
