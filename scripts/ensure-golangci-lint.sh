#!/usr/bin/env bash
# Builds golangci-lint (v2) from the Go module proxy into the tool cache (once) and prints
# the binary's path; `make lint` runs it. Built with the Go toolchain on PATH, so it
# understands the Go version go.mod asks for (a prebuilt release may lag behind it).
# Installed into a private directory and moved into place at once, so two builds at the
# same time never write one file.
set -euo pipefail
version="${GOLANGCI_LINT_VERSION:-v2.15.0}"
# shellcheck source=scripts/toolcache.sh
. "$(dirname "$0")/toolcache.sh"
tool_cache golangci-lint "$version" golangci-lint
mkdir -p "$cache" "$(dirname "$bin")"
work="$(mktemp -d "$cache/golangci-lint-src.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Outside any module, so the project's go.mod and GOFLAGS do not apply.
(cd "$work" && GOFLAGS= GOBIN="$work/bin" CGO_ENABLED=0 go install -trimpath \
	"github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version") >&2
"$work/bin/golangci-lint" version >&2
mv -f "$work/bin/golangci-lint" "$bin"
echo "$bin"
