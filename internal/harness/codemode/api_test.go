package codemode

import (
	"encoding/json"
	"fmt"
	"math/rand"
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

// apiPythonPrelude installs a fake __trueforge_call__ that records each call.
const apiPythonPrelude = `import builtins, json
_calls = []
def _fake_call(name, args):
    _calls.append([name, args])
    return {"called": name}
builtins.__trueforge_call__ = _fake_call
`

func TestAPIPythonStubsSendTheToolNameAndArguments(t *testing.T) {
	api := NewAPI(apiWeather(t))
	script := apiPythonPrelude + api.Python() + `
import inspect
errors = []
r = weather.forecast(city="Paris", days=3)
weather.forecast(city="Oslo", class_="x", temp_c=None, unit="f")
tools.weather.forecast(city="Rome", temp_c=1.5, where={"lat": 1, "lon": 2})
weather.list()
tools.json_.do_it(a=1, b="x")
for call in (lambda: weather.forecast(days=1), lambda: weather.forecast(city="x", nope=1),
             lambda: weather.forecast("positional"), lambda: weather.list(x=1)):
    try:
        call()
    except TypeError:
        errors.append("TypeError")
print(json.dumps({"calls": _calls, "r": r, "errors": errors,
    "qualname": weather.forecast.__qualname__, "doc": inspect.getdoc(weather.forecast),
    "hints": {k: str(v) for k, v in weather.forecast.__annotations__.items()}}))
`
	var got struct {
		Calls    [][]any           `json:"calls"`
		R        map[string]any    `json:"r"`
		Errors   []string          `json:"errors"`
		Qualname string            `json:"qualname"`
		Doc      string            `json:"doc"`
		Hints    map[string]string `json:"hints"`
	}
	apiJSON(t, apiRun(t, "python3", script), &got)
	want := [][]any{
		{"weather__forecast", map[string]any{"city": "Paris", "days": 3.0}},
		{"weather__forecast", map[string]any{"city": "Oslo", "class": "x", "unit": "f"}},
		{"weather__forecast", map[string]any{"city": "Rome", "temp-c": 1.5, "where": map[string]any{"lat": 1.0, "lon": 2.0}}},
		{"weather__list", map[string]any{}},
		{"json__do-it", map[string]any{"a": 1.0, "b": "x"}},
	}
	if !reflect.DeepEqual(got.Calls, want) {
		t.Errorf("calls:\n got %v\nwant %v", got.Calls, want)
	}
	if got.R["called"] != "weather__forecast" {
		t.Errorf("the stub returned %v, not what __trueforge_call__ returned", got.R)
	}
	if len(got.Errors) != 4 {
		t.Errorf("a missing, unknown or positional argument raised TypeError %d times of 4", len(got.Errors))
	}
	if got.Qualname != "weather.forecast" {
		t.Errorf("__qualname__ %q", got.Qualname)
	}
	for _, s := range []string{"Get a forecast for a city.\nUp to 10 days.", `class_ (sent as "class")`, "city: City name"} {
		if !strings.Contains(got.Doc, s) {
			t.Errorf("the docstring lacks %q:\n%s", s, got.Doc)
		}
	}
	wantHints := map[string]string{
		"city": "<class 'str'>", "days": "typing.Optional[int]", "unit": "typing.Optional[typing.Literal['c', 'f']]",
		"class_": "typing.Optional[str]", "temp_c": "typing.Optional[float]",
		"where": "typing.Optional[__main__.WeatherForecastWhere]", "return": "<class '__main__.WeatherForecastResult'>",
	}
	if !reflect.DeepEqual(got.Hints, wantHints) {
		t.Errorf("type hints:\n got %v\nwant %v", got.Hints, wantHints)
	}
}

// apiNodePrelude installs a fake __trueforge_call__ that records each call.
const apiNodePrelude = `"use strict";
const calls = [];
globalThis.__trueforge_call__ = (name, args) => { calls.push([name, args]); return Promise.resolve({ called: name }); };
`

func TestAPIJavaScriptStubsSendTheToolNameAndArguments(t *testing.T) {
	api := NewAPI(apiWeather(t))
	script := apiNodePrelude + api.JavaScript() + `
(async () => {
  const errors = [];
  const r = await weather.forecast({ city: "Paris", days: 3 });
  await weather.forecast({ city: "Oslo", class_: "x", temp_c: null, unit: "f", days: undefined });
  await tools.weather.forecast({ city: "Rome", "temp-c": 1.5, where: { lat: 1, lon: 2 } });
  await weather.list();
  await tools.json_.do_it({ a: 1, b: "x" });
  for (const bad of [() => weather.forecast({ days: 1 }), () => weather.forecast({ city: "x", nope: 1 }),
                     () => weather.forecast("Paris"), () => weather.list({ x: 1 })]) {
    const p = bad();
    if (!(p instanceof Promise)) throw new Error("a stub did not return a Promise");
    await p.then(() => errors.push("resolved"), (e) => errors.push(e.constructor.name + ": " + e.message));
  }
  console.log(JSON.stringify({ calls, r, errors, name: weather.forecast.name, frozen: Object.isFrozen(tools.weather) }));
})().catch((e) => { console.error(e); process.exit(1); });
`
	var got struct {
		Calls  [][]any        `json:"calls"`
		R      map[string]any `json:"r"`
		Errors []string       `json:"errors"`
		Name   string         `json:"name"`
		Frozen bool           `json:"frozen"`
	}
	apiJSON(t, apiRun(t, "node", script), &got)
	want := [][]any{
		{"weather__forecast", map[string]any{"city": "Paris", "days": 3.0}},
		{"weather__forecast", map[string]any{"city": "Oslo", "class": "x", "unit": "f"}},
		{"weather__forecast", map[string]any{"city": "Rome", "temp-c": 1.5, "where": map[string]any{"lat": 1.0, "lon": 2.0}}},
		{"weather__list", map[string]any{}},
		{"json__do-it", map[string]any{"a": 1.0, "b": "x"}},
	}
	if !reflect.DeepEqual(got.Calls, want) {
		t.Errorf("calls:\n got %v\nwant %v", got.Calls, want)
	}
	if got.R["called"] != "weather__forecast" {
		t.Errorf("the stub resolved to %v, not what __trueforge_call__ returned", got.R)
	}
	wantErrors := []string{
		"TypeError: weather.forecast: missing required argument city",
		`TypeError: weather.forecast: unknown argument "nope"; it takes city, class_, days, temp_c, unit, where`,
		"TypeError: weather.forecast takes one object of named arguments: weather.forecast({city, class_, days, temp_c, unit, where})",
		`TypeError: weather.list: unknown argument "x"; it takes no arguments`,
	}
	if !reflect.DeepEqual(got.Errors, wantErrors) {
		t.Errorf("errors:\n got %q\nwant %q", got.Errors, wantErrors)
	}
	if got.Name != "weather.forecast" || !got.Frozen {
		t.Errorf("name %q, frozen %v", got.Name, got.Frozen)
	}
}

// apiGolden compares got with testdata/name, rewriting it when UPDATE_GOLDEN is set.
func apiGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the generated text (UPDATE_GOLDEN=1 rewrites it); got:\n%s", path, got)
	}
}

