package attachments

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// maxNameBytes bounds a safe name: well under every filesystem's 255, with room for a
// "-NN" suffix.
const maxNameBytes = 120

// SafeName is name made safe for /workspace/attachments/: the last element of a path
// (either slash), with control characters, invalid UTF-8, quotes, backslashes and
// characters a shell treats specially replaced by "_", no leading dot or dash (no hidden
// file, no option), and at most 120 bytes, keeping the extension. A name that leaves
// nothing usable is ErrBadName.
func SafeName(name string) (string, error) {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for i, r := range name {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(name[i:]); size <= 1 {
				b.WriteByte('_')
				continue
			}
		}
		switch {
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), strings.ContainsRune("\"'`$\\|&;<>*?!#~{}[]()", r):
			b.WriteByte('_')
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	safe := strings.TrimLeft(strings.TrimSpace(b.String()), ".-")
	if strings.Trim(safe, "_ ") == "" {
		return "", fmt.Errorf("%w: %q leaves no name once made safe; give the file a name of letters or digits", ErrBadName, name)
	}
	return truncateName(safe, maxNameBytes), nil
}

// truncateName cuts name to max bytes on a rune boundary, keeping a short extension.
func truncateName(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	ext := extension(name)
	stem := name[:len(name)-len(ext)]
	cut := limit - len(ext)
	for cut > 0 && !utf8.RuneStart(stem[cut]) {
		cut--
	}
	return stem[:cut] + ext
}

// uniqueName is name, or name with "-2", "-3", ... before its extension, whichever no
// attachment of existing has.
func uniqueName(name string, existing []store.Attachment) string {
	taken := map[string]bool{}
	for _, a := range existing {
		taken[a.Name] = true
	}
	if !taken[name] {
		return name
	}
	ext := extension(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		candidate := truncateName(stem, maxNameBytes-len(suffix)-len(ext)) + suffix + ext
		if !taken[candidate] {
			return candidate
		}
	}
}

// extension is name's extension as a suffix is put before it: ".tar.gz" whole, and
// none when it is too long to be one.
func extension(name string) string {
	ext := path.Ext(name)
	if stem := strings.TrimSuffix(name, ext); strings.HasSuffix(strings.ToLower(stem), ".tar") {
		ext = stem[len(stem)-4:] + ext
	}
	if len(ext) > 16 || len(ext) == len(name) {
		return ""
	}
	return ext
}
