package codemode

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// TestDescribeGolden keeps the description of each golden API within DescribeBudget,
// which each fits whole: the same at exactly its length and with all the room there is.
func TestDescribeGolden(t *testing.T) {
	eachGoldenAPI(t, "describe", func(a *API) string { return a.Describe(DescribeBudget) }, func(t *testing.T, api *API, got string) {
		if full := api.Describe(1 << 20); got != full {
			t.Errorf("within DescribeBudget the description is not the full one:\n%s", full)
		}
		if again := api.Describe(len(got)); again != got {
			t.Errorf("at exactly its length the description changed:\n%s", again)
		}
	})
}

func TestAPIDescribe(t *testing.T) {
	if NewAPI(nil).Describe(1000) != "" {
		t.Error("no tools should describe as nothing")
	}
}

// TestDescribeBudget: an agent with many tools still gets a description within
// DescribeBudget, naming as many tools as fit and counting the rest.
func TestDescribeBudget(t *testing.T) {
	var tools []Tool
	for i := 0; i < 1000; i++ {
		tools = append(tools, Tool{
			Name: fmt.Sprintf("srv__tool_%03d", i), Server: "srv", Tool: fmt.Sprintf("tool_%03d", i),
			Description: "Does a thing with a query.",
			Input:       apiSchema(t, `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
		})
	}
	got := NewAPI(tools).Describe(DescribeBudget)
	if len(got) > DescribeBudget {
		t.Errorf("%d bytes, over DescribeBudget (%d)", len(got), DescribeBudget)
	}
	if !strings.Contains(got, "srv.tool_000") || !strings.HasSuffix(got, " more tools") {
		t.Errorf("not the first tools and the count of the rest:\n%s", got)
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
