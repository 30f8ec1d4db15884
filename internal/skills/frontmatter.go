package skills

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// frontMatter is what trueforge reads of SKILL.md's front matter.
type frontMatter struct {
	name, description string
}

// parseFrontMatter reads the YAML front matter that opens SKILL.md: the lines between a
// first line "---" and the next "---". Of it, only the top-level keys name and
// description are read, each a plain, single-quoted or double-quoted scalar (continued
// on more-indented lines, as YAML folds them) or a block scalar (| or >); other keys,
// nested ones included, are skipped, so front matter written for other tools (license,
// allowed-tools, metadata) is accepted. This is the subset of YAML skills use, not a
// YAML parser: anything else on a name or description line is an error that says so.
func parseFrontMatter(md []byte) (frontMatter, error) {
	if !utf8.Valid(md) {
		return frontMatter{}, errors.New("is not valid UTF-8")
	}
	text := strings.TrimPrefix(string(md), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t") != "---" {
		return frontMatter{}, errors.New("does not start with front matter (a first line ---)")
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if l := strings.TrimRight(lines[i], " \t"); l == "---" || l == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		return frontMatter{}, errors.New("has front matter that is never closed (no second --- line)")
	}
	body := lines[1:end]
	var fm frontMatter
	seen := map[string]bool{}
	for i := 0; i < len(body); i++ {
		line := body[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") || startsIndented(line) {
			continue // a comment, or part of a key this parser skips
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(key, " \t\"'") {
			return frontMatter{}, fmt.Errorf("has a front matter line %d that is not \"key: value\": %q", i+2, line)
		}
		// The lines that continue this key: more indented, or blank.
		j := i + 1
		for j < len(body) && (startsIndented(body[j]) || strings.TrimSpace(body[j]) == "") {
			j++
		}
		cont := body[i+1 : j]
		i = j - 1
		if key != "name" && key != "description" {
			continue
		}
		if seen[key] {
			return frontMatter{}, fmt.Errorf("gives %s twice in its front matter", key)
		}
		seen[key] = true
		v, err := scalar(strings.TrimSpace(value), cont)
		if err != nil {
			return frontMatter{}, fmt.Errorf("has a %s that cannot be read: %v", key, err)
		}
		if key == "name" {
			fm.name = v
		} else {
			fm.description = v
		}
	}
	return fm, nil
}

func startsIndented(line string) bool {
	return strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
}

// scalar is the value of a key whose text after the colon is first and whose
// continuation lines are cont.
func scalar(first string, cont []string) (string, error) {
	switch {
	case first == "":
		if len(strings.TrimSpace(strings.Join(cont, ""))) > 0 {
			return "", errors.New("it is a nested value, not text")
		}
		return "", nil
	case first[0] == '|' || first[0] == '>':
		if strings.Trim(first[1:], "+-0123456789") != "" {
			return "", fmt.Errorf("%q after the block indicator", first[1:])
		}
		return block(first[0] == '>', cont), nil
	case first[0] == '"' || first[0] == '\'':
		return quoted(fold(append([]string{first}, cont...)))
	case first[0] == '[' || first[0] == '{' || first[0] == '&' || first[0] == '*' || first[0] == '!':
		return "", fmt.Errorf("%q is not plain text; quote it", first)
	}
	v := fold(append([]string{first}, cont...))
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i] // a comment
	}
	return strings.TrimSpace(v), nil
}

// fold joins lines as YAML folds a multi-line flow scalar: each line trimmed, a single
// line break becomes a space, an empty line a newline.
func fold(lines []string) string {
	var b strings.Builder
	pendingBreaks := 0
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			pendingBreaks++
			continue
		}
		if i > 0 && b.Len() > 0 {
			if pendingBreaks > 0 {
				b.WriteString(strings.Repeat("\n", pendingBreaks))
			} else {
				b.WriteByte(' ')
			}
		}
		pendingBreaks = 0
		b.WriteString(l)
	}
	return b.String()
}

// block is a literal (|) or folded (>) block scalar's content, with its common
// indentation removed and surrounding blank lines dropped.
func block(folded bool, lines []string) string {
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var out []string
	for _, l := range lines {
		if len(l) >= indent && indent >= 0 {
			l = l[indent:]
		} else {
			l = strings.TrimSpace(l)
		}
		out = append(out, strings.TrimRight(l, " \t"))
	}
	if folded {
		return strings.TrimSpace(fold(out))
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}

// quoted reads a single- or double-quoted scalar that must make up the whole value.
func quoted(s string) (string, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case c == q:
			if rest := strings.TrimSpace(s[i+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
				return "", fmt.Errorf("text after the closing quote: %q", rest)
			}
			return b.String(), nil
		case c == '\\' && q == '"':
			if i+1 >= len(s) {
				return "", errors.New("it ends with a backslash")
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case '"', '\\', '/', ' ':
				b.WriteByte(e)
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n >= len(s) {
					return "", fmt.Errorf("a short \\%c escape", e)
				}
				r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
				if err != nil {
					return "", fmt.Errorf("a bad \\%c escape", e)
				}
				b.WriteRune(rune(r))
				i += n
			default:
				return "", fmt.Errorf("an unknown escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("the closing quote is missing")
}
