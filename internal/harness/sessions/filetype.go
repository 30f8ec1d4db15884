package sessions

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/filetype"
)

// Downloads are checked for what they are before their first byte leaves: the content
// is sniffed (filetype), compared with the name, and an executable, or an archive that
// holds one or cannot be looked into, is refused unless the operator allows executable
// downloads. Executable outputs go through a build and signing pipeline, not a chat.

// ErrExecutable is a download refused because it is, or may hold, an executable.
var ErrExecutable = errors.New("executable outputs go through your build and signing pipeline, not a download")

// maxListed is how many executables of an archive a refusal names.
const maxListed = 5

// TypeCheck is what a download's content is.
type TypeCheck struct {
	Kind        string   // filetype's kind, from the first bytes
	Mismatch    string   // how the kind contradicts the name ("" when it does not)
	Executables []string // an archive's entries that are executables
}

// Header is the check as the X-Trueforge-Type header and the CLI say it: "pdf", or
// "elf; named .pdf but its content is elf".
func (c TypeCheck) Header() string {
	if c.Mismatch != "" {
		return c.Kind + "; " + c.Mismatch
	}
	return c.Kind
}

// CheckType sniffs content, downloaded as name, and refuses (ErrExecutable, wrapped with
// the reason) an executable or an archive that holds one or cannot be looked into,
// unless allowExecutables.
func CheckType(name string, content []byte, allowExecutables bool) (TypeCheck, error) {
	return inspect(content).decide(name, allowExecutables)
}

// inspection is what the content is, whatever its name: all that a check reads from
// the bytes (an archive's entries included), so it can be kept per digest.
type inspection struct {
	kind string
	exes []string
	err  error // filetype.ErrNotInspected, wrapped, for an archive it cannot look into
}

func inspect(content []byte) inspection {
	in := inspection{kind: filetype.Sniff(content)}
	in.exes, in.err = filetype.ArchiveExecutables(content, in.kind, maxListed)
	return in
}

func (in inspection) decide(name string, allowExecutables bool) (TypeCheck, error) {
	c := TypeCheck{Kind: in.kind, Mismatch: filetype.Mismatch(path.Base(name), in.kind), Executables: in.exes}
	if allowExecutables {
		return c, nil
	}
	switch {
	case filetype.Executable(c.Kind):
		what := "an executable (" + c.Kind + ")"
		if c.Mismatch != "" {
			what += ", " + c.Mismatch
		}
		return c, fmt.Errorf("%s is %s: %w", name, what, ErrExecutable)
	case len(in.exes) > 0:
		return c, fmt.Errorf("%s is a %s archive holding executables (%s): %w", name, c.Kind, strings.Join(in.exes, ", "), ErrExecutable)
	case errors.Is(in.err, filetype.ErrNotInspected):
		return c, fmt.Errorf("%s is a %s archive whose entries could not be checked for executables (%v): %w", name, c.Kind, in.err, ErrExecutable)
	}
	return c, nil
}

// TypeChecks is CheckType with what it read from each content kept by digest, so that
// a file downloaded again (the same bytes, under any name, in any session) is not
// sniffed and its archive not opened again: an archive's look inside costs milliseconds
// per MiB, the kept answer microseconds. It holds at most Max digests (0:
// DefaultTypeChecks), forgetting the oldest first; the zero value is ready to use and
// safe for concurrent use.
type TypeChecks struct {
	Max   int
	mu    sync.Mutex
	seen  map[string]inspection
	order []string
}

// DefaultTypeChecks is how many digests a TypeChecks keeps by default (a few hundred
// bytes each).
const DefaultTypeChecks = 4096

// Check is CheckType for content whose SHA-256 (hex) is sum.
func (t *TypeChecks) Check(name, sum string, content []byte, allowExecutables bool) (TypeCheck, error) {
	t.mu.Lock()
	in, ok := t.seen[sum]
	t.mu.Unlock()
	if !ok {
		in = inspect(content)
		t.keep(sum, in)
	}
	return in.decide(name, allowExecutables)
}

func (t *TypeChecks) keep(sum string, in inspection) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]inspection{}
	}
	if _, ok := t.seen[sum]; ok {
		return
	}
	limit := t.Max
	if limit <= 0 {
		limit = DefaultTypeChecks
	}
	for len(t.order) >= limit {
		delete(t.seen, t.order[0])
		t.order = t.order[1:]
	}
	t.seen[sum] = in
	t.order = append(t.order, sum)
}
