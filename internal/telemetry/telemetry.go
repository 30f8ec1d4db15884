// Package telemetry provides the harness's OpenTelemetry tracing: a TracerProvider built
// from the standard OTEL_* environment, exporting over OTLP/HTTP through a batch span
// processor, or nothing at all when no endpoint is set.
//
// There is no global provider. cmd/trueforge-harness builds one Provider and hands it to
// the runner, which starts each turn's root span from it; everything below the runner
// (tools, MCP calls, sandbox operations) starts its spans with Start, from the provider
// of the span already in its context. A call made outside a turn, or any call when
// tracing is off, finds no span there and gets a non-recording one: a context lookup,
// nothing exported, nothing allocated for attributes (callers set them only when the
// span records).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Scope is the instrumentation scope of every span the harness starts.
const Scope = "github.com/trueforge/terraform-provider-trueforge/harness"

// The environment variables that configure tracing (the OpenTelemetry SDK's own names;
// the exporter also reads OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE and their
// _TRACES_ forms, and the SDK OTEL_TRACES_SAMPLER and OTEL_BSP_*).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	// EnvCaptureContent turns on recording prompts, model output, tool arguments and
	// results as span attributes (the GenAI semantic conventions' switch). Off, no span
	// carries any of them.
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "trueforge-harness"

// Config is what the environment asks for.
type Config struct {
	// TracesURL is the full OTLP/HTTP traces URL (…/v1/traces); "" means tracing is off.
	TracesURL      string
	ServiceName    string
	Version        string
	CaptureContent bool
}

// ConfigFromEnv reads the standard variables through getenv. Tracing is on when
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or OTEL_EXPORTER_OTLP_ENDPOINT (with
// /v1/traces appended, as the specification says) is set, unless OTEL_SDK_DISABLED is
// true or OTEL_TRACES_EXPORTER is none.
func ConfigFromEnv(getenv func(string) string, version string) (Config, error) {
	c := Config{ServiceName: getenv(EnvServiceName), Version: version,
		CaptureContent: strings.EqualFold(strings.TrimSpace(getenv(EnvCaptureContent)), "true")}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if strings.EqualFold(getenv(EnvSDKDisabled), "true") {
		return c, nil
	}
	switch exp := strings.TrimSpace(getenv(EnvTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("%s=%q: the harness exports traces over OTLP only; set it to otlp or none, or unset it", EnvTracesExporter, exp)
	}
	proto := getenv(EnvTracesProtocol)
	if proto == "" {
		proto = getenv(EnvProtocol)
	}
	if proto != "" && proto != "http/protobuf" {
		return c, fmt.Errorf("%s=%q: the harness exports traces over OTLP/HTTP (http/protobuf) only; point the endpoint at the collector's HTTP port (4318) and set the protocol to http/protobuf, or unset it", EnvProtocol, proto)
	}
	if u := strings.TrimSpace(getenv(EnvTracesEndpoint)); u != "" {
		c.TracesURL = u
	} else if u := strings.TrimSpace(getenv(EnvEndpoint)); u != "" {
		c.TracesURL = strings.TrimSuffix(u, "/") + "/v1/traces"
	}
	if c.TracesURL != "" && !strings.HasPrefix(c.TracesURL, "http://") && !strings.HasPrefix(c.TracesURL, "https://") {
		return c, fmt.Errorf("OTLP traces endpoint %q is not an http:// or https:// URL: set %s to the collector's OTLP/HTTP address, e.g. http://localhost:4318", c.TracesURL, EnvEndpoint)
	}
	return c, nil
}

// Provider is the harness's tracing: on (exporting) or off (a no-op).
type Provider struct {
	tp      trace.TracerProvider
	sdk     *sdktrace.TracerProvider // nil when off
	tracer  trace.Tracer
	capture bool
}

// Off is a Provider that records nothing.
func Off() *Provider {
	tp := noop.NewTracerProvider()
	return &Provider{tp: tp, tracer: tp.Tracer(Scope)}
}

// New builds the Provider c asks for. Spans are batched (the SDK's batch span
// processor: OTEL_BSP_* or its defaults, a 2048-span queue sent every 5 s or per 512
// spans) so a turn never waits on the collector; a full queue drops spans, never blocks.
func New(ctx context.Context, c Config) (*Provider, error) {
	if c.TracesURL == "" {
		p := Off()
		p.capture = c.CaptureContent
		return p, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.TracesURL))
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter for %s: %w", c.TracesURL, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", c.ServiceName), attribute.String("service.version", c.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{tp: sdk, sdk: sdk, tracer: sdk.Tracer(Scope, trace.WithInstrumentationVersion(c.Version)), capture: c.CaptureContent}, nil
}

// Enabled says spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// CaptureContent says prompts, model output, tool arguments and results may be span
// attributes (EnvCaptureContent).
func (p *Provider) CaptureContent() bool { return p != nil && p.capture }

// Tracer is the harness's tracer (a no-op one when off or p is nil).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return noop.NewTracerProvider().Tracer(Scope)
	}
	return p.tracer
}

// ForceFlush exports every ended span now.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown flushes the spans not yet exported and stops the exporter; the harness calls
// it on exit.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Start starts a span named name as a child of the span in ctx, from that span's
// provider. With no recording span in ctx it returns ctx and a non-recording span
// without touching any provider, so instrumented code costs nothing when tracing is off.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// Recording says ctx holds a recording span: callers check it before they build a span's
// name or attributes, so that tracing off costs no allocation.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Inject writes ctx's trace context (W3C traceparent and tracestate) into h.
func Inject(ctx context.Context, h propagation.TextMapCarrier) {
	propagation.TraceContext{}.Inject(ctx, h)
}

// Fail marks span failed with error.type kind (a class such as "timeout" or
// "tool_error", never an error's text, which may quote arguments or output).
func Fail(span trace.Span, kind string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("error.type", kind))
	span.SetStatus(codes.Error, "")
}
