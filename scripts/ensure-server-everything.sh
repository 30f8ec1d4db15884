#!/usr/bin/env bash
# Installs the MCP reference server "everything" (@modelcontextprotocol/server-everything,
# from the npm registry, pinned) into the tool cache once and prints the path of its
# dist/index.js: the foreign MCP server that the MCP client's tests talk to
# (internal/everythingtest; scripts/test.sh exports the path as TRUEFORGE_SERVER_EVERYTHING).
# Needs node and npm (scripts/deps.sh --tests installs them). Installed into a private
# directory and moved into place at once, so two installs at the same time never write
# one tree and a broken install is never taken for a finished one.
set -euo pipefail
# internal/everythingtest's Version must match, for its lookup in the tool cache.
version="${SERVER_EVERYTHING_VERSION:-2026.8.31}"
# shellcheck source=scripts/toolcache.sh
. "$(dirname "$0")/toolcache.sh"
entry=node_modules/@modelcontextprotocol/server-everything/dist/index.js
tool_cache server-everything "$version" "$entry"
command -v npm >/dev/null 2>&1 || { echo "ensure-server-everything: npm is missing (scripts/deps.sh --tests installs it)" >&2; exit 1; }
mkdir -p "$cache"
work="$(mktemp -d "$cache/server-everything-src.XXXXXX")"
trap 'rm -rf "$work"' EXIT
npm install --prefix "$work" --no-audit --no-fund --save-exact --loglevel=error \
	"@modelcontextprotocol/server-everything@$version" >&2
[[ -x "$work/$entry" ]] || { echo "ensure-server-everything: the package has no $entry" >&2; exit 1; }
# Another install may have finished first: then its tree stays and this one goes.
mv -T "$work" "$cache/server-everything-$version" 2>/dev/null || [[ -x "$bin" ]] ||
	{ echo "ensure-server-everything: cannot move the install into $cache/server-everything-$version" >&2; exit 1; }
echo "$bin"
