//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Build egress (BuildRequest.Egress): every build that is not BlockNetwork gets no network
// interface but lo, and an egress proxy (package egress): one that admits the hosts of
// its environment's allow_domains and package indexes alone when Egress lists them, one
// that admits every public host otherwise. Never the host's network: a build runs a
// script its environment's author wrote, and on the host's network it reached the
// services of the host's loopback (the harness's MCP servers, PostgreSQL) and link-local
// ones (cloud metadata). Through the proxy it is refused the forbidden ranges (loopback,
// private, link-local, metadata...) as a sandbox is, whatever the allow list.
//
// Where the proxy lives: a build outlives the process that started it (a Terraform
// timeout, a provider that exits), so its proxy cannot live in that process. The build's
// supervisor (buildscript.go) starts it beside the build, as this very program in proxy
// mode (runBuildProxy), and stops it when the build script has exited; it dies with the
// supervisor (DeleteSnapshot kills the group; a parent-death signal covers the rest).
// It listens on <snapshot>/egress/egress.sock, a directory holding that socket alone,
// which the setup step binds into the build (read-only, idmapped like the layers so
// that the build's root may connect) at sandbox.EgressSocketDir.
//
// Inside, the build shim (setup.go) serves the netd bridge in its own process while the
// script runs: an HTTP proxy on 127.0.0.1:3128 and SOCKS5 on 127.0.0.1:1080, carried to
// the socket. The script gets HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY (both
// cases), which pip, npm, apt, go, cargo, curl and git honour. There is no DNS in the
// build's namespace: a client that resolves names itself instead of asking its proxy
// fails, as it would under block_all. The proxy tunnels TLS (a build has no secrets to
// substitute), so no CA is added to the build. Every decision of the proxy is a line of
// the build log ("trueforge egress: ..."), so a refused host shows in the failure's log
// tail.

const (
	// buildProxyArg is the only argument of the build's proxy and buildProxyEnv names its
	// configuration file, so that neither alone turns a run of the program into it.
	buildProxyArg = "trueforge-build-proxy"
	buildProxyEnv = "TRUEFORGE_BUILD_PROXY"
	// buildEgressEnv tells the build shim to serve netd for the script.
	buildEgressEnv = "TRUEFORGE_BUILD_EGRESS"
	// buildEgressDir and buildEgressConfig are in the snapshot's directory during the build.
	buildEgressDir    = "egress"
	buildEgressConfig = "egress.json"
)

// buildEgress is the proxy's configuration file.
type buildEgress struct {
	SandboxID    string   `json:"sandbox_id"`
	AllowDomains []string `json:"allow_domains,omitempty"`
	Socket       string   `json:"socket"`
	// Hosts and AllowAddrs are for tests alone, whose fake upstreams are on loopback:
	// names resolved to these addresses instead of by DNS, and addresses exempt from the
	// forbidden ranges (egress.Config.AllowAddrs). The builder sets them only from its
	// unexported test fields.
	Hosts      map[string]string `json:"hosts,omitempty"`
	AllowAddrs []string          `json:"allow_addrs,omitempty"`
}

// planEgress sets the build's egress from the request: nothing under BlockNetwork (it
// wins); otherwise the proxy's configuration, admitting Egress's allow list (checked now,
// so that a bad pattern fails StartBuild rather than the build), or every public host
// without Egress.
func (b *Builder) planEgress(plan *buildPlan, req sandbox.BuildRequest) error {
	if req.BlockNetwork {
		return nil
	}
	var allow []string
	if req.Egress != nil {
		allow = req.Egress.AllowDomains
	}
	if _, err := egress.ParsePatterns("allow_domains", allow); err != nil {
		return err
	}
	plan.egress = &buildEgress{
		SandboxID:    "build-" + req.ID,
		AllowDomains: allow,
		Socket:       filepath.Join(plan.dir(), buildEgressDir, sandbox.EgressSocketName),
		Hosts:        b.egressHosts,
	}
	for _, a := range b.egressHosts {
		plan.egress.AllowAddrs = append(plan.egress.AllowAddrs, a)
	}
	return nil
}

// stageEgress writes the proxy's configuration and its socket directory into the
// staging directory of the build.
func (p buildPlan) stageEgress(stage string) error {
	if p.egress == nil {
		return nil
	}
	if err := os.Mkdir(filepath.Join(stage, buildEgressDir), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(p.egress)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(stage, buildEgressConfig), data, 0o600)
}

// egressSetup adds to the setup plan what the build's network needs: the namespace
// prepared for netd (lo up) and the socket directory, staged with mapping m.
func (p buildPlan) egressSetup(plan *setupPlan, m string) {
	if p.egress == nil {
		return
	}
	plan.NetPrep = true
	plan.Binds = append(plan.Binds, stageBind{Src: filepath.Join(p.dir(), buildEgressDir), Dst: buildEgressDir, Map: m})
}

// egressArgs are bwrap's arguments for the build's egress, after --clearenv: the
// socket directory and the proxy variables.
func (p buildPlan) egressArgs() []string {
	if p.egress == nil {
		return nil
	}
	args := []string{"--ro-bind", stagePath(buildEgressDir), sandbox.EgressSocketDir, "--setenv", buildEgressEnv, "1"}
	for _, k := range slices.Sorted(maps.Keys(buildProxyVars())) {
		args = append(args, "--setenv", k, buildProxyVars()[k])
	}
	return args
}

