#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine: bubblewrap for the
# local backend, util-linux's unshare and prlimit (present on Debian), and a
# Terraform-compatible CLI; with --tests (scripts/test.sh), PostgreSQL's server binaries
# too, for the tests of a shared control plane, jq for the CI drift script, and chromium
# for the web page's end-to-end test, and Node.js with npm for the MCP reference server
# the MCP client's tests talk to, and ClamAV's daemon for the malware scanner's tests.
# Safe to run again: it installs only what is missing.
# Run as an ordinary user, it installs nothing: it names what is missing and exits 1.
set -euo pipefail
# have TOOL: TOOL is on PATH or in a system directory. Debian keeps tools such as
# mkfs.ext4 in /usr/sbin and /sbin, which are not on an ordinary user's PATH, and the
# local backend looks there too (findTool in internal/sandbox/local).
have() {
	command -v "$1" >/dev/null 2>&1 && return 0
	local d
	for d in /usr/bin /bin /usr/sbin /sbin /usr/local/bin; do
		[[ -f $d/$1 && -x $d/$1 ]] && return 0
	done
	return 1
}
need=()
have bwrap || need+=(bubblewrap)
{ have unshare && have prlimit; } || need+=(util-linux) # prlimit: limits of sandboxes without a writable cgroup
if [[ $(id -u) -eq 0 ]]; then
	have mkfs.ext4 || need+=(e2fsprogs) # sandbox disk images: only a root runtime makes them
fi
have curl || need+=(curl)       # egress tests: real clients inside the test namespaces
have python3 || need+=(python3) # egress tests (urllib client); make bench statistics
# PostgreSQL's server binaries (the shared control plane's tests start throwaway clusters
# with them; internal/pgtest). Debian keeps them in /usr/lib/postgresql/<version>/bin.
have_postgres() {
	have initdb && return 0
	compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}
pg_needed=0
clamd_needed=0
if [[ ${1:-} == --tests ]]; then
	have_postgres || { need+=(postgresql); pg_needed=1; }
	have jq || need+=(jq) # scripts/ci-drift.sh, which the CI drift test runs
	have chromium || need+=(chromium) # the web page's end-to-end test (internal/harness/api/web)
	# The MCP reference server "everything", a foreign MCP server for the MCP client's tests
	# (internal/everythingtest): node runs it, npm installs it (scripts/ensure-server-everything.sh).
	have node || need+=(nodejs)
	have npm || need+=(npm)
	# ClamAV's daemon, for the malware scanner's tests: they start a throwaway clamd with a
	# signature database of their own (internal/clamtest). freshclam is never run.
	have clamd || { need+=(clamav-daemon); clamd_needed=1; }
fi
if ((${#need[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "deps: missing ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ((pg_needed)); then
		# Only the binaries are wanted: no system cluster created and started on install.
		mkdir -p /etc/postgresql-common/createcluster.d
		echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/trueforge.conf
	fi
	# clamav-daemon and clamav-freshclam start their services on install, and freshclam
	# would try to download the real signature databases: a policy-rc.d that denies every
	# start (Docker images have one already) keeps the maintainer scripts from starting them.
	if ((clamd_needed)) && [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	apt-get update -qq >&2
	apt-get install -y -qq "${need[@]}" >&2
	if ((clamd_needed)) && [[ -d /run/systemd/system ]]; then
		# Nor left enabled to start at the next boot.
		systemctl disable --now clamav-daemon.socket clamav-daemon.service clamav-freshclam.service >&2 || true
	fi
fi
# As root the local backend maps sandboxes and builds to subordinate ids of a system
# account, never to host root (internal/sandbox/local/subids.go): create them once.
if [[ $(id -u) -eq 0 ]]; then
	"$(dirname "$0")/setup-subids.sh"
fi
