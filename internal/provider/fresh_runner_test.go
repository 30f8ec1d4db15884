package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

// A cliRunner is one machine that runs the Terraform CLI the way a CI runner does: its
// own working directory and HOME (nothing cached from an earlier run), an empty CLI
// configuration, no update check, TF_IN_AUTOMATION, and no other environment. The CLI is
// the one TF_ACC_TERRAFORM_PATH names (Terraform or OpenTofu, as `make test` runs both).
//
// The provider is served from the test process for each command (as
// terraform-plugin-testing does) and the CLI reattaches to it through
// TF_REATTACH_PROVIDERS, so nothing is installed and nothing leaves the machine. The
// provider therefore does not see the runner's environment but its factory's (the test
// process's, or a PostgreSQL fixture's getenv): a runner's TRUEFORGE_DATABASE_URL and
// TRUEFORGE_SECRET_KEY are given to the factory (pgFixture.providersWith).
type cliRunner struct {
	t       testing.TB
	cli     string
	dir     string // the working directory
	home    string
	newProv func() (tfprotov6.ProviderServer, error)
}

// cliTimeout bounds one CLI command of these tests: a local snapshot build takes
// seconds, and a command that hangs (a deadlock) must fail the test, not stall it.
const cliTimeout = 5 * time.Minute

// newCLIRunner returns a runner with an empty working directory and HOME that serves
// the trueforge provider of providers (as a TestCase's ProtoV6ProviderFactories: a
// fixture's, or freshProviders), a new server for each command.
func newCLIRunner(t testing.TB, providers providerFactories) *cliRunner {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		// As terraform-plugin-testing's resource.Test: acceptance tests run with TF_ACC=1
		// (make test sets it), never by a bare `go test`.
		t.Skip("acceptance test: set TF_ACC=1 to run it")
	}
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if cli == "" {
		t.Fatal("TF_ACC_TERRAFORM_PATH must name the Terraform or OpenTofu binary these tests run (make test sets it)")
	}
	root := t.TempDir()
	newProv, ok := providers["trueforge"]
	if !ok {
		t.Fatal("the provider factories have no trueforge provider")
	}
	r := &cliRunner{t: t, cli: cli, dir: filepath.Join(root, "work"), home: filepath.Join(root, "home"), newProv: newProv}
	for _, d := range []string{r.dir, r.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.write(filepath.Join(r.home, ".terraformrc"), "")
	return r
}

