// The typed script API: an agent's allowed MCP tools as Python functions, JavaScript
// functions and TypeScript declarations, a compact description of them for the model,
// and the minimizer that keeps a result to the fields its tool declares.
//
// Every name, description and enum value here comes from an MCP server, which is only
// semi-trusted, so the generators treat them as data: identifiers are rebuilt from ASCII
// letters, digits and '_' (the original names live on only in string literals, escaped),
// descriptions reach generated code only inside escaped string literals or sanitized
// block comments, and the schema walk is bounded in depth, nodes, properties, enum
// values and union arms, so a hostile schema costs a bounded amount of output.

package codemode

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tool is one MCP tool the script API exposes.
type Tool struct {
	Name        string         // the model-facing name, "<server>__<tool>"
	Server      string         // the agent's MCP server name (letters, digits, _ and -)
	Tool        string         // the tool's name on its server (any string the server chose)
	Description string         // the tool's description
	Input       map[string]any // the tool's input JSON schema (an object schema)
	Output      map[string]any // the tool's output JSON schema; nil when it declares none
}

// Bounds on what one tool's schemas can make the API cost. Past each, the type is
// widened (to Any, an untyped dict or the enum's base type), never rejected: the tool
// stays callable, only less precisely typed.
const (
	maxDepth    = 6    // nesting followed in a schema, $ref hops included
	maxNodes    = 400  // schema nodes parsed per schema
	maxProps    = 64   // properties typed per object
	maxEnum     = 64   // enum values spelled as a literal type
	maxLiteral  = 256  // bytes of one enum string
	maxUnion    = 8    // arms of an anyOf/oneOf/type list
	maxRefPath  = 8    // segments of a local $ref pointer
	maxIdent    = 64   // bytes of a generated identifier, before a collision suffix
	maxTypeName = 96   // bytes of a generated type name, before a collision suffix
	maxDoc      = 2048 // bytes of a tool description in stubs and declarations
	maxPropDoc  = 256  // bytes of a parameter description in stubs and declarations
)

// API is the script API for one agent's tools. It is immutable once built.
type API struct {
	servers []*server            // in order of server name
	byName  map[string]*function // by model-facing name
}

type server struct {
	name  string // as the agent names it
	ident string // its namespace in scripts
	funcs []*function
}

type function struct {
	tool    Tool
	server  *server
	ident   string      // the function's name in its namespace
	private string      // the module-level Python function behind it
	params  []*property // the input's properties: required first, then by name
	open    bool        // the input allows other properties and types none: any named argument passes
	output  *schemaType // nil when the tool declares no output schema
	objects []*schemaType
}

// NewAPI builds the script API of tools. The order of tools does not matter: servers,
// functions and parameters are ordered by name, and the first of two tools with the
// same model-facing name wins.
func NewAPI(tools []Tool) *API {
	ts := make([]Tool, 0, len(tools))
	seen := map[string]bool{}
	for _, t := range tools {
		if seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		if t.Tool == "" {
			t.Tool = strings.TrimPrefix(t.Name, t.Server+"__")
		}
		ts = append(ts, t)
	}
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Server != ts[j].Server {
			return ts[i].Server < ts[j].Server
		}
		if ts[i].Tool != ts[j].Tool {
			return ts[i].Tool < ts[j].Tool
		}
		return ts[i].Name < ts[j].Name
	})

	a := &API{byName: map[string]*function{}}
	module := newScope(moduleReserved)
	for _, s := range []string{"_tf_types", "_tf_namespace"} {
		module.claim(s)
	}
	var cur *server
	for _, t := range ts {
		if cur == nil || cur.name != t.Server {
			cur = &server{name: t.Server}
			a.servers = append(a.servers, cur)
		}
		f := &function{tool: t, server: cur}
		f.params, f.open = parameters(t.Input)
		if t.Output != nil {
			f.output = parseSchema(t.Output)
		}
		cur.funcs = append(cur.funcs, f)
		a.byName[t.Name] = f
	}
	servers := make([]string, len(a.servers))
	for i, s := range a.servers {
		servers[i] = s.name
	}
	for i, id := range module.claimAll(servers, moduleReserved) {
		a.servers[i].ident = id
	}
	for _, s := range a.servers {
		tools := make([]string, len(s.funcs))
		for i, f := range s.funcs {
			tools[i] = f.tool.Tool
		}
		for i, id := range newScope(memberReserved).claimAll(tools, memberReserved) {
			s.funcs[i].ident = id
		}
	}

	// Module-level Python names come after every namespace has its name, so that a
	// server keeps its plain name whatever the other servers' types are called.
	for _, s := range a.servers {
		types := newScope(typeReserved) // TypeScript types live in the server's namespace
		for _, f := range s.funcs {
			f.private = module.claim("_tf_" + s.ident + "_" + f.ident)
			py := pascal(s.ident) + pascal(f.ident)
			ts := pascal(f.ident)
			name := func(t *schemaType, suffix string) {
				t.py = module.claim(typeName(py + suffix))
				t.ts = types.claim(typeName(ts + suffix))
				f.objects = append(f.objects, t)
			}
			for _, p := range f.params {
				walkObjects(p.typ, pascal(p.ident), name)
			}
			if f.output != nil {
				walkObjects(f.output, "Result", name)
			}
		}
	}
	return a
}

