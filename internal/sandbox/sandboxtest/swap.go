package sandboxtest

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// SwapLinkAndFile keeps replacing dir/name, as fast as it can, by a symlink to target
// and then by a regular file holding "inside", each put in place by a rename: the race
// that a file operation which must never follow a link is put through. It stops when
// stop is called or, at the latest, when the test ends.
func SwapLinkAndFile(tb testing.TB, dir, name, target string) (stop func()) {
	tb.Helper()
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		race, tmp := filepath.Join(dir, name), filepath.Join(dir, "."+name)
		for !done.Load() {
			_ = os.Symlink(target, tmp)
			_ = os.Rename(tmp, race)
			_ = os.WriteFile(tmp, []byte("inside"), 0o644)
			_ = os.Rename(tmp, race)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { done.Store(true); wg.Wait() }) }
	tb.Cleanup(stop)
	return stop
}
