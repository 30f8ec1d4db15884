package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// flushTimeout bounds how long exit waits for the last spans to reach the collector: an
// unreachable collector must not hold a finished command.
const flushTimeout = 5 * time.Second

// openTelemetry builds the process's tracing from the standard OTEL_* variables (README,
// "Tracing"): off, a no-op, when no OTLP endpoint is set.
func openTelemetry(ctx context.Context) (*telemetry.Provider, error) {
	cfg, err := telemetry.ConfigFromEnv(os.Getenv, version)
	if err != nil {
		return nil, usageErrorf("tracing: %v", err)
	}
	p, err := telemetry.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return p, nil
}

// flushTelemetry exports the spans not sent yet and stops the exporter.
func (h *harness) flushTelemetry() {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := h.telemetry.Shutdown(ctx); err != nil {
		h.logger.Warn("flushing traces failed: the last spans may be lost", "err", err)
	}
}
