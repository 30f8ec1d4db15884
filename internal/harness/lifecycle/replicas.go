package lifecycle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/periodic"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Replicas: several harness processes may share one control-plane database (`serve`
// on two machines, or a `serve` beside `run` and `chat`). Every lifecycle transition is
// a compare-and-swap on the session's sandbox record, so two processes can never both
// make one transition; on top of that, a process reaps a sandbox, or repairs a session
// (package runner), only while it holds that thing's lease (store leases: a row naming
// the holder, with an expiry), so two replicas' reapers running at the same moment
// split the sandboxes between them instead of both looking up every one, and a
// replica that dies mid-step keeps the others off that sandbox for DefaultLeaseTTL at
// most.

// DefaultLeaseTTL is how long a lease lasts unless its holder renews it: the longest a
// dead replica keeps the others off what it was working on.
const DefaultLeaseTTL = time.Minute

// leaseRenewals is how many times per TTL a held lease is renewed (every 20 s with the
// default TTL), so that two renewals in a row can fail (a slow database) before it
// lapses under a live holder.
const leaseRenewals = 3

// SandboxLeaseName is the lease a reaper holds while it acts on a session's sandbox.
func SandboxLeaseName(sessionID string) string { return "sandbox/" + sessionID }

// HoldLease takes lease name for holder and renews it every ttl/3 until release is
// called, which gives it up. ok is false when another holder has it (the work is
// theirs); err is a database failure, in which case nothing is held either.
func HoldLease(ctx context.Context, st *store.Store, name, holder string, ttl time.Duration, logger *slog.Logger) (release func(), ok bool, err error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	ok, err = st.AcquireLease(ctx, name, holder, ttl)
	if err != nil || !ok {
		return func() {}, false, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	renewCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		periodic.Run(renewCtx, ttl/leaseRenewals, func(renewCtx context.Context) bool {
			held, err := st.RenewLease(renewCtx, name, holder, ttl)
			switch {
			case renewCtx.Err() != nil:
				return false
			case err != nil:
				logger.Warn("renewing a lease failed; it lapses unless a later renewal succeeds", "lease", name, "ttl", ttl, "err", err)
			case !held:
				// The lease lapsed and another replica took it: it may now act on the same
				// thing, and the records' compare-and-swaps decide who lands first.
				logger.Warn("lost a lease while working under it", "lease", name, "holder", holder)
				return false
			}
			return true
		})
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			wg.Wait()
			if err := st.ReleaseLease(context.WithoutCancel(ctx), name, holder); err != nil {
				logger.Warn("releasing a lease failed; it lapses by itself", "lease", name, "err", err)
			}
		})
	}, true, nil
}
