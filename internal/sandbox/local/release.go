package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// manifestVersion starts the release manifest; bump it whenever the release layout or
// the copy rules change, so that old and new releases get different ids.
const manifestVersion = "trueforge-release-manifest v2"

// releaseEntry is one item of the release layer, taken from the host.
type releaseEntry struct {
	rel    string // path inside the layer, e.g. "etc/passwd"
	src    string // host path
	mode   fs.FileMode
	size   int64
	mtime  time.Time
	target string // symlink target
	// content, when set, is written instead of copying src: a host file rewritten for
	// the sandbox (the account databases).
	content []byte
}

// Sandbox commands run as uid/gid sandboxUID (1000); the release names that account.
const sandboxAccount = "sandbox"

// sandboxAccounts rewrites the host's passwd or group for the release: system accounts
// (ids below 1000, and nobody/nogroup) stay, because packages and tools expect them;
// the host's people and service users (1000 and up) are left out, so untrusted code
// learns no host account names; and the sandbox user takes uid/gid 1000.
func sandboxAccounts(name string, host []byte) []byte {
	first, _ := strconv.Atoi(sandboxUID)
	var out bytes.Buffer
	for _, line := range strings.Split(string(host), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		id, err := strconv.Atoi(f[2])
		if err != nil || (id >= first && id != 65534) {
			continue
		}
		out.WriteString(line + "\n")
	}
	if name == "passwd" {
		fmt.Fprintf(&out, "%s:x:%s:%s:trueforge sandbox:/workspace:/bin/sh\n", sandboxAccount, sandboxUID, sandboxUID)
	} else {
		fmt.Fprintf(&out, "%s:x:%s:\n", sandboxAccount, sandboxUID)
	}
	return out.Bytes()
}

// PrepareRelease creates the release snapshot, the platform image every build starts
// from: a sanitized copy of the host /etc, a skeleton of /usr/local and empty opt, var,
// srv, home and root directories. The host /usr is its read-only lowest layer under usr.
//
// Its id is derived from what it copies, so a changed host /etc gives a new release and
// an unchanged one returns the existing release without copying anything.
func (b *Builder) PrepareRelease(ctx context.Context) (string, error) {
	entries, err := b.scanRelease(ctx)
	if err != nil {
		return "", fmt.Errorf("local: prepare release: %w", err)
	}
	manifest := renderManifest(entries)
	sum := sha256.Sum256([]byte(manifest))
	id := "release-" + hex.EncodeToString(sum[:])[:16]
	if b.isReady(id) {
		return id, nil
	}

	stage, err := os.MkdirTemp(b.tmpDir(), id+"-")
	if err != nil {
		return "", fmt.Errorf("local: prepare release %s: %w", id, err)
	}
	published := false
	defer func() {
		if !published {
			_ = removeAll(stage)
		}
	}()
	if err := writeReleaseLayer(ctx, filepath.Join(stage, "layer"), entries); err != nil {
		return "", fmt.Errorf("local: prepare release %s: %w", id, err)
	}
	if err := os.WriteFile(filepath.Join(stage, "manifest"), []byte(manifest), 0o600); err != nil {
		return "", fmt.Errorf("local: prepare release %s: %w", id, err)
	}
	if err := writeMeta(stage, meta{ID: id, Kind: kindRelease, Created: time.Now().UTC()}); err != nil {
		return "", fmt.Errorf("local: prepare release %s: %w", id, err)
	}
	if err := os.WriteFile(filepath.Join(stage, "ready"), nil, 0o600); err != nil {
		return "", fmt.Errorf("local: prepare release %s: %w", id, err)
	}
	if err := os.Rename(stage, b.snapDir(id)); err != nil {
		// Another process may have published the same release first.
		if b.isReady(id) {
			return id, nil
		}
		return "", fmt.Errorf("local: publish release %s: %w", id, err)
	}
	published = true
	return id, nil
}

