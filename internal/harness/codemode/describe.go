// The compact description of the script API the model sees, within its byte budget.

package codemode

import (
	"fmt"
	"strings"
)

// detail is how much of a tool one line of the description shows.
type detail struct {
	desc   int  // bytes of the description, 0 for none
	sig    bool // the parameter list
	types  bool // the parameters' types
	ret    bool // the result type
	depth  int  // levels of object types spelled out
	fields int  // fields shown per object
}

var details = []detail{
	{desc: 160, sig: true, types: true, ret: true, depth: 2, fields: 6},
	{desc: 60, sig: true, types: true, ret: true, depth: 1, fields: 4},
	{sig: true, types: true, ret: true, depth: 1, fields: 4},
	{sig: true, types: true},
	{sig: true},
	{},
}

// DescribeBudget is the most bytes of the API listing in Code Mode's tool description
// (8 KiB): the one bound the tool, its docs and the tests share.
const DescribeBudget = 8 << 10

// maxLine is the longest line a tool gets at a level before it is shown at the next.
const maxLine = 320

// Describe returns the API as the model should see it in at most limit bytes: a line
// on how to call the functions, then one line per tool in order of namespace and name,
// e.g.
//
//	weather.forecast(city: str, days: int = None) -> {temp_c: float, ...}  # Get a forecast
//
// When that does not fit, every line gets less detail (shorter descriptions, then none,
// then no result types, no parameter types, no parameters), and then the tools that
// still do not fit are counted on a last line ("...and N more tools"). Lines are never
// cut.
func (a *API) Describe(limit int) string {
	var funcs []*function
	for _, s := range a.servers {
		funcs = append(funcs, s.funcs...)
	}
	if len(funcs) == 0 || limit <= 0 {
		return ""
	}
	header := describeHeader(funcs)
	lines := make([]string, len(funcs))
	for level := range details {
		size := len(header)
		for i, f := range funcs {
			lines[i] = f.line(level)
			size += 1 + len(lines[i])
		}
		if size <= limit {
			return header + "\n" + strings.Join(lines, "\n")
		}
	}
	// Names alone do not fit: as many as do, then the count of the rest; under the
	// header unless leaving it out shows more tools.
	best, withHeader := fitting(lines, 0, limit), false
	if n := fitting(lines, len(header), limit); n >= 0 && n >= best {
		best, withHeader = n, true
	}
	if best < 0 {
		return ""
	}
	var out []string
	if withHeader {
		out = append(out, header)
	}
	out = append(out, lines[:best]...)
	if best < len(lines) {
		out = append(out, more(len(lines)-best))
	}
	return strings.Join(out, "\n")
}

// fitting is how many of lines fit in limit bytes after size bytes of text, followed
// by the count of the others when some are left out; -1 when not even the count fits.
func fitting(lines []string, size, limit int) int {
	best := -1
	for n := 0; n <= len(lines); n++ {
		total := size
		if n < len(lines) {
			total = joined(total, more(len(lines)-n))
		}
		if total <= limit {
			best = n
		}
		if n < len(lines) {
			size = joined(size, lines[n])
		}
	}
	return best
}

// joined is the length of text of size bytes with line appended on a line of its own.
func joined(size int, line string) int {
	if size == 0 {
		return len(line)
	}
	return size + 1 + len(line)
}

func more(n int) string {
	if n == 1 {
		return "...and 1 more tool"
	}
	return fmt.Sprintf("...and %d more tools", n)
}

// describeHeader says how to call the functions, with the first tool that takes a
// parameter as the example.
func describeHeader(funcs []*function) string {
	f := funcs[0]
	for _, g := range funcs {
		if len(g.params) > 0 {
			f = g
			break
		}
	}
	call := f.server.ident + "." + f.ident
	py, js := call+"()", "await "+call+"()"
	if len(f.params) > 0 {
		p := f.params[0].ident
		py, js = call+"("+p+"=...)", "await "+call+"({"+p+": ...})"
	}
	return "MCP tools as script functions (Python: x = " + py + "; JS/TS: x = " + js +
		"; also tools.<server>.<tool>; optional arguments may be left out):"
}

// line is the description line of f at a level of detail, or at the first level
// after it where the line is short enough.
func (f *function) line(level int) string {
	var s string
	for ; level < len(details); level++ {
		s = f.render(details[level])
		if len(s) <= maxLine {
			break
		}
	}
	return s
}

func (f *function) render(d detail) string {
	s := f.server.ident + "." + f.ident
	if !d.sig {
		return s
	}
	var params []string
	if f.open {
		params = []string{"**kwargs"}
	}
	for _, p := range f.params {
		switch {
		case d.types && p.required:
			params = append(params, p.ident+": "+p.typ.brief(d.depth, d.fields))
		case d.types:
			t := p.typ
			if t.kind == unionKind { // "= None" says it already
				t = union(nonNull(t.alts))
			}
			params = append(params, p.ident+": "+t.brief(d.depth, d.fields)+" = None")
		case p.required:
			params = append(params, p.ident)
		default:
			params = append(params, p.ident+"=None")
		}
	}
	s += "(" + strings.Join(params, ", ") + ")"
	if d.ret && f.output != nil {
		s += " -> " + f.output.brief(d.depth, d.fields)
	}
	if d.desc > 0 {
		if desc := oneLine(f.tool.Description, d.desc); desc != "" {
			s += "  # " + desc
		}
	}
	return s
}

func nonNull(alts []*schemaType) []*schemaType {
	var out []*schemaType
	for _, a := range alts {
		if a.kind != nullKind {
			out = append(out, a)
		}
	}
	return out
}

// brief is t in the description's compact Python-like notation, spelling out objects
// depth levels deep with at most fields fields each.
func (t *schemaType) brief(depth, fields int) string {
	switch t.kind {
	case arrayKind:
		return "list[" + t.elem.brief(depth, fields) + "]"
	case objectKind:
		if t.props == nil || depth <= 0 {
			return "dict"
		}
		var fs []string
		for i, p := range t.props {
			if i == fields {
				fs = append(fs, "...")
				break
			}
			fs = append(fs, briefKey(p.name)+": "+p.typ.brief(depth-1, fields))
		}
		return "{" + strings.Join(fs, ", ") + "}"
	case literalKind:
		if len(t.lits) > 6 {
			return base(t.lits[0].kind)
		}
		vals := make([]string, len(t.lits))
		for i, l := range t.lits {
			if l.kind != stringKind {
				vals[i] = literalPython(l)
				continue
			}
			if len(l.text) > 24 {
				return base(stringKind)
			}
			vals[i] = jsString(l.text)
		}
		return strings.Join(vals, "|")
	case unionKind:
		arms := make([]string, len(t.alts))
		for i, a := range t.alts {
			arms[i] = a.brief(depth, fields)
		}
		return strings.Join(arms, " | ")
	}
	return base(t.kind)
}

func base(k kind) string {
	switch k {
	case stringKind:
		return "str"
	case integerKind:
		return "int"
	case numberKind:
		return "float"
	case booleanKind:
		return "bool"
	case nullKind:
		return "None"
	}
	return "Any"
}

func briefKey(name string) string {
	if tsKey(name) == name {
		return name
	}
	return jsString(clip(name, 24))
}
