package codemode

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files from what the generators write now:
//
//	go test ./internal/harness/codemode -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, rewriting the file first under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (-update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the generated text (-update rewrites it); got:\n%s", path, got)
	}
}

// goldenAPI is one representative set of tools whose generated code each generator's
// golden test keeps in testdata/<name>.<language>.golden.
type goldenAPI struct {
	name  string
	tools func(t *testing.T) []Tool
}

// goldenAPIs are the schemas the goldens cover: the small weather API (required and
// optional parameters, an enum, a nullable value, a nested object, names that are not
// identifiers, an output schema, no arguments, any arguments), nested objects and
// arrays (with $ref, allOf and typed additionalProperties), enums and unions, names
// that need escaping, and descriptions (long, several lines, with comment and quote
// characters).
var goldenAPIs = []goldenAPI{
	{"weather", apiWeather},
	{"nested", func(t *testing.T) []Tool {
		return []Tool{{
			Name: "repo__search", Server: "repo", Tool: "search", Description: "Search issues.",
			Input: apiSchema(t, `{"type":"object","properties":{
				"filter":{"type":"object","properties":{
					"labels":{"type":"array","items":{"type":"string"}},
					"author":{"$ref":"#/$defs/User"},
					"range":{"type":"object","properties":{"from":{"type":"integer"},"to":{"type":"integer"}},"required":["from"]}
				},"required":["labels"]},
				"matrix":{"type":"array","items":{"type":"array","items":{"type":"number"}}},
				"tags":{"type":"object","additionalProperties":{"type":"string"}}
			},"required":["filter"],"$defs":{"User":{"type":"object","properties":{"login":{"type":"string"},"id":{"type":"integer"}},"required":["login"]}}}`),
			Output: apiSchema(t, `{"type":"object","properties":{
				"items":{"type":"array","items":{"allOf":[
					{"type":"object","properties":{"id":{"type":"integer"},"title":{"type":"string"}},"required":["id"]},
					{"type":"object","properties":{"owner":{"$ref":"#/$defs/User"}}}
				]}},
				"by_label":{"type":"object","additionalProperties":{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer"}}}}}
			},"required":["items"],"$defs":{"User":{"type":"object","properties":{"login":{"type":"string"}}}}}`),
		}}
	}},
	{"enums", func(t *testing.T) []Tool {
		return []Tool{{
			Name: "paint__mix", Server: "paint", Tool: "mix", Description: "Mix a color.",
			Input: apiSchema(t, `{"type":"object","properties":{
				"color":{"enum":["red","green","blue"]},
				"level":{"enum":[1,2,3]},
				"flag":{"enum":[true,false,null]},
				"mode":{"const":"fast"},
				"shade":{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},
				"spec":{"anyOf":[{"type":"object","properties":{"hex":{"type":"string"}},"required":["hex"]},{"type":"object","properties":{"rgb":{"type":"array","items":{"type":"integer"}}}}]},
				"ratio":{"type":"number","nullable":true}
			},"required":["color","mode"]}`),
			Output: apiSchema(t, `{"enum":["ok","failed"]}`),
		}}
	}},
	{"escaping", func(t *testing.T) []Tool {
		return []Tool{
			{
				Name: "my-srv__do.thing", Server: "my-srv", Tool: "do.thing", Description: `Quotes " and \ and */ and """ stay text.`,
				Input: apiSchema(t, `{"type":"object","properties":{
					"class":{"type":"string"},
					"a-b":{"type":"string"},
					"a_b":{"type":"string"},
					"__proto__":{"type":"string"},
					"1st":{"type":"integer"},
					"日本":{"type":"string","description":"A name that is not ASCII"},
					"say \"hi\"":{"type":"boolean"}
				},"required":["class"]}`),
				Output: apiSchema(t, `{"type":"object","properties":{"end */ here":{"type":"string"},"ok":{"type":"boolean"}}}`),
			},
			{Name: "json__import", Server: "json", Tool: "import", Description: "A server and a tool named like modules and keywords.",
				Input: apiSchema(t, `{"type":"object","properties":{"from":{"type":"string"},"None":{"type":"string"}}}`)},
		}
	}},
	{"descriptions", func(t *testing.T) []Tool {
		return []Tool{{
			Name: "docs__write", Server: "docs", Tool: "write",
			Description: "Write a page.\n\nThe page is stored\tas Markdown.\r\nLines\u2028break here too.\n" + repeatWords("long", 600),
			Input: apiSchema(t, `{"type":"object","properties":{
				"title":{"type":"string","description":"The title,\non one line in the docs."},
				"body":{"type":"string","description":"`+repeatWords("body", 80)+`"}
			},"required":["title"]}`),
		}}
	}},
}

// repeatWords is n words "<w>0 <w>1 ...": a description long enough to be clipped.
func repeatWords(w string, n int) string {
	b := make([]byte, 0, n*(len(w)+4))
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
		b = append(b, byte('0'+i%10))
	}
	return string(b)
}

// eachGoldenAPI compares, in a subtest for each of goldenAPIs, what gen writes for its
// API with testdata/<name>.<ext>.golden, then runs check on it.
func eachGoldenAPI(t *testing.T, ext string, gen func(*API) string, check func(t *testing.T, api *API, out string)) {
	for _, g := range goldenAPIs {
		t.Run(g.name, func(t *testing.T) {
			api := NewAPI(g.tools(t))
			out := gen(api)
			golden(t, g.name+"."+ext+".golden", out)
			check(t, api, out)
		})
	}
}
