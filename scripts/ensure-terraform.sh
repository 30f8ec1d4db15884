#!/usr/bin/env bash
# Builds Terraform 1.16 from the Go module proxy into the tool cache (once) and prints the
# binary's path: the third CLI of the acceptance matrix, the one with resource identity
# (Terraform >= 1.12), list resources and `terraform query` (>= 1.14) and actions (>= 1.14;
# their failure modes 1.16). The 1.11 on PATH has none of them, OpenTofu has no query and
# no actions. TERRAFORM_VERSION picks another release (the proxy serves an exact version
# even where its version list looks older).
#
# Built like OpenTofu (scripts/ensure-tofu.sh), inside a writable copy of the downloaded
# module, because Terraform's go.mod replaces ten of its own nested modules with
# directories (./internal/backend/remote-state/{azure,consul,cos,gcs,kubernetes,oci,oss,
# pg,s3} and ./internal/legacy). A module zip never contains nested modules, and the proxy
# does not serve them on their own (no tags), so the copy drops those replaces and the
# nine remote-state backends they provide: what is built is Terraform 1.16.4 with the
# local, http, inmem, remote and cloud backends. The acceptance tests use local state
# only; nothing else in Terraform imports those packages (init.go alone does).
set -euo pipefail
version="${TERRAFORM_VERSION:-v1.16.4}"
# shellcheck source=scripts/toolcache.sh
. "$(dirname "$0")/toolcache.sh"
tool_cache terraform "$version" terraform
mkdir -p "$cache" "$(dirname "$bin")"
dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/hashicorp/terraform@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
work="$(mktemp -d "$cache/terraform-src.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
nested='internal/backend/remote-state/(azure|consul|cos|gcs|kubernetes|oci|oss|pg|s3)|internal/legacy'
# go.mod: the requires and replaces of the nested modules.
sed -E -i "\#github\.com/hashicorp/terraform/($nested)[ \"]#d" "$work/go.mod"
# init.go: their imports and their entries in the backend table.
sed -E -i \
	-e "\#\"github\.com/hashicorp/terraform/internal/backend/remote-state/(azure|consul|cos|gcs|kubernetes|oci|oss|pg|s3)\"#d" \
	-e '/^[[:space:]]*"(azurerm|consul|cos|gcs|kubernetes|oss|pg|s3|oci)":/d' \
	"$work/internal/backend/init/init.go"
# The main module's own go.sum covers every remaining dependency; -mod=mod lets go drop
# the nested modules from the build list without a network tidy.
# Built inside the private copy and moved into place at once, so two builds at the same
# time (make test's and make generate's) never write one file.
(cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
	-ldflags "-X github.com/hashicorp/terraform/version.dev=no" -o "$work/terraform.bin" .) >&2
CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null "$work/terraform.bin" version >&2
mv -f "$work/terraform.bin" "$bin"
echo "$bin"