// parameters reads the properties of an input schema as the function's parameters.
// An object schema without properties and without additionalProperties or
// patternProperties is a tool without arguments (how SDKs write one); one that allows
// other properties, has too many to type, or is no object schema at all makes the
// function take any named arguments.
func parameters(input map[string]any) ([]*property, bool) {
	if input == nil {
		return nil, false
	}
	t := parseSchema(input)
	if t.kind != objectKind {
		return nil, true
	}
	if t.props == nil {
		props, _ := input["properties"].(map[string]any)
		ap, hasAP := input["additionalProperties"]
		_, hasPattern := input["patternProperties"]
		return nil, len(props) > maxProps || hasPattern || hasAP && ap != false
	}
	params := append([]*property(nil), t.props...)
	sort.SliceStable(params, func(i, j int) bool { return params[i].required && !params[j].required })
	locals := newScope(paramReserved)
	locals.claim("_tf_args")
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
	}
	for i, id := range locals.claimAll(names, paramReserved) {
		params[i].ident = id
	}
	return params, false
}

// walkObjects calls name for each object type with properties in t, children before
// their parent (the order Python needs to define them), with a suffix that says where
// the object sits.
func walkObjects(t *schemaType, suffix string, name func(*schemaType, string)) {
	switch t.kind {
	case arrayKind:
		walkObjects(t.elem, suffix+"Item", name)
	case objectKind:
		if t.elem != nil {
			walkObjects(t.elem, suffix+"Value", name)
		}
		for _, p := range t.props {
			walkObjects(p.typ, suffix+pascal(p.ident), name)
		}
		if t.props != nil {
			name(t, suffix)
		}
	case unionKind:
		arms := 0
		for _, a := range t.alts {
			if a.kind != nullKind {
				arms++
			}
		}
		for i, a := range t.alts {
			if arms == 1 {
				walkObjects(a, suffix, name)
			} else {
				walkObjects(a, suffix+"Option"+strconv.Itoa(i+1), name)
			}
		}
	}
}

// ---- Schemas ----

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

// ---- Names ----

// identifier makes name an ASCII identifier that is safe in Python and JavaScript:
// other characters become '_', a leading digit gets a '_' before it, leading
// underscores shrink to one (a "__x" name would be mangled in a Python class body and
// "__proto__" is special in JavaScript), and a reserved word gets a trailing '_'.
func identifier(name string, reserved map[string]bool) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= maxIdent {
			break
		}
		switch {
		case r == '_' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	if strings.HasPrefix(s, "__") {
		s = "_" + strings.TrimLeft(s, "_")
	}
	if reserved[s] {
		s += "_"
	}
	return s
}

// pascal turns an identifier into a part of a type name: "temp_c" is "TempC".
func pascal(ident string) string {
	var b strings.Builder
	for _, part := range strings.Split(ident, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]))
			b.WriteString(part[1:])
		}
	}
	return b.String()
}

func typeName(s string) string {
	if len(s) > maxTypeName {
		s = s[:maxTypeName]
	}
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "T" + s
	}
	return s
}

// scope hands out distinct names: a name already taken gets a numeric suffix.
type scope map[string]bool

func newScope(reserved map[string]bool) scope {
	s := scope{}
	for k := range reserved {
		s[k] = true
	}
	return s
}

