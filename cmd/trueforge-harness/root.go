package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"sync"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sampling"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// globals are the flags every command shares.
type globals struct {
	databaseURL string
	logLevel    string
	owner       string
	policyFile  string
	// credentialsFile is the operator's credentials file (--credentials).
	credentialsFile string
	// scanner is the operator's malware scanner (--scanner, scan.Parse's unix:PATH or
	// tcp:HOST:PORT; "" scans nothing), and scannerFailOpen lets downloads go on
	// unscanned when it gives no verdict.
	scanner         string
	scannerFailOpen bool
	// allowExecutables hands out executables and archives that hold them
	// (--allow-executable-downloads); by default they are refused.
	allowExecutables bool
	// attachmentsDir keeps attachments' content in a directory instead of the store
	// (--attachments-dir); maxAttachmentBytes and maxAttachments are the caps.
	attachmentsDir     string
	maxAttachmentBytes int64
	maxAttachments     int
}

// attachments is the service that keeps attachments in st as the flags say.
func (g *globals) attachments(st *store.Store) *attachments.Service {
	return &attachments.Service{Store: st, Dir: g.attachmentsDir, MaxBytes: g.maxAttachmentBytes, MaxPerSession: g.maxAttachments}
}

// malwareScanner is the scanner --scanner names, nil when none; a value scan.Parse
// refuses is a usage error naming the flag.
func (g *globals) malwareScanner() (sessions.Scanner, error) {
	if g.scanner == "" {
		return nil, nil
	}
	c, err := scan.Parse(g.scanner)
	if err != nil {
		return nil, usageErrorf("--scanner %q: %v (want unix:/run/clamav/clamd.ctl or tcp:127.0.0.1:3310)", g.scanner, err)
	}
	return &c, nil
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "trueforge-harness",
		Short: "Run trueforge agents from the applied control-plane database",
		Long: "trueforge-harness runs the agents that `terraform apply` published. The agent loop and the model and MCP\n" +
			"credentials stay in this process; a sandbox is provisioned only when a turn needs one.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", os.Getenv("TRUEFORGE_DATABASE_URL"),
		"control-plane database: an SQLite file, or a postgres:// URL (default $TRUEFORGE_DATABASE_URL, else ~/.local/share/trueforge/trueforge.db)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("TRUEFORGE_LOG_LEVEL", "warn"), "harness log level on stderr: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.owner, "owner", os.Getenv("TRUEFORGE_OWNER"),
		"who you are, checked against a session's owner (default $TRUEFORGE_OWNER, else the OS user); on PostgreSQL you are the database role, and a different --owner is refused")
	root.PersistentFlags().StringVar(&g.policyFile, "policy", os.Getenv("TRUEFORGE_POLICY"),
		"the operator's rules for MCP calls, a JSON file (default $TRUEFORGE_POLICY; none: allowed_tools alone decides); see docs/guides/mcp-policy.md")
	root.PersistentFlags().StringVar(&g.credentialsFile, "credentials", os.Getenv("TRUEFORGE_CREDENTIALS"),
		"the operator's credentials, a JSON file: each credential's variable, the origins it may go to and the owners whose agents may use it (default $TRUEFORGE_CREDENTIALS; "+
			"none: on SQLite your own agents may name your variables, on PostgreSQL no credential is sent); see docs/guides/running-agents.md")
	root.PersistentFlags().StringVar(&g.scanner, "scanner", os.Getenv("TRUEFORGE_SCANNER"),
		"the malware scanner that every file is scanned with before its first download, once per digest: ClamAV's clamd at unix:PATH or tcp:HOST:PORT "+
			"(default $TRUEFORGE_SCANNER; none: downloads are not scanned); see docs/guides/running-agents.md")
	root.PersistentFlags().BoolVar(&g.allowExecutables, "allow-executable-downloads", os.Getenv("TRUEFORGE_ALLOW_EXECUTABLE_DOWNLOADS") == "1",
		"hand out executables (ELF, PE, Mach-O, scripts with a shebang) and archives that hold them, or that cannot be looked into, which downloads otherwise refuse: "+
			"executable outputs go through your build and signing pipeline (default $TRUEFORGE_ALLOW_EXECUTABLE_DOWNLOADS=1)")
	root.PersistentFlags().BoolVar(&g.scannerFailOpen, "scanner-fail-open", os.Getenv("TRUEFORGE_SCANNER_FAIL_OPEN") == "1",
		"when the --scanner gives no verdict (down, too slow, a file too large for it), hand the file out unscanned, logged, instead of refusing it "+
			"(default: refuse; $TRUEFORGE_SCANNER_FAIL_OPEN=1 sets it)")
	root.PersistentFlags().StringVar(&g.attachmentsDir, "attachments-dir", os.Getenv("TRUEFORGE_ATTACHMENTS_DIR"),
		"keep the content of the files users attach in this directory, by SHA-256, instead of the database (default $TRUEFORGE_ATTACHMENTS_DIR; "+
			"replicas sharing a database must share it)")
	root.PersistentFlags().Int64Var(&g.maxAttachmentBytes, "max-attachment-bytes", attachments.DefaultMaxBytes,
		"the largest file a user may attach to a session, in bytes")
	root.PersistentFlags().IntVar(&g.maxAttachments, "max-attachments", attachments.DefaultMaxPerSession,
		"how many files one session may have attached")
	root.AddCommand(newRunCmd(g), newApprovalsCmd(g), newBudgetsCmd(g), newChatCmd(g), newAgentsCmd(g), newEnvironmentsCmd(g), newSessionsCmd(g), newFilesCmd(g), newSandboxesCmd(g), newSnapshotsCmd(g),
		newServeCmd(g), newUsageCmd(g), newUsersCmd(g), newDBCmd(g), newCheckCmd(g), newVersionCmd())
	markUsageErrors(root)
	safeOutput(root)
	return root
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// harness is what a command works with.
type harness struct {
	g *globals
	// me is the caller: the owner of the sessions it starts and the only one who may
	// touch them (see identity).
	me       string
	store    *store.Store
	runtimes *backend.Runtimes
	manager  *lifecycle.Manager
	network  *sandboxnet.Proxies
	logger   *slog.Logger
	// policy is the operator's MCP policy (nil: none).
	policy *policy.Policy
	// credentials is the operator's credentials file (nil: none, or not read yet).
	credentials *agents.Credentials
	// codeModes are the Code Mode tools of the runners this process made: close waits
	// for the MCP calls their scripts left running, so each outcome is recorded. mu
	// guards them and policy: serve builds runners for concurrent requests.
	codeModes []*codemode.Mode
	mu        sync.Mutex
	// telemetry traces the turns this process runs (off unless OTEL_* asks; tracing.go).
	telemetry *telemetry.Provider
	// specs keeps agents' decoded specs between the runners serve builds per message.
	specs agents.Specs
}

