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
