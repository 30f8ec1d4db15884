// Package glob is the pattern syntax of the harness operator's files (the MCP policy,
// the credentials file): one syntax, so a pattern means the same in both.
package glob

import (
	"errors"
	"regexp"
	"strings"
)

const loneBackslash = `it ends with a lone backslash, which escapes nothing: a literal backslash is two in the pattern ("\\\\" in JSON)`

// Compile turns a glob into an anchored regular expression: "*" is any run of
// characters ("/" included), "?" one character, "[...]" one character of a class
// ("[^...]" outside it, ranges with "-"), and "\" makes the next character literal.
// Regular expressions match in linear time, whatever the pattern or the value.
func Compile(pat string) (*regexp.Regexp, error) {
	if pat == "" {
		return nil, errors.New(`an empty pattern matches only an empty value; use "*" to match anything`)
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i+1 == len(rs) {
				return nil, errors.New(loneBackslash)
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case '[':
			end, class, err := globClass(rs, i)
			if err != nil {
				return nil, err
			}
			b.WriteString(class)
			i = end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)$`)
	return regexp.Compile(b.String())
}

// globClass reads the class that starts at rs[start] == '[' and returns the index of
// its ']' and the class as a regular expression.
func globClass(rs []rune, start int) (int, string, error) {
	var b strings.Builder
	b.WriteByte('[')
	i := start + 1
	if i < len(rs) && rs[i] == '^' {
		b.WriteByte('^')
		i++
	}
	n := 0
	for ; i < len(rs) && rs[i] != ']'; i++ {
		c, escaped := rs[i], false
		if c == '\\' {
			if i+1 == len(rs) {
				return 0, "", errors.New(loneBackslash)
			}
			i++
			c, escaped = rs[i], true
		}
		if n > 0 && c == '-' && !escaped && i+1 < len(rs) && rs[i+1] != ']' {
			b.WriteByte('-') // a range, like a-z
			continue
		}
		if strings.ContainsRune(`\-]^[`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
		n++
	}
	if i >= len(rs) {
		return 0, "", errors.New(`a "[" class is not closed with "]"; write "\[" for a literal bracket`)
	}
	if n == 0 {
		return 0, "", errors.New(`a "[]" class is empty; list characters like "[abc]" or ranges like "[a-z]"`)
	}
	b.WriteByte(']')
	return i, b.String(), nil
}
