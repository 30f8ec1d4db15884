package codemode

import (
	"reflect"
	"testing"
)

// apiNodePrelude installs a fake __trueforge_call__ that records each call.
const apiNodePrelude = `"use strict";
const calls = [];
globalThis.__trueforge_call__ = (name, args) => { calls.push([name, args]); return Promise.resolve({ called: name }); };
`

func TestAPIJavaScriptStubsSendTheToolNameAndArguments(t *testing.T) {
	api := NewAPI(apiWeather(t))
	script := apiNodePrelude + api.JavaScript() + `
(async () => {
  const errors = [];
  const r = await weather.forecast({ city: "Paris", days: 3 });
  await weather.forecast({ city: "Oslo", class_: "x", temp_c: null, unit: "f", days: undefined });
  await tools.weather.forecast({ city: "Rome", "temp-c": 1.5, where: { lat: 1, lon: 2 } });
  await weather.list();
  await tools.json_.do_it({ a: 1, b: "x" });
  for (const bad of [() => weather.forecast({ days: 1 }), () => weather.forecast({ city: "x", nope: 1 }),
                     () => weather.forecast("Paris"), () => weather.list({ x: 1 })]) {
    const p = bad();
    if (!(p instanceof Promise)) throw new Error("a stub did not return a Promise");
    await p.then(() => errors.push("resolved"), (e) => errors.push(e.constructor.name + ": " + e.message));
  }
  console.log(JSON.stringify({ calls, r, errors, name: weather.forecast.name, frozen: Object.isFrozen(tools.weather) }));
})().catch((e) => { console.error(e); process.exit(1); });
`
	var got struct {
		apiStubRun
		Name   string `json:"name"`
		Frozen bool   `json:"frozen"`
	}
	apiJSON(t, apiRun(t, "node", script), &got)
	apiCheckWeatherCalls(t, got.Calls, got.R)
	wantErrors := []string{
		"TypeError: weather.forecast: missing required argument city",
		`TypeError: weather.forecast: unknown argument "nope"; it takes city, class_, days, temp_c, unit, where`,
		"TypeError: weather.forecast takes one object of named arguments: weather.forecast({city, class_, days, temp_c, unit, where})",
		`TypeError: weather.list: unknown argument "x"; it takes no arguments`,
	}
	if !reflect.DeepEqual(got.Errors, wantErrors) {
		t.Errorf("errors:\n got %q\nwant %q", got.Errors, wantErrors)
	}
	if got.Name != "weather.forecast" || !got.Frozen {
		t.Errorf("name %q, frozen %v", got.Name, got.Frozen)
	}
}

// TestJavaScriptGolden keeps the stubs of each golden API, each of which runs when node
// is installed.
func TestJavaScriptGolden(t *testing.T) {
	eachGoldenAPI(t, "js", (*API).JavaScript, func(t *testing.T, _ *API, js string) {
		apiRun(t, "node", apiNodePrelude+js)
	})
}
