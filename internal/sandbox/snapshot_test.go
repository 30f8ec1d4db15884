package sandbox

import "testing"

func TestBuildHashCoversEveryBuildInputAndNothingElse(t *testing.T) {
	base := SnapshotSpec{Image: "platform", BuildScript: "echo hi", CPU: 1, MemoryGB: 1, DiskGB: 3, Triggers: map[string]string{"a": "1", "b": "2"}}
	h := base.BuildHash()
	same := base
	same.Triggers = map[string]string{"b": "2", "a": "1"}
	if same.BuildHash() != h {
		t.Fatal("the hash depends on map order")
	}
	variants := map[string]func(s *SnapshotSpec){
		"image":        func(s *SnapshotSpec) { s.Image = "other" },
		"build_script": func(s *SnapshotSpec) { s.BuildScript = "echo bye" },
		"cpu":          func(s *SnapshotSpec) { s.CPU = 2 },
		"memory":       func(s *SnapshotSpec) { s.MemoryGB = 2 },
		"disk":         func(s *SnapshotSpec) { s.DiskGB = 4 },
		"triggers":     func(s *SnapshotSpec) { s.Triggers = map[string]string{"a": "1", "b": "3"} },
		"gpu":          func(s *SnapshotSpec) { s.GPU = 1 },
		"gpu_type":     func(s *SnapshotSpec) { s.GPUType = "H100" },
		"dockerfile":   func(s *SnapshotSpec) { s.Dockerfile = "FROM alpine\n" },
		"context_hash": func(s *SnapshotSpec) { s.ContextHash = "abc" },
		"entrypoint":   func(s *SnapshotSpec) { s.Entrypoint = []string{"sleep", "infinity"} },
		"region":       func(s *SnapshotSpec) { s.Region = "eu" },
		"registry":     func(s *SnapshotSpec) { s.Registry = "ghcr" },
		"rebuild":      func(s *SnapshotSpec) { s.Rebuild = 1 },
	}
	for name, change := range variants {
		v := base
		change(&v)
		if v.BuildHash() == h {
			t.Errorf("changing %s does not change the build hash", name)
		}
	}
	if id := SnapshotID(h); len(id) != len("snap-")+20 {
		t.Errorf("SnapshotID = %q", id)
	}
}

// Inputs added after the first release leave the hash of a spec that does not set them
// unchanged, so an upgrade never rebuilds an existing snapshot. The value is the hash
// the first release computed for this spec.
func TestBuildHashOfFirstReleaseSpecIsStable(t *testing.T) {
	s := SnapshotSpec{Image: "platform", BuildScript: "echo hi", CPU: 1, MemoryGB: 1, DiskGB: 3, Triggers: map[string]string{"a": "1"}}
	if got, want := s.BuildHash(), firstReleaseHash; got != want {
		t.Fatalf("BuildHash = %s, want the first release's %s", got, want)
	}
}

// firstReleaseHash was computed by the first release's BuildHash (encoding v1 without the
// later inputs).
const firstReleaseHash = "08d2ed735eb3914392d26e311a176879c1d5d1b06952a5e99ceb8f41e2a71d10"
