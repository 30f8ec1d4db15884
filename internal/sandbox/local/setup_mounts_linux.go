//go:build linux

package local

import (
	"sort"
	"strings"
	"syscall"
)

// dropForeignMounts detaches, in the setup step's mount namespace (unshare's private copy
// of the host's), every loop-backed ext4 mount outside the staging directory: the disk
// images and volumes of other sandboxes, of this runtime or of any other on the host, and
// this sandbox's own once staged. Everything bwrap binds comes from the staging directory,
// bound before this runs, so the sandbox loses nothing; without it the copy pins each of
// those file systems for this sandbox's life, so that a volume's loop device stays
// attached after the host unmounts it and growing it offline (growVolume) is refused
// while any sandbox of anyone runs. The detach is private to this namespace (unshare's
// propagation is private): the host keeps its mounts.
func dropForeignMounts() {
	mounts, err := readMounts()
	if err != nil {
		return
	}
	var targets []string
	for _, m := range mounts {
		if m.FSType != "ext4" || !strings.HasPrefix(m.Source, "/dev/loop") ||
			m.Point == stagingDir || strings.HasPrefix(m.Point, stagingDir+"/") {
			continue
		}
		targets = append(targets, m.Point)
	}
	// The deepest first, so that a mount inside another goes before it.
	sort.Slice(targets, func(i, j int) bool { return len(targets[i]) > len(targets[j]) })
	for _, mp := range targets {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}