func (g *globals) open(ctx context.Context, logOut io.Writer) (*harness, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: lvl}))
	st, err := store.Open(ctx, g.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("opening the control-plane database: %w", err)
	}
	me, err := g.identity(st)
	if err != nil {
		st.Close()
		return nil, err
	}
	tel, err := openTelemetry(ctx) // tracing.go
	if err != nil {
		st.Close()
		return nil, err
	}
	h := &harness{g: g, me: me, store: st, logger: logger, telemetry: tel}
	plane := controlplane.New(st)
	h.runtimes = backend.New(plane)
	h.network = sandboxnet.New(netConfig(plane, logger))
	h.manager = lifecycle.New(lifecycle.Config{Store: st, Runtimes: h.runtimes, Logger: logger,
		Network: h.network, Telemetry: tel})
	return h, nil
}

// netConfig configures the egress proxies of local sandboxes: sockets under the local
// backend's directory, decisions into the session log, and the netd helper found by
// sandboxnet.LocateHelper (this binary itself when it is static).
func netConfig(plane *controlplane.Plane, logger *slog.Logger) sandboxnet.Config {
	st := plane.Store
	cfg := sandboxnet.Config{Store: st, Plane: plane, Dir: plane.EgressDir(), Logger: logger,
		Record: func(ctx context.Context, sessionID string, p events.Payload) {
			if _, err := events.Append(ctx, st, sessionID, "", p); err != nil {
				logger.Warn("recording an egress decision failed", "session", sessionID, "err", err)
			}
		}}
	self, err := os.Executable()
	if err == nil {
		cfg.Helper, err = sandboxnet.LocateHelper(self)
	}
	cfg.HelperErr = err
	return cfg
}

func (h *harness) close() {
	h.waitCodeModes()
	h.network.Close()
	h.flushTelemetry() // tracing.go
	h.store.Close()
}