// write creates a file; a relative name is in the working directory.
func (r *cliRunner) write(name, content string) {
	r.t.Helper()
	if !filepath.IsAbs(name) {
		name = filepath.Join(r.dir, name)
	}
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// read returns a file of the working directory.
func (r *cliRunner) read(name string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// files lists the working directory's entries, for the test's claim that a fresh runner
// holds nothing else.
func (r *cliRunner) files() []string {
	r.t.Helper()
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// cliResult is what one CLI command did.
type cliResult struct {
	args   []string
	code   int
	stdout string
	stderr string
}

func (c cliResult) String() string {
	return fmt.Sprintf("%s exited %d\n--- stdout\n%s\n--- stderr\n%s", strings.Join(c.args, " "), c.code, c.stdout, c.stderr)
}

// run runs one CLI command in the working directory with the provider served for it.
// A CLI that cannot be started, or that runs past cliTimeout, fails the test; any exit
// code is returned.
func (r *cliRunner) run(args ...string) cliResult {
	r.t.Helper()
	return r.runProgram(r.cli, args...)
}

// runProgram runs program (the CLI, or a script that runs the CLI named by $TF) in the
// working directory with the runner's environment and one provider served for every CLI
// command it runs. A program that cannot be started, or that runs past cliTimeout, fails
// the test; any exit code is returned.
func (r *cliRunner) runProgram(program string, args ...string) cliResult {
	r.t.Helper()
	res, err := r.exec(program, args...)
	if err != nil {
		r.t.Fatalf("%v\n%s", err, res)
	}
	return res
}

// exec is runProgram for any goroutine: what fails is returned, not reported.
func (r *cliRunner) exec(program string, args ...string) (cliResult, error) {
	res := cliResult{args: append([]string{filepath.Base(program)}, args...)}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	reattach, stop, err := serveProvider(r.t, r.newProv)
	if err != nil {
		return res, fmt.Errorf("serving the provider: %w", err)
	}
	defer stop()

	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir = r.dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.home,
		"TMPDIR=" + os.TempDir(),
		"TF_CLI_CONFIG_FILE=" + filepath.Join(r.home, ".terraformrc"),
		"CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"TF_REATTACH_PROVIDERS=" + reattach,
		"TF=" + r.cli,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	res.stdout, res.stderr = stdout.String(), stderr.String()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("did not finish within %s (a deadlock?)", cliTimeout)
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		return res, fmt.Errorf("running %s: %w", program, err)
	}
	return res, nil
}

// must runs a command that has to succeed and returns its standard output.
func (r *cliRunner) must(args ...string) string {
	r.t.Helper()
	res := r.run(args...)
	if res.code != 0 {
		r.t.Fatalf("%s", res)
	}
	return res.stdout
}

// init runs `init`, which with the provider reattached installs nothing.
func (r *cliRunner) init() { r.t.Helper(); r.must("init", "-input=false", "-no-color") }

// apply applies the working directory's configuration.
func (r *cliRunner) apply() {
	r.t.Helper()
	r.must("apply", "-auto-approve", "-input=false", "-no-color")
}

// plan runs `plan -detailed-exitcode`: 0 is no change, 2 changes, 1 an error.
func (r *cliRunner) plan() cliResult {
	r.t.Helper()
	return r.run("plan", "-detailed-exitcode", "-input=false", "-no-color")
}

// serveProvider serves one provider from this process in go-plugin's test mode until
// stop is called, and returns the TF_REATTACH_PROVIDERS value that points the CLI at it.
func serveProvider(t testing.TB, newProv func() (tfprotov6.ProviderServer, error)) (reattach string, stop func(), err error) {
	srv, err := newProv()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	configs := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	served := make(chan error, 1)
	opts := []tf6server.ServeOpt{
		tf6server.WithDebug(ctx, configs, closed),
		tf6server.WithGoPluginLogger(hclog.NewNullLogger()),
	}
	if tt, ok := t.(*testing.T); ok {
		// The provider's logs go where TF_LOG / TF_ACC_LOG_PATH send them, as in the
		// terraform-plugin-testing steps; by default nowhere.
		opts = append(opts, tf6server.WithLoggingSink(tt))
	}
	go func() {
		served <- tf6server.Serve(providerName(), func() tfprotov6.ProviderServer { return srv }, opts...)
	}()
	var cfg *plugin.ReattachConfig
	select {
	case cfg = <-configs:
	case err := <-served:
		cancel()
		return "", nil, fmt.Errorf("the provider server stopped before it listened: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		return "", nil, errors.New("the provider server did not listen within 30s")
	}
	type addr struct{ Network, String string }
	type entry struct {
		Protocol        string
		ProtocolVersion int
		Pid             int
		Test            bool
		Addr            addr
	}
	e := entry{Protocol: string(cfg.Protocol), ProtocolVersion: cfg.ProtocolVersion, Pid: cfg.Pid, Test: cfg.Test,
		Addr: addr{Network: cfg.Addr.Network(), String: cfg.Addr.String()}}
	all := map[string]entry{}
	for _, a := range providerAddress("trueforge") {
		all[a] = e
	}
	b, err := json.Marshal(all)
	if err != nil {
		cancel()
		return "", nil, err
	}
	return string(b), func() {
		cancel()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Errorf("the provider server did not stop within 30s")
		}
	}, nil
}

// providerAddress lists the addresses under which the CLI may look for a provider type
// that the configuration does not declare in required_providers: hashicorp/<type> on the
// CLI's registry (registry.terraform.io, or what TF_ACC_PROVIDER_HOST names:
// registry.opentofu.org under OpenTofu), and the legacy "-" namespace, as
// terraform-plugin-testing registers them.
func providerAddress(typ string) []string {
	host := os.Getenv("TF_ACC_PROVIDER_HOST")
	if host == "" {
		host = "registry.terraform.io"
	}
	namespaces := []string{"-", "hashicorp"}
	if ns := os.Getenv("TF_ACC_PROVIDER_NAMESPACE"); ns != "" {
		namespaces = []string{ns}
	}
	var out []string
	for _, ns := range namespaces {
		out = append(out, strings.TrimSuffix(host, "/")+"/"+ns+"/"+typ)
	}
	return out
}

// providerName is the provider's full address in the CLI's registry, for the server's logs.
func providerName() string {
	all := providerAddress("trueforge")
	return all[len(all)-1]
}

// freshProviders serves a new provider for every command, as a new provider process
// would be, configured from the test process's environment (the SQLite tests; a
// PostgreSQL fixture has its own f.providers).
var freshProviders = providerFactories{
	"trueforge": func() (tfprotov6.ProviderServer, error) { return providerserver.NewProtocol6WithError(New("test")())() },
}

// providerFactories is a TestCase's ProtoV6ProviderFactories.
type providerFactories = map[string]func() (tfprotov6.ProviderServer, error)