func (s scope) claim(name string) string {
	n := name
	for i := 2; s[n]; i++ {
		if strings.HasSuffix(name, "_") {
			n = name + strconv.Itoa(i)
		} else {
			n = name + "_" + strconv.Itoa(i)
		}
	}
	s[n] = true
	return n
}

// claimAll gives each of names an identifier in s, those that are identifiers already
// first, so that "a_b" keeps its name and "a-b" becomes "a_b_2" whatever their order.
func (s scope) claimAll(names []string, reserved map[string]bool) []string {
	out := make([]string, len(names))
	for _, exact := range []bool{true, false} {
		for i, n := range names {
			if id := identifier(n, reserved); (id == n) == exact {
				out[i] = s.claim(id)
			}
		}
	}
	return out
}

func words(lists ...string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, w := range strings.Fields(l) {
			m[w] = true
		}
	}
	return m
}

const (
	pythonKeywords = `False None True and as assert async await break class continue def del elif else
		except finally for from global if import in is lambda nonlocal not or pass raise return try
		while with yield`
	pythonBuiltins = `ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup
		BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError
		ConnectionError ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis
		EncodingWarning EnvironmentError Exception ExceptionGroup FileExistsError FileNotFoundError
		FloatingPointError FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError
		IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError
		ModuleNotFoundError NameError NotADirectoryError NotImplemented NotImplementedError OSError
		OverflowError PendingDeprecationWarning PermissionError ProcessLookupError RecursionError
		ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration
		SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError TypeError UnboundLocalError
		UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning
		UserWarning ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool breakpoint
		bytearray bytes callable chr classmethod compile complex copyright credits delattr dict dir divmod
		enumerate eval exec exit filter float format frozenset getattr globals hasattr hash help hex id
		input int isinstance issubclass iter len license list locals map max memoryview min next object
		oct open ord pow print property quit range repr reversed round set setattr slice sorted
		staticmethod str sum super tuple type vars zip`
	// Modules a bootstrap or a script is likely to import at the top level, where a
	// namespace of the same name would replace them.
	pythonModules = `json sys os io re time math asyncio subprocess socket select struct base64
		threading types typing builtins random datetime collections functools itertools pathlib signal
		traceback inspect`
	typingNames = `Any Literal Optional TypedDict Union`
	jsReserved  = `break case catch class const continue debugger default delete do else enum export
		extends false finally for function if import in instanceof new null return super switch this
		throw true try typeof var void while with yield let static implements interface package private
		protected public await arguments eval undefined NaN Infinity`
	// Type keywords that cannot name a TypeScript namespace, and contextual keywords.
	tsKeywords = `any unknown never object string number boolean symbol bigint keyof infer readonly
		unique is asserts as satisfies abstract declare namespace module global type require of get set
		from async constructor`
	jsGlobals = `globalThis window self global document navigator location history name status top
		parent frames event screen crypto performance origin length closed opener external
		localStorage sessionStorage indexedDB caches alert confirm prompt open close stop focus blur
		postMessage fetch Request Response Headers URL URLSearchParams Blob File FormData TextEncoder
		TextDecoder AbortController AbortSignal Event EventTarget WebSocket Worker setTimeout
		clearTimeout setInterval clearInterval setImmediate clearImmediate queueMicrotask
		structuredClone atob btoa console process require module exports Buffer __dirname __filename
		Deno Bun Object Function Array Number String Boolean Symbol BigInt Math JSON Date RegExp Error
		TypeError RangeError SyntaxError Promise Proxy Reflect Map Set WeakMap WeakSet WeakRef
		ArrayBuffer SharedArrayBuffer DataView Atomics Intl isNaN isFinite parseInt parseFloat
		encodeURI decodeURI encodeURIComponent decodeURIComponent escape unescape Uint8Array`
)

var (
	// A namespace is a Python module global, a JavaScript global and a TypeScript
	// namespace at once, so it avoids the names of all three, and "tools".
	moduleReserved = words(pythonKeywords, pythonBuiltins, pythonModules, typingNames, jsReserved,
		tsKeywords, jsGlobals, "tools")
	// A function is an attribute in Python and a function declaration in TypeScript.
	memberReserved = words(pythonKeywords, jsReserved)
	// A parameter is a Python keyword argument and a key of a TypeScript object type.
	paramReserved = words(pythonKeywords)
	// Types in a TypeScript namespace must not hide the global types the declarations use.
	typeReserved = words("Promise")
)

