"""Shared pytest fixtures: the data root the tests read (real data, sliced)."""

import os
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:  # so `pytest` works as well as `python -m pytest`
    sys.path.insert(0, str(PROJECT))


# The suite runs the eager LSTM step in every process it starts (the app's servers and the
# commands would otherwise compile the fused step in the background, tens of seconds of CPU each
# time a process starts): tests/test_fused_step.py turns it on and holds it to the eager numbers.
os.environ.setdefault("ELMO_WORKBENCH_FUSED_STEP", "0")


def _data_root() -> Path:
    """$ELMO_WORKBENCH_DATA, else the shared folder beside the checkout (../shared)."""
    env = os.environ.get("ELMO_WORKBENCH_DATA", "").strip()
    return Path(env).expanduser().resolve() if env else PROJECT.parent / "shared"


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The data root: $ELMO_WORKBENCH_DATA or ../shared; fails the test clearly if missing."""
    root = _data_root()
    if not root.is_dir():
        pytest.fail(
            f"data root {root} not found: set ELMO_WORKBENCH_DATA to a data root, or put one at "
            f"{PROJECT.parent / 'shared'} (fill one with `python -m probing.data download`)",
            pytrace=False,
        )
    return root


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a test module, as the app runs (app.py sets
    OMP_NUM_THREADS=1): the fixture models are tiny, so a second thread only adds
    synchronisation, and on a busy 2-core machine two threads stall for seconds. The thread
    count and the environment are restored afterwards. Use with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")  # ElmoEmbedder then leaves the thread count alone
        torch.set_num_threads(1)
        yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def own_models_home(tmp_path_factory, monkeypatch):
    """Every test gets an empty models home ($ELMO_WORKBENCH_MODELS), so no test reads or fills
    the user's own ~/.cache/elmo-workbench/models."""
    home = tmp_path_factory.mktemp("models_home")
    monkeypatch.setenv("ELMO_WORKBENCH_MODELS", str(home))
    return home


@pytest.fixture(scope="module")
def french_model(tmp_path_factory):
    """A random biLM in the AllenNLP layout whose model card says French (the other-language tests)."""
    import json

    from test_precision import small_random_bilm

    from elmo_model.bilm.weights import save_weights

    folder = tmp_path_factory.mktemp("models") / "fr-random"
    folder.mkdir()
    model = small_random_bilm()
    model.config.to_json(folder / "options.json")
    save_weights(model, folder / "weights.hdf5")
    (folder / "model_card.json").write_text(json.dumps({"language": "French"}), encoding="utf-8")
    return folder
