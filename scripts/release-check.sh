#!/usr/bin/env bash
# The release check, as `make release-check` and CI run it: goreleaser validates
# .goreleaser.yml and builds a snapshot of every archive into .tmp/dist (git-ignored),
# without signing or publishing; then the files the Terraform Registry needs are checked:
# the SHA256SUMS (every line verified), the manifest, and one zip per platform with the
# binary named as Terraform expects.
#
# goreleaser is built from the Go module proxy into the tool cache, once, as
# scripts/ensure-tofu.sh builds OpenTofu (about 4 minutes the first time); its module
# has no replace directives, so `go install module@version` works.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${GORELEASER_VERSION:-v2.15.1}"
cache="${TRUEFORGE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trueforge-tools}"
bin="$cache/goreleaser-$version/goreleaser"
if [[ ! -x $bin ]]; then
	echo "== building goreleaser $version from the Go module proxy (once, into $cache)"
	mkdir -p "$(dirname "$bin")"
	GOBIN="$(dirname "$bin")" CGO_ENABLED=0 go install -trimpath "github.com/goreleaser/goreleaser/v2@$version"
fi

echo "== goreleaser check"
"$bin" check

dist=.tmp/dist # the `dist` of .goreleaser.yml
echo "== goreleaser release --snapshot --clean --skip=sign,publish (into $dist)"
"$bin" release --snapshot --clean --skip=sign,publish

name=terraform-provider-trueforge
fail() {
	echo "release-check: $*" >&2
	exit 1
}
shopt -s nullglob
sums=("$dist"/${name}_*_SHA256SUMS)
((${#sums[@]} == 1)) || fail "expected one ${name}_<version>_SHA256SUMS in $dist, found ${#sums[@]}"
sums="${sums[0]}"
v="${sums##*/${name}_}"
v="${v%_SHA256SUMS}"
# The release uploads terraform-registry-manifest.json under this name (release.extra_files);
# a snapshot publishes nothing, so it is put beside the archives here, and the sums must
# hold its hash like every archive's.
manifest="$dist/${name}_${v}_manifest.json"
grep -q " ${manifest##*/}\$" "$sums" || fail "$sums does not list ${manifest##*/}"
cp terraform-registry-manifest.json "$manifest"
(cd "$dist" && sha256sum --check --strict --quiet "${sums##*/}") || fail "a checksum in $sums does not match its file"

# One zip per platform of .goreleaser.yml, each listed in the sums and holding the
# binary terraform-provider-trueforge_v<version> (.exe on Windows).
platforms=0
for os in freebsd windows linux darwin; do
	for arch in amd64 386 arm arm64; do
		# Left out by .goreleaser.yml's ignore list, and darwin/arm by Go (no such port).
		[[ $os/$arch == darwin/386 || $os/$arch == darwin/arm || $os/$arch == windows/arm ]] && continue
		zip="${name}_${v}_${os}_${arch}.zip"
		[[ -f $dist/$zip ]] || fail "missing $zip"
		grep -q " $zip\$" "$sums" || fail "$sums does not list $zip"
		exe="${name}_v${v}"
		[[ $os == windows ]] && exe+=.exe
		# A zip stores its file names uncompressed, so grep finds the entry without unzip
		# (CI runs this while deps.sh may still be installing packages).
		grep -aqF "$exe" "$dist/$zip" || fail "$zip does not hold $exe"
		platforms=$((platforms + 1))
	done
done
for arch in amd64 arm64; do
	tgz="trueforge-harness_${v}_linux_${arch}.tar.gz"
	[[ -f $dist/$tgz ]] || fail "missing $tgz"
	grep -q " $tgz\$" "$sums" || fail "$sums does not list $tgz"
done
echo "release-check: ok: version $v, $platforms provider zips and 2 harness archives, ${sums##*/} and ${manifest##*/} in $dist"
