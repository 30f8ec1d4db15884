package packageindex

import (
	"reflect"
	"testing"
)

func TestSandboxAllow(t *testing.T) {
	pypi := []string{"pypi"}
	for _, c := range []struct {
		name  string
		allow []string
		cidrs []string
		names []string
		in    string
		want  []string
	}{
		{"build only keeps the allow list", []string{"api.example.com"}, nil, pypi, InBuild, []string{"api.example.com"}},
		{"the default is build only", []string{"api.example.com"}, nil, pypi, "", []string{"api.example.com"}},
		{"build and sandbox adds the hosts", []string{"api.example.com", "pypi.org"}, nil, pypi, InBuildAndSandbox,
			[]string{"api.example.com", "pypi.org", "files.pythonhosted.org"}},
		{"an empty allow list stays every host", nil, nil, pypi, InBuildAndSandbox, nil},
		{"address ranges alone restrict the sandbox, so the hosts are added", nil, []string{"10.0.0.0/8"}, pypi, InBuildAndSandbox,
			[]string{"files.pythonhosted.org", "pypi.org"}},
		{"no index changes nothing", []string{"a.example"}, nil, nil, InBuildAndSandbox, []string{"a.example"}},
	} {
		got, err := SandboxAllow(c.allow, c.cidrs, c.names, c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: SandboxAllow(%v, %v, %q) = %v, %v; want %v", c.name, c.allow, c.names, c.in, got, err, c.want)
		}
	}
	if _, err := SandboxAllow([]string{"a.example"}, nil, []string{"pipy"}, InBuildAndSandbox); err == nil {
		t.Error("an unknown index name was accepted")
	}
}

func TestBuildNetwork(t *testing.T) {
	pypi := []string{"pypi"}
	for _, c := range []struct {
		name           string
		blockAll       bool
		allow, names   []string
		block, proxied bool
		hosts          []string
	}{
		{"block_all alone blocks", true, nil, nil, true, false, nil},
		{"block_all with indexes reaches only them", true, []string{"a.example"}, pypi, false, true,
			[]string{"files.pythonhosted.org", "pypi.org"}},
		{"an allow list is the build's too, plus the indexes", false, []string{"a.example"}, pypi, false, true,
			[]string{"a.example", "files.pythonhosted.org", "pypi.org"}},
		{"an allow list without indexes", false, []string{"a.example"}, nil, false, true, []string{"a.example"}},
		{"no allow list: every host, as before", false, nil, pypi, false, false, nil},
		{"nothing set: every host, as before", false, nil, nil, false, false, nil},
	} {
		block, proxied, hosts, err := BuildNetwork(c.blockAll, c.allow, c.names)
		if err != nil || block != c.block || proxied != c.proxied || !reflect.DeepEqual(hosts, c.hosts) {
			t.Errorf("%s: BuildNetwork = %v, %v, %v, %v; want %v, %v, %v", c.name, block, proxied, hosts, err, c.block, c.proxied, c.hosts)
		}
	}
}
