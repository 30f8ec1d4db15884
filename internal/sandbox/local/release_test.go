package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepareReleaseFromHost(t *testing.T) {
	b, err := NewBuilder(filepath.Join(t.TempDir(), "local-backend"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(b.Root())
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("builder root: %v, mode %v; want 0700", err, info.Mode())
	}
	id, err := b.PrepareRelease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "release-") || len(id) != len("release-")+16 {
		t.Fatalf("release id %q", id)
	}
	layer := b.layerDir(id)
	if _, err := os.Stat(filepath.Join(layer, "etc", "passwd")); err != nil {
		t.Errorf("passwd not copied: %v", err)
	}
	for _, p := range []string{"shadow", "gshadow", "shadow-", "machine-id", "sudoers", "ssl/private"} {
		if _, err := os.Lstat(filepath.Join(layer, "etc", p)); err == nil {
			t.Errorf("/etc/%s was copied", p)
		}
	}
	for _, d := range TopDirs() {
		if info, err := os.Stat(filepath.Join(layer, d)); err != nil || !info.IsDir() {
			t.Errorf("release layer lacks %s/: %v", d, err)
		}
	}
	if info, err := os.Stat(filepath.Join(layer, "root")); err == nil && info.Mode().Perm() != 0o700 {
		t.Errorf("root/ has mode %v", info.Mode())
	}

	again, err := b.PrepareRelease(context.Background())
	if err != nil || again != id {
		t.Fatalf("second PrepareRelease = %q, %v; want %q", again, err, id)
	}
	st, err := b.BuildState(context.Background(), id)
	if err != nil || st.Status != "Ready" {
		t.Fatalf("release state %+v, %v", st, err)
	}
	layers, err := b.Layers(id)
	if err != nil || len(layers) != 1 || layers[0] != layer {
		t.Fatalf("Layers(release) = %v, %v", layers, err)
	}
}

// TestReleaseCopyRules runs the copy rules on a fake /etc, where key files can be
// world-readable so that only the exclusion list keeps them out.
func TestReleaseCopyRules(t *testing.T) {
	tmp := t.TempDir()
	etc := filepath.Join(tmp, "etc")
	write := func(rel string, mode os.FileMode) {
		p := filepath.Join(etc, rel)
		mkdirs(t, filepath.Dir(p))
		if err := os.WriteFile(p, []byte(rel), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("passwd", 0o644)
	write("hostname", 0o444)
	write("shadow", 0o644)
	write("gshadow-", 0o644)
	write("secret.conf", 0o640)
	write("ssh/ssh_config", 0o644)
	write("ssh/ssh_host_ed25519_key", 0o644)
	write("ssh/ssh_host_ed25519_key.pub", 0o644)
	write("ssl/private/key.pem", 0o644)
	write("ssl/certs/ca.pem", 0o644)
	write("sudoers.d/admin", 0o644)
	write("security/opasswd", 0o644)
	write("closed/file", 0o644)
	write("svc/home/.profile", 0o644)
	if err := os.Chmod(filepath.Join(etc, "closed"), 0o750); err != nil {
		t.Fatal(err)
	}
	write("passwd", 0o644)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nsvc:x:9:9::/etc/svc/home:/bin/false\nalice:x:1000:1000:Alice:/home/alice:/bin/bash\nops:x:1001:1001::/home/ops:/bin/sh\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/share/zoneinfo/UTC", filepath.Join(etc, "localtime")); err != nil {
		t.Fatal(err)
	}
	// A builder whose data lives inside the fake /etc must not copy itself.
	b, err := NewBuilder(filepath.Join(etc, "trueforge"))
	if err != nil {
		t.Fatal(err)
	}
	b.hostEtc = etc
	b.hostUsr = filepath.Join(tmp, "usr")
	mkdirs(t, filepath.Join(b.hostUsr, "local", "bin"))
	id, err := b.PrepareRelease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	layer := b.layerDir(id)
	for _, p := range []string{"etc/passwd", "etc/hostname", "etc/ssh/ssh_config", "etc/ssl/certs/ca.pem", "etc/svc", "usr/local/bin"} {
		if _, err := os.Lstat(filepath.Join(layer, p)); err != nil {
			t.Errorf("%s missing: %v", p, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(layer, "etc", "localtime")); err != nil || target != "/usr/share/zoneinfo/UTC" {
		t.Errorf("localtime symlink: %q, %v", target, err)
	}
	if info, err := os.Stat(filepath.Join(layer, "etc", "hostname")); err != nil || info.Mode().Perm() != 0o444 {
		t.Errorf("hostname mode not kept: %v", err)
	}
	for _, p := range []string{"shadow", "gshadow-", "secret.conf", "ssh/ssh_host_ed25519_key", "ssh/ssh_host_ed25519_key.pub",
		"ssl/private", "sudoers.d", "security/opasswd", "closed", "svc/home", "trueforge"} {
		if _, err := os.Lstat(filepath.Join(layer, "etc", p)); err == nil {
			t.Errorf("etc/%s was copied", p)
		}
	}

	// Host accounts from uid 1000 up stay out; the sandbox user is uid 1000.
	passwd, err := os.ReadFile(filepath.Join(layer, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	want := "root:x:0:0:root:/root:/bin/sh\nsvc:x:9:9::/etc/svc/home:/bin/false\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n" +
		"sandbox:x:1000:1000:trueforge sandbox:/workspace:/bin/sh\n"
	if string(passwd) != want {
		t.Errorf("release passwd:\n%s\nwant:\n%s", passwd, want)
	}

	// A changed /etc is a new release.
	write("motd", 0o644)
	id2, err := b.PrepareRelease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id {
		t.Fatal("release id did not change with /etc")
	}
}

// mkdirs creates a directory and its missing parents with mode 0755 whatever the umask:
// the release copies only world-readable directories.
func mkdirs(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); err == nil {
		return
	}
	mkdirs(t, filepath.Dir(dir))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
