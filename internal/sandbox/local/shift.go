//go:build linux

package local

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Shifting moves a tree's ownership between an id slot and the ids as seen inside
// (0..65535), file by file (lchown; links are never followed). A build's layer is shifted
// back to 0.. when the build ends, so that layers are stored as a root filesystem is and
// any slot stacks them through an idmapped mount; a sandbox's files are shifted when an
// archive is restored into a new slot. chown clears set-user-ID and set-group-ID bits
// (and file capabilities), so the mode is put back after it; file capabilities set
// inside a build are not kept (they named the build's slot as their root anyway).

// shiftFunc maps a host uid and gid to new ones (unchanged when ok is false).
type shiftFunc func(uid, gid uint32) (nuid, ngid uint32, ok bool)

// fromSlot maps the slot's ids to the ids inside; others are left alone.
func fromSlot(r idRange) shiftFunc {
	return func(uid, gid uint32) (uint32, uint32, bool) {
		nu, ng := uid, gid
		if uid >= r.UID && uid-r.UID < idsPerSlot {
			nu = uid - r.UID
		}
		if gid >= r.GID && gid-r.GID < idsPerSlot {
			ng = gid - r.GID
		}
		return nu, ng, nu != uid || ng != gid
	}
}

// shiftTree applies f to the owner of every entry of dir, dir included.
func shiftTree(ctx context.Context, dir string, f shiftFunc) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		nu, ng, change := f(st.Uid, st.Gid)
		if !change {
			return nil
		}
		if err := os.Lchown(p, int(nu), int(ng)); err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 && fi.Mode()&fs.ModeSymlink == 0 {
			return os.Chmod(p, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		}
		return nil
	})
}

// The unshift step: the build supervisor (buildscript.go) runs this program in unshift
// mode once the build sandbox is gone, to give the layer's files back to 0...
const (
	unshiftArg = "trueforge-sandbox-unshift"
	unshiftEnv = "TRUEFORGE_SANDBOX_UNSHIFT" // "<dir> <uid> <gid>": the layer and the slot
)

func isUnshift() bool {
	return len(os.Args) == 2 && os.Args[1] == unshiftArg && os.Getenv(unshiftEnv) != ""
}

func runUnshift() int {
	err := func() error {
		f := strings.Fields(os.Getenv(unshiftEnv))
		if len(f) != 3 {
			return fmt.Errorf("%s: want <dir> <uid> <gid>", unshiftEnv)
		}
		uid, err1 := strconv.ParseUint(f[1], 10, 32)
		gid, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s: bad ids %q %q", unshiftEnv, f[1], f[2])
		}
		return shiftTree(context.Background(), f[0], fromSlot(idRange{UID: uint32(uid), GID: uint32(gid)}))
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge unshift:", err)
		return 1
	}
	return 0
}
