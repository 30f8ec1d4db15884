#!/usr/bin/env bash
# The end-to-end demo (`make demo`, after `scripts/deps.sh` and `make install`): applies
# examples/quickstart on the embedded local backend in a fresh work dir, runs the demo
# agent with trueforge-harness (a question answered without a sandbox, then code, a file
# and a download in the same session, showing the moment the sandbox is provisioned),
# then runs the analyst agent's Code Mode script against a local MCP server
# (tools/demomcp) and loads its skill, then shows that
#   - a second plan is empty (plan -detailed-exitcode exits 0),
#   - changing an environment variable is an in-place update with no rebuild
#     (snapshot_id stays known, no build starts),
#   - changing the build script rebuilds the snapshot exactly once,
# and destroys everything. Offline: `terraform init` finds the provider in the implied
# local mirror (~/.terraform.d/plugins) where `make install` put it. Any unexpected
# result exits non-zero.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# TF_CLI picks the CLI (for example the OpenTofu binary from scripts/ensure-tofu.sh).
tf="${TF_CLI:-$(scripts/tf-cli.sh)}"
tfname="$(basename "$tf")"
if ! command -v python3 >/dev/null 2>&1; then
	echo "demo: python3 is needed to read plans and the control-plane database" >&2
	exit 1
fi

work="$root/.tmp/demo"
rm -rf "$work"
mkdir -p "$work"
cp -r examples/quickstart "$work/config"
: >"$work/empty.tfrc"

export TRUEFORGE_DATABASE_URL="$work/trueforge.db"
TRUEFORGE_SECRET_KEY="$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')"
export TRUEFORGE_SECRET_KEY
export TF_CLI_CONFIG_FILE="$work/empty.tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
unset TF_PLUGIN_CACHE_DIR TF_CLI_ARGS TF_CLI_ARGS_plan TF_CLI_ARGS_apply
cd "$work/config"

step_no=0
step() {
	step_no=$((step_no + 1))
	printf '\n\033[1m==== %d. %s\033[0m\n' "$step_no" "$*"
}
ok() { printf '\033[32mOK\033[0m   %s\n' "$*"; }
fail() {
	printf '\033[31mFAIL\033[0m %s\n' "$*" >&2
	exit 1
}
# run_expect CODE CMD...: runs CMD and fails the demo unless it exits with CODE.
run_expect() {
	local want=$1 rc=0
	shift
	echo "\$ $tfname ${*:2}"
	"$@" || rc=$?
	[[ $rc -eq $want ]] || fail "'$tfname ${*:2}' exited $rc; expected $want"
}
builds_started() {
	python3 - "$TRUEFORGE_DATABASE_URL" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT value FROM counters WHERE name = 'builds_started'").fetchone()
print(row[0] if row else 0)
EOF
}
output() { "$tf" output -raw "$1"; }
# layer_check SNAPSHOT MARKER: on the local backend, the build script's files are in the
# snapshot's layer (layout: internal/sandbox/local/doc.go).
layer_check() {
	local layer="$work/local-backend/snapshots/$1/layer"
	if [[ ! -d $layer ]]; then
		echo "     (no layer directory at $layer; skipping the look inside the snapshot)"
		return
	fi
	[[ -x $layer/usr/local/bin/hello ]] || fail "snapshot $1 lacks /usr/local/bin/hello"
	[[ "$(cat "$layer/etc/trueforge/build-marker")" == "$2" ]] || fail "snapshot $1 has build marker '$(cat "$layer/etc/trueforge/build-marker")'; expected '$2'"
	echo "     snapshot $1 layer: usr/local/bin/hello -> $(sed -n 2p "$layer/usr/local/bin/hello"); etc/trueforge/build-marker = $2"
}
# plan_check FILE MODE: asserts what a saved plan does to trueforge_environment.python
# (MODE live: in-place update, snapshot_id known and unchanged; MODE rebuild: in-place
# update, snapshot_id unknown) and that no other resource changes.
plan_check() {
	"$tf" show -json "$1" >"$1.json"
	python3 - "$1.json" "$2" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
mode = sys.argv[2]
changes = {rc["address"]: rc["change"] for rc in plan.get("resource_changes", [])}
others = {a: c["actions"] for a, c in changes.items() if c["actions"] != ["no-op"] and a != "trueforge_environment.python"}
if others:
    sys.exit(f"unexpected changes to other resources: {others}")
env = changes.get("trueforge_environment.python")
if env is None or env["actions"] != ["update"]:
    sys.exit(f"trueforge_environment.python: actions {env and env['actions']}; expected an in-place update")
before, after, unknown = env["before"], env["after"], env.get("after_unknown") or {}
changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and not unknown.get(k))
print(f"     plan: trueforge_environment.python update in-place; changed: {', '.join(changed) or '-'}; "
      f"unknown after apply: {', '.join(sorted(k for k, v in unknown.items() if v is True)) or '-'}")