// excludedEtc lists /etc paths never copied whatever their mode: credentials, their
// backups, host keys and host identity.
func excludedEtc(rel string) bool {
	switch rel {
	case "shadow", "gshadow", "shadow-", "gshadow-", "passwd-", "group-",
		"ssl/private", "sudoers", "sudoers.d", "security/opasswd", "machine-id":
		return true
	}
	return strings.HasPrefix(rel, "ssh/ssh_host_")
}

// scanRelease lists what goes into the release layer, in walk (sorted) order.
func (b *Builder) scanRelease(ctx context.Context) ([]releaseEntry, error) {
	skip := b.releaseSkips()
	var entries []releaseEntry
	err := filepath.WalkDir(b.hostEtc, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// Vanished or unreadable entries are simply not copied; only world-readable
			// things are wanted anyway.
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				if d != nil && d.IsDir() && p != b.hostEtc {
					return fs.SkipDir
				}
				if p == b.hostEtc {
					return err
				}
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(b.hostEtc, p)
		if err != nil {
			return err
		}
		if rel != "." && (excludedEtc(filepath.ToSlash(rel)) || skip(p)) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		e := releaseEntry{rel: filepath.Join("etc", rel), src: p, mode: info.Mode(), mtime: info.ModTime()}
		switch {
		case info.IsDir():
			if rel != "." && info.Mode().Perm()&0o005 != 0o005 {
				return fs.SkipDir
			}
		case info.Mode().IsRegular():
			if info.Mode().Perm()&0o004 == 0 {
				return nil
			}
			e.size = info.Size()
			if rel == "passwd" || rel == "group" {
				host, err := os.ReadFile(p)
				if err != nil {
					return nil //nolint:nilerr // an unreadable entry is left out of the listing
				}
				e.content = sandboxAccounts(rel, host)
				e.size = int64(len(e.content))
			}
		case info.Mode()&fs.ModeSymlink != 0:
			if e.target, err = os.Readlink(p); err != nil {
				return nil //nolint:nilerr // an unreadable entry is left out of the listing
			}
			e.size = int64(len(e.target))
		default:
			return nil // sockets, fifos, devices
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", b.hostEtc, err)
	}
	return append(entries, b.scanUsrLocal()...), nil
}

// releaseSkips returns a predicate for host paths that must never be copied even when
// world-readable: the builder's own data, and home directories that happen to live under
// /etc.
func (b *Builder) releaseSkips() func(string) bool {
	roots := []string{b.root}
	if r, err := filepath.EvalSymlinks(b.root); err == nil {
		roots = append(roots, r)
	}
	if data, err := os.ReadFile(filepath.Join(b.hostEtc, "passwd")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(line, ":")
			if len(f) >= 6 && filepath.IsAbs(f[5]) && within(f[5], "/etc") {
				roots = append(roots, filepath.Join(b.hostEtc, strings.TrimPrefix(filepath.Clean(f[5]), "/etc")))
			}
		}
	}
	return func(p string) bool {
		for _, r := range roots {
			if within(p, r) {
				return true
			}
		}
		return false
	}
}

