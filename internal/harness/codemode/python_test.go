package codemode

import (
	"reflect"
	"strings"
	"testing"
)

// apiPythonPrelude installs a fake __trueforge_call__ that records each call.
const apiPythonPrelude = `import builtins, json
_calls = []
def _fake_call(name, args):
    _calls.append([name, args])
    return {"called": name}
builtins.__trueforge_call__ = _fake_call
`

func TestAPIPythonStubsSendTheToolNameAndArguments(t *testing.T) {
	api := NewAPI(apiWeather(t))
	script := apiPythonPrelude + api.Python() + `
import inspect
errors = []
r = weather.forecast(city="Paris", days=3)
weather.forecast(city="Oslo", class_="x", temp_c=None, unit="f")
tools.weather.forecast(city="Rome", temp_c=1.5, where={"lat": 1, "lon": 2})
weather.list()
tools.json_.do_it(a=1, b="x")
for call in (lambda: weather.forecast(days=1), lambda: weather.forecast(city="x", nope=1),
             lambda: weather.forecast("positional"), lambda: weather.list(x=1)):
    try:
        call()
    except TypeError:
        errors.append("TypeError")
print(json.dumps({"calls": _calls, "r": r, "errors": errors,
    "qualname": weather.forecast.__qualname__, "doc": inspect.getdoc(weather.forecast),
    "hints": {k: str(v) for k, v in weather.forecast.__annotations__.items()}}))
`
	var got struct {
		apiStubRun
		Qualname string            `json:"qualname"`
		Doc      string            `json:"doc"`
		Hints    map[string]string `json:"hints"`
	}
	apiJSON(t, apiRun(t, "python3", script), &got)
	apiCheckWeatherCalls(t, got.Calls, got.R)
	if len(got.Errors) != 4 {
		t.Errorf("a missing, unknown or positional argument raised TypeError %d times of 4", len(got.Errors))
	}
	if got.Qualname != "weather.forecast" {
		t.Errorf("__qualname__ %q", got.Qualname)
	}
	for _, s := range []string{"Get a forecast for a city.\nUp to 10 days.", `class_ (sent as "class")`, "city: City name"} {
		if !strings.Contains(got.Doc, s) {
			t.Errorf("the docstring lacks %q:\n%s", s, got.Doc)
		}
	}
	wantHints := map[string]string{
		"city": "<class 'str'>", "days": "typing.Optional[int]", "unit": "typing.Optional[typing.Literal['c', 'f']]",
		"class_": "typing.Optional[str]", "temp_c": "typing.Optional[float]",
		"where": "typing.Optional[__main__.WeatherForecastWhere]", "return": "<class '__main__.WeatherForecastResult'>",
	}
	if !reflect.DeepEqual(got.Hints, wantHints) {
		t.Errorf("type hints:\n got %v\nwant %v", got.Hints, wantHints)
	}
}

// TestPythonGolden keeps the stubs of each golden API, each of which runs as a module
// when python3 is installed.
func TestPythonGolden(t *testing.T) {
	eachGoldenAPI(t, "py", (*API).Python, func(t *testing.T, _ *API, py string) {
		apiRun(t, "python3", apiPythonPrelude+py)
	})
}
