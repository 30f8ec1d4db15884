package sandbox

import (
	"strings"
	"testing"
)

// The mount rules every runtime applies, and the provider asks at plan time.
func TestCheckVolumeMounts(t *testing.T) {
	for _, c := range []struct {
		mounts []VolumeMount
		want   string // "" when accepted
	}{
		{[]VolumeMount{{Volume: "a", MountPath: "/data"}, {Volume: "b", MountPath: "/workspace/shared", Subpath: "team/x"}}, ""},
		{[]VolumeMount{{Volume: "a", MountPath: "/data"}, {Volume: "b", MountPath: "/data/b"}}, "overlap"},
		{[]VolumeMount{{Volume: "a", MountPath: "/data/b"}, {Volume: "b", MountPath: "/data"}}, "overlap"},
		{[]VolumeMount{{Volume: "a", MountPath: "/data"}, {Volume: "b", MountPath: "/data"}}, "overlap"},
		{[]VolumeMount{{Volume: "a", MountPath: "/data"}, {Volume: "b", MountPath: "/database"}}, ""},
		{[]VolumeMount{{Volume: "a", MountPath: "/run/trueforge"}}, "system directory /run"},
		{[]VolumeMount{{Volume: "a", MountPath: "/usr/local"}}, "system directory /usr"},
		{[]VolumeMount{{Volume: "a", MountPath: "/workspace"}}, "whole workspace"},
		{[]VolumeMount{{Volume: "a", MountPath: "/data", Subpath: "a/../../etc"}}, "'..'"},
		{[]VolumeMount{{Volume: "a", MountPath: "/data", Subpath: "/etc"}}, "relative"},
	} {
		err := CheckVolumeMounts(c.mounts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.mounts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v; want an error with %q", c.mounts, err, c.want)
		}
	}
}
