package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// A trueforge_secret of an environment whose backend keeps secrets of its own (Daytona)
// is also such a secret (sandbox.SecretStore): the backend keeps the value and its egress
// proxy puts it into requests to the secret's hosts. The store keeps its sealed copy as
// for every backend (the harness reads it), and the backend secret's id and last-known
// update time ride in the resource's private state, so a refresh costs one read.

// privateRemoteSecret is the private-state key of the backend secret's identity. It
// keeps the name it had when Daytona was the only backend with secrets, so state written
// then still reads.
const privateRemoteSecret = "daytona_secret"

type privateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

type privateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

func loadRemoteSecret(ctx context.Context, p privateGetter) sandbox.RemoteSecret {
	var rs sandbox.RemoteSecret
	if p == nil {
		return rs
	}
	if b, _ := p.GetKey(ctx, privateRemoteSecret); len(b) > 0 {
		_ = json.Unmarshal(b, &rs)
	}
	return rs
}

func saveRemoteSecret(ctx context.Context, p privateSetter, s *sandbox.RemoteSecret, diags *diag.Diagnostics) {
	if p == nil || s == nil {
		return
	}
	b, _ := json.Marshal(s)
	diags.Append(p.SetKey(ctx, privateRemoteSecret, b)...)
}

// remoteSecretDrift compares the backend's secret with what state remembers: the hosts
// to put in state, and whether the value may have changed outside Terraform (a backend
// never returns values, so a newer update time than the one remembered is the only sign).
func remoteSecretDrift(s *sandbox.RemoteSecret, remembered sandbox.RemoteSecret) (hosts []string, valueChanged bool) {
	return s.Hosts, !remembered.Updated.IsZero() && !s.Updated.Equal(remembered.Updated)
}
