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
//
// This file builds the API from the tools; the schema model is schema.go, the names
// names.go, each language's generator its own file (python.go, javascript.go,
// typescript.go), the model's description describe.go (within DescribeBudget)
// and the minimizer minimize.go.

package codemode

import (
	"sort"
	"strconv"
	"strings"
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

// serverList is every server's namespace identifier as item spells it, in order and
// joined by sep: the members of the "tools" namespace each generator ends with.
func (a *API) serverList(sep string, item func(ident string) string) string {
	items := make([]string, len(a.servers))
	for i, s := range a.servers {
		items[i] = item(s.ident)
	}
	return strings.Join(items, sep)
}
