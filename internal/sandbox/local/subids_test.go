//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func writeSubIDFiles(t *testing.T, uid, gid string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	u, g := filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")
	if err := os.WriteFile(u, []byte(uid), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g, []byte(gid), 0o644); err != nil {
		t.Fatal(err)
	}
	return u, g
}

// TestSubIDsMissing: a root process without the account's ranges is refused with the
// commands that make them.
func TestSubIDsMissing(t *testing.T) {
	for _, c := range []struct{ name, uid, gid, want string }{
		{"no line", "alice:100000:65536\n", "alice:100000:65536\n", "no line for trueforge"},
		{"too small", "trueforge:100000:1000\n", "trueforge:100000:65536\n", "fewer than 65536"},
		{"no gids", "trueforge:100000:65536\n", "", "no line for trueforge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, g := writeSubIDFiles(t, c.uid, c.gid)
			_, err := loadSubIDs("trueforge", u, g)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range []string{c.want, "never runs a sandbox or build process as host root", "scripts/setup-subids.sh", "usermod --add-subuids"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	u, g := writeSubIDFiles(t, "alice:100000:65536\ntrueforge:1048576:655360\n", "trueforge:2097152:131072\n")
	m, err := loadSubIDs("trueforge", u, g)
	if err != nil {
		t.Fatal(err)
	}
	if m.uid != 1048576 || m.gid != 2097152 || m.slots != 2 {
		t.Fatalf("mapper %+v, want uid 1048576 gid 2097152 and 2 slots (the smaller range)", m)
	}
	if r := m.rangeOf(1); r.UID != 1048576+65536 || r.GID != 2097152+65536 || r.hostUID(1000) != 1048576+65536+1000 {
		t.Fatalf("slot 1: %+v", r)
	}
}

// TestSlotRegistry: sandboxes and builds never share a slot; a slot comes back when its
// sandbox is deleted, its build ends, or its sandbox's directory is long gone.
func TestSlotRegistry(t *testing.T) {
	m := &idMapper{account: "trueforge", uid: 1 << 20, gid: 1 << 20, slots: 3, registry: filepath.Join(t.TempDir(), "slots")}
	owners := []string{t.TempDir(), t.TempDir()}
	a, err := m.claim(owners[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.claim(owners[1])
	if err != nil {
		t.Fatal(err)
	}
	c, lock, err := m.claimTransient()
	if err != nil {
		t.Fatal(err)
	}
	if a.Slot == b.Slot || a.Slot == c.Slot || b.Slot == c.Slot {
		t.Fatalf("slots shared: %d %d %d", a.Slot, b.Slot, c.Slot)
	}
	if _, err := m.claim(t.TempDir()); err == nil || !strings.Contains(err.Error(), "all 3 id ranges") {
		t.Fatalf("a fourth claim on 3 slots: %v", err)
	}
	if _, _, err := m.claimTransient(); err == nil {
		t.Fatal("a second build took a taken slot")
	}
	// The build ends: its slot is free again, for a sandbox.
	lock.Close()
	d, err := m.claim(t.TempDir())
	if err != nil || d.Slot != c.Slot {
		t.Fatalf("claim after the build: %+v %v, want slot %d", d, err, c.Slot)
	}
	// A release by someone else's owner does nothing; the right one frees the slot.
	m.release(a, owners[1])
	if _, err := os.Lstat(m.linkPath(a.Slot)); err != nil {
		t.Fatal("a slot released by the wrong owner")
	}
	m.release(a, owners[0])
	if _, err := os.Lstat(m.linkPath(a.Slot)); err == nil {
		t.Fatal("slot not released")
	}
	// A sandbox directory that vanished without Delete: reclaimed once the claim is old.
	if err := os.RemoveAll(owners[1]); err != nil {
		t.Fatal(err)
	}
	e, err := m.claim(t.TempDir())
	if err != nil || e.Slot != a.Slot {
		t.Fatalf("claim: %+v %v, want the released slot %d", e, err, a.Slot)
	}
	if _, err := m.claim(t.TempDir()); err == nil {
		t.Fatal("a fresh claim of a vanished sandbox was taken over")
	}
	old := time.Now().Add(-2 * slotStaleAge)
	if err := lchtimes(m.linkPath(b.Slot), old); err != nil {
		t.Fatal(err)
	}
	f, err := m.claim(t.TempDir())
	if err != nil || f.Slot != b.Slot {
		t.Fatalf("claim: %+v %v, want the stale slot %d", f, err, b.Slot)
	}
}

// lchtimes sets a symlink's own times.
func lchtimes(path string, t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	return unix.Lutimes(path, []unix.Timeval{tv, tv})
}
