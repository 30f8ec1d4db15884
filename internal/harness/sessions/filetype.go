package sessions

import (
	"errors"
	"fmt"
	"path"
	"strings"

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
	c := TypeCheck{Kind: filetype.Sniff(content)}
	c.Mismatch = filetype.Mismatch(path.Base(name), c.Kind)
	exes, err := filetype.ArchiveExecutables(content, c.Kind, maxListed)
	c.Executables = exes
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
	case len(exes) > 0:
		return c, fmt.Errorf("%s is a %s archive holding executables (%s): %w", name, c.Kind, strings.Join(exes, ", "), ErrExecutable)
	case errors.Is(err, filetype.ErrNotInspected):
		return c, fmt.Errorf("%s is a %s archive whose entries could not be checked for executables (%v): %w", name, c.Kind, err, ErrExecutable)
	}
	return c, nil
}