// buildProxyVars are the proxy variables of a build's script.
func buildProxyVars() map[string]string {
	httpProxy := fmt.Sprintf("http://127.0.0.1:%d", wire.HTTPProxyPort)
	env := map[string]string{"NODE_USE_ENV_PROXY": "1"}
	for k, v := range map[string]string{"HTTP_PROXY": httpProxy, "HTTPS_PROXY": httpProxy,
		"ALL_PROXY": fmt.Sprintf("socks5h://127.0.0.1:%d", wire.SOCKSPort), "NO_PROXY": "localhost,127.0.0.1,::1"} {
		env[k], env[strings.ToLower(k)] = v, v
	}
	return env
}

// egressUnshare is the outer namespaces' extra flag: a network namespace of the build's
// own, which the setup step prepares and bwrap shares.
func (p buildPlan) egressUnshare() string {
	if p.egress == nil {
		return ""
	}
	return "n"
}

// egressStart is the supervisor's step that starts the proxy and waits for its socket;
// egressStop stops it once the script has exited and removes its files.
func (p buildPlan) egressStart() string {
	if p.egress == nil {
		return ""
	}
	return fmt.Sprintf(`%s="$d/%s" %s %s &
proxy=$!
n=0
while [ ! -S "$d/%s/%s" ]; do
	n=$((n + 1))
	if [ "$n" -gt 400 ] || ! kill -0 "$proxy" 2>/dev/null; then kill "$proxy" 2>/dev/null; fail "the build's egress proxy did not start"; fi
	sleep 0.05
done
`, buildProxyEnv, buildEgressConfig, shq(p.exe), buildProxyArg, buildEgressDir, sandbox.EgressSocketName)
}

func (p buildPlan) egressStop() string {
	if p.egress == nil {
		return ""
	}
	return fmt.Sprintf(`kill "$proxy" 2>/dev/null
wait "$proxy" 2>/dev/null
rm -rf "$d/%s" "$d/%s"
`, buildEgressDir, buildEgressConfig)
}

// isBuildProxy reports whether this process is a build's egress proxy.
func isBuildProxy() bool {
	return len(os.Args) == 2 && os.Args[1] == buildProxyArg && os.Getenv(buildProxyEnv) != ""
}

// runBuildProxy serves a build's egress proxy until SIGTERM or its supervisor dies.
func runBuildProxy() int {
	if err := serveBuildProxy(); err != nil {
		fmt.Fprintln(os.Stderr, "trueforge egress:", err)
		return 1
	}
	return 0
}

func serveBuildProxy() error {
	// Die with the supervisor, and check it did not die before the signal was armed.
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return err
	}
	if os.Getppid() != parent {
		return errors.New("the build's supervisor is gone")
	}
	cfg, err := readPlan[buildEgress](buildProxyEnv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	ecfg := egress.Config{SandboxID: cfg.SandboxID, Policy: egress.Policy{AllowDomains: cfg.AllowDomains}, Log: logDecision}
	if len(cfg.Hosts) > 0 {
		r := staticResolver{}
		for h, a := range cfg.Hosts {
			if r[h], err = netip.ParseAddr(a); err != nil {
				return fmt.Errorf("configuration: hosts: %w", err)
			}
		}
		ecfg.Resolver = r
	}
	for _, a := range cfg.AllowAddrs {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("configuration: allow_addrs: %w", err)
		}
		ecfg.AllowAddrs = append(ecfg.AllowAddrs, addr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p, err := egress.New(ctx, ecfg)
	if err != nil {
		return err
	}
	// Listen by a name relative to the socket's directory: a snapshot's directory can be
	// deeper than the 107 bytes a unix socket path may have.
	if err := os.Chdir(filepath.Dir(cfg.Socket)); err != nil {
		return err
	}
	ln, err := egress.Listen(filepath.Base(cfg.Socket))
	if err != nil {
		return err
	}
	fmt.Printf("trueforge egress: the build reaches the network through a proxy that admits %s\n", allowedText(cfg.AllowDomains))
	go func() {
		<-ctx.Done()
		_ = p.Close()
	}()
	return p.Serve(ln)
}

// logDecision writes one decision as a line of the build log.
func logDecision(d egress.Decision) {
	verdict := "allowed"
	if !d.Allowed {
		verdict = "refused (" + d.Reason + ")"
	}
	line := fmt.Sprintf("trueforge egress: %s %s %s", verdict, d.Mode, d.Host+":"+d.Port)
	if !d.Allowed && d.Message != "" {
		line += ": " + d.Message
	}
	fmt.Println(line)
}

func allowedText(allow []string) string {
	if len(allow) == 0 {
		return "every public host"
	}
	return strings.Join(allow, ", ")
}

// staticResolver answers names from a fixed table (tests' fake upstreams).
type staticResolver map[string]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, fmt.Errorf("no address for %s", host)
}

// startBuildNetd serves netd in the build shim's process when the build has egress, for
// the script it runs; the returned function stops it.
func startBuildNetd() (func(), error) {
	if os.Getenv(buildEgressEnv) != "1" {
		return func() {}, nil
	}
	os.Unsetenv(buildEgressEnv)
	s := netd.New(netd.Config{Socket: sandbox.EgressSocketPath,
		HTTPAddr:  "127.0.0.1:" + strconv.Itoa(wire.HTTPProxyPort),
		SOCKSAddr: "127.0.0.1:" + strconv.Itoa(wire.SOCKSPort)})
	if _, err := s.Listen(); err != nil {
		return nil, fmt.Errorf("the build's network bridge: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = s.Serve(ctx) }()
	return func() { cancel(); s.Close() }, nil
}
