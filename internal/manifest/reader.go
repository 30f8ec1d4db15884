package manifest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"
)

// dumpMarker starts each file in ReaderScript's output.
const dumpMarker = "@@trueforge-manifest-file "

// ReaderScript is a POSIX sh script that prints, inside a sandbox, what Extract reads:
// each database file after a marker line, cut to the fields Extract uses (dpkg and apk
// fields, the Name and Version of core metadata, package.json whole up to 64 KiB). It
// needs only sh, grep, sed and head (coreutils or busybox), and never runs a package
// manager. ParseDump turns its output back into a tree for Extract.
var ReaderScript = readerScript()

func readerScript() string {
	abs := func(ps []string) string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = "$R/" + p
		}
		return strings.Join(out, " ")
	}
	var b strings.Builder
	// Errors (an unreadable file) would mix into the dump on backends that merge the
	// streams: dropped.
	b.WriteString("exec 2>/dev/null\n")
	// R (empty in a sandbox) lets a test point the script at a folder standing for /.
	b.WriteString("R=\"${TRUEFORGE_MANIFEST_ROOT:-}\"\n")
	b.WriteString("m='" + strings.TrimSpace(dumpMarker) + "'\n")
	b.WriteString("emit() { printf '\\n%s %s\\n' \"$m\" \"${1#\"$R\"}\"; }\n")
	fmt.Fprintf(&b, "for f in %s; do [ -f \"$f\" ] && { emit \"$f\"; head -c 65536 \"$f\"; }; done\n", abs(osReleaseFiles))
	fmt.Fprintf(&b, "for f in %s %s; do [ -f \"$f\" ] && { emit \"$f\"; grep -E '^(Package|Version|Architecture|Status|P|V|A):|^$' \"$f\"; }; done\n",
		abs(dpkgFiles), abs(apkFiles))
	fmt.Fprintf(&b, "for d in %s; do [ -d \"$d\" ] || continue; for f in \"$d\"/*.dist-info/METADATA \"$d\"/*.egg-info/PKG-INFO \"$d\"/*.egg-info; do [ -f \"$f\" ] && { emit \"$f\"; sed -n '1,/^$/p' \"$f\" | grep -E '^(Name|Version):'; }; done; "+
		// A dist-info folder without METADATA: an empty one, so that its name is read.
		"for f in \"$d\"/*.dist-info; do [ -d \"$f\" ] && [ ! -f \"$f/METADATA\" ] && emit \"$f/METADATA\"; done; done\n",
		abs(pythonDirs))
	fmt.Fprintf(&b, "for d in %s; do [ -d \"$d\" ] || continue; for f in \"$d\"/*/package.json \"$d\"/@*/*/package.json; do [ -f \"$f\" ] && { emit \"$f\"; head -c 65536 \"$f\"; }; done; done\n",
		abs(nodeDirs))
	b.WriteString("exit 0\n")
	return b.String()
}

// ParseDump reads ReaderScript's output into a tree of the files it printed.
func ParseDump(r io.Reader) (fs.FS, error) {
	files := fstest.MapFS{}
	var cur string
	var buf bytes.Buffer
	flush := func() {
		if cur != "" {
			files[cur] = &fstest.MapFile{Data: bytes.Clone(buf.Bytes()), Mode: 0o444}
		}
		buf.Reset()
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, dumpMarker); ok {
			flush()
			p := path.Clean(strings.TrimPrefix(strings.TrimRight(rest, "\r\n"), "/"))
			cur = ""
			if fs.ValidPath(p) && p != "." {
				cur = p
			}
		} else {
			buf.WriteString(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the package databases' dump: %w", err)
		}
	}
	flush()
	return files, nil
}

// ExtractDump is ParseDump followed by Extract.
func ExtractDump(r io.Reader) (Manifest, error) {
	fsys, err := ParseDump(r)
	if err != nil {
		return Manifest{}, err
	}
	return Extract(fsys)
}
