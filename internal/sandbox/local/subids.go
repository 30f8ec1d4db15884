//go:build linux

package local

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// No sandbox or build process is ever host root. A runtime or builder that runs as root
// maps every sandbox and build into a user namespace of its own whose ids 0..65535 are a
// range of host ids nobody else uses: a slot of the subordinate uid and gid ranges of a
// dedicated system account ("trueforge", /etc/subuid and /etc/subgid), as rootful Podman
// and Docker's userns-remap do. Root inside is then an unprivileged host uid: the kernel's
// checks by effective uid (sysctl files, /proc/sysrq-trigger, files owned by host root)
// refuse it, and what it owns on the host is only its own slot's files.
//
// A slot is 65536 ids. A sandbox holds its slot from Create until Delete (or Archive:
// the archive stores ids as seen inside, and Start takes a slot anew), because its files
// on the host (overlay upper directories, workspace) are owned by the slot's ids. A
// build holds a slot while it runs (an flock held by the build's processes) and gives
// the ids of its layer back to 0..65535 when it ends (unshift.go), so that snapshot
// layers are stored as a root filesystem is and any slot can stack them through an
// idmapped mount. A runtime that is not root needs none of this: its own uid is
// already unprivileged (the sandbox's one mapped id).
//
// The slot registry is system-wide, since every runtime and builder on the host shares
// the account's ranges: /var/lib/trueforge/uid-slots, one symlink per claimed sandbox slot
// ("<n>" -> the sandbox's directory) and one lock file per slot ("<n>.lock", flocked by
// a running build). A symlink whose sandbox directory is gone (a test's temporary root,
// a crash between Create and Delete) is stale after an hour and reclaimed.

const (
	// idsPerSlot is the size of each sandbox's or build's id range: 0..65535 inside, as
	// in a container, so that system accounts, nobody (65534) and the sandbox user (1000)
	// all exist.
	idsPerSlot = 65536

	// DefaultSubIDAccount is the account whose subordinate ids the sandboxes use.
	DefaultSubIDAccount = "trueforge"
	// SubIDAccountEnv overrides DefaultSubIDAccount.
	SubIDAccountEnv = "TRUEFORGE_SUBID_ACCOUNT"

	slotRegistry = "/var/lib/trueforge/uid-slots"
	// slotStaleAge is how long a claim whose sandbox directory is missing is kept: a
	// Create stages its directory elsewhere for a moment before renaming it into place.
	slotStaleAge = time.Hour
)

// idMapper hands out the slots of the account's subordinate ranges.
type idMapper struct {
	account  string
	uid, gid uint32 // first host uid and gid of slot 0
	slots    int
	registry string

	probe    sync.Once
	probeErr error
}

