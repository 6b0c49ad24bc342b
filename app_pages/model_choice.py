"""Which biLM the sidebar chose, which model directories a visitor may open, and loading the
model once per process.

Not a page (``app.py`` lists the pages by name; a folder named ``app_pages`` rather than
``pages``: see ``app.py``). Imports nothing heavy at module level, so the
sidebar and each page's widgets paint before torch is imported; the model is loaded the first
time a page asks for it (``app_pages.running.require_model``: a job of the server's queue, the
model then kept in ``st.cache_resource`` for every visitor).

Choosing the model:
- the sidebar (``app.py``): the default, any model shipped in ``data/models/``, any published ELMo
  model downloaded into the data root (``elmo_model.models.published``: elmo-small, elmo-medium,
  elmo-original, elmo-original-5.5b; the sidebar offers to fetch the others,
  ``data_setup.published_models_panel``), or a directory with ``options.json`` + ``weights.hdf5``
  (or bilm-tf's ``lm_weights.hdf5``); the model card under it says what the chosen model is;
- the default is ``elmo-mini`` unless the environment variable ``ELMO_WORKBENCH_MODEL`` names
  another model or directory (the tests point it at ``fixtures/bilm_tf``).

Choosing the device: the sidebar offers the GPU and the CPU when this machine has a GPU (the GPU
first, the default), and says "CPU" in a caption when it has none (:func:`device_choice`).
Before torch is imported (the first paint) a GPU is recognised by the CUDA libraries of the
installed torch and an NVIDIA device node; once torch is loaded, by ``torch.cuda``.

Choosing the precision (:func:`precision_choice`): the choices and the words of the command
lines' ``--precision`` (``elmo_model.plumbing.flags``, which imports no torch).

Which directories a visitor may type: someone running the app on their own machine (a visitor
from localhost) may open any directory. A visitor from another machine (the app served to a
class) may open only directories inside the allowed folders: ``data/models/``, the data root
(``$ELMO_WORKBENCH_DATA``) and those listed in ``$ELMO_WORKBENCH_MODEL_DIRS`` (separated by
``os.pathsep``); any other path gets one message that says nothing about it, and is never
touched. Who is local: ``app_pages.serving``; behind a reverse proxy or tunnel on the same machine
set ``ELMO_WORKBENCH_PUBLIC=1`` to apply the allowed folders to everyone.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import weakref
from pathlib import Path

import streamlit as st

from app_pages.display import escape_markdown
from app_pages.serving import RESTRICT_ENV_VAR, address_is_local, public_deployment  # noqa: F401 (a name hosts use)
from elmo_model.plumbing.flags import PRECISION_CHOICES, PRECISION_HELP  # light: no torch
from elmo_model.models.names import (DEFAULT_MODEL, ENGLISH, MODELS_DIR, model_card_rows,  # light: no torch
                                     model_language, model_place, resolve_model, shipped_models)
from elmo_model.models.published import downloaded_models
from elmo_model.models.published_archives import downloaded_archives
from elmo_model.plumbing.settings import folder_setting  # light: no torch

MODEL_ENV_VAR = "ELMO_WORKBENCH_MODEL"
DEFAULT_MODEL_NAME = DEFAULT_MODEL  # from elmo_model.models.names, which (unlike the registry) imports no torch
OTHER_DIRECTORY = "a directory…"

SPEC_KEY = "model_spec"  # session state: the model name or directory the sidebar chose
PRECISION_KEY = "model_precision"  # session state: "auto", "fp32" or "bf16" (elmo_model.bilm.precision)
DEVICE_KEY = "model_device"  # session state: "cuda" or "cpu"

MODEL_DIRS_ENV_VAR = "ELMO_WORKBENCH_MODEL_DIRS"
DATA_ENV_VAR = "ELMO_WORKBENCH_DATA"  # as probing.data.ENV_VAR (not imported: see above)
REJECTED_DIRECTORY = ("That directory cannot be opened from this browser. Visitors from another machine may "
                      "open the shipped models and the directories the server allows; pick one from the list.")


def visitor_is_local() -> bool:
    """Whether the visitor's browser runs on the server's machine: the rule of
    ``app_pages.serving.address_is_local`` (loopback, IPv4-mapped loopback; forwarding headers
    trusted only from the proxies the host names); every visitor is remote on a public server
    (``$ELMO_WORKBENCH_PUBLIC`` or ``$ELMO_WORKBENCH_RESTRICT_MODEL_DIRS``)."""
    if public_deployment():
        return False
    try:  # the peer as the server saw it: st.context.ip_address reports loopback as None, as it does "unknown"
        from streamlit.runtime.context import _get_client_context

        client = _get_client_context()
        address, headers = getattr(client, "remote_ip", None), dict(st.context.headers)
    except Exception:  # noqa: BLE001 (unknown: remote, the rule fails closed)
        return False
    if type(address).__module__ == "unittest.mock":  # AppTest's stand-in context: the test's own machine
        return True
    return address_is_local(address, headers)


def allowed_model_roots() -> list[Path]:
    """Folders whose directories a visitor from another machine may open: ``data/models/``,
    the data root and ``$ELMO_WORKBENCH_MODEL_DIRS``."""
    roots = [MODELS_DIR]
    roots.append(folder_setting(DATA_ENV_VAR, "data"))
    roots += [Path(p) for p in os.environ.get(MODEL_DIRS_ENV_VAR, "").split(os.pathsep) if p.strip()]
    return [root.expanduser().resolve() for root in roots]


def model_dir_allowed(path: str, local: bool) -> bool:
    """Whether a typed model directory may be opened: always for a local visitor; for a remote
    one only when the folder it means (``elmo_model.models.names.model_place``: what the loader
    would open) is inside :func:`allowed_model_roots` (after resolving ``..`` and symbolic links)."""
    if local:
        return True
    try:
        target = model_place(path).directory.resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return any(target == root or root in target.parents for root in allowed_model_roots())


def default_model_spec() -> str:
    """$ELMO_WORKBENCH_MODEL if set, else ``elmo-mini``."""
    return os.environ.get(MODEL_ENV_VAR, "").strip() or DEFAULT_MODEL_NAME


def shipped_model_names() -> list[str]:
    """Models in ``data/models/`` that have an options.json (``elmo_model.models.names.shipped_models``)."""
    return shipped_models()


def model_names() -> list[str]:
    """What the sidebar's Model list offers besides the default: the shipped models, then the
    published ones downloaded into the data root, then the other families' published archives
    downloaded into the models home."""
    shipped = shipped_model_names()
    return shipped + [name for name in downloaded_models() + downloaded_archives() if name not in shipped]


def model_card_panel(spec: str) -> None:
    """For the sidebar: an expander with the chosen model's card (``elmo_model.models.names.model_card_rows``
    of the folder the loader opens: layers, dimensions, parameters, training corpus and, for a
    published model, licence, citation and source). Reads JSON only: no torch before the first paint."""
    if not spec:
        return
    rows = model_card_rows(spec)
    with st.expander("Model card"):
        st.markdown("\n".join(f"- **{escape_markdown(field)}**: {escape_markdown(text)}"
                              for field, text in rows.items()))


def what_this_model_shows(keys: tuple[str, ...], where: str) -> None:
    """The lesson's verdicts for ``keys`` from the chosen model's card (``probing.report.lesson``
    writes them with ``--card``): what this model can and cannot show, in its own numbers. Nothing
    for a model whose card has no lesson. Reads JSON only."""
    import json

    from probing.report.lesson import card_summary  # lazy: numpy, only once a page asks

    spec = chosen_model_spec()
    try:
        card = json.loads((model_place(spec).directory / "model_card.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    lines = card_summary(card, keys)
    if lines:
        with st.expander(f"What {escape_markdown(spec)} can show {where} (its model card's lesson)"):
            st.markdown("\n".join(lines))


def chosen_model_spec() -> str:
    """The model the sidebar chose this run (a shipped name or a directory path; "" while the
    user has chosen *a directory…* but not typed one)."""
    return st.session_state.get(SPEC_KEY, default_model_spec())


def chosen_model_language() -> str:
    """The language of the model the sidebar chose (``elmo_model.models.names.model_language``:
    its card, an ELMoForManyLangs config, else English). Reads JSON only."""
    spec = chosen_model_spec()
    return model_language(spec) if spec else ENGLISH


def chosen_precision() -> str:
    """The precision the sidebar chose ("auto" until the user picks one)."""
    return st.session_state.get(PRECISION_KEY, "auto")


def gpu_present() -> bool:
    """Whether this machine has a GPU the installed torch can use. Once torch is imported, its
    own answer; before that (the first paint must not wait for torch) the installed torch's CUDA
    libraries and, on Linux, an NVIDIA device node."""
    torch = sys.modules.get("torch")
    # another visitor's session may be importing torch this instant: a module still initialising is
    # in sys.modules without its attributes (torch.cuda missing), so only a finished import answers
    if torch is not None and not getattr(getattr(torch, "__spec__", None), "_initializing", False):
        return bool(torch.cuda.is_available())
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:
        return False
    lib = Path(spec.origin).parent / "lib"
    if not (any(lib.glob("libtorch_cuda*")) or any(lib.glob("torch_cuda*"))):
        return False
    return not sys.platform.startswith("linux") or any(Path("/dev").glob("nvidia[0-9]*"))


def device_options() -> list[str]:
    """The devices the sidebar offers: ["cuda", "cpu"] with a GPU (the GPU first: the default), else ["cpu"]."""
    return ["cuda", "cpu"] if gpu_present() else ["cpu"]


def chosen_device() -> str:
    """The device the sidebar chose: the GPU when there is one, until the user picks the CPU."""
    options = device_options()
    chosen = st.session_state.get(DEVICE_KEY)
    return chosen if chosen in options else options[0]


def precision_choice() -> None:
    """The sidebar's precision widget: the choices and words of the command lines' --precision."""
    st.selectbox("Precision", PRECISION_CHOICES, key=PRECISION_KEY,
                 help=f"{PRECISION_HELP[0].upper()}{PRECISION_HELP[1:]} (default: auto). Mean cosine to fp32 "
                      "vectors >= 0.99999 on elmo-mini (docs/performance.md); fp32 is the reference verified "
                      "against bilm-tf.")


def device_choice() -> None:
    """The sidebar's device widget: GPU or CPU where there is a GPU; where there is none the same
    widget, disabled, saying so."""
    options = device_options()
    names = {"cuda": "GPU (cuda)", "cpu": "CPU" if len(options) > 1 else "CPU (no GPU found)"}
    st.selectbox("Device", options, key=DEVICE_KEY, format_func=names.__getitem__, disabled=len(options) == 1,
                 help="Where the biLM runs. The GPU is the default where there is one; its fp32 vectors are "
                      "expected to equal the CPU's within 1e-5 (relative; expected, measured by "
                      "bench/gpu_check.py)." if len(options) > 1 else
                      "Where the biLM runs: torch sees no GPU on this machine, so the CPU.")


def read_model(spec: str, precision: str, device: str):
    """The biLM read from disk: the work of a model load (``app_pages.running.load_model``, which
    makes it a job of the server's queue and keeps the model for every visitor)."""
    from elmo_model import load_bilm  # lazy: torch loads with the first model, not at first paint
    from elmo_model.bilm import fused_step

    fused_step.enable()  # a server runs many steps: the compiled step pays (compiled in the background)

    return load_bilm(spec, precision, device=device)


def weights_stamp(spec: str) -> tuple:
    """(weight path, size, mtime): changes when the weights are replaced. Raises ValueError."""
    weights = resolve_model(spec).weights
    stat = weights.stat()
    return (str(weights.resolve()), stat.st_size, stat.st_mtime_ns)


_keys: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (guard, key)
_keys_lock = threading.Lock()


def model_key(model) -> str:
    """A short, hashable identity for caching results computed with ``model``: where it came from
    and its identity (weights, options, precision: ``elmo_model.bilm.identity``).

    Kept per model object: the identity reads every weight (0.6-0.9 s on a full-size model on a
    loaded 2-core CPU), and a page run asks for it at every cached step. The app never changes a
    loaded model's weights; should anything, an optimizer step (the parameters' version
    counters), a cast or a move changes the guard and the identity is computed again."""
    # lazy: elmo_model.bilm.identity imports torch (first paint); a model exists, so torch is loaded
    from elmo_model.bilm.identity import model_identity

    parameters = list(model.parameters())
    guard = (getattr(model, "source", ""), str(getattr(model, "precision", "")),
             sum(p._version for p in parameters), tuple(sorted({(str(p.dtype), str(p.device)) for p in parameters})))
    with _keys_lock:
        known = _keys.get(model)
    if known is not None and known[0] == guard:
        return known[1]
    key = f"{getattr(model, 'source', '')}:{model_identity(model)}"
    with _keys_lock:
        _keys[model] = (guard, key)
    return key
