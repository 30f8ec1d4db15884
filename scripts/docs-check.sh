#!/usr/bin/env bash
# Fails when `make generate` would change docs/: runs scripts/generate-docs.sh in a
# temporary copy of the tree (the work tree is never written) and compares the copy's
# docs/ with this one's, naming every file that differs. `make test` runs it.
# Terraform 1.13 comes from the tool cache (scripts/ensure-terraform113.sh builds it once).
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
tar -c --exclude=./.git --exclude=./.tmp --exclude=./bin --exclude=.terraform . | tar -x -C "$work"
if ! (cd "$work" && scripts/generate-docs.sh) >"$work/.generate.log" 2>&1; then
	cat "$work/.generate.log" >&2
	echo "docs-check: scripts/generate-docs.sh failed" >&2
	exit 1
fi
if ! diff -r docs "$work/docs" >"$work/.docs.diff"; then
	echo "docs-check: docs/ is stale; these files differ from what \`make generate\` writes:" >&2
	diff -rq docs "$work/docs" | sed -E "s#$work/##g; s/^/  /" >&2
	head -100 "$work/.docs.diff" | sed "s#$work/##g" >&2
	echo "docs-check: run \`make generate\` and commit docs/" >&2
	exit 1
fi
echo "docs-check: docs/ matches the schemas, templates/ and examples/ ($(find docs -type f | wc -l) files)"
