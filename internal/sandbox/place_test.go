package sandbox

import "testing"

// A runtime reaches a snapshot's files only in the same directory, on the same machine
// unless the directory is shared; the recorded form reads back as it was written.
func TestPlaceReaches(t *testing.T) {
	a := Place{Host: "a", Machine: "m-a", Dir: "/d"}
	shared := Place{Host: "a", Dir: "/mnt/tf", Shared: true}
	for _, c := range []struct {
		name      string
		here, got Place
		want      bool
	}{
		{"same machine and directory", a, a, true},
		{"same machine, renamed", Place{Host: "a2", Machine: "m-a", Dir: "/d"}, a, true},
		{"another machine", Place{Host: "b", Machine: "m-b", Dir: "/d"}, a, false},
		{"same machine, another directory", Place{Host: "a", Machine: "m-a", Dir: "/e"}, a, false},
		{"shared, built on another machine", Place{Host: "b", Dir: "/mnt/tf", Shared: true}, shared, true},
		{"shared here, built locally", Place{Host: "a", Dir: "/mnt/tf", Shared: true}, Place{Host: "a", Machine: "m-a", Dir: "/mnt/tf"}, false},
		{"local here, built into the shared directory", Place{Host: "a", Machine: "m-a", Dir: "/mnt/tf"}, shared, false},
		{"another shared directory", Place{Host: "b", Dir: "/mnt/other", Shared: true}, shared, false},
	} {
		if got := c.here.Reaches(c.got); got != c.want {
			t.Errorf("%s: Reaches = %v; want %v", c.name, got, c.want)
		}
	}
	for _, p := range []Place{a, shared} {
		back, ok := ParsePlace(p.Encode())
		if !ok || back != p {
			t.Errorf("ParsePlace(%s) = %+v, %v; want %+v", p.Encode(), back, ok, p)
		}
	}
	for _, s := range []string{"", "build-01", `{"host":"a"}`} {
		if _, ok := ParsePlace(s); ok {
			t.Errorf("ParsePlace(%q) took it for a place", s)
		}
	}
}
