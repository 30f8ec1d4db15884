#!/usr/bin/env bash
# Fails when `make generate` would change docs/: runs scripts/generate-docs.sh in a
# temporary copy of the tree, from an empty docs/ (the work tree is never written), and
# compares the result with docs/, naming every file that differs, is missing or is
# extra. `make test` runs it last. Terraform 1.16 comes from the tool cache
# (scripts/ensure-terraform.sh builds it once).
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
tar -c --exclude=./.git --exclude=./.tmp --exclude=./bin --exclude=./trueforge-harness \
	--exclude=./terraform-provider-trueforge --exclude=.terraform . | tar -x -C "$work"
# From an empty docs/: a page nothing generates any more (a removed resource's) is found.
rm -rf "$work/docs"
if ! (cd "$work" && scripts/generate-docs.sh) >"$work/.generate.log" 2>&1; then
	cat "$work/.generate.log" >&2
	echo "docs-check: scripts/generate-docs.sh failed" >&2
	exit 1
fi
if ! diff -r docs "$work/docs" >/dev/null; then
	echo "docs-check: docs/ is stale; these files differ from what \`make generate\` writes:" >&2
	{ diff -rq docs "$work/docs" || true; } | sed -E \
		-e "s#^Only in $work/(docs[^:]*): (.*)#  missing: \\1/\\2 (make generate writes it)#" \
		-e "s#^Only in (docs[^:]*): (.*)#  extra:   \\1/\\2 (nothing generates it: delete it)#" \
		-e "s#^Files (docs/[^ ]*) and .* differ#  differs: \\1#" >&2
	echo "docs-check: the difference (- committed, + generated):" >&2
	{ diff -ru docs "$work/docs" || true; } | sed "s#$work/##g" | head -100 >&2
	echo "docs-check: run \`make generate\` and commit docs/ (deleting any page listed as extra)" >&2
	exit 1
fi
echo "docs-check: docs/ matches the schemas, templates/ and examples/ ($(find docs -type f | wc -l) files)"
