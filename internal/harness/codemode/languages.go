package codemode

import (
	_ "embed"
	"fmt"
	"strings"
)

// The bootstraps run in the sandbox around the model's script: they set up the bridge
// on their stdin and stdout, load the stubs and run the script (see each file's head).
var (
	//go:embed bootstrap/python.py
	pythonBootstrap string
	//go:embed bootstrap/node.mjs
	nodeBootstrap string
)

// Languages a script may be written in.
const (
	Python     = "python"
	JavaScript = "javascript"
	TypeScript = "typescript"
)

// Languages lists them in the order the tool's description names them.
var Languages = []string{Python, JavaScript, TypeScript}

// language resolves what the model wrote (names and common short forms).
func language(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "python", "py", "python3":
		return Python, nil
	case "javascript", "js", "node", "mjs":
		return JavaScript, nil
	case "typescript", "ts", "mts":
		return TypeScript, nil
	}
	return "", fmt.Errorf("language %q is not one Code Mode runs: use %s", s, strings.Join(Languages, ", "))
}

// MissingInterpreter is the exit status of a script whose interpreter the environment
// lacks (the shell's "command not found").
const MissingInterpreter = 127

// The shell lines that start an interpreter, or say clearly that the environment has
// none ($0 is the bootstrap). They run with /bin/sh -c, which every environment has.
const (
	pythonLine = `if command -v python3 >/dev/null 2>&1; then exec python3 -u -c "$0"; fi
echo "trueforge Code Mode: this sandbox's environment has no python3, so Python scripts cannot run here. Write the script in JavaScript if the environment has node, or install Python in the environment's build_script." >&2
exit 127`
	javascriptLine = `if command -v node >/dev/null 2>&1; then exec node --input-type=module -e "$0" javascript; fi
echo "trueforge Code Mode: this sandbox's environment has no node, so JavaScript scripts cannot run here. Write the script in Python if the environment has python3, or install Node.js in the environment's build_script." >&2
exit 127`
	// Node.js strips TypeScript's types itself from 22.6 (behind a flag until 23.6).
	typescriptLine = `if ! command -v node >/dev/null 2>&1; then
echo "trueforge Code Mode: this sandbox's environment has no node, so TypeScript scripts cannot run here (they need Node.js 22.6 or newer). Write the script in Python if the environment has python3, or install Node.js in the environment's build_script." >&2
exit 127
fi
v=$(node -p 'process.versions.node'); major=${v%%.*}; rest=${v#*.}; minor=${rest%%.*}
if [ "$major" -gt 22 ] || { [ "$major" -eq 22 ] && [ "$minor" -ge 6 ]; }; then exec node --experimental-strip-types --no-warnings --input-type=module -e "$0" typescript; fi
echo "trueforge Code Mode: TypeScript needs Node.js 22.6 or newer (it strips the types itself); this sandbox's environment has Node.js $v. Write the script in JavaScript (the same API, without type annotations), or install a newer Node.js in the environment's build_script." >&2
exit 127`
)

// command is the argv that runs a script of lang in the sandbox.
func command(lang string) []string {
	switch lang {
	case Python:
		return []string{"/bin/sh", "-c", pythonLine, pythonBootstrap}
	case TypeScript:
		return []string{"/bin/sh", "-c", typescriptLine, nodeBootstrap}
	default:
		return []string{"/bin/sh", "-c", javascriptLine, nodeBootstrap}
	}
}
