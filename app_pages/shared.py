"""What every page shares: which biLM the sidebar chose, and loading it once per process.

Not a page (``app.py`` lists the pages by name; a folder named ``app_pages`` rather than
``pages``: see ``app.py``). Imports nothing heavy at module level, so the
sidebar and each page's widgets paint before torch is imported; the model is loaded the first
time a page asks for it (:func:`require_model`), behind a spinner, and then comes from
``st.cache_resource``.

Choosing the model:
- the sidebar (``app.py``): the default, any model shipped in ``data/models/``, or a directory
  with ``options.json`` + ``weights.hdf5`` (or bilm-tf's ``lm_weights.hdf5``);
- the default is ``elmo-mini`` unless the environment variable ``ELMO_WORKBENCH_MODEL`` names
  another model or directory (the tests point it at ``fixtures/bilm_tf``).

Which directories a visitor may type: someone running the app on their own machine (a visitor
from localhost) may open any directory. A visitor from another machine (the app served to a
class) may open only directories inside the allowed folders: ``data/models/``, the data root
(``$ELMO_WORKBENCH_DATA``) and those listed in ``$ELMO_WORKBENCH_MODEL_DIRS`` (separated by
``os.pathsep``); any other path gets one message that says nothing about it, and is never
touched. Behind a reverse proxy on the same machine every visitor looks local: set
``ELMO_WORKBENCH_RESTRICT_MODEL_DIRS=1`` to apply the allowed folders to everyone.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import streamlit as st

log = logging.getLogger(__name__)

MODEL_ENV_VAR = "ELMO_WORKBENCH_MODEL"
# Same as elmo_model.DEFAULT_MODEL / registry.MODELS_DIR, spelled out here because importing
# elmo_model imports torch (2+ s), which would delay the first paint of every page.
DEFAULT_MODEL_NAME = "elmo-mini"
MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"
OTHER_DIRECTORY = "a directory…"

#: Session-state keys that start with one of these survive a visit to another page (Streamlit
#: forgets a widget's value when a run does not draw it; app.py re-stores them every run).
PERSISTENT_PREFIXES = ("pg_",)

SPEC_KEY = "model_spec"  # session state: the model name or directory the sidebar chose
PRECISION_KEY = "model_precision"  # session state: "auto", "fp32" or "bf16" (elmo_model.precision)
PRECISION_OPTIONS = ("auto", "fp32", "bf16")  # elmo_model.precision.PRECISION_CHOICES, without importing torch

#: A session's first figure is not sent before this many seconds into its first script run (see
#: :func:`let_the_shell_paint`).
SHELL_SECONDS = float(os.environ.get("ELMO_WORKBENCH_SHELL_SECONDS", "1.0"))  # 0: never hold back
_SESSION_START_KEY = "_wb_session_start"
_SHELL_DONE_KEY = "_wb_shell_painted"


def note_session_start() -> None:
    """Called by ``app.py`` on every run: remembers when the session's first run started."""
    st.session_state.setdefault(_SESSION_START_KEY, time.monotonic())


def let_the_shell_paint() -> None:
    """Call before sending a plotly figure or a dataframe: on a session's first run, wait until
    :data:`SHELL_SECONDS` have passed since the run started (at most that; not at all when the
    page already spent longer computing, or on any later run).

    Why: every Streamlit widget, the sidebar's model picker included, is a lazily loaded script,
    and each element waits behind a skeleton until its script is in. When a page's figures come
    from a cache, they reach a new browser in the same instant as the picker, and the browser
    shows the picker in the same frame as plotly's first drawing, after fetching and running
    plotly's 4.7 MB bundle: a throwaway script on bench/app_timing.py's helpers saw the picker at
    3.9-4.9 s while the page title was up at 1.4 s. Holding the first figure back ~1 s lets the
    picker and the page's text paint first (1.5-2.7 s in that script and in bench/app_timing.py)
    at the cost of the figure coming up to that much later on the session's first page only."""
    if st.session_state.get(_SHELL_DONE_KEY):
        return
    st.session_state[_SHELL_DONE_KEY] = True
    started = st.session_state.get(_SESSION_START_KEY)
    if started is not None:
        time.sleep(max(0.0, SHELL_SECONDS - (time.monotonic() - started)))


MODEL_DIRS_ENV_VAR = "ELMO_WORKBENCH_MODEL_DIRS"
RESTRICT_ENV_VAR = "ELMO_WORKBENCH_RESTRICT_MODEL_DIRS"
DATA_ENV_VAR = "ELMO_WORKBENCH_DATA"  # as probing.data.ENV_VAR (not imported: see above)
REJECTED_DIRECTORY = ("That directory cannot be opened from this browser. Visitors from another machine may "
                      "open the shipped models and the directories the server allows; pick one from the list.")


