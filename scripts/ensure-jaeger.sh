#!/usr/bin/env bash
# Builds Jaeger (the v2 all-in-one: OTLP receivers, in-memory storage, query API) from the
# Go module proxy into the tool cache and prints the binary's path. The tracing tests
# export to it and read the trace back from its query API. Jaeger's go.mod carries
# replace directives `go install ...@version` refuses, so we build inside a writable
# copy of the downloaded module, as ensure-tofu.sh does.
set -euo pipefail
version="${JAEGER_VERSION:-v1.75.0}"
# shellcheck source=scripts/toolcache.sh
. "$(dirname "$0")/toolcache.sh"
tool_cache jaeger "$version" jaeger
mkdir -p "$cache"
dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/jaegertracing/jaeger@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
work="$(mktemp -d "$cache/jaeger-src.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
(cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin.tmp" ./cmd/jaeger) >&2
mv "$bin.tmp" "$bin"
echo "$bin"
