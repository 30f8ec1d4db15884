// The JSON Schema model the generators read: the walk of a tool's input and output
// schemas into schemaType, bounded in depth, nodes, properties, enum values and union arms.

package codemode

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

type kind uint8

const (
	anyKind kind = iota
	stringKind
	integerKind
	numberKind
	booleanKind
	nullKind
	arrayKind
	objectKind
	literalKind
	unionKind
)

// schemaType is the part of a JSON schema the API uses: a tree (references are
// expanded, with bounds), so each object node is named once.
type schemaType struct {
	kind   kind
	elem   *schemaType   // arrayKind: the items; objectKind: the other properties' values (nil: Any)
	props  []*property   // objectKind: the declared properties by name; nil for an untyped dict
	closed bool          // objectKind with props: undeclared properties are not part of it
	lits   []literal     // literalKind
	alts   []*schemaType // unionKind, flattened
	py, ts string        // objectKind with props: its TypedDict and interface names
}

type property struct {
	name     string // as the schema spells it: the key sent and received
	ident    string // as scripts spell it
	typ      *schemaType
	required bool
	desc     string
}

type literal struct {
	kind kind   // stringKind, integerKind, booleanKind or nullKind
	text string // the string, or the integer's digits, or "true"/"false"
}

func (t *schemaType) prop(name string) *property {
	i := sort.Search(len(t.props), func(i int) bool { return t.props[i].name >= name })
	if i < len(t.props) && t.props[i].name == name {
		return t.props[i]
	}
	return nil
}

type parser struct {
	root   map[string]any
	nodes  int
	active map[string]bool // $refs being expanded: one met again is a loop
}

func parseSchema(s map[string]any) *schemaType {
	p := &parser{root: s, active: map[string]bool{}}
	return p.parse(s, 0)
}

func (p *parser) parse(v any, depth int) *schemaType {
	s, ok := v.(map[string]any)
	if !ok || depth > maxDepth || p.nodes >= maxNodes {
		return &schemaType{}
	}
	p.nodes++
	if ref, ok := s["$ref"].(string); ok {
		return p.ref(ref, depth)
	}
	t := p.literals(s)
	if t == nil {
		for _, key := range []string{"anyOf", "oneOf"} {
			if arms, ok := s[key].([]any); ok && len(arms) > 0 {
				if len(arms) > maxUnion {
					t = &schemaType{}
					break
				}
				alts := make([]*schemaType, len(arms))
				for i, arm := range arms {
					alts[i] = p.parse(arm, depth+1)
				}
				t = union(alts)
				break
			}
		}
	}
	if t == nil {
		if parts, ok := s["allOf"].([]any); ok && len(parts) > 0 {
			t = p.allOf(parts, depth)
		}
	}
	if t == nil {
		switch ty := s["type"].(type) {
		case string:
			t = p.typed(s, ty, depth)
		case []any:
			if len(ty) > maxUnion {
				t = &schemaType{}
				break
			}
			alts := make([]*schemaType, 0, len(ty))
			for _, name := range ty {
				n, _ := name.(string)
				alts = append(alts, p.typed(s, n, depth))
			}
			t = union(alts)
		default:
			switch {
			case s["properties"] != nil || s["additionalProperties"] != nil:
				t = p.typed(s, "object", depth)
			case s["items"] != nil:
				t = p.typed(s, "array", depth)
			default:
				t = &schemaType{}
			}
		}
	}
	if nullable, _ := s["nullable"].(bool); nullable {
		t = union([]*schemaType{t, {kind: nullKind}})
	}
	return t
}

// ref expands a local reference ("#/$defs/X", "#/definitions/X", any JSON pointer into
// the same document). Others, and loops, are Any.
func (p *parser) ref(ref string, depth int) *schemaType {
	if p.active[ref] || (ref != "#" && !strings.HasPrefix(ref, "#/")) {
		return &schemaType{}
	}
	var cur any = p.root
	if ref != "#" {
		segs := strings.Split(ref[2:], "/")
		if len(segs) > maxRefPath {
			return &schemaType{}
		}
		for _, seg := range segs {
			seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return &schemaType{}
			}
			if cur, ok = m[seg]; !ok {
				return &schemaType{}
			}
		}
	}
	p.active[ref] = true
	defer delete(p.active, ref)
	return p.parse(cur, depth+1)
}

// literals reads const and enum as a literal type, or returns nil when the schema has
// neither or its values cannot all be spelled as literals (then its type is used).
func (p *parser) literals(s map[string]any) *schemaType {
	var vals []any
	if c, ok := s["const"]; ok {
		vals = []any{c}
	} else if e, ok := s["enum"].([]any); ok && len(e) > 0 && len(e) <= maxEnum {
		vals = e
	} else {
		return nil
	}
	t := &schemaType{kind: literalKind}
	for _, v := range vals {
		l, ok := literalOf(v)
		if !ok {
			return nil
		}
		t.lits = append(t.lits, l)
	}
	return t
}

