//go:build !linux

package daytonatest

// newLocalBox reports that local sandboxes are not available off Linux.
func newLocalBox(string) (box, bool, error) { return nil, false, nil }
