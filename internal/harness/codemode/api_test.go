package codemode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
)

// Helpers here are prefixed api so they cannot clash with other tests of the package.

func apiSchema(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test schema %s: %v", s, err)
	}
	return m
}

// apiWeather is a small API with the cases a real agent meets: required and optional
// parameters, an enum, a nullable value, a nested object, names that are not
// identifiers, a keyword, an output schema with an array of objects, a tool without
// arguments and one that takes any.
func apiWeather(t *testing.T) []Tool {
	return []Tool{
		{
			Name: "weather__forecast", Server: "weather", Tool: "forecast",
			Description: "Get a forecast for a city.\nUp to 10 days.",
			Input: apiSchema(t, `{"type":"object","properties":{
				"city":{"type":"string","description":"City name"},
				"days":{"type":"integer","description":"How many days"},
				"unit":{"enum":["c","f"]},
				"class":{"type":"string"},
				"temp-c":{"type":["number","null"]},
				"where":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}},"required":["lat","lon"]}
			},"required":["city"]}`),
			Output: apiSchema(t, `{"type":"object","properties":{
				"temp_c":{"type":"number"},
				"summary":{"type":"string"},
				"hours":{"type":"array","items":{"type":"object","properties":{"h":{"type":"integer"},"t":{"type":"number"}}}}
			},"required":["temp_c"]}`),
		},
		{Name: "weather__list", Server: "weather", Tool: "list", Description: "List the cities.", Input: apiSchema(t, `{"type":"object"}`)},
		{Name: "json__do-it", Server: "json", Tool: "do-it", Description: "Anything goes.", Input: apiSchema(t, `{"type":"object","additionalProperties":true}`)},
	}
}

// apiStubRun is what the Python and JavaScript stub test scripts print: the calls the
// fake __trueforge_call__ received, the first call's result and the errors bad calls
// raised.
type apiStubRun struct {
	Calls  [][]any        `json:"calls"`
	R      map[string]any `json:"r"`
	Errors []string       `json:"errors"`
}

// apiCheckWeatherCalls checks what the Python and the JavaScript stubs test scripts
// sent through the fake __trueforge_call__ (the same calls in both languages), and that
// the first call's result r is what the fake returned.
func apiCheckWeatherCalls(t *testing.T, calls [][]any, r map[string]any) {
	t.Helper()
	want := [][]any{
		{"weather__forecast", map[string]any{"city": "Paris", "days": 3.0}},
		{"weather__forecast", map[string]any{"city": "Oslo", "class": "x", "unit": "f"}},
		{"weather__forecast", map[string]any{"city": "Rome", "temp-c": 1.5, "where": map[string]any{"lat": 1.0, "lon": 2.0}}},
		{"weather__list", map[string]any{}},
		{"json__do-it", map[string]any{"a": 1.0, "b": "x"}},
	}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("calls:\n got %v\nwant %v", calls, want)
	}
	if r["called"] != "weather__forecast" {
		t.Errorf("the stub gave %v, not what __trueforge_call__ returned", r)
	}
}

func apiRun(t *testing.T, name string, src string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed", name)
	}
	file := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{file}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s\n--- script ---\n%s", name, err, stderr.String(), apiNumbered(src))
	}
	return string(out)
}

func apiNumbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}

func apiJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
}

