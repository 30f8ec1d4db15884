#!/bin/sh
# Runs pytest quietly, stopping after five failures, with short tracebacks.
set -e
exec python3 -m pytest -q --maxfail=5 --tb=short "${1:-.}"
