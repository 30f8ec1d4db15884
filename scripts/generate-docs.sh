#!/usr/bin/env bash
# Regenerates docs/ from the provider's schema, templates/ and examples/ with tfplugindocs,
# then validates the result. `make generate` runs it; scripts/docs-check.sh (in `make test`)
# runs it in a temporary copy to catch stale docs.
#
# Offline: tfplugindocs comes from the Go module proxy (or the module cache), builds the
# provider itself and reads its schema through the terraform CLI on PATH (it downloads a
# CLI only when none is found, which we never let it do). OpenTofu cannot stand in here:
# tfplugindocs hard-codes registry.terraform.io addresses.
set -euo pipefail
cd "$(dirname "$0")/.."

TFPLUGINDOCS_VERSION="${TFPLUGINDOCS_VERSION:-v0.25.0}"
tfplugindocs=(go run "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs@${TFPLUGINDOCS_VERSION}")

# Terraform 1.16 (scripts/ensure-terraform.sh, built once into the tool cache) reads
# the schema: Terraform 1.11's schema JSON has no resource identity, without which
# tfplugindocs refuses the import-by-identity examples, and no list resources; 1.11
# cannot validate either.
PATH="$(dirname "$(scripts/ensure-terraform.sh)"):$PATH"
export PATH

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# No user CLI settings (and no warning about a missing ~/.terraformrc) leak into the run.
: >"$work/empty.tfrc"
export TF_CLI_CONFIG_FILE="$work/empty.tfrc" CHECKPOINT_DISABLE=1

echo "== terraform fmt examples/"
terraform fmt -recursive examples/

# The examples are documentation, so they must match the schema: validate them against a
# fresh build of the provider (dev_overrides, no init). The per-resource snippets refer to
# each other, so they are validated together as one configuration (the actions' with them:
# Terraform 1.16 validates action blocks); the quickstart alone.
# A resource's import-by-string-id.tf and import-by-identity.tf import the same address, so
# each is validated in a configuration of its own with the rest.
echo "== terraform validate examples/"
go build -o "$work/plugins/terraform-provider-trueforge" .
cat >"$work/dev.tfrc" <<EOT
provider_installation {
  dev_overrides {
    "trueforge/trueforge" = "$work/plugins"
  }
  direct {}
}
EOT
mkdir -p "$work/all" "$work/identity" "$work/quickstart"
n=0
while IFS= read -r f; do
	n=$((n + 1))
	name="$(printf '%02d' "$n")-$(echo "${f#examples/}" | tr / _)"
	[[ $f == */import-by-identity.tf ]] || cp "$f" "$work/all/$name"
	[[ $f == */import-by-string-id.tf ]] || cp "$f" "$work/identity/$name"
done < <(find examples/provider examples/resources examples/data-sources examples/actions -name '*.tf' | sort)
# The agent check action's example reads its check file (file() is evaluated by validate).
for d in all identity; do cp -r examples/actions/trueforge_agent_check/checks "$work/$d/"; done
cp -r examples/quickstart/. "$work/quickstart/"
# The list resources' examples (.tfquery.hcl, for `terraform query`) are validated with
# the provider block beside them (terraform validate -query).
mkdir -p "$work/query"
cp examples/provider/provider.tf "$work/query/"
for f in examples/list-resources/*/*.tfquery.hcl; do
	cp "$f" "$work/query/$(basename "$(dirname "$f")").tfquery.hcl"
done
for d in all identity quickstart query; do
	flags=()
	[[ $d == query ]] && flags=(-query)
	if ! (cd "$work/$d" && TF_CLI_CONFIG_FILE="$work/dev.tfrc" terraform validate -no-color "${flags[@]}" >"$work/validate-$d.log" 2>&1); then
		echo "generate-docs: the examples ($d) do not validate against the provider's schema:" >&2
		cat "$work/validate-$d.log" >&2
		exit 1
	fi
	echo "   examples ($d): valid"
done

echo "== tfplugindocs ${TFPLUGINDOCS_VERSION} generate"
"${tfplugindocs[@]}" generate \
	--provider-dir . \
	--provider-name trueforge \
	--rendered-provider-name trueforge \
	--examples-dir examples \
	--website-source-dir templates \
	--rendered-website-dir docs

echo "== tfplugindocs ${TFPLUGINDOCS_VERSION} validate"
"${tfplugindocs[@]}" validate --provider-dir . --provider-name trueforge

echo "docs/ is up to date:"
find docs -type f | sort | sed 's/^/  /'
