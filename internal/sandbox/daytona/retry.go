package daytona

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// RetryPolicy says how failed calls are retried.
//
//   - 429 is retried for every method: the rate limiter rejects a request before it runs.
//   - 409 "state change in progress" is retried for every method (the change was refused)
//     for up to StateChangeWait, with backoff, not counting against MaxAttempts.
//   - 5xx and transport errors are retried only for idempotent calls (GET, PUT, DELETE and the
//     POSTs that are safe to repeat: activate, start, stop, archive).
//
// The wait is the server's Retry-After, Retry-After-{throttler} or X-RateLimit-Reset-{throttler}
// (seconds or an HTTP date) when present, else exponential backoff with full jitter. Every
// wait ends when the context does.
type RetryPolicy struct {
	MaxAttempts int           // including the first; <= 1 disables retries
	BaseDelay   time.Duration // first backoff ceiling
	MaxDelay    time.Duration // cap on one backoff
	// MaxServerWait caps one server-requested wait (Retry-After*, X-RateLimit-Reset-*).
	MaxServerWait time.Duration
	// StateChangeWait bounds the total time spent retrying 409 "state change in progress"
	// (which does not count against MaxAttempts); the context bounds it too.
	StateChangeWait time.Duration
}

// DefaultRetryPolicy is 8 attempts, 500 ms base, 30 s backoff cap, 2 min server-wait cap.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 8, BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second,
		MaxServerWait: 2 * time.Minute, StateChangeWait: 5 * time.Minute}
}

func (p RetryPolicy) decide(attempt int, elapsed time.Duration, idempotent bool, err error) (time.Duration, bool) {
	e, isAPI := asAPI(err)
	if isAPI && isStateChange(e) {
		if elapsed >= p.StateChangeWait {
			return 0, false
		}
		return p.backoff(min(attempt, 30)), true
	}
	if attempt >= p.MaxAttempts {
		return 0, false
	}
	switch {
	case !isAPI:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sandbox.ErrTooLarge) || !idempotent {
			return 0, false
		}
	case e.Status == http.StatusTooManyRequests:
	case e.Status >= 500 && idempotent:
	default:
		return 0, false
	}
	if isAPI {
		if d, ok := serverWait(e.header, e.Status == http.StatusTooManyRequests); ok {
			if p.MaxServerWait > 0 && d > p.MaxServerWait {
				d = p.MaxServerWait
			}
			return d, true
		}
	}
	return p.backoff(attempt), true
}

// backoff is full jitter over min(MaxDelay, BaseDelay*2^(attempt-1)).
func (p RetryPolicy) backoff(attempt int) time.Duration {
	ceil := p.BaseDelay
	for i := 1; i < attempt && (p.MaxDelay <= 0 || ceil < p.MaxDelay); i++ {
		ceil *= 2
	}
	if p.MaxDelay > 0 && ceil > p.MaxDelay {
		ceil = p.MaxDelay
	}
	if ceil <= 0 {
		return 0
	}
	return ceil/2 + rand.N(ceil/2+1)
}

// serverWait reads Retry-After and Retry-After-{throttler}, and for a 429 also
// X-RateLimit-Reset-{throttler} (sent on every answer, so meaningless otherwise); the longest
// wait wins.
func serverWait(h http.Header, limited bool) (time.Duration, bool) {
	var best time.Duration
	found := false
	for k, vs := range h {
		lk := strings.ToLower(k)
		if lk != "retry-after" && !strings.HasPrefix(lk, "retry-after-") &&
			!(limited && strings.HasPrefix(lk, "x-ratelimit-reset-")) {
			continue
		}
		for _, v := range vs {
			if d, ok := parseWait(v); ok {
				found = true
				if d > best {
					best = d
				}
			}
		}
	}
	return best, found
}

func parseWait(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := time.Until(t)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
