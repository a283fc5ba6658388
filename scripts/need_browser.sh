#!/usr/bin/env bash
# The browser tests drive Debian's Chromium. Install it where this machine lets us (as root, or with sudo that
# needs no password), as .ci/run does; otherwise stop at once with the one command to run. Never let the tests
# pass with the browser untested: `make test` also sets BATCH_LANES_REQUIRE_BROWSER=1.
set -euo pipefail
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}   # overridable for this script's own test
APT_GET=${APT_GET:-apt-get}
[ -x "$CHROMIUM" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  SUDO="no"
fi
if [ "$SUDO" != "no" ] && command -v "$APT_GET" >/dev/null; then
  echo "The browser tests need Chromium: installing Debian's chromium package ($APT_GET)..."
  export DEBIAN_FRONTEND=noninteractive
  if $SUDO "$APT_GET" update -qq && $SUDO "$APT_GET" install -y -qq chromium >/dev/null && [ -x "$CHROMIUM" ]; then
    exit 0
  fi
fi
echo "error: the browser tests need Chromium at $CHROMIUM and it could not be installed here; run:" >&2
echo "    sudo apt-get install -y chromium" >&2
echo "then run make test again." >&2
exit 1
