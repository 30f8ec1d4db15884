package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// Defaults of the operations that wait on a backend other than for a build
// (defaultBuildTimeout). They are generous: the Daytona client alone retries a 409 "state
// change in progress" for up to 5 minutes, and deleting an environment or a sandbox
// provider may delete several snapshots, each with its own retries.
const (
	defaultDeleteTimeout = 20 * time.Minute
	defaultSecretTimeout = 10 * time.Minute
)

// durationDoc is what every timeout accepts.
const durationDoc = "A [duration](https://pkg.go.dev/time#ParseDuration) such as `\"30s\"` or `\"1h30m\"`."

// timeoutsAttribute is the `timeouts` nested attribute with the operations named in docs
// (operation name -> what it bounds, its default included), every one documented in
// Markdown so that the defaults show in the registry docs.
func timeoutsAttribute(ctx context.Context, summary string, docs map[string]string) schema.Attribute {
	opts := timeouts.Opts{}
	for op := range docs {
		switch op {
		case "create":
			opts.Create = true
		case "update":
			opts.Update = true
		case "delete":
			opts.Delete = true
		default:
			panic("timeoutsAttribute: unknown operation " + op)
		}
	}
	a := timeouts.Attributes(ctx, opts).(schema.SingleNestedAttribute)
	a.MarkdownDescription = summary
	for op, doc := range docs {
		inner := a.Attributes[op].(schema.StringAttribute)
		inner.Description = ""
		inner.MarkdownDescription = doc + " " + durationDoc
		a.Attributes[op] = inner
	}
	return a
}

// withTimeout bounds ctx by an operation's timeout: op (a timeouts.Value's Create,
// Update or Delete) gives the configured one, else def; a malformed one is reported in
// diags. The caller defers cancel, and names the timeout in what it reports.
func withTimeout(ctx context.Context, op func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), def time.Duration,
	diags *diag.Diagnostics) (context.Context, context.CancelFunc, time.Duration) {
	timeout, d := op(ctx, def)
	diags.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, timeout
}

// timedOut reports whether err (or the context it ran under) ended because an operation's
// timeout passed.
func timedOut(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// addTimeoutError reports an operation that ran out of its `timeouts.<op>` (limit):
// what was left undone (done says what was done first) and what to do next.
func addTimeoutError(diags *diag.Diagnostics, summary, op string, limit time.Duration, done, next string, err error) {
	diags.AddError(summary,
		fmt.Sprintf("%s did not finish within timeouts.%s (%s). %s\n\nOriginal Error: %s", done, op, limit, next, err))
}
