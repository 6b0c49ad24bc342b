"""``elmo-workbench``: start the Streamlit app of an installed ELMo Workbench (``streamlit run app.py``).

The app is ``app.py`` beside this ``app_pages/`` folder: the checkout's root, or ``elmo_workbench/``
in site-packages (pyproject.toml installs the root under that name). The app and its pages import
``app_pages.*`` as a top-level package in both cases: ``streamlit run`` puts the script's folder
first on ``sys.path``. This module is imported as ``elmo_workbench.app_pages.launch`` by the
command, and imports nothing heavy (no torch, no Streamlit) until Streamlit runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from elmo_model.plumbing.extras import missing_message

# .streamlit/config.toml's settings: Streamlit reads that file only from the current directory, and
# an installed app is started from anywhere, so they are passed as flags (a test keeps them equal)
SETTINGS = {
    "browser.gatherUsageStats": "false",
    "server.runOnSave": "false",
    "server.fileWatcherType": "none",
    "server.maxUploadSize": "16",
    "client.showErrorDetails": "full",
    "client.toolbarMode": "minimal",
}


def app_file() -> Path:
    """The app's entry script: ``app.py`` beside this ``app_pages/`` folder, at the root of a
    checkout or in ``elmo_workbench/`` of an installed wheel (found without running it)."""
    app = Path(__file__).resolve().parent.parent / "app.py"
    if not (app.is_file() and (app.parent / "app_pages" / "model_choice.py").is_file()):
        raise FileNotFoundError(f"the ELMo Workbench app ({app}) is not installed beside app_pages/; "
                                "reinstall the package with its [app] extra, as it was installed (from the project's "
                                "folder: pip install '.[app]'; a wheel: pip install 'dist/elmo_workbench-*.whl[app]')")
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="elmo-workbench",
        description="Start the ELMo Workbench app in the browser: runs `streamlit run app.py` on the installed app. "
                    "Other arguments go to `streamlit run` (e.g. --server.port 8502; see `streamlit run --help`). "
                    "The model: $ELMO_WORKBENCH_MODEL or the sidebar; the data root: $ELMO_WORKBENCH_DATA.",
        epilog="Example: elmo-workbench --server.port 8502 --server.headless true")
    parser.add_argument("--print-app", action="store_true", help="print the path of the app file and exit")
    args, streamlit_args = parser.parse_known_args(argv)
    try:
        app = app_file()
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.print_app:
        print(app)
        return 0
    message = missing_message("app", "the app")
    if message:
        print(f"error: {message}", file=sys.stderr)
        return 2
    given = {arg.split("=")[0].removeprefix("--") for arg in streamlit_args if arg.startswith("--")}
    settings = [f"--{key}={value}" for key, value in SETTINGS.items() if key not in given]
    command = [sys.executable, "-m", "streamlit", "run", str(app), *settings, *streamlit_args]
    if os.name == "posix":  # become Streamlit: Ctrl-C and signals from a supervisor reach it directly
        os.execv(sys.executable, command)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
