#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine: bubblewrap for the
# local backend, util-linux's unshare (present on Debian), and a Terraform-compatible CLI.
# Safe to run again: it installs only what is missing.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs) # sandbox disk limits (root)
command -v curl >/dev/null 2>&1 || need+=(curl)       # egress tests: real clients inside the test namespaces
command -v python3 >/dev/null 2>&1 || need+=(python3) # egress tests (urllib client); make bench statistics
if ((${#need[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "deps: missing ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq "${need[@]}" >&2
fi
