package runner_test

import (
	"context"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
)

// On Daytona the backend enforces the network itself: a sandbox's domainAllowList is the
// environment's allow_domains plus its package indexes' hosts under package_indexes_in =
// "build_and_sandbox", and allow_domains alone under "build".
func TestDaytonaPackageIndexesInTheDomainAllowList(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{packageindex.InBuild, "api.example.com,*.pypi.org"},
		{packageindex.InBuildAndSandbox, "api.example.com,*.pypi.org,files.pythonhosted.org,pypi.org"},
	} {
		t.Run(c.in, func(t *testing.T) {
			f := newDaytonaFixture(t)
			ctx := context.Background()
			e, err := f.st.GetEnvironment(ctx, "dtenv")
			if err != nil {
				t.Fatal(err)
			}
			e.Settings.PackageIndexes, e.Settings.PackageIndexesIn = []string{"pypi"}, c.in
			must(t, f.st.UpdateEnvironment(ctx, e))
			harnesstest.AddAgent(t, f.st, "pi", "dtenv", harnesstest.AgentSpec{
				"model":   harnesstest.Script(exec("true"), text("ok")),
				"sandbox": harnesstest.Sandbox("dtenv", 15, 60, 120),
			})
			r := f.runner(t, "pi")
			sid, _ := r.NewSession(ctx, harnesstest.Owner)
			mustRun(t, r, sid, "go")
			rec, err := f.st.GetSessionSandbox(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := f.client.GetSandbox(ctx, rec.SandboxID)
			if err != nil {
				t.Fatal(err)
			}
			if sb.DomainAllowList != c.want || sb.NetworkBlockAll {
				t.Fatalf("domainAllowList %q (block_all %v), want %q", sb.DomainAllowList, sb.NetworkBlockAll, c.want)
			}
		})
	}
}
