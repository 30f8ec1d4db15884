# shellcheck shell=bash
# Sourced by the ensure-*.sh scripts, which build a tool once into the tool cache and
# print the binary's path: where that cache is, kept in one place.

# tool_cache NAME VERSION BINARY sets cache (the tool cache: $TRUEFORGE_TOOLS_DIR, else
# trueforge-tools under the user's cache directory) and bin (BINARY of NAME at VERSION in
# it); when bin is built already, it prints bin and ends the script.
tool_cache() {
	cache="${TRUEFORGE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trueforge-tools}"
	bin="$cache/$1-$2/$3"
	if [[ -x "$bin" ]]; then echo "$bin"; exit 0; fi
}