if mode == "live":
    if unknown.get("snapshot_id") or after.get("snapshot_id") != before.get("snapshot_id"):
        sys.exit("snapshot_id does not stay known and unchanged: the plan would rebuild")
    print(f"     snapshot_id stays {after['snapshot_id']}")
elif mode == "rebuild":
    if not unknown.get("snapshot_id"):
        sys.exit("snapshot_id stays known: the plan would not rebuild")
    print(f"     snapshot_id {before['snapshot_id']} -> (known after apply)")
EOF
}

# The MCP server of the Code Mode step (tools/demomcp, MCP Go SDK) on a free loopback
# port, with a fresh token only the harness gets; the quickstart's facts_mcp_url points
# the analyst agent at it.
demo_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
DEMO_MCP_TOKEN="demo-mcp-$(python3 -c 'import secrets; print(secrets.token_hex(12))')"
export DEMO_MCP_TOKEN
export TF_VAR_facts_mcp_url="http://127.0.0.1:$demo_port/mcp"
(cd "$root" && go build -o "$work/bin/demomcp" ./tools/demomcp)
"$work/bin/demomcp" -listen "127.0.0.1:$demo_port" >"$work/demomcp.url" 2>"$work/demomcp.log" &
demomcp_pid=$!
trap 'kill "$demomcp_pid" 2>/dev/null || true' EXIT

step "Setup"
echo "work dir:                $work"
echo "CLI:                     $("$tf" version | head -1) ($tf)"
echo "TRUEFORGE_DATABASE_URL:  $TRUEFORGE_DATABASE_URL"
echo "TRUEFORGE_SECRET_KEY:    (a fresh random 32-byte key)"
echo "TF_CLI_CONFIG_FILE:      $TF_CLI_CONFIG_FILE (empty)"
echo "config:                  examples/quickstart -> $work/config"
echo "facts MCP server:        $TF_VAR_facts_mcp_url (tools/demomcp; token in DEMO_MCP_TOKEN, for the harness only)"

step "$tfname init (offline, provider from the local plugin mirror)"
run_expect 0 "$tf" init -input=false -no-color

step "$tfname apply: sandbox provider (release snapshot + default environment), environment, secret, agent"
t0=$SECONDS
run_expect 0 "$tf" apply -auto-approve -input=false
echo "apply took $((SECONDS - t0))s"

step "Outputs"
"$tf" output
snap1="$(output snapshot_id)"
hash1="$(output build_hash)"
[[ "$(output status)" == Ready ]] || fail "environment status is $(output status); expected Ready"
ok "environment python is Ready, snapshot $snap1"
layer_check "$snap1" v1
builds1="$(builds_started)"
echo "builds started so far: $builds1 (the default environment and python)"
[[ $builds1 -eq 2 ]] || fail "expected 2 builds after the first apply, got $builds1"

