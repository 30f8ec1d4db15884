package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

const (
	// DefaultBuildTimeout bounds a build's wall-clock time when Builder.BuildTimeout is 0.
	DefaultBuildTimeout = 30 * time.Minute
	// MaxLayerDepth bounds how many layers a snapshot may stack (itself, its bases and the
	// release). Overlay lowerdir options must fit in one page; with the short relative
	// paths we pass this stays well inside it.
	MaxLayerDepth = 32

	kindRelease  = "release"
	kindSnapshot = "snapshot"

	// staleAge is how old an entry of tmp/ must be before NewBuilder removes it; nothing
	// legitimately stays in staging that long.
	staleAge = time.Hour
)

// TopDirs lists the top-level directories a layer holds, in mount order. Everything else
// in a sandbox's root is either a tmpfs, /proc, /dev, or a symlink into /usr.
func TopDirs() []string {
	return []string{"usr", "etc", "opt", "var", "srv", "home", "root"}
}

// Builder bakes snapshots on this host. It implements sandbox.SnapshotBuilder.
//
// Spec.CPU and Spec.MemoryGB are not enforced for builds: a CPU count has no rlimit, a
// memory rlimit (RLIMIT_AS) breaks runtimes that reserve address space, and cgroups are
// not reliably delegated to an unprivileged user. Spec.DiskGB is checked once the build
// script has exited, so a build can briefly use more before it fails.
//
// A Builder holds no mutable state; all of it is on disk, and several Builders (in one
// or several processes) may share a root.
type Builder struct {
	// BuildTimeout bounds the wall-clock time of a build, after which the supervisor kills
	// it. Zero means DefaultBuildTimeout. It is read when a build starts.
	BuildTimeout time.Duration

	root string
	// The host paths the release is made from; fields so that tests can point them at a
	// fake tree.
	hostEtc  string
	hostUsr  string
	hostRoot string

	// ids hands out id slots when this process is root (nil otherwise): no sandbox or
	// build process is ever host root (subids.go).
	ids *idMapper
	// exe is this program, which runs the setup step of builds (setup.go).
	exe string
	// place is where the backend that made this builder says its snapshots are
	// (place.go); zero for a builder made by NewBuilder alone: root, on this machine.
	place sandbox.Place
	// egressHosts, for tests only, resolves names to loopback addresses in the egress
	// proxy of builds, which then admits those addresses (buildegress.go).
	egressHosts map[string]string
}

var _ sandbox.SnapshotBuilder = (*Builder)(nil)

// NewBuilder returns a Builder keeping its data under root, which it creates (0700) if
// needed, and sweeps stale staging directories left by crashed processes.
func NewBuilder(root string) (*Builder, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local: builder root %q: %w", root, err)
	}
	b := &Builder{root: abs, hostEtc: "/etc", hostUsr: "/usr", hostRoot: "/"}
	if b.ids, err = newIDMapper(); err != nil {
		return nil, err
	}
	if b.exe, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("local: find this program (it runs the setup of builds): %w", err)
	}
	for _, d := range []string{b.root, b.snapshotsDir(), b.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("local: create builder directory %s: %w", d, err)
		}
	}
	if b.ids != nil {
		if err := b.ids.probeIDMap(b.hostUsr, b.root); err != nil {
			return nil, err
		}
	}
	b.sweepTmp()
	return b, nil
}

// Root returns the builder's data directory.
func (b *Builder) Root() string { return b.root }

func (b *Builder) snapshotsDir() string      { return filepath.Join(b.root, "snapshots") }
func (b *Builder) tmpDir() string            { return filepath.Join(b.root, "tmp") }
func (b *Builder) snapDir(id string) string  { return filepath.Join(b.snapshotsDir(), id) }
func (b *Builder) layerDir(id string) string { return filepath.Join(b.snapDir(id), "layer") }

func (b *Builder) timeout() time.Duration {
	if b.BuildTimeout > 0 {
		return b.BuildTimeout
	}
	return DefaultBuildTimeout
}

// sweepTmp removes staging and trash directories that no live operation can still own.
// Failures are ignored: the next sweep tries again.
func (b *Builder) sweepTmp() {
	entries, err := os.ReadDir(b.tmpDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && time.Since(info.ModTime()) > staleAge {
			_ = removeAll(filepath.Join(b.tmpDir(), e.Name()))
		}
	}
}

// validID accepts ids that are safe as one path element and inside overlay mount options
// and shell words without quoting: no separators, no ',' or ':', no leading dot.
func validID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("invalid snapshot id %q: must be 1 to 128 characters", id)
	}
	for i, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("invalid snapshot id %q: only letters, digits and (not first) . _ - are allowed", id)
		}
	}
	return nil
}

// meta is a snapshot's metadata file. Base links the layer chain.
type meta struct {
	ID           string                `json:"id"`
	Kind         string                `json:"kind"`
	Base         string                `json:"base,omitempty"`
	Spec         *sandbox.SnapshotSpec `json:"spec,omitempty"`
	BlockNetwork bool                  `json:"block_network,omitempty"`
	Created      time.Time             `json:"created"`
}

func (b *Builder) readMeta(id string) (meta, error) {
	if err := validID(id); err != nil {
		return meta{}, err
	}
	return readJSONFile[meta](filepath.Join(b.snapDir(id), "meta.json"), "metadata", "snapshot "+id)
}

func writeMeta(dir string, m meta) error {
	return writeJSONFile(filepath.Join(dir, "meta.json"), m)
}

func (b *Builder) isReady(id string) bool {
	_, err := os.Stat(filepath.Join(b.snapDir(id), "ready"))
	return err == nil
}

// Exists reports whether a snapshot (release or build, in any state) exists.
func (b *Builder) Exists(id string) bool {
	_, err := b.readMeta(id)
	return err == nil
}

// chain returns the ids of a ready snapshot and all its bases, topmost first, ending with
// the release.
func (b *Builder) chain(id string) ([]string, error) {
	var ids []string
	for cur := id; ; {
		if len(ids) == MaxLayerDepth {
			return nil, fmt.Errorf("snapshot %s stacks more than %d layers", id, MaxLayerDepth)
		}
		m, err := b.readMeta(cur)
		if err != nil {
			return nil, err
		}
		if !b.isReady(cur) {
			return nil, fmt.Errorf("snapshot %s is not ready", cur)
		}
		ids = append(ids, cur)
		if m.Kind == kindRelease {
			return ids, nil
		}
		if m.Base == "" {
			return nil, fmt.Errorf("snapshot %s has no base and is not a release", cur)
		}
		cur = m.Base
	}
}

// Layers returns the layer directories of a ready snapshot, topmost first: the snapshot's
// own layer, its bases' layers, then the release layer. Each holds the directories in
// TopDirs; the host /usr (HostUsr) is the implied lowest layer under usr.
func (b *Builder) Layers(id string) ([]string, error) {
	ids, err := b.chain(id)
	if err != nil {
		return nil, fmt.Errorf("local: layers of %s: %w", id, err)
	}
	layers := make([]string, len(ids))
	for i, l := range ids {
		layers[i] = b.layerDir(l)
	}
	return layers, nil
}

// HostUsr is the host directory used read-only as the lowest layer of /usr.
func (b *Builder) HostUsr() string { return b.hostUsr }

// checkOverlayPath rejects paths that cannot appear in an overlay lowerdir option.
func checkOverlayPath(p string) error {
	if !filepath.IsAbs(p) || strings.ContainsAny(p, ",:\\\n") {
		return fmt.Errorf("path %q cannot be used as an overlay layer (must be absolute, without , : or \\)", p)
	}
	return nil
}
