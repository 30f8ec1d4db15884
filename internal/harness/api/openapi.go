package api

import (
	_ "embed"
	"net/http"
	"strings"
)

// openapiDoc is the OpenAPI 3.1 document of every route (openapi.json, embedded). A test
// walks the router's routes and the document and fails when either has one the other
// lacks.
//
//go:embed openapi.json
var openapiDoc []byte

// OpenAPI is the embedded OpenAPI document.
func OpenAPI() []byte { return openapiDoc }

// OpenAPIPath is a route's path as the OpenAPI document spells it: net/http's
// {name...} wildcard is {name}.
func OpenAPIPath(pattern string) string { return strings.ReplaceAll(pattern, "...}", "}") }

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openapiDoc)
	return nil
}