# The harness runs the agent that apply published, reading only the control-plane
# database. The agent's model is scripted (examples/quickstart/replay.json): a replay,
# labelled as such, so the demo needs no API key.
harness="$work/bin/trueforge-harness"
step "Build the harness static into $work/bin (never committed): it is also the netd helper of local sandboxes"
(cd "$root" && CGO_ENABLED=0 go build -ldflags "-X main.version=demo" -o "$harness" ./cmd/trueforge-harness)
"$harness" version
sandbox_rows() {
	python3 - "$TRUEFORGE_DATABASE_URL" <<'EOF2'
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM session_sandboxes").fetchone()[0])
EOF2
}
# turn FILE AGENT [--session ID] MESSAGE: shows the harness command of a turn, runs it and
# keeps its output in $work/FILE for the checks that follow.
turn() {
	local out="$work/$1"
	shift
	echo "\$ trueforge-harness run ${*:1:$#-1} \"${!#}\""
	"$harness" run "$@" | tee "$out"
}
# session_in FILE: the id of the session a turn's output in $work/FILE started.
session_in() { sed -n 's/^session \(s-[0-9a-f]*\) .*/\1/p' "$work/$1"; }

step "Supply chain: what the python environment's snapshot contains (package manifest, recorded when its build turned Ready)"
echo "\$ trueforge-harness snapshots show python | head -12"
"$harness" snapshots show python >"$work/manifest.txt" || fail "snapshots show python failed"
head -12 "$work/manifest.txt"
grep -q "^digest    sha256:" "$work/manifest.txt" || fail "the python environment's snapshot has no manifest digest"
"$harness" snapshots show python --sbom >"$work/sbom.json"
python3 - "$work/sbom.json" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"     SBOM: {d['bomFormat']} {d['specVersion']}, {len(d['components'])} components (trueforge-harness snapshots show python --sbom)")
EOF2
ok "manifest and CycloneDX SBOM of snapshot $snap1"

step "Harness: a question that needs no code (no sandbox is provisioned)"
turn turn1.txt demo "What is the capital of France?"
sid="$(session_in turn1.txt)"
[[ -n $sid ]] || fail "no session id in the harness output"
grep -q "Paris" "$work/turn1.txt" || fail "the answer did not come back"
grep -q "PROVISIONED" "$work/turn1.txt" && fail "a question with no code provisioned a sandbox"
[[ "$(sandbox_rows)" == 0 ]] || fail "a sandbox record exists after a question with no code"
ok "answered without a sandbox (session $sid, 0 sandboxes)"

step "Same session: run code, write a file, offer it for download (the sandbox is provisioned now)"
turn turn2.txt demo --session "$sid" "Run some code and give me a report"
grep -q "PROVISIONED" "$work/turn2.txt" || fail "no sandbox was provisioned for the code turn"
grep -q "hello from the python env" "$work/turn2.txt" || fail "the environment's hello tool did not run in the sandbox"
grep -q "385" "$work/turn2.txt" || fail "the Python code did not run"
[[ "$(grep -c PROVISIONED "$work/turn2.txt")" == 1 ]] || fail "more than one sandbox was provisioned for one session"
ok "one sandbox provisioned at the first exec, reused by write_file and offer_artifact"

step "Download the offered file: digest re-checked"
"$harness" files list "$sid"
"$harness" files get "$sid" report.md --dest "$work/report.md"
want="$(python3 - "$TRUEFORGE_DATABASE_URL" "$sid" <<'EOF2'
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT sha256 FROM artifacts WHERE session_id = ? AND path = 'report.md'", (sys.argv[2],)).fetchone()[0])
EOF2
)"
got="$(sha256sum "$work/report.md" | cut -d' ' -f1)"
[[ "$got" == "$want" ]] || fail "downloaded report.md has sha256 $got; the artifact records $want"
cat "$work/report.md"
ok "report.md downloaded, sha256 $got matches the artifact record"

step "The session's append-only event log (labelled as a replay)"
"$harness" sessions show "$sid"
"$harness" sandboxes list

step "Harness: Code Mode, a script in the sandbox calls the facts MCP server through the harness"
turn turn3.txt analyst "Which of France's, Japan's and Peru's capitals is largest?"
asid="$(session_in turn3.txt)"
grep -q "largest: Tokyo" "$work/turn3.txt" || fail "the Code Mode script did not combine the MCP results"
[[ "$(grep -c '\[mcp\] facts__.* completed' "$work/turn3.txt")" == 6 ]] || fail "expected 6 completed MCP calls from the script"
grep -q "$DEMO_MCP_TOKEN" "$work/turn3.txt" && fail "the MCP token appeared in the session output"
grep -c "called for user" "$work/demomcp.log" | grep -qx 6 || fail "the MCP server did not see 6 calls with the caller's identity"
sed -n 1p "$work/demomcp.log"
ok "the script made 6 MCP calls through the harness (the server saw each with the caller as X-Trueforge-User); the token never entered the sandbox"