func TestAPITypeScriptDeclarations(t *testing.T) {
	ts := NewAPI(apiWeather(t)).TypeScript()
	apiGolden(t, "api_weather.d.ts", ts)
	if err := apiCheckTypeScript(ts); err != nil {
		t.Fatalf("%v\n%s", err, apiNumbered(ts))
	}
}

func TestAPIDescribe(t *testing.T) {
	api := NewAPI(apiWeather(t))
	full := api.Describe(1 << 20)
	apiGolden(t, "api_weather.txt", full)
	if got := api.Describe(len(full)); got != full {
		t.Errorf("at exactly its length the description changed:\n%s", got)
	}
	if NewAPI(nil).Describe(1000) != "" {
		t.Error("no tools should describe as nothing")
	}
}

// TestAPIDescribeDegrades checks every limit up to the full description of 40 tools:
// within the limit, whole lines only, each tool line one of that tool's renderings,
// the count of left-out tools right, never fewer tools for more room, and the same
// text whatever the order the tools came in.
func TestAPIDescribeDegrades(t *testing.T) {
	var tools []Tool
	for i := 0; i < 40; i++ {
		tools = append(tools, Tool{
			Name: fmt.Sprintf("srv%d__tool_%02d", i%3, i), Server: fmt.Sprintf("srv%d", i%3), Tool: fmt.Sprintf("tool_%02d", i),
			Description: strings.Repeat(fmt.Sprintf("Tool %d does things. ", i), i%5+1),
			Input:       apiSchema(t, `{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"},"opts":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"boolean"}}}},"required":["query"]}`),
			Output:      apiSchema(t, `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"score":{"type":"number"}}}},"total":{"type":"integer"}}}`),
		})
	}
	api := NewAPI(tools)
	shuffled := append([]Tool(nil), tools...)
	rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	again := NewAPI(shuffled)

	renderings := map[string]bool{}
	for _, s := range api.servers {
		for _, f := range s.funcs {
			for _, d := range details {
				renderings[f.render(d)] = true
			}
		}
	}
	full := api.Describe(1 << 20)
	header := strings.SplitN(full, "\n", 2)[0]
	prevTools := 0
	seen := map[string]bool{}
	for limit := 0; limit <= len(full)+1; limit += 1 + limit/500 {
		got := api.Describe(limit)
		if got != again.Describe(limit) {
			t.Fatalf("limit %d: the description depends on the order of the tools", limit)
		}
		if len(got) > limit {
			t.Fatalf("limit %d: %d bytes", limit, len(got))
		}
		if got == "" {
			continue
		}
		seen[got] = true
		lines := strings.Split(got, "\n")
		if lines[0] == header {
			lines = lines[1:]
		}
		shown, more := 0, 0
		for i, l := range lines {
			switch {
			case renderings[l]:
				shown++
			case i == len(lines)-1 && (fmt.Sprintf("...and %d more tools", 40-shown) == l || l == "...and 1 more tool" && shown == 39):
				more = 40 - shown
			default:
				t.Fatalf("limit %d: line %q is neither a tool nor the count of the rest:\n%s", limit, l, got)
			}
		}
		if shown+more != 40 {
			t.Fatalf("limit %d: %d tools shown and %d counted:\n%s", limit, shown, more, got)
		}
		if shown < prevTools {
			t.Fatalf("limit %d: %d tools shown, fewer than with less room", limit, shown)
		}
		prevTools = shown
	}
	// Every level of detail was reached on the way.
	for _, want := range []string{"# Tool 1 does things. Tool 1 does things.", "# Tool 1 does", "-> {items:", "opts: dict = None)", "opts=None)", "srv1.tool_01\n", "...and "} {
		found := false
		for s := range seen {
			found = found || strings.Contains(s, want)
		}
		if !found {
			t.Errorf("no limit gave a description with %q", want)
		}
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

func TestAPIMinimize(t *testing.T) {
	api := NewAPI([]Tool{
		{Name: "s__closed", Server: "s", Tool: "closed", Output: apiSchema(t, `{"type":"object","properties":{
			"id":{"type":"string"},
			"owner":{"type":"object","properties":{"login":{"type":"string"}}},
			"labels":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}},
			"meta":{"type":"object","additionalProperties":{"type":"object","properties":{"v":{"type":"integer"}},"additionalProperties":false}},
			"open":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true},
			"maybe":{"anyOf":[{"type":"null"},{"type":"object","properties":{"x":{"type":"integer"}}}]},
			"either":{"anyOf":[{"type":"object","properties":{"x":{}}},{"type":"object","properties":{"y":{}}}]},
			"ref":{"$ref":"#/$defs/R"}
		},"$defs":{"R":{"type":"object","properties":{"keep":{}}}}}`)},
		{Name: "s__none", Server: "s", Tool: "none"},
	})
	var in map[string]any
	const result = `{
		"id":"1","extra":"drop",
		"owner":{"login":"ann","avatar":"drop"},
		"labels":[{"name":"bug","color":"drop"},"not an object"],
		"meta":{"k":{"v":1,"w":"drop"}},
		"open":{"a":"x","b":"kept"},
		"maybe":{"x":1,"y":"drop"},
		"either":{"x":1,"y":2,"z":"kept: no single arm"},
		"ref":{"keep":1,"drop":2}
	}`
	if err := json.Unmarshal([]byte(result), &in); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(in)
	got := api.Minimize("s__closed", in)
	want := apiSchema(t, `{
		"id":"1",
		"owner":{"login":"ann"},
		"labels":[{"name":"bug"},"not an object"],
		"meta":{"k":{"v":1}},
		"open":{"a":"x","b":"kept"},
		"maybe":{"x":1},
		"either":{"x":1,"y":2,"z":"kept: no single arm"},
		"ref":{"keep":1}
	}`)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Errorf("minimized:\n got %s\nwant %v", g, want)
	}
	if after, _ := json.Marshal(in); string(after) != string(before) {
		t.Error("Minimize changed its argument")
	}
	for _, name := range []string{"s__none", "unknown"} {
		if got := api.Minimize(name, in); !reflect.DeepEqual(got, in) {
			t.Errorf("%s: a tool without output schema should pass its result through", name)
		}
	}
	for _, v := range []any{"text", 1.0, nil, []any{1.0}} {
		if got := api.Minimize("s__closed", v); !reflect.DeepEqual(got, v) {
			t.Errorf("a %T result that is not an object should pass through, got %v", v, got)
		}
	}
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