// identity is who the caller is. On PostgreSQL it is the database role the connection
// authenticates as, never a claim: the database keeps each role to its own sessions, so
// an --owner (or TRUEFORGE_OWNER) naming anyone else is refused rather than ignored. On
// SQLite it is --owner, else the OS user.
func (g *globals) identity(st *store.Store) (string, error) {
	if st.Shared() {
		if g.owner != "" && g.owner != st.Role() {
			return "", fmt.Errorf("--owner (or TRUEFORGE_OWNER) is %q, but this control plane is on PostgreSQL, where you are the database role "+
				"this harness connects as: %q. Drop --owner and unset TRUEFORGE_OWNER to act as %q, or connect as role %q in --database-url",
				g.owner, st.Role(), st.Role(), g.owner)
		}
		return st.Role(), nil
	}
	if g.owner != "" {
		return g.owner, nil
	}
	if u, err := user.Current(); err == nil {
		return u.Username, nil
	}
	return "", nil
}

// openSession opens the harness for a command on session id, which the caller must own.
// The caller closes h.
func (g *globals) openSession(ctx context.Context, cmd *cobra.Command, id string) (*harness, store.Session, error) {
	h, err := g.open(ctx, cmd.ErrOrStderr())
	if err != nil {
		return nil, store.Session{}, err
	}
	s, err := sessions.Get(ctx, h.store, id, h.caller(), false)
	if err != nil {
		err = h.checkOwner(s, err)
		h.close()
		return nil, store.Session{}, err
	}
	return h, s, nil
}

// session returns the session a run or chat continues: a new one of r's agent when id
// is "", else id, which the caller must own.
func (h *harness) session(ctx context.Context, r *runner.Runner, id string) (string, error) {
	if id == "" {
		return r.NewSession(ctx, h.me)
	}
	s, err := sessions.Get(ctx, h.store, id, h.caller(), false)
	switch {
	case errors.Is(err, sessions.ErrNotOwner):
		return "", h.checkOwner(s, err)
	case err != nil:
		return "", fmt.Errorf("--session %s: %w (list sessions with `trueforge-harness sessions list`)", id, err)
	}
	return id, nil
}

// caller is who the CLI acts for: h.me, with no admin's reach (the CLI's user owns the
// database or its role, and sees only its own sessions).
func (h *harness) caller() sessions.Caller { return sessions.Caller{Name: h.me} }

// checkOwner is err from sessions.Get, said as the CLI says it when s is another
// owner's (sessions.ErrNotOwner): a session id is not authorization.
func (h *harness) checkOwner(s store.Session, err error) error {
	if !errors.Is(err, sessions.ErrNotOwner) {
		return err
	}
	how := "--owner or TRUEFORGE_OWNER"
	if h.store.Shared() {
		how = "connect as its role in --database-url"
	}
	return fmt.Errorf("session %s belongs to %q, not to you (%q); run as its owner (%s)", s.ID, s.Owner, h.me, how)
}

type runFlags struct {
	maxTurns    int64
	tokenBudget int64
	jsonOut     bool
}

func (f *runFlags) add(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.maxTurns, "max-turns", 0, fmt.Sprintf("model steps allowed per message (default: the agent's, else %d)", agentspec.DefaultMaxTurns))
	cmd.Flags().Int64Var(&f.tokenBudget, "token-budget", 0, fmt.Sprintf("tokens allowed per message (default: the agent's, else %d)", agentspec.DefaultTokenBudget))
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print events as JSON lines instead of text")
}

// runner loads an agent and builds its runner for the caller, refusing clearly when it
// cannot run.
func (h *harness) runner(ctx context.Context, agentName string, f *runFlags) (*runner.Runner, error) {
	return h.runnerFor(ctx, agentName, h.me, f)
}