def visitor_is_local() -> bool:
    """Whether the visitor's browser runs on the server's machine (Streamlit reports no IP
    address for localhost), unless ``$ELMO_WORKBENCH_RESTRICT_MODEL_DIRS`` treats every visitor
    as remote."""
    if os.environ.get(RESTRICT_ENV_VAR, "").strip() not in ("", "0"):
        return False
    try:
        address = st.context.ip_address
    except Exception:  # no request context: a script run outside a browser session
        return True
    if not isinstance(address, str):  # None for localhost; AppTest's stand-in context gives no address either
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def allowed_model_roots() -> list[Path]:
    """Folders whose directories a visitor from another machine may open: ``data/models/``,
    the data root and ``$ELMO_WORKBENCH_MODEL_DIRS``."""
    roots = [MODELS_DIR]
    data = os.environ.get(DATA_ENV_VAR, "").strip()
    if data:
        roots.append(Path(data))
    else:
        cache = os.environ.get("XDG_CACHE_HOME", "").strip()
        roots.append((Path(cache) if cache else Path.home() / ".cache") / "elmo-workbench" / "data")
    roots += [Path(p) for p in os.environ.get(MODEL_DIRS_ENV_VAR, "").split(os.pathsep) if p.strip()]
    return [root.expanduser().resolve() for root in roots]


def model_dir_allowed(path: str, local: bool) -> bool:
    """Whether a typed model directory may be opened: always for a local visitor; for a remote
    one only inside :func:`allowed_model_roots` (after resolving ``..`` and symbolic links)."""
    if local:
        return True
    try:
        target = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return any(target == root or root in target.parents for root in allowed_model_roots())


def default_model_spec() -> str:
    """$ELMO_WORKBENCH_MODEL if set, else ``elmo-mini``."""
    return os.environ.get(MODEL_ENV_VAR, "").strip() or DEFAULT_MODEL_NAME


def shipped_model_names() -> list[str]:
    """Models in ``data/models/`` that have an options.json (as ``registry.shipped_models``)."""
    if not MODELS_DIR.is_dir():
        return []
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / "options.json").is_file())


def keep_widget_state() -> None:
    """Re-store the persistent widget values so they outlive a page switch."""
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith(PERSISTENT_PREFIXES):
            st.session_state[key] = st.session_state[key]


def chosen_model_spec() -> str:
    """The model the sidebar chose this run (a shipped name or a directory path; "" while the
    user has chosen *a directory…* but not typed one)."""
    return st.session_state.get(SPEC_KEY, default_model_spec())


def chosen_precision() -> str:
    """The precision the sidebar chose ("auto" until the user picks one)."""
    return st.session_state.get(PRECISION_KEY, "auto")


@st.cache_resource(show_spinner=False, max_entries=4)
def _load_model(spec: str, stamp: tuple, precision: str = "auto"):
    """One biLM per (spec, weight file stamp, precision): a retrained model on disk is reloaded."""
    from elmo_model import load_bilm

    return load_bilm(spec, precision)


def _weights_stamp(spec: str) -> tuple:
    """(weight path, size, mtime): changes when the weights are replaced. Raises ValueError."""
    from elmo_model.registry import resolve_model

    weights = resolve_model(spec).weights
    stat = weights.stat()
    return (str(weights.resolve()), stat.st_size, stat.st_mtime_ns)


def load_model(spec: str, precision: str = "auto"):
    """``(model, None)`` or ``(None, message)``: never raises for a missing or broken model."""
    try:
        return _load_model(spec, _weights_stamp(spec), precision), None
    except ValueError as err:  # the registry and weight reader name the file and the fix
        return None, str(err)
    except Exception as err:  # a corrupt hdf5 or options.json can fail in many ways
        log.exception("loading biLM %r failed", spec)
        return None, f"{type(err).__name__}: {err}"


def require_model():
    """The chosen biLM, loaded behind a spinner; on failure an error box and ``st.stop()``."""
    spec = chosen_model_spec()
    if not spec:
        st.info("Type the path of a biLM directory (options.json + weights.hdf5) in the sidebar.")
        st.stop()
    with st.spinner(f"Loading the biLM {escape_markdown(repr(spec))}…"):
        model, error = load_model(spec, chosen_precision())
    if model is None:
        st.error(f"**Could not load the biLM {escape_markdown(repr(spec))}.** {escape_markdown(error)}\n\n"
                 "Pick another model in the sidebar, or choose *a directory…* and type the path of "
                 "a directory holding `options.json` and `weights.hdf5`.")
        if spec == DEFAULT_MODEL_NAME:
            st.info(f"The default model is trained by `python -m elmo_model.train` and exported to "
                    f"`data/models/{DEFAULT_MODEL_NAME}/`; until it exists, any biLM directory "
                    f"works (e.g. bilm-tf's test model in `fixtures/bilm_tf` of the data root).")
        st.stop()
    return model


def model_key(model) -> str:
    """A short, hashable identity for caching results computed with ``model``."""
    return (f"{getattr(model, 'source', '')}:{getattr(model, 'checksum', id(model))}"
            f":{getattr(model, 'precision', 'fp32')}")


_MARKDOWN_SPECIALS = set("\\`*_{}[]()<>#+-.!|$~:")


def escape_markdown(text: str) -> str:
    """User text made literal for st.markdown / st.caption / st.warning (a "$" would start
    LaTeX, a "*" emphasis, a leading "#" a heading)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in str(text))


def plotly_config(filename: str) -> dict:
    """plotly's toolbar with a PNG download named after the figure."""
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}}


def figure(fig, name: str, key: str) -> None:
    """A plotly figure at full width with the PNG download named ``name``."""
    let_the_shell_paint()
    st.plotly_chart(fig, config=plotly_config(name), key=key)


def table(data, **kwargs) -> None:
    """``st.dataframe`` (its grid is a 1.2 MB lazily loaded script: see :func:`let_the_shell_paint`)."""
    let_the_shell_paint()
    st.dataframe(data, **kwargs)
