package api

import (
	"fmt"
	"net/url"
	"strings"
)

// TraceIDPlaceholder is where a trace id goes in Config.TraceURL.
const TraceIDPlaceholder = "{trace_id}"

// CheckTraceURL says what is wrong with a trace link template, naming the fix: it must
// be an absolute http(s) URL holding {trace_id} (Jaeger's
// https://jaeger.example.com/trace/{trace_id}, say).
func CheckTraceURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	if !strings.Contains(tmpl, TraceIDPlaceholder) {
		return fmt.Errorf("%q has no %s where the trace id goes; e.g. https://jaeger.example.com/trace/%s", tmpl, TraceIDPlaceholder, TraceIDPlaceholder)
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, TraceIDPlaceholder, "0"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http:// or https:// URL; e.g. https://jaeger.example.com/trace/%s", tmpl, TraceIDPlaceholder)
	}
	return nil
}