// runnerFor builds agent's runner for user, on whose behalf its MCP servers are called
// (the API's user, for serve). Safe for concurrent use.
func (h *harness) runnerFor(ctx context.Context, agentName, user string, f *runFlags) (*runner.Runner, error) {
	a, err := h.specs.Load(ctx, h.store, agentName)
	if err != nil {
		return nil, err
	}
	auth, err := h.authority(a)
	if err != nil {
		return nil, err
	}
	// Every credential is decided before the run starts: a refused one stops it before
	// the model is called or any MCP server is dialled.
	if err := a.CheckCredentials(auth); err != nil {
		return nil, err
	}
	m, err := a.NewModel(agents.ModelOptions{Credentials: auth})
	if err != nil {
		return nil, err
	}
	// The policy is read when an agent is about to run, so a broken file stops the run
	// before anything is called, and never a command that runs no agent.
	pol, err := h.loadPolicy()
	if err != nil {
		return nil, err
	}
	// The policy's cumulative budgets, charged in the store (shared by every replica).
	meter := &budgets.Meter{Store: h.store, Policy: pol, Logger: h.logger}
	gate := &approvals.Gate{Store: h.store, Logger: h.logger}
	x := &tools.Executor{Store: h.store, Sandboxes: h.manager, Budgets: meter, Approvals: gate, Attachments: h.g.attachments(h.store)}
	scanner, err := h.g.malwareScanner()
	if err != nil {
		return nil, err
	}
	if scanner != nil {
		x.Scans = &sessions.OfferScans{Store: h.store, Scanner: scanner, Logger: h.logger}
	}
	var ts *mcptools.Toolset
	if len(a.Spec.MCPServers) > 0 {
		opts := mcptools.Options{Logger: h.logger, Version: version, User: user, Agent: a.Name, Owner: a.Owner, Credentials: auth,
			Approver: gate, Asker: gate,
			Sampler: &sampling.Sampler{Policy: pol, Model: m, Budgets: meter, User: user, Owner: a.Owner, Agent: a.Name}}
		if pol != nil {
			opts.Policy, opts.Budgets = pol, meter
		}
		ts = mcptools.New(a.Spec.MCPServers, opts)
		x.MCP = ts
	}
	if a.Spec.CodeMode && a.Spec.Sandbox.Enabled {
		var m codemode.MCP // none: scripts run without tools
		if ts != nil {
			m = ts
		}
		cm := codemode.New(m, h.logger)
		x.Code = cm
		h.mu.Lock()
		// A long-running serve makes a runner per message: keep only the modes that may
		// still have calls in flight.
		h.codeModes = slices.DeleteFunc(h.codeModes, idleMode)
		h.codeModes = append(h.codeModes, cm)
		h.mu.Unlock()
	}
	if f == nil {
		f = &runFlags{}
	}
	return &runner.Runner{
		Store: h.store, Agent: a, Model: m, Logger: h.logger, Tools: x,
		MaxTurns: f.maxTurns, TokenBudget: f.tokenBudget, Budgets: meter, Telemetry: h.telemetry,
	}, nil
}

// loadPolicy reads the operator's policy file the first time it is needed (nil: none).
func (h *harness) loadPolicy() (*policy.Policy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.g.policyFile != "" && h.policy == nil {
		p, err := policy.Load(h.g.policyFile)
		if err != nil {
			return nil, fmt.Errorf("--policy (TRUEFORGE_POLICY): %w", err)
		}
		h.policy = p
	}
	return h.policy, nil
}

// declaredBudgets is the policy's budgets, for showing their limits; a policy that
// cannot be read shows none (the runs that need it say why).
func (h *harness) declaredBudgets() []policy.Budget {
	p, err := h.loadPolicy()
	if err != nil {
		return nil
	}
	return p.Budgets()
}

// authority is what decides a's credentials: the operator's credentials file, read when
// an agent is first about to run (as the policy is), and without one the single-user
// default, which on SQLite serves the harness's own owner and on PostgreSQL no one.
func (h *harness) authority(a *agents.Agent) (agents.Authority, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.g.credentialsFile != "" && h.credentials == nil {
		c, err := agents.LoadCredentials(h.g.credentialsFile)
		if err == nil {
			err = agents.CheckCredentialEnvsVar(c)
		}
		if err != nil {
			return agents.Authority{}, fmt.Errorf("--credentials (TRUEFORGE_CREDENTIALS): %w", err)
		}
		h.credentials = c
	}
	operator := h.me
	if h.store.Shared() {
		operator = ""
	}
	return a.Authority(h.credentials, operator), nil
}

// withHarness is a command body that runs with the harness open (and closed after).
func (g *globals) withHarness(fn func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		h, err := g.open(ctx, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		defer h.close()
		return fn(ctx, cmd, h, args)
	}
}

// harnessCmd is a command that works on the open harness: use, short and args as cobra
// takes them, and run with the harness open (withHarness).
func (g *globals) harnessCmd(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: g.withHarness(run)}
}

// storeCmd is a command that works on the harness database: use, short and args as
// cobra takes them, and run with the store open (withStore).
func (g *globals) storeCmd(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, cmd *cobra.Command, st *store.Store) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: g.withStore(run)}
}

// sessionCmd is a command on one of the caller's sessions, named by its first of nargs
// arguments (completed as a session): use and short as cobra takes them, and run with the
// harness and the session open (withSession).
func (g *globals) sessionCmd(use, short string, nargs int, run func(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, args []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(nargs), ValidArgsFunction: g.completeSessions, RunE: g.withSession(run)}
}

// withSession is a command body on the session named by its first argument, which the
// caller must own; the harness is open while it runs.
func (g *globals) withSession(fn func(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		h, s, err := g.openSession(ctx, cmd, args[0])
		if err != nil {
			return err
		}
		defer h.close()
		return fn(ctx, cmd, h, s, args)
	}
}
