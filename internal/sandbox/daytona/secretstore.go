package daytona

import (
	"context"
	"fmt"
	"slices"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// secretStore keeps a control plane's environment secrets as Daytona organization
// secrets (sandbox.SecretStore): Daytona keeps the value, and its egress proxy swaps the
// placeholder a sandbox sees for the value, only on requests to the secret's hosts. Each
// is named SecretName(environment, variable); the harness attaches it to sandboxes by
// that name.
type secretStore struct{ c *Client }

func (s secretStore) Name(environment, envName string) string {
	return SecretName(environment, envName)
}

func remote(sec *Secret) sandbox.RemoteSecret {
	hosts := slices.Clone(sec.Hosts)
	if hosts == nil {
		hosts = []string{}
	}
	return sandbox.RemoteSecret{ID: sec.ID, Updated: sec.UpdatedAt, Hosts: hosts}
}

// find returns the secret named name (nil when there is none): a lookup for a caller
// that has no id yet (an import, or a create whose answer was lost).
func (s secretStore) find(ctx context.Context, name string) (*Secret, error) {
	all, err := s.c.AllSecrets(ctx, SecretListOptions{Name: name, Limit: 200})
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

func (s secretStore) Get(ctx context.Context, ref sandbox.RemoteSecret, environment, envName string) (*sandbox.RemoteSecret, error) {
	var sec *Secret
	var err error
	if ref.ID == "" {
		sec, err = s.find(ctx, SecretName(environment, envName))
	} else if sec, err = s.c.GetSecret(ctx, ref.ID); IsNotFound(err) {
		return nil, nil
	}
	if err != nil || sec == nil {
		return nil, err
	}
	r := remote(sec)
	return &r, nil
}

func (s secretStore) Create(ctx context.Context, v sandbox.SecretValue) (sandbox.RemoteSecret, error) {
	name := SecretName(v.Environment, v.EnvName)
	sec, err := s.c.CreateSecret(ctx, CreateSecretRequest{
		Name: name, Value: v.Value, Hosts: v.Hosts,
		Description: fmt.Sprintf("trueforge secret %s of environment %q (managed by Terraform)", v.EnvName, v.Environment),
	})
	if IsConflict(err) {
		// Left by an earlier apply whose answer was lost: adopt it.
		existing, ferr := s.find(ctx, name)
		if ferr != nil || existing == nil {
			return sandbox.RemoteSecret{}, err
		}
		sec, err = s.c.UpdateSecret(ctx, existing.ID, UpdateSecretRequest{Value: &v.Value, Hosts: &v.Hosts})
	}
	if err != nil {
		return sandbox.RemoteSecret{}, err
	}
	return remote(sec), nil
}

func (s secretStore) Update(ctx context.Context, ref sandbox.RemoteSecret, v sandbox.SecretValue, rotate bool) (sandbox.RemoteSecret, error) {
	id := ref.ID
	if id == "" {
		sec, err := s.find(ctx, SecretName(v.Environment, v.EnvName))
		if err != nil {
			return sandbox.RemoteSecret{}, err
		}
		if sec != nil {
			id = sec.ID
		}
	}
	if id != "" {
		req := UpdateSecretRequest{Hosts: &v.Hosts}
		if rotate {
			req.Value = &v.Value
		}
		sec, err := s.c.UpdateSecret(ctx, id, req)
		if err == nil {
			return remote(sec), nil
		}
		if !IsNotFound(err) {
			return sandbox.RemoteSecret{}, err
		}
	}
	// Deleted outside trueforge: made again, with the value the configuration has.
	return s.Create(ctx, v)
}

func (s secretStore) Delete(ctx context.Context, ref sandbox.RemoteSecret, environment, envName string) error {
	id := ref.ID
	if id == "" {
		sec, err := s.find(ctx, SecretName(environment, envName))
		if err != nil || sec == nil {
			return err
		}
		id = sec.ID
	}
	if err := s.c.DeleteSecret(ctx, id); err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}
