"""The app's reliability: the model-directory box for visitors from another machine, and the
Playground saying when it leaves sentences out (see docs/reliability.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.model_choice import (MODEL_ENV_VAR, OTHER_DIRECTORY, REJECTED_DIRECTORY, RESTRICT_ENV_VAR,
                                    model_dir_allowed)

APP = Path(__file__).resolve().parents[1] / "app.py"
TIMEOUT = 120

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def plain(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


@pytest.fixture
def app_env(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "activations"))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    monkeypatch.delenv("ELMO_WORKBENCH_MODEL_DIRS", raising=False)
    return data_root


def test_a_remote_visitor_gets_only_allowed_directories_and_one_message(app_env, tmp_path, monkeypatch):
    monkeypatch.setenv(RESTRICT_ENV_VAR, "1")  # every visitor treated as one from another machine
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    at.selectbox(key="model_choice").select(OTHER_DIRECTORY).run()
    shown = []
    for path in ("/etc", "/no/such/dir", str(tmp_path), str(app_env / "fixtures" / ".." / ".." / "..")):
        at.text_input(key="model_dir").input(path).run()
        assert not at.exception
        messages = [plain(e.value) for e in at.error]
        assert messages == [REJECTED_DIRECTORY], messages
        assert not any("Could not load" in plain(e.value) for e in at.error)
        shown.append(messages)
    assert all(m == shown[0] for m in shown)  # the same words whether the path exists or not
    # a directory inside the data root opens
    at.text_input(key="model_dir").input(str(app_env / "fixtures" / "bilm_tf")).run()
    assert not at.exception and not at.error and at.get("plotly_chart")


def test_the_allow_list(tmp_path, monkeypatch, data_root):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    extra = tmp_path / "models"
    (extra / "mine").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (extra / "escape").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL_DIRS", str(extra))
    assert model_dir_allowed(str(extra / "mine"), local=False)
    assert model_dir_allowed(str(data_root / "fixtures" / "bilm_tf"), local=False)
    assert not model_dir_allowed(str(tmp_path / "elsewhere"), local=False)
    assert not model_dir_allowed(str(extra / "escape"), local=False)  # a link out of the folder
    assert not model_dir_allowed(str(extra / ".." / "elsewhere"), local=False)
    assert model_dir_allowed(str(tmp_path / "elsewhere"), local=True)  # the machine's own user: anything


def test_the_playground_says_when_it_leaves_sentences_out(app_env):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    lines = [f"The bank number {i} was closed ." for i in range(40)]
    at.text_area(key="pg_text").input("\n".join(lines)).run()
    assert not at.exception
    warnings = " ".join(plain(w.value) for w in at.warning)
    assert "40 sentences given; only the first 32 are used" in warnings
