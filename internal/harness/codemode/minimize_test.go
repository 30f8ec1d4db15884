package codemode

import (
	"encoding/json"
	"reflect"
	"testing"
)

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
