package sandbox

import (
	"strings"
	"testing"
)

func TestCheckDockerfile(t *testing.T) {
	for df, want := range map[string]string{
		"FROM python:3.12\nRUN true\n":                  "",
		"# syntax=docker/dockerfile:1\nARG V=1\nFROM x": "",
		"RUN echo hi":        "first instruction is RUN",
		"# only a comment\n": "no instructions",
		"FROM\n":             "FROM names no image",
	} {
		err := CheckDockerfile(df)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v; want %q", df, err, want)
		}
	}
}
