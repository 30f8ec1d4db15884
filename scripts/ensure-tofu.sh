#!/usr/bin/env bash
# Builds OpenTofu from the Go module proxy into a cache dir and prints the binary's path.
# `go install ...@version` refuses OpenTofu's replace directive, so we build inside a
# writable copy of the downloaded module instead.
set -euo pipefail
version="${TOFU_VERSION:-v1.12.6}"
# shellcheck source=scripts/toolcache.sh
. "$(dirname "$0")/toolcache.sh"
tool_cache tofu "$version" tofu
if command -v tofu >/dev/null 2>&1; then command -v tofu; exit 0; fi
mkdir -p "$cache"
dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
work="$(mktemp -d "$cache/tofu-src.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
(cd "$work" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" ./cmd/tofu) >&2
mv "$bin.tmp" "$bin"
echo "$bin"
