// Command demomcp is the MCP server of `make demo`: a small streamable HTTP MCP server
// (MCP Go SDK) on loopback with two tools, capital and population, that answers only
// requests bearing the token in $DEMO_MCP_TOKEN, and logs on stderr which user and agent
// each call was made for (the X-Trueforge-User and -Agent headers the harness sends).
//
//	demomcp -listen 127.0.0.1:8931
//
// It prints its URL on stdout once it listens.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countryIn struct {
	Country string `json:"country" jsonschema:"a country's English name"`
}

type capitalOut struct {
	Country string `json:"country"`
	Capital string `json:"capital"`
}

type cityIn struct {
	City string `json:"city" jsonschema:"a city's English name"`
}

type populationOut struct {
	City       string `json:"city"`
	Population int    `json:"population" jsonschema:"inhabitants of the city proper"`
}

var capitals = map[string]string{"france": "Paris", "germany": "Berlin", "italy": "Rome", "japan": "Tokyo", "peru": "Lima", "norway": "Oslo"}

var populations = map[string]int{"paris": 2_102_650, "berlin": 3_878_100, "rome": 2_748_109, "tokyo": 14_187_176, "lima": 10_151_200, "oslo": 717_710}

// addLookup adds tool to srv: it answers from table, by the lower-cased key of its
// input (a country, a city), with answer, and logs whom each call was made for. Each
// of the demo's tools is one such lookup.
func addLookup[In, Out, V any](srv *mcp.Server, tool *mcp.Tool, table map[string]V, key func(In) string, answer func(In, V) Out) {
	mcp.AddTool(srv, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		log.Printf("demomcp: %s called for user %q, agent %q", tool.Name, req.Extra.Header.Get("X-Trueforge-User"), req.Extra.Header.Get("X-Trueforge-Agent"))
		v, ok := table[strings.ToLower(key(in))]
		if !ok {
			var none Out
			return nil, none, fmt.Errorf("no %s known for %q", tool.Name, key(in))
		}
		return nil, answer(in, v), nil
	})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8931", "loopback address to listen on")
	flag.Parse()
	token := os.Getenv("DEMO_MCP_TOKEN")
	if token == "" {
		log.Fatal("demomcp: set DEMO_MCP_TOKEN: the bearer token callers must send")
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "facts", Version: "1"}, nil)
	addLookup(srv, &mcp.Tool{Name: "capital", Description: "The capital city of a country."}, capitals,
		func(in countryIn) string { return in.Country },
		func(in countryIn, c string) capitalOut { return capitalOut{Country: in.Country, Capital: c} })
	addLookup(srv, &mcp.Tool{Name: "population", Description: "How many people live in a city."}, populations,
		func(in cityIn) string { return in.City },
		func(in cityIn, n int) populationOut { return populationOut{City: in.City, Population: n} })
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		log.Fatalf("demomcp: %s is not a loopback address", ln.Addr())
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
