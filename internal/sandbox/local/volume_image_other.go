//go:build !linux

package local

import "context"

// Local sandboxes need Linux: volumes are plain directories and nothing mounts them.

func volumeImage(dir string) string { return dir + ".img" }
func volumeLock(dir string) string  { return dir + ".lock" }

func volumeSizeUnenforced(bool) string {
	return "local sandboxes need Linux: a volume is a plain directory and its size is not enforced"
}

func makeVolumeImage(context.Context, string, int64) error { return nil }
func ensureVolumeMounted(context.Context, string) error    { return nil }
func unmountVolume(string) error                           { return nil }
func hasVolumeImage(string) bool                           { return false }

func (s volumeStore) Grow(context.Context, string, int64) error { return nil }