// ---- Python ----

const pythonHeader = `# The MCP tools of this agent as Python functions, generated by trueforge.
# Each call goes to the harness through __trueforge_call__, which makes the MCP call.
import types as _tf_types
from typing import Any, Literal, Optional, TypedDict, Union


def _tf_namespace(name, members):
    for key, fn in members.items():
        fn.__name__ = key
        fn.__qualname__ = name + "." + key
    return _tf_types.SimpleNamespace(**members)
`

// Python returns Python source defining, for each server, a namespace of functions
// that call __trueforge_call__(name, args) (a builtin the bootstrap provides) with the
// tool's model-facing name and a dict of its arguments under their schema names, and
// "tools", a namespace of the server namespaces. Types are hints for Python 3.9 and
// later; a result is what __trueforge_call__ returns.
func (a *API) Python() string {
	var b strings.Builder
	b.WriteString(pythonHeader)
	for _, s := range a.servers {
		for _, f := range s.funcs {
			for _, o := range f.objects {
				writeTypedDict(&b, o)
			}
			writePythonFunc(&b, f)
		}
	}
	b.WriteString("\n\n")
	for _, s := range a.servers {
		fmt.Fprintf(&b, "%s = _tf_namespace(%s, {", s.ident, pyString(s.ident))
		for i, f := range s.funcs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", pyString(f.ident), f.private)
		}
		b.WriteString("})\n")
	}
	b.WriteString("tools = _tf_types.SimpleNamespace(")
	for i, s := range a.servers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", s.ident, s.ident)
	}
	b.WriteString(")\n")
	return b.String()
}

func writeTypedDict(b *strings.Builder, t *schemaType) {
	total := true
	for _, p := range t.props {
		total = total && p.required
	}
	fmt.Fprintf(b, "\n\n%s = TypedDict(%s, {\n", t.py, pyString(t.py))
	for _, p := range t.props {
		fmt.Fprintf(b, "    %s: %s,\n", pyString(p.name), p.typ.python())
	}
	if total {
		b.WriteString("})\n")
	} else {
		b.WriteString("}, total=False)\n")
	}
}

func writePythonFunc(b *strings.Builder, f *function) {
	var params []string
	switch {
	case f.open:
		params = []string{"**kwargs: Any"}
	case len(f.params) > 0:
		params = append(params, "*")
		for _, p := range f.params {
			if p.required {
				params = append(params, p.ident+": "+p.typ.python())
			} else {
				params = append(params, p.ident+": "+optionalPython(p.typ)+" = None")
			}
		}
	}
	ret := "Any"
	if f.output != nil {
		ret = f.output.python()
	}
	sig := "def " + f.private + "(" + strings.Join(params, ", ") + ") -> " + ret + ":"
	if len(sig) > 88 && len(params) > 1 {
		sig = "def " + f.private + "(\n    " + strings.Join(params, ",\n    ") + ",\n) -> " + ret + ":"
	}
	b.WriteString("\n\n" + sig + "\n")
	b.WriteString("    " + pyDocstring(f.doc(), "    ") + "\n")
	call := pyString(f.tool.Name)
	switch {
	case f.open:
		fmt.Fprintf(b, "    return __trueforge_call__(%s, dict(kwargs))\n", call)
		return
	case len(f.params) == 0:
		fmt.Fprintf(b, "    return __trueforge_call__(%s, {})\n", call)
		return
	}
	var req []string
	for _, p := range f.params {
		if p.required {
			req = append(req, pyString(p.name)+": "+p.ident)
		}
	}
	fmt.Fprintf(b, "    _tf_args = {%s}\n", strings.Join(req, ", "))
	for _, p := range f.params {
		if !p.required {
			fmt.Fprintf(b, "    if %s is not None:\n        _tf_args[%s] = %s\n", p.ident, pyString(p.name), p.ident)
		}
	}
	fmt.Fprintf(b, "    return __trueforge_call__(%s, _tf_args)\n", call)
}