// within reports whether p is dir or below it (but not dir "/" itself, which would
// exclude everything).
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	if dir == "/" {
		return false
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// scanUsrLocal lists /usr and /usr/local with its first-level directories. Their copies
// sit in the release layer above the host /usr, so that /usr/local/bin and the like are
// owned by the builder's user: unprivileged, host root's directories are not writable in
// the build's user namespace, and overlay copy-up takes the owner from the topmost layer.
func (b *Builder) scanUsrLocal() []releaseEntry {
	var entries []releaseEntry
	add := func(rel, src string) bool {
		info, err := os.Lstat(src)
		if err != nil || !info.IsDir() || info.Mode().Perm()&0o005 != 0o005 {
			return false
		}
		entries = append(entries, releaseEntry{rel: rel, src: src, mode: info.Mode()})
		return true
	}
	if !add("usr", b.hostUsr) || !add(filepath.Join("usr", "local"), filepath.Join(b.hostUsr, "local")) {
		return entries
	}
	des, err := os.ReadDir(filepath.Join(b.hostUsr, "local"))
	if err != nil {
		return entries
	}
	for _, de := range des {
		add(filepath.Join("usr", "local", de.Name()), filepath.Join(b.hostUsr, "local", de.Name()))
	}
	return entries
}

// runtimeManaged files are rewritten by container runtimes and network managers at every
// boot. Their content does not define the platform image, so only their presence is
// hashed: otherwise a restart would give a new release id under existing snapshots.
var runtimeManaged = map[string]bool{"etc/hosts": true, "etc/resolv.conf": true, "etc/hostname": true, "etc/mtab": true}

// renderManifest is the hashed description of a release. Directory mtimes are left out:
// they change whenever a file is added or removed, which the file list already shows.
func renderManifest(entries []releaseEntry) string {
	var sb strings.Builder
	sb.WriteString(manifestVersion + "\n")
	for _, e := range entries {
		perm := strconv.FormatUint(uint64(e.mode.Perm()), 8)
		switch {
		case e.mode.IsDir():
			fmt.Fprintf(&sb, "d %s %s\n", perm, strconv.Quote(e.rel))
		case e.mode.IsRegular() && runtimeManaged[e.rel]:
			fmt.Fprintf(&sb, "f %s %s\n", perm, strconv.Quote(e.rel))
		case e.content != nil:
			fmt.Fprintf(&sb, "f %s %d sha256:%x %s\n", perm, e.size, sha256.Sum256(e.content), strconv.Quote(e.rel))
		case e.mode.IsRegular():
			fmt.Fprintf(&sb, "f %s %d %d %s\n", perm, e.size, e.mtime.UnixNano(), strconv.Quote(e.rel))
		default:
			fmt.Fprintf(&sb, "l %d %s -> %s\n", e.mtime.UnixNano(), strconv.Quote(e.rel), strconv.Quote(e.target))
		}
	}
	return sb.String()
}

// writeReleaseLayer materializes the entries plus the fixed empty directories.
// Directories are created owner-writable and get their real mode at the end, so that
// copying into a read-only directory works without root.
func writeReleaseLayer(ctx context.Context, layer string, entries []releaseEntry) error {
	if err := os.Mkdir(layer, 0o755); err != nil {
		return err
	}
	type dirMode struct {
		path  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirMode
	for _, d := range []struct {
		rel  string
		mode fs.FileMode
	}{{"opt", 0o755}, {"var", 0o755}, {"var/tmp", 0o777 | fs.ModeSticky}, {"srv", 0o755}, {"home", 0o755}, {"root", 0o700}} {
		dirs = append(dirs, dirMode{path: filepath.Join(layer, d.rel), mode: d.mode})
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := filepath.Join(layer, e.rel)
		switch {
		case e.mode.IsDir():
			dirs = append(dirs, dirMode{path: dst, mode: e.mode, mtime: e.mtime})
			if err := os.MkdirAll(dst, 0o700); err != nil {
				return err
			}
		case e.content != nil:
			if err := os.WriteFile(dst, e.content, e.mode.Perm()); err != nil {
				return err
			}
			if err := os.Chmod(dst, e.mode.Perm()); err != nil {
				return err
			}
			_ = os.Chtimes(dst, e.mtime, e.mtime)
		case e.mode.IsRegular():
			if err := copyFile(e.src, dst, e.mode.Perm(), e.mtime); err != nil {
				return err
			}
		default:
			if err := os.Symlink(e.target, dst); err != nil {
				return err
			}
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d.path, 0o700); err != nil {
			return err
		}
	}
	// Deepest first, so that a parent's mode is set after its children are done.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := os.Chmod(d.path, d.mode&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid)); err != nil {
			return err
		}
		if !d.mtime.IsZero() {
			_ = os.Chtimes(d.path, d.mtime, d.mtime)
		}
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode, mtime time.Time) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, perm)
	}
	if err == nil {
		err = os.Chtimes(dst, mtime, mtime)
	}
	return err
}
