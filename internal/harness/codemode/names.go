// Identifiers for generated code: names rebuilt from ASCII, scopes that keep them
// unique, and each language's reserved words.

package codemode

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// identifier makes name an ASCII identifier that is safe in Python and JavaScript:
// other characters become '_', a leading digit gets a '_' before it, leading
// underscores shrink to one (a "__x" name would be mangled in a Python class body and
// "__proto__" is special in JavaScript), and a reserved word gets a trailing '_'.
func identifier(name string, reserved map[string]bool) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= maxIdent {
			break
		}
		switch {
		case r == '_' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	if strings.HasPrefix(s, "__") {
		s = "_" + strings.TrimLeft(s, "_")
	}
	if reserved[s] {
		s += "_"
	}
	return s
}

// pascal turns an identifier into a part of a type name: "temp_c" is "TempC".
func pascal(ident string) string {
	var b strings.Builder
	for _, part := range strings.Split(ident, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]))
			b.WriteString(part[1:])
		}
	}
	return b.String()
}

func typeName(s string) string {
	if len(s) > maxTypeName {
		s = s[:maxTypeName]
	}
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "T" + s
	}
	return s
}

// scope hands out distinct names: a name already taken gets a numeric suffix.
type scope map[string]bool

func newScope(reserved map[string]bool) scope {
	s := scope{}
	for k := range reserved {
		s[k] = true
	}
	return s
}

func (s scope) claim(name string) string {
	n := name
	for i := 2; s[n]; i++ {
		if strings.HasSuffix(name, "_") {
			n = name + strconv.Itoa(i)
		} else {
			n = name + "_" + strconv.Itoa(i)
		}
	}
	s[n] = true
	return n
}

// claimAll gives each of names an identifier in s, those that are identifiers already
// first, so that "a_b" keeps its name and "a-b" becomes "a_b_2" whatever their order.
func (s scope) claimAll(names []string, reserved map[string]bool) []string {
	out := make([]string, len(names))
	for _, exact := range []bool{true, false} {
		for i, n := range names {
			if id := identifier(n, reserved); (id == n) == exact {
				out[i] = s.claim(id)
			}
		}
	}
	return out
}

func words(lists ...string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, w := range strings.Fields(l) {
			m[w] = true
		}
	}
	return m
}

const (
	pythonKeywords = `False None True and as assert async await break class continue def del elif else
		except finally for from global if import in is lambda nonlocal not or pass raise return try
		while with yield`
	pythonBuiltins = `ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup
		BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError
		ConnectionError ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis
		EncodingWarning EnvironmentError Exception ExceptionGroup FileExistsError FileNotFoundError
		FloatingPointError FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError
		IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError
		ModuleNotFoundError NameError NotADirectoryError NotImplemented NotImplementedError OSError
		OverflowError PendingDeprecationWarning PermissionError ProcessLookupError RecursionError
		ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration StopIteration
		SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError TypeError UnboundLocalError
		UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning
		UserWarning ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool breakpoint
		bytearray bytes callable chr classmethod compile complex copyright credits delattr dict dir divmod
		enumerate eval exec exit filter float format frozenset getattr globals hasattr hash help hex id
		input int isinstance issubclass iter len license list locals map max memoryview min next object
		oct open ord pow print property quit range repr reversed round set setattr slice sorted
		staticmethod str sum super tuple type vars zip`
	// Modules a bootstrap or a script is likely to import at the top level, where a
	// namespace of the same name would replace them.
	pythonModules = `json sys os io re time math asyncio subprocess socket select struct base64
		threading types typing builtins random datetime collections functools itertools pathlib signal
		traceback inspect`
	typingNames = `Any Literal Optional TypedDict Union`
	jsReserved  = `break case catch class const continue debugger default delete do else enum export
		extends false finally for function if import in instanceof new null return super switch this
		throw true try typeof var void while with yield let static implements interface package private
		protected public await arguments eval undefined NaN Infinity`
	// Type keywords that cannot name a TypeScript namespace, and contextual keywords.
	tsKeywords = `any unknown never object string number boolean symbol bigint keyof infer readonly
		unique is asserts as satisfies abstract declare namespace module global type require of get set
		from async constructor`
	jsGlobals = `globalThis window self global document navigator location history name status top
		parent frames event screen crypto performance origin length closed opener external
		localStorage sessionStorage indexedDB caches alert confirm prompt open close stop focus blur
		postMessage fetch Request Response Headers URL URLSearchParams Blob File FormData TextEncoder
		TextDecoder AbortController AbortSignal Event EventTarget WebSocket Worker setTimeout
		clearTimeout setInterval clearInterval setImmediate clearImmediate queueMicrotask
		structuredClone atob btoa console process require module exports Buffer __dirname __filename
		Deno Bun Object Function Array Number String Boolean Symbol BigInt Math JSON Date RegExp Error
		TypeError RangeError SyntaxError Promise Proxy Reflect Map Set WeakMap WeakSet WeakRef
		ArrayBuffer SharedArrayBuffer DataView Atomics Intl isNaN isFinite parseInt parseFloat
		encodeURI decodeURI encodeURIComponent decodeURIComponent escape unescape Uint8Array`
)

var (
	// A namespace is a Python module global, a JavaScript global and a TypeScript
	// namespace at once, so it avoids the names of all three, and "tools".
	moduleReserved = words(pythonKeywords, pythonBuiltins, pythonModules, typingNames, jsReserved,
		tsKeywords, jsGlobals, "tools")
	// A function is an attribute in Python and a function declaration in TypeScript.
	memberReserved = words(pythonKeywords, jsReserved)
	// A parameter is a Python keyword argument and a key of a TypeScript object type.
	paramReserved = words(pythonKeywords)
	// Types in a TypeScript namespace must not hide the global types the declarations use.
	typeReserved = words("Promise")
)