// doc is the text of a function's docstring and JSDoc comment.
func (f *function) doc() string {
	var b strings.Builder
	if d := strings.TrimSpace(clip(f.tool.Description, maxDoc)); d != "" {
		b.WriteString(d)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "MCP tool %s of server %s.", quote(f.tool.Tool), quote(f.tool.Server))
	var args []string
	for _, p := range f.params {
		line := p.ident
		if p.ident != p.name {
			line += " (sent as " + quote(p.name) + ")"
		}
		if d := oneLine(p.desc, maxPropDoc); d != "" {
			line += ": " + d
		}
		if line != p.ident {
			args = append(args, line)
		}
	}
	if len(args) > 0 {
		b.WriteString("\n\nArgs:\n    " + strings.Join(args, "\n    "))
	}
	return b.String()
}

func (t *schemaType) python() string {
	switch t.kind {
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
	case arrayKind:
		return "list[" + t.elem.python() + "]"
	case objectKind:
		switch {
		case t.py != "":
			return t.py
		case t.elem != nil:
			return "dict[str, " + t.elem.python() + "]"
		}
		return "dict[str, Any]"
	case literalKind:
		vals := make([]string, len(t.lits))
		for i, l := range t.lits {
			vals[i] = literalPython(l)
		}
		return "Literal[" + strings.Join(vals, ", ") + "]"
	case unionKind:
		var arms []string
		null := false
		for _, a := range t.alts {
			if a.kind == nullKind {
				null = true
				continue
			}
			arms = append(arms, a.python())
		}
		s := arms[0]
		if len(arms) > 1 {
			s = "Union[" + strings.Join(arms, ", ") + "]"
		}
		if null {
			s = "Optional[" + s + "]"
		}
		return s
	}
	return "Any"
}

func literalPython(l literal) string {
	switch l.kind {
	case stringKind:
		return pyString(l.text)
	case booleanKind:
		return strings.ToUpper(l.text[:1]) + l.text[1:]
	case nullKind:
		return "None"
	}
	return l.text
}

func optionalPython(t *schemaType) string {
	if t.nullable() {
		return t.python()
	}
	return "Optional[" + t.python() + "]"
}

// pyString is s as a Python string literal: ASCII quotes and backslashes escaped, and
// every character that is not printable (line breaks, NUL, bidi controls) as an escape.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	pyEscape(&b, s)
	b.WriteByte('"')
	return b.String()
}

// pyDocstring is text as a triple-quoted docstring whose lines are indented by indent.
// Escaping every quote and backslash means no character of text can end the literal.
func pyDocstring(text, indent string) string {
	var b strings.Builder
	b.WriteString(`"""`)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
			if l != "" {
				b.WriteString(indent)
			}
		}
		pyEscape(&b, l)
	}
	if len(lines) > 1 {
		b.WriteString("\n" + indent)
	}
	b.WriteString(`"""`)
	return b.String()
}

func pyEscape(b *strings.Builder, s string) {
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
}

// ---- JavaScript ----

const jsHeader = `// The MCP tools of this agent as JavaScript functions, generated by trueforge.
// Each call goes to the harness through globalThis.__trueforge_call__, which makes the MCP call.
(() => {
  "use strict";
  const __tf_has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  // params: [identifier, name sent, required] of each parameter; open: any key passes.
  const __tf_stub = (name, label, params, open) => {
    const keys = new Map();
    for (const [, key] of params) keys.set(key, key);
    for (const [ident, key] of params) keys.set(ident, key);
    const required = params.filter((p) => p[2]);
    const optional = new Set(params.filter((p) => !p[2]).map((p) => p[1]));
    const names = params.map((p) => p[0]).join(", ");
    const fn = async (args) => {
      if (args === undefined || args === null) args = {};
      if (typeof args !== "object" || Array.isArray(args)) {
        throw new TypeError(label + " takes one object of named arguments: " + label + "({" + names + "})");
      }
      const out = {};
      for (const k of Object.keys(args)) {
        if (!open && !keys.has(k)) {
          throw new TypeError(label + ": unknown argument " + JSON.stringify(k) + "; it takes " + (names || "no arguments"));
        }
        const key = keys.has(k) ? keys.get(k) : k;
        const v = args[k];
        if (v === undefined || (v === null && optional.has(key))) continue;
        Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      }
      for (const [ident, key] of required) {
        if (!__tf_has(out, key)) throw new TypeError(label + ": missing required argument " + ident);
      }
      return globalThis.__trueforge_call__(name, out);
    };
    Object.defineProperty(fn, "name", { value: label });
    return fn;
  };
`

