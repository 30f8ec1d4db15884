package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The standard variables decide whether tracing is on and where it goes, as the
// OpenTelemetry specification has them.
func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		url     string
		service string
		capture bool
		err     string
	}{
		{name: "nothing set: off", env: nil, service: telemetry.DefaultServiceName},
		{name: "base endpoint gets /v1/traces", env: map[string]string{telemetry.EnvEndpoint: "http://collector:4318/"},
			url: "http://collector:4318/v1/traces", service: telemetry.DefaultServiceName},
		{name: "traces endpoint is used as is, and wins", env: map[string]string{telemetry.EnvEndpoint: "http://a:4318",
			telemetry.EnvTracesEndpoint: "https://b/otlp/traces", telemetry.EnvServiceName: "harness-eu"},
			url: "https://b/otlp/traces", service: "harness-eu"},
		{name: "SDK disabled", env: map[string]string{telemetry.EnvEndpoint: "http://a:4318", telemetry.EnvSDKDisabled: "true"},
			service: telemetry.DefaultServiceName},
		{name: "exporter none", env: map[string]string{telemetry.EnvEndpoint: "http://a:4318", telemetry.EnvTracesExporter: "none"},
			service: telemetry.DefaultServiceName},
		{name: "content capture", env: map[string]string{telemetry.EnvCaptureContent: "TRUE"}, service: telemetry.DefaultServiceName, capture: true},
		{name: "grpc refused", env: map[string]string{telemetry.EnvEndpoint: "http://a:4317", telemetry.EnvProtocol: "grpc"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\""},
		{name: "zipkin refused", env: map[string]string{telemetry.EnvTracesExporter: "zipkin"}, err: "OTEL_TRACES_EXPORTER=\"zipkin\""},
		{name: "not a URL", env: map[string]string{telemetry.EnvEndpoint: "collector:4318"}, err: "not an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := telemetry.ConfigFromEnv(env(tc.env), "v1")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v; want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.TracesURL != tc.url || c.ServiceName != tc.service || c.CaptureContent != tc.capture || c.Version != "v1" {
				t.Fatalf("config %+v; want url %q service %q capture %v", c, tc.url, tc.service, tc.capture)
			}
		})
	}
}

// Off, nothing records: no root span, and Start below it hands back the context as it
// was.
func TestOffRecordsNothing(t *testing.T) {
	p, err := telemetry.New(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() {
		t.Fatal("enabled without an endpoint")
	}
	ctx, root := p.Tracer().Start(context.Background(), "turn")
	if root.IsRecording() {
		t.Fatal("the off provider's span records")
	}
	child, span := telemetry.Start(ctx, "step")
	if span.IsRecording() || child != ctx {
		t.Fatal("Start under a non-recording span made a span of its own")
	}
	if n := testing.AllocsPerRun(100, func() { _, s := telemetry.Start(ctx, "step"); s.End() }); n != 0 {
		t.Fatalf("Start allocates %v times per call with tracing off", n)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
