package codemode

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestTypeScriptGolden keeps the declarations of each golden API, each of which parses
// with the declarations' grammar.
func TestTypeScriptGolden(t *testing.T) {
	eachGoldenAPI(t, "d.ts", (*API).TypeScript, func(t *testing.T, _ *API, ts string) {
		if err := apiCheckTypeScript(ts); err != nil {
			t.Fatalf("%v\n%s", err, apiNumbered(ts))
		}
	})
}

// ---- A checker for the TypeScript the generator writes ----

// apiCheckTypeScript parses ts with the grammar of the declarations TypeScript() writes,
// a subset of TypeScript, failing on anything else: text that escaped a comment or a
// string shows up as tokens that do not fit. It also fails on an identifier PWNED and
// on a reserved word used as a name.
//
//	file      = { "declare" ( namespace | const ) }
//	namespace = "namespace" name "{" { function | interface } "}"
//	const     = "const" name ":" type ";"
//	function  = "function" name "(" name [ "?" ] ":" type ")" ":" type ";"
//	interface = "interface" name "{" { member } "}"
//	member    = [ "readonly" ] ( name | string ) [ "?" ] ":" type ";"
//	          | "[" name ":" "string" "]" ":" type ";"
//	type      = postfix { "|" postfix }
//	postfix   = primary { "[" "]" }
//	primary   = name [ "<" type ">" ] | "typeof" name | string | number | "(" type ")" | "{" { member } "}"
func apiCheckTypeScript(ts string) error {
	toks, err := apiLexTypeScript(ts)
	if err != nil {
		return err
	}
	p := &apiTSParser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	for !p.at("") {
		p.expect("declare")
		switch {
		case p.accept("namespace"):
			p.name()
			p.expect("{")
			for !p.accept("}") {
				switch {
				case p.accept("function"):
					p.name()
					p.expect("(")
					p.name()
					p.accept("?")
					p.expect(":")
					p.typ()
					p.expect(")")
					p.expect(":")
					p.typ()
					p.expect(";")
				case p.accept("interface"):
					p.name()
					p.expect("{")
					for !p.accept("}") {
						p.member()
					}
				default:
					p.fail("a function or an interface")
				}
			}
		case p.accept("const"):
			p.name()
			p.expect(":")
			p.typ()
			p.expect(";")
		default:
			p.fail("namespace or const")
		}
	}
	return err
}

type apiToken struct {
	kind string // "name", "string", "number", "punct", "" at the end
	text string
	line int
}

func apiLexTypeScript(s string) ([]apiToken, error) {
	var toks []apiToken
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ':
			i++
		case strings.HasPrefix(s[i:], "//"):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			if strings.ContainsAny(s[i:i+end], "\r\u2028\u2029") {
				return nil, fmt.Errorf("line %d: a line comment holds a line terminator", line)
			}
			i += end
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: an unterminated comment", line)
			}
			line += strings.Count(s[i:i+2+end], "\n")
			i += end + 4
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			var v string
			if j >= len(s) || json.Unmarshal([]byte(s[i:j+1]), &v) != nil || strings.ContainsAny(s[i:j+1], "\n\r\u2028\u2029") {
				return nil, fmt.Errorf("line %d: a bad string literal %.40q", line, s[i:])
			}
			toks = append(toks, apiToken{"string", s[i : j+1], line})
			i = j + 1
		case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '$' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, apiToken{"name", s[i:j], line})
			i = j
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' || s[j] == '+' || s[j] == '-') {
				j++
			}
			toks = append(toks, apiToken{"number", s[i:j], line})
			i = j
		case strings.IndexByte("{}()[]<>:;?|,", c) >= 0:
			toks = append(toks, apiToken{"punct", string(c), line})
			i++
		default:
			return nil, fmt.Errorf("line %d: unexpected character %q", line, c)
		}
	}
	for _, t := range toks {
		if t.kind == "name" && t.text == "PWNED" {
			return nil, fmt.Errorf("line %d: hostile text became code", t.line)
		}
	}
	return append(toks, apiToken{line: line}), nil
}

type apiTSParser struct {
	toks []apiToken
	pos  int
}

// apiTSReserved are words that cannot name a namespace, function, interface or parameter.
var apiTSReserved = words(jsReserved, "any unknown never object string number boolean symbol bigint void")

func (p *apiTSParser) peek() apiToken { return p.toks[p.pos] }
func (p *apiTSParser) at(text string) bool {
	t := p.peek()
	return t.text == text && (t.kind == "punct" || t.kind == "name" || t.kind == "")
}
func (p *apiTSParser) accept(text string) bool {
	if p.at(text) {
		p.pos++
		return true
	}
	return false
}
func (p *apiTSParser) fail(want string) {
	t := p.peek()
	panic(fmt.Sprintf("line %d: want %s, got %q", t.line, want, t.text))
}
func (p *apiTSParser) expect(text string) {
	if !p.accept(text) {
		p.fail(fmt.Sprintf("%q", text))
	}
}
func (p *apiTSParser) name() string {
	t := p.peek()
	if t.kind != "name" || apiTSReserved[t.text] {
		p.fail("a name")
	}
	p.pos++
	return t.text
}
func (p *apiTSParser) member() {
	if p.accept("[") {
		p.name()
		p.expect(":")
		p.expect("string")
		p.expect("]")
	} else {
		p.accept("readonly")
		if t := p.peek(); t.kind == "string" || t.kind == "name" { // property names may be reserved words
			p.pos++
		} else {
			p.fail("a property name")
		}
		p.accept("?")
	}
	p.expect(":")
	p.typ()
	p.expect(";")
}
func (p *apiTSParser) typ() {
	p.postfix()
	for p.accept("|") {
		p.postfix()
	}
}
func (p *apiTSParser) postfix() {
	p.primary()
	for p.accept("[") {
		p.expect("]")
	}
}
func (p *apiTSParser) primary() {
	t := p.peek()
	switch {
	case t.kind == "string" || t.kind == "number":
		p.pos++
	case p.accept("("):
		p.typ()
		p.expect(")")
	case p.accept("{"):
		for !p.accept("}") {
			p.member()
		}
	case p.accept("typeof"):
		p.name()
	case t.kind == "name":
		p.pos++
		if p.accept("<") {
			p.typ()
			p.expect(">")
		}
	default:
		p.fail("a type")
	}
}