// JavaScript returns a script that defines, as globals, each server's namespace of
// async functions taking one object of named arguments and returning
// globalThis.__trueforge_call__(name, args) (which the bootstrap provides), and
// "tools", holding every namespace. A function maps identifiers back to the schema's
// names (the schema's own names are accepted too), leaves out optional arguments that
// are null or undefined, and rejects unknown or missing ones before any call.
func (a *API) JavaScript() string {
	var b strings.Builder
	b.WriteString(jsHeader)
	for _, s := range a.servers {
		fmt.Fprintf(&b, "  globalThis.%s = Object.freeze({\n", s.ident)
		for _, f := range s.funcs {
			params := make([]string, len(f.params))
			for i, p := range f.params {
				params[i] = "[" + jsString(p.ident) + ", " + jsString(p.name) + ", " + strconv.FormatBool(p.required) + "]"
			}
			fmt.Fprintf(&b, "    %s: __tf_stub(%s, %s, [%s], %t),\n", f.ident, jsString(f.tool.Name),
				jsString(s.ident+"."+f.ident), strings.Join(params, ", "), f.open)
		}
		b.WriteString("  });\n")
	}
	b.WriteString("  globalThis.tools = Object.freeze({")
	for i, s := range a.servers {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s: globalThis.%s", s.ident, s.ident)
	}
	b.WriteString(" });\n})();\n")
	return b.String()
}

// jsString is s as a JSON string, which is also a JavaScript and TypeScript string
// literal (encoding/json escapes quotes, control characters and U+2028/U+2029).
func jsString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// ---- TypeScript ----

// TypeScript returns declarations (a .d.ts script) for the same API: one namespace per
// server with its functions and the interfaces of their arguments and results, and
// "tools" holding every namespace.
func (a *API) TypeScript() string {
	var b strings.Builder
	b.WriteString("// The MCP tools of this agent, generated by trueforge: call them as await server.tool({...}).\n")
	b.WriteString("// Each call goes to the harness, which makes the MCP call.\n")
	for _, s := range a.servers {
		fmt.Fprintf(&b, "declare namespace %s {\n", s.ident)
		for _, f := range s.funcs {
			b.WriteString(tsComment(f.doc(), "  "))
			args := "args"
			req := false
			for _, p := range f.params {
				req = req || p.required
			}
			if !req {
				args += "?"
			}
			ret := "any"
			if f.output != nil {
				ret = f.output.typescript()
			}
			switch {
			case f.open:
				fmt.Fprintf(&b, "  function %s(%s: { [key: string]: any }): Promise<%s>;\n", f.ident, args, ret)
			case len(f.params) == 0:
				fmt.Fprintf(&b, "  function %s(%s: {}): Promise<%s>;\n", f.ident, args, ret)
			default:
				fmt.Fprintf(&b, "  function %s(%s: {\n", f.ident, args)
				for _, p := range f.params {
					b.WriteString(tsComment(oneLine(p.desc, maxPropDoc), "    "))
					if p.required {
						fmt.Fprintf(&b, "    %s: %s;\n", p.ident, p.typ.typescript())
					} else {
						fmt.Fprintf(&b, "    %s?: %s;\n", p.ident, optionalTypeScript(p.typ))
					}
				}
				fmt.Fprintf(&b, "  }): Promise<%s>;\n", ret)
			}
			for _, o := range f.objects {
				fmt.Fprintf(&b, "  interface %s {\n", o.ts)
				for _, p := range o.props {
					b.WriteString(tsComment(oneLine(p.desc, maxPropDoc), "    "))
					opt := "?"
					if p.required {
						opt = ""
					}
					fmt.Fprintf(&b, "    %s%s: %s;\n", tsKey(p.name), opt, p.typ.typescript())
				}
				b.WriteString("  }\n")
			}
		}
		b.WriteString("}\n")
	}
	b.WriteString("declare const tools: {\n")
	for _, s := range a.servers {
		fmt.Fprintf(&b, "  readonly %s: typeof %s;\n", s.ident, s.ident)
	}
	b.WriteString("};\n")
	return b.String()
}

