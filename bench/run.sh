#!/usr/bin/env bash
# Old name of bench/run, kept for scripts that still call it: bench/run
# chooses the namespaces itself when root (--netns is still accepted).
exec "$(dirname "${BASH_SOURCE[0]}")/run" "$@"
