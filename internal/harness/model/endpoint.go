package model

import (
	"fmt"
	"net/http"
	"os"
)

// Endpoint is how a hosted model is reached: the agent's model block as each model
// package reads it, so that name, base URL and key variable mean the same for every
// provider.
type Endpoint struct {
	Model   string // required
	BaseURL string // "" means the API's public endpoint
	KeyEnv  string // "" means the model package's default variable
	// HTTPClient, when set, carries every request (tests pass an httptest client).
	HTTPClient *http.Client
	// Getenv reads the key variable; nil means os.Getenv.
	Getenv func(string) string
}

// Complete checks that the endpoint names a model and fills in the defaults: keyEnv
// for KeyEnv and os.Getenv for Getenv. api and example name the API and a model of it
// in the error.
func (e Endpoint) Complete(api, example, keyEnv string) (Endpoint, error) {
	if e.Model == "" {
		return e, fmt.Errorf("%s model: model.name is empty; set it, for example %s", api, example)
	}
	if e.KeyEnv == "" {
		e.KeyEnv = keyEnv
	}
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	return e, nil
}

// Key reads the API key from the harness's environment. It is read at each call, not
// once, so a key rotated in the environment of a long-running harness takes effect.
func (e Endpoint) Key() (string, error) {
	key := e.Getenv(e.KeyEnv)
	if key == "" {
		return "", fmt.Errorf("%w: export %s in the harness's environment (the variable of the agent's model key: model.api_key_credential's, or model.api_key_env)", ErrNoKey, e.KeyEnv)
	}
	return key, nil
}
