#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: unit tests, then the acceptance
# tests (TF_ACC=1, in-process provider, offline) under Terraform when it is on PATH and
# always under OpenTofu; beside them, the identity, import, query and action tests under
# Terraform 1.16 (a third CLI, built from the Go module proxy); last, the docs check (docs/ is what
# `make generate` writes). `make test` runs `make lint` before it. Tests that need a
# Daytona account run only with DAYTONA_API_KEY.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --tests

work="$(mktemp -d)"
# On any exit, wait for the Terraform 1.16 run below before its log goes.
trap 'wait; rm -rf "$work"' EXIT
# terraform-exec cannot parse tofu's version when the CLI config file is missing, so
# every run gets an existing, empty one (and no user settings leak into tests).
: >"$work/empty.tfrc"
export TF_CLI_CONFIG_FILE="$work/empty.tfrc" CHECKPOINT_DISABLE=1 TF_ACC=1
timeout="${TEST_TIMEOUT:-40m}"

# Run as root, the sandbox tests run again as an unprivileged account; the setup creates
# it (a system account without a home or a login shell) and passes its uid on. Without
# useradd they fall back to nobody.
if [[ $(id -u) -eq 0 ]] && command -v useradd >/dev/null 2>&1; then
	id -u trueforge-test >/dev/null 2>&1 ||
		useradd --system --no-create-home --shell /usr/sbin/nologin --comment "trueforge sandbox tests" trueforge-test
	TRUEFORGE_TEST_UID="$(id -u trueforge-test)"
	export TRUEFORGE_TEST_UID
fi

# The tests of a shared control plane start throwaway PostgreSQL clusters (internal/pgtest);
# deps.sh installed PostgreSQL, so here they must run, never skip.
export TRUEFORGE_REQUIRE_POSTGRES=1
# Likewise chromium, for the web page's end-to-end test (internal/harness/api/web).
export TRUEFORGE_REQUIRE_BROWSER=1
# Likewise clamd, for the malware scanner's tests (internal/clamtest starts throwaway ones).
export TRUEFORGE_REQUIRE_CLAMD=1
# Likewise the MCP reference server "everything" (internal/everythingtest), which runs on
# the node that deps.sh installed: installed into the tool cache once, from the npm registry.
TRUEFORGE_SERVER_EVERYTHING="$(scripts/ensure-server-everything.sh)"
export TRUEFORGE_SERVER_EVERYTHING TRUEFORGE_REQUIRE_SERVER_EVERYTHING=1
# Likewise Jaeger, the collector the tracing tests export to and read back from
# (internal/jaegertest): built from the Go module proxy into the tool cache once (several
# minutes on a fresh machine), in the background beside the Terraform 1.16 and OpenTofu
# builds below and go vet; waited for before the tests.
scripts/ensure-jaeger.sh >"$work/jaeger.path" 2>"$work/jaeger.log" &
jaeger_pid=$!

# Third CLI: Terraform 1.16, which has resource identity (Terraform 1.11 has none, so the
# identity tests skip there), list resources and `terraform query`, and actions (1.14 and
# later; under Terraform 1.11 and OpenTofu the query and action tests skip, saying so).
# Its build (about 4 minutes the first time) and its tests run beside the other two; they
# must pass, and none of them may skip.
(
	tf116="$(scripts/ensure-terraform.sh)"
	echo "== identity, import, query and action tests under $("$tf116" version | head -1)"
	TF_ACC_TERRAFORM_PATH="$tf116" go test -count=1 -timeout "$timeout" -v -run '^(TestAccIdentity|TestAccImport|TestAccQuery|TestAccAction)' ./internal/provider/ >"$work/tf116-test.log" 2>&1 ||
		{ cat "$work/tf116-test.log"; exit 1; }
	grep -E '^(--- |ok|FAIL)' "$work/tf116-test.log"
	if grep -q -- '--- SKIP' "$work/tf116-test.log"; then echo "a test skipped under Terraform 1.16" >&2; exit 1; fi
) >"$work/tf116.log" 2>&1 &
tf116_pid=$!
# Built while Terraform 1.16 builds, on a fresh machine.
tofu="$(scripts/ensure-tofu.sh)"

go vet ./...

# Jaeger is first needed by the tests: vet (which compiles every package) ran beside its build.
wait "$jaeger_pid" || { cat "$work/jaeger.log"; echo "test: building Jaeger failed" >&2; exit 1; }
TRUEFORGE_JAEGER="$(cat "$work/jaeger.path")"
export TRUEFORGE_JAEGER TRUEFORGE_REQUIRE_JAEGER=1

if command -v terraform >/dev/null 2>&1; then
	echo "== go test ./... (acceptance under $(terraform version | head -1))"
	TF_ACC_TERRAFORM_PATH="$(command -v terraform)" go test -count=1 -timeout "$timeout" ./...
	echo "== acceptance tests under $("$tofu" version | head -1)"
	TF_ACC_TERRAFORM_PATH="$tofu" TF_ACC_PROVIDER_NAMESPACE=hashicorp TF_ACC_PROVIDER_HOST=registry.opentofu.org \
		go test -count=1 -timeout "$timeout" ./internal/provider/...
else
	echo "== go test ./... (acceptance under $("$tofu" version | head -1); terraform is not on PATH)"
	TF_ACC_TERRAFORM_PATH="$tofu" TF_ACC_PROVIDER_NAMESPACE=hashicorp TF_ACC_PROVIDER_HOST=registry.opentofu.org \
		go test -count=1 -timeout "$timeout" ./...
fi

wait "$tf116_pid" || { cat "$work/tf116.log"; echo "test: the identity, import, query or action tests failed under Terraform 1.16" >&2; exit 1; }
cat "$work/tf116.log"

# docs/ must be what `make generate` writes; with the Terraform 1.16 built above.
echo "== docs check"
scripts/docs-check.sh