func TestAPIIdentifiers(t *testing.T) {
	for name, want := range map[string]string{
		"forecast": "forecast", "temp-c": "temp_c", "class": "class_", "None": "None_", "1st": "_1st",
		"__init__": "_init__", "__proto__": "_proto__", "": "_", "café": "caf_", "a b\nc": "a_b_c",
		"print": "print", "delete": "delete", strings.Repeat("x", 100): strings.Repeat("x", maxIdent),
	} {
		if got := identifier(name, paramReserved); got != want {
			t.Errorf("parameter %q: %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]string{"delete": "delete_", "eval": "eval_", "print": "print", "class": "class_"} {
		if got := identifier(name, memberReserved); got != want {
			t.Errorf("function %q: %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]string{"print": "print_", "tools": "tools_", "console": "console_", "json": "json_", "Any": "Any_", "github": "github"} {
		if got := identifier(name, moduleReserved); got != want {
			t.Errorf("namespace %q: %q, want %q", name, got, want)
		}
	}

	// Collisions: a name that is an identifier keeps it, the others get suffixes.
	api := NewAPI([]Tool{
		{Name: "a-b__x", Server: "a-b", Tool: "x"},
		{Name: "a_b__x", Server: "a_b", Tool: "x"},
		{Name: "tools__x", Server: "tools", Tool: "x"},
		{Name: "s__get-it", Server: "s", Tool: "get-it", Input: apiSchema(t, `{"type":"object","properties":{"a-b":{},"a_b":{},"a.b":{},"class":{},"class_":{},"_tf_args":{}}}`)},
		{Name: "s__get_it", Server: "s", Tool: "get_it"},
		{Name: "s__get.it", Server: "s", Tool: "get.it"},
	})
	got := map[string]string{}
	for _, s := range api.servers {
		got["server "+s.name] = s.ident
		for _, f := range s.funcs {
			got["tool "+f.tool.Name] = f.ident
			for _, p := range f.params {
				got["param "+p.name] = p.ident
			}
		}
	}
	want := map[string]string{
		"server a-b": "a_b_2", "server a_b": "a_b", "server tools": "tools_", "server s": "s",
		"tool a-b__x": "x", "tool a_b__x": "x", "tool tools__x": "x",
		"tool s__get_it": "get_it", "tool s__get-it": "get_it_2", "tool s__get.it": "get_it_3",
		"param a_b": "a_b", "param a-b": "a_b_2", "param a.b": "a_b_3",
		"param class_": "class_", "param class": "class_2", "param _tf_args": "_tf_args_2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("identifiers:\n got %v\nwant %v", got, want)
	}
}

// apiHostile is text written to break out of every context generated code puts a
// server's text in: Python docstrings and strings, JavaScript and TypeScript strings
// and comments. A breakout would run or declare PWNED.
var apiHostile = []string{
	`"""; import PWNED; """`,
	`'''; PWNED = 1; '''`,
	`*/ declare const PWNED: 1; /*`,
	`*/ globalThis.PWNED = 1; /*`,
	`"; globalThis.PWNED = 1; "`,
	"\n\nPWNED = 1\n",
	"\r\nPWNED = 1 # \\",
	"\u2028globalThis.PWNED = 1\u2029",
	"x\x00y\x1b[31m",
	"`${globalThis.PWNED = 1}`",
	"\\",
	"\\\"",
	"\"\"\"",
	"ends with a quote\"",
	"ends with a backslash \\",
	"</script><!--",
	"\u202eevil\u202c",
	"\xff\xfe invalid UTF-8",
	"# PWNED",
	"__proto__",
	"constructor",
	"__init__",
	"__class__",
	"_tf_args",
	"__trueforge_call__",
	"class",
	"1abc",
	"",
}

// apiHostileTools puts every hostile text in every place a server controls: tool names
// and descriptions, property names and descriptions, enum values and output fields.
func apiHostileTools() []Tool {
	props := map[string]any{}
	out := map[string]any{}
	var required []any
	for i, h := range apiHostile {
		props[h] = map[string]any{"type": "string", "description": h, "enum": []any{h, fmt.Sprint(i)}}
		out[h] = map[string]any{"type": "object", "description": h, "properties": map[string]any{h: map[string]any{"const": h}}}
		if i%2 == 0 {
			required = append(required, h)
		}
	}
	var tools []Tool
	for i, h := range apiHostile {
		server := []string{"evil", "class", "tools", "print", "__trueforge_call__", "1x"}[i%6]
		tools = append(tools, Tool{
			Name: fmt.Sprintf("%s__t%d", server, i), Server: server, Tool: h, Description: h + strings.Repeat(" long", 1000),
			Input:  map[string]any{"type": "object", "properties": props, "required": required},
			Output: map[string]any{"type": "object", "properties": out},
		})
	}
	return tools
}

func TestAPIHostileTextStaysData(t *testing.T) {
	tools := apiHostileTools()
	api := NewAPI(tools)

	// The expected calls: each function called with every parameter, by identifier,
	// valued with the parameter's original name.
	type call struct {
		Expr string         // Python and JavaScript path to the function
		Args map[string]any // identifier -> value
		Name string
		Sent map[string]any // original name -> value
		Doc  string
	}
	var calls []call
	for _, s := range api.servers {
		for _, f := range s.funcs {
			c := call{Expr: "tools." + s.ident + "." + f.ident, Args: map[string]any{}, Name: f.tool.Name, Sent: map[string]any{}}
			for _, p := range f.params {
				// Strings reach the scripts as valid UTF-8, as they would from JSON.
				valid := string([]rune(p.name))
				c.Args[p.ident], c.Sent[valid] = valid, valid
			}
			// The docstring as Python holds it: the description, its lines indented.
			lines := strings.Split(string([]rune(strings.TrimSpace(clip(f.tool.Description, maxDoc)))), "\n")
			for i, l := range lines {
				if i > 0 && l != "" {
					lines[i] = "    " + l
				}
			}
			c.Doc = strings.Join(lines, "\n")
			calls = append(calls, c)
		}
	}
	if len(calls) != len(apiHostile) {
		t.Fatalf("%d functions for %d tools", len(calls), len(apiHostile))
	}
	spec, _ := json.Marshal(calls)

	t.Run("python", func(t *testing.T) {
		py := api.Python()
		script := apiPythonPrelude + `
import ast, sys
src = open(sys.argv[1]).read()
tree = ast.parse(src)
names = set()
for node in ast.walk(tree):
    for attr in ("id", "attr", "name", "arg", "asname"):
        v = getattr(node, attr, None)
        if isinstance(v, str):
            names.add(v)
kinds = sorted({type(s).__name__ for s in tree.body})
g = {}
exec(compile(tree, "stubs", "exec"), g)
got = []
for c in json.loads(open(sys.argv[2]).read()):
    fn = eval(c["Expr"], g)
    got.append([fn(**c["Args"]), fn.__doc__])
print(json.dumps({"pwned_name": "PWNED" in names, "pwned_global": "PWNED" in g or hasattr(builtins, "PWNED"),
    "kinds": kinds, "calls": _calls, "docs": [d for _, d in got]}))
`
		dir := t.TempDir()
		for name, text := range map[string]string{"stubs.py": py, "calls.json": string(spec)} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var got struct {
			PwnedName, PwnedGlobal bool
			Kinds                  []string
			Calls                  [][]any
			Docs                   []string
		}
		out := apiRun(t, "python3", script, filepath.Join(dir, "stubs.py"), filepath.Join(dir, "calls.json"))
		apiJSON(t, out, &got)
		if got.PwnedName || got.PwnedGlobal {
			t.Fatalf("hostile text became Python code:\n%s", apiNumbered(py))
		}
		if want := []string{"Assign", "FunctionDef", "Import", "ImportFrom"}; !reflect.DeepEqual(got.Kinds, want) {
			t.Errorf("top-level statements %v, want only %v", got.Kinds, want)
		}
		for i, c := range calls {
			if !reflect.DeepEqual(got.Calls[i], []any{c.Name, c.Sent}) {
				t.Errorf("%s sent %q, want %q with %q", c.Expr, got.Calls[i], c.Name, c.Sent)
			}
			if !strings.HasPrefix(got.Docs[i], c.Doc) {
				t.Errorf("%s: the docstring does not start with the description %q:\n%q", c.Expr, c.Doc, got.Docs[i])
			}
		}
	})

	t.Run("javascript", func(t *testing.T) {
		js := api.JavaScript()
		script := apiNodePrelude + js + `
const calls_ = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
(async () => {
  for (const c of calls_) {
    const fn = c.Expr.split(".").slice(1).reduce((o, k) => o[k], globalThis.tools);
    await fn(c.Args);
  }
  console.log(JSON.stringify({ pwned: "PWNED" in globalThis, calls }));
})().catch((e) => { console.error(e); process.exit(1); });
`
		file := filepath.Join(t.TempDir(), "calls.json")
		if err := os.WriteFile(file, spec, 0o600); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Pwned bool
			Calls [][]any
		}
		apiJSON(t, apiRun(t, "node", script, file), &got)
		if got.Pwned {
			t.Fatalf("hostile text became JavaScript code:\n%s", apiNumbered(js))
		}
		for i, c := range calls {
			if !reflect.DeepEqual(got.Calls[i], []any{c.Name, c.Sent}) {
				t.Errorf("%s sent %q, want %q with %q", c.Expr, got.Calls[i], c.Name, c.Sent)
			}
		}
	})

	t.Run("typescript", func(t *testing.T) {
		ts := api.TypeScript()
		if err := apiCheckTypeScript(ts); err != nil {
			t.Fatalf("%v\n%s", err, apiNumbered(ts))
		}
	})

	t.Run("describe", func(t *testing.T) {
		d := api.Describe(100000)
		for _, l := range strings.Split(d, "\n") {
			if len(l) > maxLine+200 {
				t.Errorf("a line of %d bytes", len(l))
			}
			for _, r := range l {
				if !unicode.IsPrint(r) && r != ' ' {
					t.Errorf("an unprintable %U in line %q", r, l)
				}
			}
		}
	})
}

// TestAPIBoundedSchemas feeds schemas built to cost: deep nesting, $ref loops, refs
// that double at each level, huge enums, objects and unions, and a megabyte of
// description. Each builds quickly into bounded, valid code.
func TestAPIBoundedSchemas(t *testing.T) {
	deep := map[string]any{"type": "string"}
	for i := 0; i < 10000; i++ {
		deep = map[string]any{"type": "object", "properties": map[string]any{"x": deep}}
	}
	defs := map[string]any{}
	for i := 0; i < 30; i++ {
		defs[fmt.Sprint("D", i)] = map[string]any{"type": "object", "properties": map[string]any{
			"a": map[string]any{"$ref": fmt.Sprint("#/$defs/D", i+1)}, "b": map[string]any{"$ref": fmt.Sprint("#/$defs/D", i+1)},
		}}
	}
	doubling := map[string]any{"$defs": defs, "$ref": "#/$defs/D0"}
	loop := apiSchema(t, `{"$defs":{"A":{"type":"object","properties":{"a":{"$ref":"#/$defs/A"},"b":{"$ref":"#"}}}},"type":"object","properties":{"x":{"$ref":"#/$defs/A"}}}`)
	var enum []any
	props := map[string]any{}
	var arms []any
	for i := 0; i < 10000; i++ {
		enum = append(enum, fmt.Sprint("v", i))
		props[fmt.Sprint("p", i)] = map[string]any{"type": "string"}
		if i < 100 {
			arms = append(arms, map[string]any{"type": "object", "properties": map[string]any{fmt.Sprint("k", i): map[string]any{}}})
		}
	}
	bigEnum := map[string]any{"type": "object", "properties": map[string]any{"e": map[string]any{"type": "string", "enum": enum}}}
	bigObject := map[string]any{"type": "object", "properties": props}
	bigUnion := map[string]any{"type": "object", "properties": map[string]any{"u": map[string]any{"anyOf": arms}}}

	tools := []Tool{
		{Name: "s__deep", Server: "s", Tool: "deep", Input: deep, Output: deep},
		{Name: "s__doubling", Server: "s", Tool: "doubling", Input: doubling, Output: doubling},
		{Name: "s__loop", Server: "s", Tool: "loop", Input: loop, Output: loop},
		{Name: "s__enum", Server: "s", Tool: "enum", Input: bigEnum, Output: bigEnum},
		{Name: "s__object", Server: "s", Tool: "object", Input: bigObject, Output: bigObject},
		{Name: "s__union", Server: "s", Tool: "union", Input: bigUnion, Output: bigUnion},
		{Name: "s__long", Server: "s", Tool: strings.Repeat("n", 100000), Description: strings.Repeat("d", 1<<20)},
	}
	start := time.Now()
	api := NewAPI(tools)
	py, js, ts := api.Python(), api.JavaScript(), api.TypeScript()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("building took %v", d)
	}
	for name, src := range map[string]string{"Python": py, "JavaScript": js, "TypeScript": ts} {
		if len(src) > 400000 {
			t.Errorf("%s: %d bytes", name, len(src))
		}
	}
	if strings.Contains(py, "v99") || strings.Contains(py, "p99\"") || strings.Contains(py, "k99") {
		t.Error("a huge enum, object or union was spelled out")
	}
	if strings.Count(py, "ddd") > maxDoc {
		t.Error("the long description was not cut")
	}
	fn := api.byName["s__object"]
	if !fn.open || fn.params != nil {
		t.Error("an object of 10000 properties should take any named arguments")
	}
	if err := apiCheckTypeScript(ts); err != nil {
		t.Fatalf("%v\n%s", err, apiNumbered(ts))
	}
	out := apiRun(t, "python3", apiPythonPrelude+py+`
print(json.dumps([s.deep(x={}), s.loop(x={"a": {}}), s.enum_(e="v1"), s.object(p1="x"), s.union(u={})]))
`)
	var got []any
	apiJSON(t, out, &got)
	if len(got) != 5 {
		t.Errorf("calls returned %v", got)
	}
	apiRun(t, "node", apiNodePrelude+js)
}
