package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
)

// leasePruneAge is how long after it lapsed a lease row is deleted: the row of a
// replica that died holding it, for a sandbox or session that may be gone by now.
const leasePruneAge = time.Hour

// serveFlags are serve's HTTP settings.
type serveFlags struct {
	listen          string
	tlsCert, tlsKey string
	insecureListen  bool
	metricsPublic   bool
	shutdownTimeout time.Duration
	traceURL        string
}

func newServeCmd(g *globals) *cobra.Command {
	var interval, poolInterval time.Duration
	var once bool
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR]",
		Short: "Serve the HTTP API and the web page (--listen), run the idle reaper and repair the runs of harnesses that died; replicas may share a database",
		Long: "With --listen, serve serves the HTTP API under /api/v1 and the web chat page at / (see docs/guides/http-api.md).\n" +
			"Plain HTTP is served only on a loopback address; anywhere else give --tls-cert and --tls-key, or --insecure-listen\n" +
			"when a reverse proxy in front terminates TLS. SIGINT or SIGTERM stops accepting, cancels the turns this process\n" +
			"runs (recorded as cancelled) and waits for them.\n\n" +
			"Every --interval, serve also marks interrupted the runs whose harness process is gone (dead, or silent\n" +
			"for the heartbeat timeout, " + runner.DefaultHeartbeatTimeout.String() + ", when it runs on another machine), stopping what they left running in\n" +
			"their sandboxes, and it stops, archives and deletes idle session sandboxes by their agents' timings. Every\n" +
			"--pool-interval it keeps the environments' warm pools (warm_pool): filled, and their members replaced when the\n" +
			"environment changes or they wait past max_age. Several serve\n" +
			"processes may share one database: each sandbox and each repair is taken by one of them at a time (leases, which lapse\n" +
			"after " + lifecycle.DefaultLeaseTTL.String() + " when their holder dies). See docs/guides/harness-replicas.md.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if sf.listen != "" && once {
				return errors.New("--once makes one reaper pass and exits; it does not go with --listen, which serves until stopped")
			}
			if sf.listen == "" {
				if sf.tlsCert != "" || sf.tlsKey != "" || sf.insecureListen || sf.metricsPublic {
					return errors.New("--tls-cert, --tls-key, --insecure-listen and --metrics-public configure the HTTP API: give --listen ADDR too")
				}
				return nil
			}
			if err := api.CheckTraceURL(sf.traceURL); err != nil {
				return usageErrorf("--trace-url (TRUEFORGE_TRACE_URL): %v", err)
			}
			return sf.check()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			h, err := g.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer h.close()
			out := io.Writer(&lockedWriter{w: cmd.OutOrStdout()})
			if once {
				h.poolPass(ctx, out) // serve_pools.go
			} else {
				var pools sync.WaitGroup
				pools.Add(1)
				go func() {
					defer pools.Done()
					h.keepPools(ctx, out, poolInterval)
				}()
				// Before the store closes (h.close, deferred earlier): the loop ends with ctx.
				defer func() { stop(); pools.Wait() }()
			}
			var stopHTTP func()
			if sf.listen != "" {
				if stopHTTP, err = h.serveHTTP(ctx, out, sf); err != nil {
					return err
				}
			}
			for {
				h.servePass(ctx, out)
				if once {
					return nil
				}
				select {
				case <-ctx.Done():
					if stopHTTP != nil {
						stopHTTP()
					}
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "how often serve repairs dead harnesses' runs and reaps idle sandboxes")
	cmd.Flags().DurationVar(&poolInterval, "pool-interval", lifecycle.PoolInterval, "how often serve refills the environments' warm pools and replaces their stale members")
	cmd.Flags().BoolVar(&once, "once", false, "make one pass and exit (without --listen)")
	cmd.Flags().StringVar(&sf.listen, "listen", "", "serve the HTTP API and the web page on this address (host:port, for example 127.0.0.1:8080)")
	cmd.Flags().StringVar(&sf.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, the chain after the leaf); needs --tls-key")
	cmd.Flags().StringVar(&sf.tlsKey, "tls-key", "", "the private key (PEM) of --tls-cert")
	cmd.Flags().BoolVar(&sf.insecureListen, "insecure-listen", false,
		"serve plain HTTP on a non-loopback address: only behind a reverse proxy that terminates TLS (login cookies are then marked Secure)")
	cmd.Flags().BoolVar(&sf.metricsPublic, "metrics-public", false, "serve /metrics without a token (otherwise an admin's token is needed)")
	cmd.Flags().StringVar(&sf.traceURL, "trace-url", os.Getenv("TRUEFORGE_TRACE_URL"),
		"link each turn on the web page to its trace: your tracing backend's URL of a trace with {trace_id} where the id goes, "+
			"e.g. https://jaeger.example.com/trace/{trace_id} (default $TRUEFORGE_TRACE_URL; none: no link)")
	cmd.Flags().DurationVar(&sf.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a stop waits for cancelled turns to end")
	return cmd
}

// check enforces the loopback rule: plain HTTP only on a loopback address, unless TLS is
// configured or the operator says a proxy terminates TLS.
func (sf *serveFlags) check() error {
	if (sf.tlsCert == "") != (sf.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both (the certificate and its private key) to serve HTTPS")
	}
	if sf.tlsCert != "" && sf.insecureListen {
		return errors.New("--insecure-listen is for plain HTTP behind a TLS proxy; with --tls-cert and --tls-key, drop it")
	}
	host, _, err := net.SplitHostPort(sf.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: give host:port, for example 127.0.0.1:8080: %w", sf.listen, err)
	}
	if sf.tlsCert != "" || sf.insecureListen || isLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("--listen %s would serve plain HTTP on %s, where tokens and login cookies would cross the network in the clear. "+
		"Listen on loopback (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), give --tls-cert and --tls-key to serve HTTPS, "+
		"or pass --insecure-listen when a reverse proxy in front terminates TLS", sf.listen, shown)
}

// isLoopback reports whether host names only this machine: localhost or a loopback IP.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// serveHTTP starts the API server and returns the function that stops it gracefully:
// no new connections, the runs it started cancelled and waited for, open event streams
// ended once those runs' last events went out.
func (h *harness) serveHTTP(ctx context.Context, out io.Writer, sf serveFlags) (func(), error) {
	scanner, err := h.g.malwareScanner()
	if err != nil {
		return nil, err
	}
	srv := api.New(api.Config{
		Store: h.store, Sandboxes: h.manager, Runtimes: h.runtimes, Logger: h.logger,
		Runner: func(ctx context.Context, agent, user string) (*runner.Runner, error) {
			return h.runnerFor(ctx, agent, user, nil)
		},
		Budgets:       h.declaredBudgets,
		Policy:        h.loadPolicy, // who may download what (its "downloads")
		Web:           web.Handler(),
		MetricsPublic: sf.metricsPublic,
		TraceURL:      sf.traceURL,
		SecureCookies: sf.insecureListen || sf.tlsCert != "",
		Scanner:       scanner, ScannerFailOpen: h.g.scannerFailOpen, AllowExecutables: h.g.allowExecutables,
		Attachments: h.g.attachments(h.store),
	})
	ln, err := net.Listen("tcp", sf.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", sf.listen, err)
	}
	// Requests' contexts derive from base: cancelled last, it ends the event streams,
	// which never end by themselves.
	base, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: event streams last; each of their writes has its own deadline.
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return base },
		ErrorLog:       slog.NewLogLogger(h.logger.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if sf.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(sf.tlsCert, sf.tlsKey)
		if err != nil {
			ln.Close()
			endStreams()
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(out, "%s serving the HTTP API and the web page on %s://%s\n", time.Now().UTC().Format(time.RFC3339), scheme, ln.Addr())
	return func() {
		stamp := time.Now().UTC().Format(time.RFC3339)
		fmt.Fprintf(out, "%s stopping: no new connections; cancelling %d running turns\n", stamp, srv.LiveRuns())
		shut := make(chan struct{})
		go func() {
			sctx, cancel := context.WithTimeout(context.Background(), sf.shutdownTimeout)
			defer cancel()
			_ = hs.Shutdown(sctx)
			close(shut)
		}()
		wctx, cancel := context.WithTimeout(context.Background(), sf.shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(wctx); err != nil {
			fmt.Fprintf(out, "%s stopping: %v\n", stamp, err)
		}
		// The streams have had the cancelled turns' last events: end them.
		time.Sleep(100 * time.Millisecond)
		endStreams()
		select {
		case <-shut:
		case <-time.After(sf.shutdownTimeout):
			_ = hs.Close()
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.logger.Warn("the HTTP server ended with an error", "err", err)
		}
	}, nil
}

// servePass repairs the runs of dead harnesses, then reaps idle sandboxes, printing what
// it did: a sandbox a dead run kept busy is reclaimed first, so it is reaped on time.
func (h *harness) servePass(ctx context.Context, out io.Writer) {
	stamp := func() string { return time.Now().UTC().Format(time.RFC3339) }
	repaired, err := runner.RepairStale(ctx, h.store, h.manager, lifecycle.ProcessOwner(), 0, h.logger)
	if err != nil {
		h.logger.Error("repairing runs of dead harnesses failed", "err", err)
	}
	for _, r := range repaired {
		if r.Err != nil {
			fmt.Fprintf(out, "%s session %s: repairing run %s of harness process %s failed: %v\n", stamp(), r.SessionID, r.RunID, r.Owner, r.Err)
			continue
		}
		fmt.Fprintf(out, "%s session %s: run %s of harness process %s interrupted (that harness is gone), %d log entries added\n",
			stamp(), r.SessionID, r.RunID, r.Owner, r.Added)
	}
	trs, err := h.manager.Reap(ctx)
	if err != nil {
		h.logger.Error("reap failed", "err", err)
	}
	for _, t := range trs {
		if t.Err != nil {
			fmt.Fprintf(out, "%s session %s: %s -> %s failed: %v\n", stamp(), t.SessionID, t.From, t.To, t.Err)
			continue
		}
		fmt.Fprintf(out, "%s session %s: sandbox %s %s -> %s\n", stamp(), t.SessionID, t.SandboxID, t.From, t.To)
	}
	if _, err := h.store.PruneLeases(ctx, leasePruneAge); err != nil {
		h.logger.Warn("pruning lapsed leases failed", "err", err)
	}
}
