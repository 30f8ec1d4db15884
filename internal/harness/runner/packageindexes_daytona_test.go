package runner_test

import (
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
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
			editEnvironment(t, f.st, "dtenv", func(e *store.Environment) {
				e.Settings.PackageIndexes, e.Settings.PackageIndexesIn = []string{"pypi"}, c.in
			})
			_, _, _, sb := f.firstTurn(t, "pi", harnesstest.Sandbox("dtenv", 15, 60, 120), exec("true"), text("ok"))
			if sb.DomainAllowList != c.want || sb.NetworkBlockAll {
				t.Fatalf("domainAllowList %q (block_all %v), want %q", sb.DomainAllowList, sb.NetworkBlockAll, c.want)
			}
		})
	}
}
