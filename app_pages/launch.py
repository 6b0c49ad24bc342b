"""``elmo-workbench``: start the Streamlit app of an installed ELMo Workbench (``streamlit run app.py``)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# .streamlit/config.toml's settings: Streamlit reads that file only from the current directory, and
# an installed app is started from anywhere, so they are passed as flags (a test keeps them equal)
SETTINGS = {
    "browser.gatherUsageStats": "false",
    "server.runOnSave": "false",
    "server.fileWatcherType": "none",
    "client.showErrorDetails": "full",
    "client.toolbarMode": "minimal",
}


def app_file() -> Path:
    """The installed (or checked-out) ``app.py``, found without running it."""
    spec = importlib.util.find_spec("app")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None or not (origin.parent / "app_pages" / "model_choice.py").is_file():
        raise FileNotFoundError("the ELMo Workbench app.py is not installed beside app_pages/; "
                                "reinstall with `pip install .` from the project's directory")
    return origin


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
    given = {arg.split("=")[0].removeprefix("--") for arg in streamlit_args if arg.startswith("--")}
    settings = [f"--{key}={value}" for key, value in SETTINGS.items() if key not in given]
    command = [sys.executable, "-m", "streamlit", "run", str(app), *settings, *streamlit_args]
    if os.name == "posix":  # become Streamlit: Ctrl-C and signals from a supervisor reach it directly
        os.execv(sys.executable, command)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
