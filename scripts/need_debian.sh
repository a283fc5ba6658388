#!/usr/bin/env bash
# need_debian.sh PROGRAM PACKAGE WHO: make sure PROGRAM (a path, or a command on PATH) exists, installing Debian's
# PACKAGE where this machine lets us (as root, or with sudo that needs no password), as CI does; otherwise stop
# at once with the one command to run. WHO says what needs it. `make test` never lets those tests skip.
set -euo pipefail
PROGRAM=$1 PACKAGE=$2 WHO=$3
APT_GET=${APT_GET:-apt-get}   # overridable for the scripts' own tests
found() { [ -x "$PROGRAM" ] || command -v "$PROGRAM" >/dev/null; }
found && exit 0
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  SUDO="no"
fi
if [ "$SUDO" != "no" ] && command -v "$APT_GET" >/dev/null; then
  echo "$WHO need $PROGRAM: installing Debian's $PACKAGE package ($APT_GET)..."
  export DEBIAN_FRONTEND=noninteractive
  # the package lists may be missing or stale on a fresh machine: update them only when the install fails
  if { $SUDO "$APT_GET" install -y -qq "$PACKAGE" >/dev/null 2>&1 \
       || { $SUDO "$APT_GET" update -qq && $SUDO "$APT_GET" install -y -qq "$PACKAGE" >/dev/null; }; } && found; then
    exit 0
  fi
fi
echo "error: $WHO need $PROGRAM and it could not be installed here; run:" >&2
echo "    sudo apt-get install -y $PACKAGE" >&2
echo "then run the command again." >&2
exit 1
