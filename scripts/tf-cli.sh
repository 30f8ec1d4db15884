#!/usr/bin/env bash
# Prints the Terraform-compatible CLI to use: terraform on PATH, else OpenTofu built from
# the Go module proxy (scripts/ensure-tofu.sh).
set -euo pipefail
if command -v terraform >/dev/null 2>&1; then command -v terraform; exit 0; fi
exec "$(dirname "$0")/ensure-tofu.sh"