func literalOf(v any) (literal, bool) {
	switch v := v.(type) {
	case nil:
		return literal{kind: nullKind, text: "null"}, true
	case string:
		return literal{kind: stringKind, text: v}, len(v) <= maxLiteral
	case bool:
		return literal{kind: booleanKind, text: strconv.FormatBool(v)}, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) <= 1<<53 {
			return literal{kind: integerKind, text: strconv.FormatFloat(v, 'f', -1, 64)}, true
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return literal{kind: integerKind, text: strconv.FormatInt(i, 10)}, true
		}
	case int:
		return literal{kind: integerKind, text: strconv.Itoa(v)}, true
	case int64:
		return literal{kind: integerKind, text: strconv.FormatInt(v, 10)}, true
	}
	return literal{}, false
}

// allOf reads an intersection: one part is that part; several object parts are one
// object with all their properties (open, since the parts' additionalProperties do not
// combine); anything else is Any.
func (p *parser) allOf(parts []any, depth int) *schemaType {
	if len(parts) == 1 {
		return p.parse(parts[0], depth+1)
	}
	if len(parts) > maxUnion {
		return &schemaType{}
	}
	merged := &schemaType{kind: objectKind}
	byName := map[string]*property{}
	for _, part := range parts {
		t := p.parse(part, depth+1)
		if t.kind != objectKind || t.props == nil {
			return &schemaType{}
		}
		for _, pr := range t.props {
			if have := byName[pr.name]; have != nil {
				have.required = have.required || pr.required
				continue
			}
			byName[pr.name] = pr
			merged.props = append(merged.props, pr)
		}
	}
	if len(merged.props) > maxProps {
		return &schemaType{kind: objectKind}
	}
	sort.Slice(merged.props, func(i, j int) bool { return merged.props[i].name < merged.props[j].name })
	return merged
}

func (p *parser) typed(s map[string]any, name string, depth int) *schemaType {
	switch name {
	case "string":
		return &schemaType{kind: stringKind}
	case "integer":
		return &schemaType{kind: integerKind}
	case "number":
		return &schemaType{kind: numberKind}
	case "boolean":
		return &schemaType{kind: booleanKind}
	case "null":
		return &schemaType{kind: nullKind}
	case "array":
		return &schemaType{kind: arrayKind, elem: p.parse(s["items"], depth+1)}
	case "object":
		return p.object(s, depth)
	}
	return &schemaType{}
}

func (p *parser) object(s map[string]any, depth int) *schemaType {
	t := &schemaType{kind: objectKind}
	props, _ := s["properties"].(map[string]any)
	open := len(props) == 0 // additionalProperties absent: closed when properties are listed
	switch ap := s["additionalProperties"].(type) {
	case bool:
		open = ap
	case map[string]any:
		t.elem = p.parse(ap, depth+1)
		open = true
	}
	if _, ok := s["patternProperties"]; ok {
		open = true
	}
	if len(props) == 0 || len(props) > maxProps {
		if len(props) > maxProps {
			t.elem = nil
		}
		return t
	}
	required := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if r, ok := r.(string); ok {
				required[r] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ps, _ := props[name].(map[string]any)
		desc, _ := ps["description"].(string)
		t.props = append(t.props, &property{
			name:     name,
			ident:    identifier(name, paramReserved),
			typ:      p.parse(props[name], depth+1),
			required: required[name],
			desc:     desc,
		})
	}
	t.closed = !open
	return t
}

// union flattens and dedupes arms; an Any arm makes it Any, one arm is that arm.
func union(alts []*schemaType) *schemaType {
	var out []*schemaType
	simple := map[kind]bool{}
	var add func(a *schemaType) bool
	add = func(a *schemaType) bool {
		switch a.kind {
		case anyKind:
			return false
		case unionKind:
			for _, b := range a.alts {
				if !add(b) {
					return false
				}
			}
			return true
		case stringKind, integerKind, numberKind, booleanKind, nullKind:
			if simple[a.kind] {
				return true
			}
			simple[a.kind] = true
		}
		out = append(out, a)
		return true
	}
	for _, a := range alts {
		if !add(a) {
			return &schemaType{}
		}
	}
	switch {
	case len(out) == 0 || len(out) > maxUnion:
		return &schemaType{}
	case len(out) == 1:
		return out[0]
	}
	return &schemaType{kind: unionKind, alts: out}
}

// object is an object type as a generator spells it: by named, the name it declared
// for the type, when it has one; else as a dictionary, spelled by dict, of the values'
// type as spell writes it (anyValue when the schema types no values).
func (t *schemaType) object(named string, spell func(*schemaType) string, anyValue string, dict func(value string) string) string {
	switch {
	case named != "":
		return named
	case t.elem != nil:
		return dict(spell(t.elem))
	}
	return dict(anyValue)
}

// literals is each of a literal type's values as spell writes it in a language.
func (t *schemaType) literals(spell func(literal) string) []string {
	vals := make([]string, len(t.lits))
	for i, l := range t.lits {
		vals[i] = spell(l)
	}
	return vals
}

// nullable reports whether None/null is already one of t's values.
func (t *schemaType) nullable() bool {
	switch t.kind {
	case anyKind, nullKind:
		return true
	case unionKind:
		for _, a := range t.alts {
			if a.nullable() {
				return true
			}
		}
	case literalKind:
		for _, l := range t.lits {
			if l.kind == nullKind {
				return true
			}
		}
	}
	return false
}
