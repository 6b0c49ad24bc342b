#!/usr/bin/env bash
# The real-browser test (tests/test_browser.py) drives Debian's Chromium through Playwright; it
# never downloads a browser of its own. Installs the `chromium` package if it is not there yet.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium
