"""The workbench's environment variables, in one table, and the one reader of those that name a
folder (no torch).

Every ``ELMO_WORKBENCH_*`` variable the code reads is listed in :data:`SETTINGS` with its default
and meaning (``tests/test_settings.py`` holds the code, this table and docs/design.md's table to one
another). A variable that names a folder is read by :func:`folder_setting` alone, which gives it
the checks its command-line flag gets, before any work, in one line naming the variable: a file
where a folder is wanted, a symlink loop, a path that cannot be resolved.
"""

from __future__ import annotations

import os
from pathlib import Path

#: name -> (default, meaning)
SETTINGS: dict[str, tuple[str, str]] = {
    "ELMO_WORKBENCH_DATA": ("~/.cache/elmo-workbench/data, else ../shared beside a checkout",
                            "the data root: EWT, CoNLL-2000, SemCor and Raganato's sets, NLTK data, published models"),
    "ELMO_WORKBENCH_MODELS": ("~/.cache/elmo-workbench/models", "where published models are downloaded and looked for"),
    "ELMO_WORKBENCH_MODELS_URL": ("AllenNLP's address", "a mirror to download the published models from"),
    "ELMO_WORKBENCH_CACHE": ("~/.cache/elmo-workbench/activations", "the activation caches of probes and WSD"),
    "ELMO_WORKBENCH_REPORTS": ("~/.cache/elmo-workbench/reports", "where the app's Reports page writes and lists reports"),
    "ELMO_WORKBENCH_REPORTS_BUDGET_MB": ("none", "the disk the app's reports may use; past it the oldest unpinned go"),
    "ELMO_WORKBENCH_MODEL": ("elmo-mini", "the model the app opens on"),
    "ELMO_WORKBENCH_MODEL_DIRS": ("none", "more folders (os.pathsep-separated) a remote visitor may open models from"),
    "ELMO_WORKBENCH_RESTRICT_MODEL_DIRS": ("off", "the earlier name of the remote-visitor restriction (read, not documented)"),
    "ELMO_WORKBENCH_PUBLIC": ("off", "1: every visitor counts as remote (a server a class shares)"),
    "ELMO_WORKBENCH_TRUSTED_PROXIES": ("none", "proxies whose X-Forwarded-For the app believes"),
    "ELMO_WORKBENCH_MAX_JOBS": ("one per core", "heavy jobs the app runs at once"),
    "ELMO_WORKBENCH_JOBS_PER_VISITOR": ("1", "heavy jobs one visitor (a browser, all its tabs) may run at once"),
    "ELMO_WORKBENCH_SHELL_SECONDS": ("1.0", "seconds into a session's first run before its first figure is sent "
                                     "(the page's shell paints first); 0: never hold back"),
    "ELMO_WORKBENCH_FUSED_STEP": ("on for long commands and the app", "1 or 0: compiled code (fused LSTM step, "
                                  "gradient kernels) on or off everywhere"),
    "ELMO_WORKBENCH_COMPILE_TIMEOUT": ("600", "seconds a caller waits for a compilation before running eager"),
    "ELMO_WORKBENCH_CUDA_GRAPHS": ("on, on a GPU", "0: GPU inference without captured CUDA graphs"),
}


def _cache_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return Path(xdg).expanduser() if xdg else Path.home() / ".cache"


def folder_setting(name: str, default_subfolder: str | None = None) -> Path | None:
    """The folder ``$name`` names (expanded, resolved), else ``${XDG_CACHE_HOME:-~/.cache}/
    elmo-workbench/<default_subfolder>`` (None where no default is given). Raises ``ValueError``,
    one line naming the variable, where it names a file, loops through symlinks or cannot be
    resolved; a folder that does not exist yet is fine (the writer makes it)."""
    value = os.environ.get(name, "").strip()
    if not value:
        if default_subfolder is None:
            return None
        return (_cache_home() / "elmo-workbench" / default_subfolder).resolve()
    try:
        path = Path(value).expanduser().resolve()
    except (RuntimeError, OSError) as err:  # a symlink loop, an unreadable component
        raise ValueError(f"{name}={value}: cannot be resolved ({err}); point it at a folder") from None
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={value}: a file, not a folder; point it at a folder, or unset it")
    above = next((p for p in path.parents if p.exists()), None)
    if above is not None and not above.is_dir():  # a folder that cannot be made: it would lie under a file
        raise ValueError(f"{name}={value}: {above} is a file, so no folder can be made there; point it at a folder")
    return path


def folder_setting_text(name: str, default_subfolder: str) -> str:
    """The folder :func:`folder_setting` gives, for a help text: its path, or what is wrong with the
    setting (a help text never fails on a bad setting; the command itself refuses it in one line)."""
    try:
        return str(folder_setting(name, default_subfolder))
    except ValueError as err:
        return f"unusable: {err}"