step "Harness: a skill, published by apply from the configuration's folder, loaded into the sandbox on first use"
turn turn4.txt analyst --session "$asid" "Make it a table"
grep -q "load_skill" "$work/turn4.txt" || fail "the skill was not loaded"
grep -q "| Japan | Tokyo | 14,187,176 |" "$work/turn4.txt" || fail "the skill's script did not run from the sandbox"
ok "facts-table loaded at .skills/facts-table/ (read-only) and its script ran in the sandbox"
"$harness" sessions delete "$asid" >/dev/null

step "Delete the session (and its sandbox)"
"$harness" sessions delete "$sid"
[[ "$("$harness" sandboxes list | grep -c "$sid")" == 0 ]] || fail "the session's sandbox is still listed after delete"
ok "session and sandbox deleted"

step "$tfname plan -detailed-exitcode right after apply: must be empty"
run_expect 0 "$tf" plan -detailed-exitcode -input=false
ok "plan -detailed-exitcode exited 0: no changes, no drift"

step "Change only an environment variable (-var greeting=bonjour): an update without rebuild"
run_expect 2 "$tf" plan -detailed-exitcode -input=false -var greeting=bonjour -out=live.tfplan
plan_check live.tfplan live || fail "the env var change is not a live update"
ok "plan is an in-place update of env only; snapshot_id stays known"
run_expect 0 "$tf" apply -auto-approve -input=false live.tfplan
[[ "$(output snapshot_id)" == "$snap1" ]] || fail "snapshot_id changed to $(output snapshot_id) after an env var change"
builds2="$(builds_started)"
[[ $builds2 -eq $builds1 ]] || fail "an env var change started $((builds2 - builds1)) build(s)"
ok "applied: snapshot_id unchanged ($snap1), no build started (builds_started = $builds2)"

step "Change the build script (-var build_marker=v2): rebuilds once, in place"
run_expect 2 "$tf" plan -detailed-exitcode -input=false -var greeting=bonjour -var build_marker=v2 -out=rebuild.tfplan
plan_check rebuild.tfplan rebuild || fail "the build script change does not plan a rebuild"
ok "plan is an in-place update with snapshot_id (known after apply)"
t0=$SECONDS
run_expect 0 "$tf" apply -auto-approve -input=false rebuild.tfplan
echo "apply took $((SECONDS - t0))s"
snap2="$(output snapshot_id)"
[[ "$snap2" != "$snap1" ]] || fail "snapshot_id did not change after a build script change"
[[ "$(output build_hash)" != "$hash1" ]] || fail "build_hash did not change after a build script change"
[[ "$(output status)" == Ready ]] || fail "environment status is $(output status) after the rebuild; expected Ready"
builds3="$(builds_started)"
[[ $builds3 -eq $((builds2 + 1)) ]] || fail "the build script change started $((builds3 - builds2)) builds; expected 1"
ok "rebuilt once: snapshot $snap1 -> $snap2, status Ready (builds_started = $builds3)"
layer_check "$snap2" v2

step "$tfname plan -detailed-exitcode after the rebuild: must be empty again"
run_expect 0 "$tf" plan -detailed-exitcode -input=false -var greeting=bonjour -var build_marker=v2
ok "plan -detailed-exitcode exited 0"

step "$tfname destroy"
run_expect 0 "$tf" destroy -auto-approve -input=false -var greeting=bonjour -var build_marker=v2
left="$("$tf" state list | wc -l)"
[[ $left -eq 0 ]] || fail "$left resource(s) left in state after destroy"
ok "everything destroyed"

printf '\n\033[1mDemo passed.\033[0m The harness answered without a sandbox, then provisioned one for code, a file and a download. First apply built 2 snapshots (default + python); the env var change built none; the build script change built 1.\n'