func (t *schemaType) typescript() string {
	switch t.kind {
	case stringKind:
		return "string"
	case integerKind, numberKind:
		return "number"
	case booleanKind:
		return "boolean"
	case nullKind:
		return "null"
	case arrayKind:
		e := t.elem.typescript()
		if t.elem.kind == unionKind || t.elem.kind == literalKind && len(t.elem.lits) > 1 {
			e = "(" + e + ")"
		}
		return e + "[]"
	case objectKind:
		switch {
		case t.ts != "":
			return t.ts
		case t.elem != nil:
			return "{ [key: string]: " + t.elem.typescript() + " }"
		}
		return "{ [key: string]: any }"
	case literalKind:
		vals := make([]string, len(t.lits))
		for i, l := range t.lits {
			if l.kind == stringKind {
				vals[i] = jsString(l.text)
			} else {
				vals[i] = l.text
			}
		}
		return strings.Join(vals, " | ")
	case unionKind:
		arms := make([]string, len(t.alts))
		for i, a := range t.alts {
			arms[i] = a.typescript()
		}
		return strings.Join(arms, " | ")
	}
	return "any"
}

func optionalTypeScript(t *schemaType) string {
	if t.nullable() {
		return t.typescript()
	}
	return t.typescript() + " | null"
}

// tsKey is a property name in an interface: bare when it is an ASCII identifier,
// otherwise a string literal.
func tsKey(name string) string {
	if name != "" && name == identifierChars(name) && (name[0] < '0' || name[0] > '9') {
		return name
	}
	return jsString(name)
}

func identifierChars(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '$' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return -1
	}, s)
}

// tsComment is text as a JSDoc block, or "" for no text. Characters that are not
// printable become spaces (JavaScript ends lines at U+2028 too) and "*/" is broken up,
// so the text cannot end the comment.
func tsComment(text, indent string) string {
	text = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\u0085':
			return '\n'
		case r == ' ' || unicode.IsPrint(r):
			return r
		}
		return ' '
	}, text)
	text = strings.TrimSpace(strings.ReplaceAll(text, "*/", "*\\/"))
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	if len(lines) == 1 {
		return indent + "/** " + lines[0] + " */\n"
	}
	var b strings.Builder
	b.WriteString(indent + "/**\n")
	for _, l := range lines {
		b.WriteString(strings.TrimRight(indent+" * "+l, " ") + "\n")
	}
	b.WriteString(indent + " */\n")
	return b.String()
}

// ---- Description ----

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

// ---- Minimize ----

// Minimize returns result (as encoding/json decodes into an any) keeping only what the
// output schema of the tool with the model-facing name declares: an object whose
// schema lists properties and does not allow others (additionalProperties false or
// absent) loses the undeclared ones, recursively through objects, arrays and
// additionalProperties. Values that do not have the schema's shape, unions that do not
// settle on one arm, and tools without an output schema pass through. result is not
// modified.
func (a *API) Minimize(name string, result any) any {
	f := a.byName[name]
	if f == nil || f.output == nil {
		return result
	}
	return minimize(f.output, result)
}

func minimize(t *schemaType, v any) any {
	switch t.kind {
	case objectKind:
		m, ok := v.(map[string]any)
		if !ok || t.props == nil && t.elem == nil {
			return v
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			switch p := t.prop(k); {
			case p != nil:
				out[k] = minimize(p.typ, x)
			case t.closed:
			case t.elem != nil:
				out[k] = minimize(t.elem, x)
			default:
				out[k] = x
			}
		}
		return out
	case arrayKind:
		s, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(s))
		for i, x := range s {
			out[i] = minimize(t.elem, x)
		}
		return out
	case unionKind:
		var arm *schemaType
		for _, a := range t.alts {
			if a.kind == anyKind || a.accepts(v) {
				if arm != nil {
					return v
				}
				arm = a
			}
		}
		if arm != nil {
			return minimize(arm, v)
		}
	}
	return v
}

// accepts reports whether v has the JSON shape of t, for choosing a union's arm.
func (t *schemaType) accepts(v any) bool {
	switch v.(type) {
	case map[string]any:
		return t.kind == objectKind
	case []any:
		return t.kind == arrayKind
	}
	return t.kind != objectKind && t.kind != arrayKind
}

// ---- Text ----

// clip cuts s to at most n bytes on a character boundary, marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// oneLine is s with every run of spaces and unprintable characters as one space,
// clipped to n bytes.
func oneLine(s string, n int) string {
	if len(s) > 4*n {
		s = s[:4*n]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r)
	}), " ")
	return clip(s, n)
}

// quote is s quoted for prose in a docstring or comment, which escape it again.
func quote(s string) string {
	return strconv.Quote(clip(s, maxIdent*2))
}
