package periodic_test

import (
	"context"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/periodic"
)

// Run calls its function each interval, stops when it returns false, and stops at once
// when its context ends.
func TestRun(t *testing.T) {
	n := 0
	periodic.Run(context.Background(), time.Millisecond, func(context.Context) bool {
		n++
		return n < 3
	})
	if n != 3 {
		t.Fatalf("called %d times; want 3", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		periodic.Run(ctx, time.Hour, func(context.Context) bool { t.Error("called after the context ended"); return true })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}
