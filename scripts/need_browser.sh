#!/usr/bin/env bash
# `make test`'s browser check: the browser tests drive Debian's Chromium (CHROMIUM overrides its path).
exec "$(dirname "$0")/need_debian.sh" "${CHROMIUM:-/usr/bin/chromium}" chromium "the browser tests"
