package skills

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The canonical encoding of a skill: a header line, then each file in ascending byte
// order of its path, as a line "f <mode> <size> <path>" (mode 644, or 755 for an
// executable), its content, and a newline:
//
//	trueforge-skill/1
//	f 644 120 SKILL.md
//	<120 bytes>
//	f 755 31 scripts/run.sh
//	<31 bytes>
//
// Paths never hold a newline (CheckPath refuses control characters), so every line
// parses one way, and since files are sorted and unique a skill has exactly one
// encoding: the digest is the SHA-256 of it.
const header = "trueforge-skill/1\n"

// Encode is the canonical encoding of files, which must be sorted by path, unique, and
// pass CheckPath (Read's files do).
func Encode(files []File) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	for _, f := range files {
		mode := "644"
		if f.Executable {
			mode = "755"
		}
		fmt.Fprintf(&b, "f %s %d %s\n", mode, len(f.Content), f.Path)
		b.Write(f.Content)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Digest is the digest of an encoding: "sha256:" and its SHA-256 in hex.
func Digest(encoded []byte) string {
	sum := sha256.Sum256(encoded)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Decode reads a stored encoding back into a bundle, checking that it hashes to digest
// and that it keeps every rule Read enforces, so content that was changed in the
// database, or written by something other than the provider, never reaches a sandbox.
func Decode(encoded []byte, digest string) (*Bundle, error) {
	if got := Digest(encoded); got != digest {
		return nil, fmt.Errorf("the stored skill content hashes to %s, not %s: it was changed in the control-plane database; apply the configuration again to republish it", got, digest)
	}
	rest, ok := bytes.CutPrefix(encoded, []byte(header))
	if !ok {
		return nil, errors.New("the stored skill content is not a trueforge skill encoding")
	}
	var files []File
	var size int64
	for len(rest) > 0 {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, errors.New("the stored skill content ends inside a file header")
		}
		f, n, err := parseFileLine(string(line))
		if err != nil {
			return nil, err
		}
		if prob := CheckPath(f.Path); prob != nil {
			return nil, fmt.Errorf("the stored skill content has a file the provider refuses: %s", prob.Detail)
		}
		if len(files) > 0 && files[len(files)-1].Path >= f.Path {
			return nil, fmt.Errorf("the stored skill content is not in canonical order at %s", f.Path)
		}
		if len(files) == MaxFiles {
			return nil, fmt.Errorf("the stored skill content has more than %d files", MaxFiles)
		}
		if size += int64(n); size > MaxBytes {
			return nil, fmt.Errorf("the stored skill content is larger than %d bytes", MaxBytes)
		}
		if len(after) < n+1 || after[n] != '\n' {
			return nil, fmt.Errorf("the stored skill content ends inside %s", f.Path)
		}
		f.Content = after[:n:n]
		files = append(files, f)
		rest = after[n+1:]
	}
	return newBundle(files, func(msg, _ string) *Problem {
		return problem("Invalid SKILL.md", Manifest, "", "The stored %s %s.", Manifest, msg)
	}, "stored as "+digest)
}

// parseFileLine reads "f <mode> <size> <path>".
func parseFileLine(line string) (File, int, error) {
	fields := strings.SplitN(line, " ", 4)
	if len(fields) != 4 || fields[0] != "f" || (fields[1] != "644" && fields[1] != "755") {
		return File{}, 0, fmt.Errorf("the stored skill content has a malformed file header %q", line)
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil || n < 0 || strconv.Itoa(n) != fields[2] {
		return File{}, 0, fmt.Errorf("the stored skill content has a malformed file size in %q", line)
	}
	return File{Path: fields[3], Executable: fields[1] == "755"}, n, nil
}
