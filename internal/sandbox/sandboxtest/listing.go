package sandboxtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// testListing: a listing is cut to the limit asked for, sorted by path, and counts what
// it left out, on every backend alike (local reads names and stats only what it
// returns; Daytona's toolbox answers the whole directory and the runtime cuts it); the
// names a sandbox can make (newline, quotes, 255 bytes) list as they are, symlinks (a
// loop, a link to "..") do not break the listing, and a sparse file far over the read
// cap is refused from its size, at once.
func testListing(t *testing.T, f Fixture) {
	ctx := ctxFor(t)
	rt := f.Runtime
	create(t, f, sandbox.CreateRequest{ID: "listing"})
	long := strings.Repeat("l", 255)
	mustSh(t, f, "listing", `set -e
mkdir many && cd many && for i in $(seq -w 1 25); do : > "$i"; done && cd ..
printf x > "$(printf 'new\nline')"; printf x > "quo\"te's"; printf x > `+long+`
ln -s loop2 loop1; ln -s loop1 loop2; ln -s .. up
truncate -s 2G sparse`)

	list, err := rt.ListFiles(ctx, "listing", "many", 10)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range list.Entries {
		paths = append(paths, e.Path)
	}
	want := []string{}
	for i := 1; i <= 10; i++ {
		want = append(want, fmt.Sprintf("many/%02d", i))
	}
	if strings.Join(paths, ",") != strings.Join(want, ",") || list.Omitted != 15 || list.OmittedAtLeast {
		t.Fatalf("listing many/ cut to 10: %v, omitted %d (at least %v); want %v and 15 omitted", paths, list.Omitted, list.OmittedAtLeast, want)
	}
	if note := list.OmittedNote(); note != "15 more entries not shown" {
		t.Fatalf("omitted note %q", note)
	}

	list, err = rt.ListFiles(ctx, "listing", ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, e := range list.Entries {
		types[e.Path] = sandbox.FileType(e.Mode)
	}
	// Symlinks are left out here: the local runtime lists them as symlinks, while
	// Daytona's toolbox stats through them (a loop is left out of its listing, "up"
	// lists as a directory). Either way the listing itself must not fail.
	for p, typ := range map[string]string{"new\nline": "file", "quo\"te's": "file", long: "file", "many": "dir", "sparse": "file"} {
		if types[p] != typ {
			t.Errorf("the workspace lists %q as %q; want %s (listing: %v)", p, types[p], typ, types)
		}
	}
	if _, err := rt.ListFiles(ctx, "listing", "loop1", 0); err == nil {
		t.Error("listing a symlink loop as a directory succeeded")
	}
	if fi, err := rt.StatFile(ctx, "listing", "sparse"); err != nil || fi.Size != 2<<30 {
		t.Fatalf("stat of a 2 GiB sparse file: %+v %v", fi, err)
	}
	start := time.Now()
	if _, err := rt.ReadFile(ctx, "listing", "sparse", 0); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("reading a 2 GiB sparse file: %v; want ErrTooLarge", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("refusing a 2 GiB sparse file took %s: it was read, not refused from its size", took)
	}
	if b, err := rt.ReadFile(ctx, "listing", "new\nline", 0); err != nil || string(b) != "x" {
		t.Fatalf("reading a file named with a newline: %q %v", b, err)
	}
}