// idRange is the host ids of one slot: inner id n is host uid uid+n and gid gid+n.
type idRange struct {
	Slot int    `json:"slot"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
}

// hostUID and hostGID translate an id inside the slot's namespace to the host's.
func (r idRange) hostUID(inner uint32) uint32 { return r.UID + inner }
func (r idRange) hostGID(inner uint32) uint32 { return r.GID + inner }

// newIDMapper returns the mapper of this host's account, or nil when this process is not
// root (no mapping is needed then). A root process without the account's ranges gets an
// error that says how to create them.
func newIDMapper() (*idMapper, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	account := os.Getenv(SubIDAccountEnv)
	if account == "" {
		account = DefaultSubIDAccount
	}
	m, err := loadSubIDs(account, "/etc/subuid", "/etc/subgid")
	if err != nil {
		return nil, err
	}
	m.registry = slotRegistry
	return m, nil
}

// probeIDMap checks once per mapper (Builder) that this kernel idmaps mounts of the given
// directories (the host /usr and the builder's root), so that a host without them is
// refused at once, with the reason, rather than at its first sandbox.
func (m *idMapper) probeIDMap(dirs ...string) error {
	m.probe.Do(func() {
		sleepBin, err := findTool("sleep")
		if err != nil {
			m.probeErr = err
			return
		}
		r := m.rangeOf(0)
		ns, err := newUserNS("", sleepBin, 0, r.UID, r.GID, idsPerSlot)
		if err != nil {
			m.probeErr = fmt.Errorf("local: make a user namespace for id slots: %w", err)
			return
		}
		defer syscall.Close(ns)
		for _, d := range dirs {
			if err := probeIDMapDir(d, ns); err != nil {
				m.probeErr = fmt.Errorf("local: %w", err)
				return
			}
		}
	})
	return m.probeErr
}

// subIDSetupHint is how an administrator creates the ranges.
func subIDSetupHint(account string) string {
	return fmt.Sprintf("create them once with scripts/setup-subids.sh from the trueforge sources, or by hand: "+
		"useradd --system --no-create-home --shell /usr/sbin/nologin %[1]s && "+
		"usermod --add-subuids 1048576-68157439 --add-subgids 1048576-68157439 %[1]s "+
		"(1024 ranges of 65536 ids; any range free on this host works, at least 65536 ids, one sandbox or build per 65536)", account)
}

// loadSubIDs reads the account's first range of at least idsPerSlot ids from each file.
func loadSubIDs(account, subuid, subgid string) (*idMapper, error) {
	uid, ucount, err := subIDRange(subuid, account)
	if err == nil {
		var gid, gcount uint32
		gid, gcount, err = subIDRange(subgid, account)
		if err == nil {
			n := min(ucount, gcount) / idsPerSlot
			return &idMapper{account: account, uid: uid, gid: gid, slots: int(n)}, nil
		}
	}
	return nil, fmt.Errorf("local: this process runs as root, and the local backend never runs a sandbox or build process as host root: "+
		"it maps them to the subordinate uid and gid ranges of the system account %q, which are not set up (%v); %s",
		account, err, subIDSetupHint(account))
}

// subIDRange finds the account's first range of at least idsPerSlot ids in an
// /etc/subuid-style file ("name:start:count" lines; the name may be the numeric uid).
func subIDRange(path, account string) (start, count uint32, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	names := map[string]bool{account: true}
	if u, err := lookupUID(account); err == nil {
		names[strconv.FormatUint(uint64(u), 10)] = true
	}
	small := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 || !names[fields[0]] {
			continue
		}
		s, err1 := strconv.ParseUint(fields[1], 10, 32)
		c, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil || s+c > 1<<32 {
			continue
		}
		if c < idsPerSlot {
			small = true
			continue
		}
		return uint32(s), uint32(c), nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if small {
		return 0, 0, fmt.Errorf("%s gives %s fewer than %d ids", path, account, idsPerSlot)
	}
	return 0, 0, fmt.Errorf("no line for %s in %s", account, path)
}

// lookupUID finds an account's uid in /etc/passwd (os/user would need cgo or the same).
func lookupUID(name string) (uint32, error) {
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == name {
			v, err := strconv.ParseUint(f[2], 10, 32)
			return uint32(v), err
		}
	}
	return 0, fmt.Errorf("no account %s", name)
}

// rangeOf returns the host ids of slot n.
func (m *idMapper) rangeOf(n int) idRange {
	return idRange{Slot: n, UID: m.uid + uint32(n)*idsPerSlot, GID: m.gid + uint32(n)*idsPerSlot}
}

func (m *idMapper) linkPath(n int) string { return filepath.Join(m.registry, strconv.Itoa(n)) }
func (m *idMapper) lockPath(n int) string { return filepath.Join(m.registry, strconv.Itoa(n)+".lock") }

func (m *idMapper) errFull() error {
	return fmt.Errorf("local: all %d id ranges of account %s are taken (one per sandbox that is not archived, and one per running build): "+
		"delete or archive sandboxes, or give %s a larger range in /etc/subuid and /etc/subgid", m.slots, m.account, m.account)
}

// claim reserves a slot for a sandbox whose directory is owner until release.
func (m *idMapper) claim(owner string) (idRange, error) {
	if err := os.MkdirAll(m.registry, 0o700); err != nil {
		return idRange{}, fmt.Errorf("local: id slot registry: %w", err)
	}
	if m.slots == 0 {
		return idRange{}, m.errFull()
	}
	first := rand.IntN(m.slots)
	for i := range m.slots {
		n := (first + i) % m.slots
		err := os.Symlink(owner, m.linkPath(n))
		if errors.Is(err, fs.ErrExist) {
			if !m.reclaimStale(n) {
				continue
			}
			err = os.Symlink(owner, m.linkPath(n))
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return idRange{}, fmt.Errorf("local: claim id slot: %w", err)
		}
		// A build may hold the slot's lock (it checked for the link before we made it):
		// give the slot back and take another.
		if buildHolds(m.lockPath(n)) {
			_ = os.Remove(m.linkPath(n))
			continue
		}
		return m.rangeOf(n), nil
	}
	return idRange{}, m.errFull()
}

// release gives back a sandbox's slot if owner still holds it.
func (m *idMapper) release(r idRange, owner string) {
	if t, err := os.Readlink(m.linkPath(r.Slot)); err == nil && t == owner {
		_ = os.Remove(m.linkPath(r.Slot))
	}
}

// reclaimStale removes slot n's claim if its sandbox is gone, reporting whether it did.
func (m *idMapper) reclaimStale(n int) bool {
	p := m.linkPath(n)
	t, err := os.Readlink(p)
	if err != nil {
		return false
	}
	if _, err := os.Stat(t); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if info, err := os.Lstat(p); err != nil || time.Since(info.ModTime()) < slotStaleAge {
		return false
	}
	return os.Remove(p) == nil
}

// buildHolds reports whether a build holds the lock file at path.
func buildHolds(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// claimTransient reserves a slot for a build: the returned file holds the slot's flock
// for as long as it (or a copy inherited by the build's processes) stays open.
func (m *idMapper) claimTransient() (idRange, *os.File, error) {
	if err := os.MkdirAll(m.registry, 0o700); err != nil {
		return idRange{}, nil, fmt.Errorf("local: id slot registry: %w", err)
	}
	first := rand.IntN(max(m.slots, 1))
	for i := range m.slots {
		n := (first + i) % m.slots
		f, err := os.OpenFile(m.lockPath(n), os.O_RDONLY|os.O_CREATE, 0o600)
		if err != nil {
			return idRange{}, nil, fmt.Errorf("local: id slot lock: %w", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		if _, err := os.Lstat(m.linkPath(n)); err == nil && !m.reclaimStale(n) {
			f.Close()
			continue
		}
		return m.rangeOf(n), f, nil
	}
	return idRange{}, nil, m.errFull()
}
