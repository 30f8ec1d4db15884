#!/usr/bin/env bash
# Gives the local sandbox backend, when it runs as root, the ids it maps sandboxes and
# builds to, so that none of their processes is host root: a system account (default
# "trueforge", no home, no login shell) with a subordinate uid and gid range in
# /etc/subuid and /etc/subgid, as rootful Podman and Docker's userns-remap use. The range
# is cut into slots of 65536 ids, one per sandbox (until it is deleted or archived) or
# running build. Safe to run again: it changes nothing that is already set up.
#
#   TRUEFORGE_SUBID_ACCOUNT  the account (default trueforge; the backend reads the same
#                            variable)
#   TRUEFORGE_SUBID_SLOTS    how many slots to give a new range (default 1024, that is
#                            67,108,864 ids)
set -euo pipefail
account="${TRUEFORGE_SUBID_ACCOUNT:-trueforge}"
slots="${TRUEFORGE_SUBID_SLOTS:-1024}"
if [[ $(id -u) -ne 0 ]]; then
	echo "setup-subids: run as root (the backend needs the ranges only when it runs as root)" >&2
	exit 1
fi
export PATH="$PATH:/usr/sbin:/sbin"
if ! id -u "$account" >/dev/null 2>&1; then
	useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
		--comment "trueforge sandboxes (owns their subordinate ids)" "$account"
fi
touch /etc/subuid /etc/subgid
has() { awk -F: -v a="$account" -v u="$(id -u "$account")" '($1 == a || $1 == u) && $3 >= 65536 { f = 1 } END { exit !f }' "$1"; }
if has /etc/subuid && has /etc/subgid; then
	exit 0
fi
# The first id after every range already given out (to anyone), on a slot boundary and
# at least 2^20, so that it stays clear of the ids accounts get.
start="$(awk -F: 'NF == 3 { e = $2 + $3; if (e > m) m = e } END { m = (m < 1048576) ? 1048576 : m; print int((m + 65535) / 65536) * 65536 }' /etc/subuid /etc/subgid)"
end=$((start + slots * 65536 - 1))
if ((end >= 4294967295)); then
	echo "setup-subids: no room for $slots slots after id $start; set TRUEFORGE_SUBID_SLOTS lower" >&2
	exit 1
fi
has /etc/subuid || usermod --add-subuids "$start-$end" "$account"
has /etc/subgid || usermod --add-subgids "$start-$end" "$account"
echo "setup-subids: $account has ids $start-$end ($slots sandboxes or builds at once)" >&2
