package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// A setting is written once: the first value stays, later ones (and racing ones) are
// answered with it.
func TestSettingsFirstWriterWins(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		if got, err := st.Settings(ctx); err != nil || len(got) != 0 {
			t.Fatalf("settings of a fresh control plane: %v, %v", got, err)
		}
		if v, err := st.InitSetting(ctx, "k", "first"); err != nil || v != "first" {
			t.Fatalf("InitSetting on an empty plane = %q, %v; want first", v, err)
		}
		if v, err := st.InitSetting(ctx, "k", "second"); err != nil || v != "first" {
			t.Fatalf("InitSetting over a stored value = %q, %v; want first", v, err)
		}
		other := reopen(t, st)
		const racers = 8
		results := make([]string, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := st
				if i%2 == 1 {
					s = other
				}
				v, err := s.InitSetting(ctx, "race", fmt.Sprint("v", i))
				if err != nil {
					t.Error(err)
				}
				results[i] = v
			}()
		}
		wg.Wait()
		for _, v := range results {
			if v != results[0] {
				t.Fatalf("racing writers saw different values: %v", results)
			}
		}
		got, err := st.Settings(ctx)
		if err != nil || got["k"] != "first" || got["race"] != results[0] || len(got) != 2 {
			t.Fatalf("Settings = %v, %v", got, err)
		}
	})
}

// Team and harness roles insert settings but cannot replace or remove one: a key check
// value stays the first key's.
func TestSettingsCannotBeReplacedByRoles(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	if v, err := p.asAlice.InitSetting(ctx, "secret_key_check", "alices"); err != nil || v != "alices" {
		t.Fatalf("alice storing the first value: %q, %v", v, err)
	}
	for _, st := range []*Store{p.asBob, p.asHarness} {
		if v, err := st.InitSetting(ctx, "secret_key_check", "mine"); err != nil || v != "alices" {
			t.Errorf("%s: InitSetting over alice's = %q, %v", st.Role(), v, err)
		}
		for _, q := range []string{
			`UPDATE control_plane SET value = 'mine' WHERE name = 'secret_key_check'`,
			`DELETE FROM control_plane WHERE name = 'secret_key_check'`,
		} {
			if _, err := st.Exec(ctx, q); !errors.Is(err, ErrForbidden) {
				t.Errorf("%s: %q: %v; want ErrForbidden", st.Role(), q, err)
			}
		}
	}
	if got, _ := p.owner.Settings(ctx); got["secret_key_check"] != "alices" {
		t.Errorf("after the attempts: %v", got)
	}
}
