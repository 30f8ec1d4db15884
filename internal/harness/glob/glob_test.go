package glob

import "testing"

func TestGlobs(t *testing.T) {
	for _, c := range []struct {
		pat   string
		match []string
		miss  []string
	}{
		{"*", []string{"", "a", "a/b", "a\nb"}, nil},
		{"github__delete_*", []string{"github__delete_repo", "github__delete_"}, []string{"github__delete", "xgithub__delete_repo", "gitlab__delete_x"}},
		{"a?c", []string{"abc", "a/c", "aéc"}, []string{"ac", "abbc"}},
		{"[abc]x", []string{"ax", "cx"}, []string{"dx", "x"}},
		{"[^abc]x", []string{"dx", "éx"}, []string{"ax"}},
		{"[a-c]", []string{"b"}, []string{"d", "-"}},
		{"[a-]", []string{"a", "-"}, []string{"b"}},
		{`[\]]`, []string{"]"}, []string{`\`}},
		{`\*`, []string{"*"}, []string{"x"}},
		{`a\\b`, []string{`a\b`}, []string{"ab"}},
		{"a.b(c)+$", []string{"a.b(c)+$"}, []string{"axb(c)+$", "a.bcc"}},
		{"prod*", []string{"prod", "production"}, []string{"Prod", "preprod"}},
	} {
		re, err := Compile(c.pat)
		if err != nil {
			t.Errorf("%q: %v", c.pat, err)
			continue
		}
		for _, s := range c.match {
			if !re.MatchString(s) {
				t.Errorf("%q should match %q", c.pat, s)
			}
		}
		for _, s := range c.miss {
			if re.MatchString(s) {
				t.Errorf("%q should not match %q", c.pat, s)
			}
		}
	}
}
