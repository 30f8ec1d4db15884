package provider

import (
	"strings"
	"testing"
)

func TestCheckHost(t *testing.T) {
	good := []string{"api.github.com", "*.github.com", "localhost", "pypi.org", "a-b.example.co.uk"}
	bad := map[string]string{
		"https://api.github.com": "scheme",
		"api.github.com:443":     "port",
		"api.github.com/v3":      "path",
		"user@github.com":        "user",
		"[::1]":                  "IPv6",
		"10.0.0.1":               "IP address",
		"*":                      "every host",
		"*.com":                  "top-level",
		"api.*.com":              "leading",
		"":                       "empty",
		"exa mple.com":           "not a valid host",
	}
	for _, h := range good {
		if msg := checkHost(h); msg != "" {
			t.Errorf("checkHost(%q) = %q, want ok", h, msg)
		}
	}
	for h, want := range bad {
		msg := checkHost(h)
		if msg == "" || !strings.Contains(msg, want) {
			t.Errorf("checkHost(%q) = %q, want a message mentioning %q", h, msg, want)
		}
	}
}

func TestLooksLikeCredential(t *testing.T) {
	for _, s := range []string{"sk-proj-abcdefghijklmnop", "ghp_abcdefghijklmnopqrstu", "sk-ant-api03-abcdefghijkl", "AKIAIOSFODNN7EXAMPLE", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9"} {
		if !looksLikeCredential(s) {
			t.Errorf("looksLikeCredential(%q) = false", s)
		}
	}
	for _, s := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_VERY_LONG_SERVICE_CREDENTIAL_NAME_2"} {
		if looksLikeCredential(s) {
			t.Errorf("looksLikeCredential(%q) = true", s)
		}
	}
}
