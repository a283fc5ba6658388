#!/usr/bin/env bash
# `make test`'s and `make scale`'s Redis check: scale-out runs on Debian's redis-server (REDIS_SERVER overrides it).
exec "$(dirname "$0")/need_debian.sh" "${REDIS_SERVER:-redis-server}" redis-server "the scale-out tests and make scale"
