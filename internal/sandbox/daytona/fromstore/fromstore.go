// Package fromstore opens the Daytona client and sandbox runtime of a sandbox provider
// recorded in the control-plane store: the harness's backend registry wires the daytona
// type with Runtime (it has the signature of the harness's backend.Opener).
//
// The API key is the provider's sealed api_key, opened with the control plane's secret key
// (TRUEFORGE_SECRET_KEY, else secret.key beside the database), exactly as the Terraform
// provider seals it. Every sandbox the runtime creates carries the label trueforge.plane,
// a hash of the database's absolute path, so two control planes sharing one Daytona
// organization never list (and so never sweep) each other's sandboxes. Moving the database
// changes it: sandboxes made before the move are then left to Daytona's auto-stop and
// auto-archive intervals.
package fromstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trueforge/terraform-provider-trueforge/internal/catalog"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// LabelPlane is the label naming the control plane a sandbox belongs to.
const LabelPlane = "trueforge.plane"

// Client opens p's API key and returns a client for its API (api_url, else the catalog's
// default) and target.
func Client(st *store.Store, p store.SandboxProvider, opts ...daytona.Option) (*daytona.Client, error) {
	if p.Type != "daytona" {
		return nil, fmt.Errorf("sandbox provider %q has type %q, not daytona", p.Name, p.Type)
	}
	if len(p.APIKeyEnc) == 0 {
		return nil, fmt.Errorf("sandbox provider %q has no stored API key", p.Name)
	}
	box, err := secretbox.Load(os.Getenv(secretbox.KeyEnv), filepath.Join(st.Dir(), "secret.key"))
	if err != nil {
		return nil, fmt.Errorf("loading the secret key: %w", err)
	}
	key, err := box.Open(p.APIKeyEnc, "sandbox_provider/"+p.Name)
	if err != nil {
		return nil, fmt.Errorf("opening the API key of sandbox provider %q: %w", p.Name, err)
	}
	url := p.APIURL
	if url == "" {
		e, _ := catalog.Lookup("daytona")
		url = e.DefaultAPIURL
	}
	return daytona.New(url, string(key), append([]daytona.Option{daytona.WithTarget(p.Target)}, opts...)...), nil
}

// PlaneLabel is the trueforge.plane value of the control plane in st.
func PlaneLabel(st *store.Store) string {
	abs, err := filepath.Abs(st.Path())
	if err != nil {
		abs = st.Path()
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:])[:16]
}

// Runtime returns the sandbox runtime of p with the package defaults (daytona.Default*).
func Runtime(_ context.Context, st *store.Store, p store.SandboxProvider) (sandbox.Runtime, error) {
	if st == nil {
		return nil, errors.New("no store")
	}
	c, err := Client(st, p)
	if err != nil {
		return nil, err
	}
	return &daytona.Runtime{C: c, Labels: map[string]string{LabelPlane: PlaneLabel(st)}}, nil
}
