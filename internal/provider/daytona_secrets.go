package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// A trueforge_secret of an environment on a Daytona sandbox provider is also a Daytona
// organization secret: Daytona keeps the value and its egress proxy swaps the placeholder
// the sandbox sees for the value, only on requests to the secret's hosts. The store keeps
// its sealed copy as for every backend (the harness reads it), and Daytona's secret id and
// last-known update time ride in the resource's private state, so refresh costs one GET.

// daytonaSecretName is the Daytona secret of variable envName of environment
// (daytona.SecretName); the harness attaches it to sandboxes by that name.
func daytonaSecretName(environment, envName string) string {
	return daytona.SecretName(environment, envName)
}

// privateDaytonaSecret is the private-state key of the remote secret's identity.
const privateDaytonaSecret = "daytona_secret"

// remoteSecret is what the private state remembers about the Daytona secret.
type remoteSecret struct {
	ID      string    `json:"id"`
	Updated time.Time `json:"updated"`
}

type privateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

type privateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

func loadRemoteSecret(ctx context.Context, p privateGetter) remoteSecret {
	var rs remoteSecret
	if p == nil {
		return rs
	}
	if b, _ := p.GetKey(ctx, privateDaytonaSecret); len(b) > 0 {
		_ = json.Unmarshal(b, &rs)
	}
	return rs
}

func saveRemoteSecret(ctx context.Context, p privateSetter, s *daytona.Secret, diags *diag.Diagnostics) {
	if p == nil || s == nil {
		return
	}
	b, _ := json.Marshal(remoteSecret{ID: s.ID, Updated: s.UpdatedAt})
	diags.Append(p.SetKey(ctx, privateDaytonaSecret, b)...)
}

// findDaytonaSecret returns the secret named name (nil when there is none): a lookup for
// state that has no id yet (an import, or a create whose answer was lost).
func findDaytonaSecret(ctx context.Context, c *daytona.Client, name string) (*daytona.Secret, error) {
	all, err := c.AllSecrets(ctx, daytona.SecretListOptions{Name: name, Limit: 200})
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, nil
}

// getDaytonaSecret reads the remote secret by the remembered id, else by name. nil means
// it does not exist.
func getDaytonaSecret(ctx context.Context, c *daytona.Client, rs remoteSecret, name string) (*daytona.Secret, error) {
	if rs.ID == "" {
		return findDaytonaSecret(ctx, c, name)
	}
	s, err := c.GetSecret(ctx, rs.ID)
	if daytona.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

// createDaytonaSecret creates the remote secret. A secret of that name left by an earlier
// apply whose answer was lost (409) is adopted and given this value and hosts.
func createDaytonaSecret(ctx context.Context, c *daytona.Client, environment, envName, value string, hosts []string) (*daytona.Secret, error) {
	name := daytonaSecretName(environment, envName)
	s, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{
		Name: name, Value: value, Hosts: hosts,
		Description: fmt.Sprintf("trueforge secret %s of environment %q (managed by Terraform)", envName, environment),
	})
	if !daytona.IsConflict(err) {
		return s, err
	}
	existing, ferr := findDaytonaSecret(ctx, c, name)
	if ferr != nil || existing == nil {
		return nil, err
	}
	return c.UpdateSecret(ctx, existing.ID, daytona.UpdateSecretRequest{Value: &value, Hosts: &hosts})
}

// daytonaSecretDrift compares the remote secret with state: it returns the hosts to put in
// state and whether the value may have changed outside Terraform (Daytona never returns
// values, so a newer update time than the one remembered is the only sign).
func daytonaSecretDrift(s *daytona.Secret, rs remoteSecret) (hosts []string, valueChanged bool) {
	hosts = slices.Clone(s.Hosts)
	if hosts == nil {
		hosts = []string{}
	}
	valueChanged = !rs.Updated.IsZero() && !s.UpdatedAt.Equal(rs.Updated)
	return hosts, valueChanged
}

// updateDaytonaSecret applies a hosts change, and a rotation when rotate is set, in one
// PATCH; it recreates the secret (with value, which the configuration always has) when it
// was deleted outside Terraform.
func updateDaytonaSecret(ctx context.Context, c *daytona.Client, rs remoteSecret, environment, envName, value string, rotate bool, hosts []string) (*daytona.Secret, error) {
	id := rs.ID
	if id == "" {
		s, err := findDaytonaSecret(ctx, c, daytonaSecretName(environment, envName))
		if err != nil {
			return nil, err
		}
		if s != nil {
			id = s.ID
		}
	}
	if id != "" {
		req := daytona.UpdateSecretRequest{Hosts: &hosts}
		if rotate {
			req.Value = &value
		}
		s, err := c.UpdateSecret(ctx, id, req)
		if !daytona.IsNotFound(err) {
			return s, err
		}
	}
	return createDaytonaSecret(ctx, c, environment, envName, value, hosts)
}

// deleteDaytonaSecret deletes the remote secret; a missing one is fine.
func deleteDaytonaSecret(ctx context.Context, c *daytona.Client, rs remoteSecret, environment, envName string) error {
	s, err := getDaytonaSecretForDelete(ctx, c, rs, daytonaSecretName(environment, envName))
	if err != nil || s == "" {
		return err
	}
	if err := c.DeleteSecret(ctx, s); err != nil && !daytona.IsNotFound(err) {
		return err
	}
	return nil
}

func getDaytonaSecretForDelete(ctx context.Context, c *daytona.Client, rs remoteSecret, name string) (string, error) {
	if rs.ID != "" {
		return rs.ID, nil
	}
	s, err := findDaytonaSecret(ctx, c, name)
	if err != nil || s == nil {
		return "", err
	}
	return s.ID, nil
}
