// Package check runs agent checks: a scripted conversation (the scripted model's turns,
// step by step) played against an agent in a fresh session and a fresh sandbox of its
// environment, with expectations on what each step did: the exit codes of its exec
// calls, patterns its tool output must (or must not) match, the files it offered and
// whether it stayed out of the sandbox. `trueforge-harness check` and the provider's
// trueforge_agent_check action both run checks through this package.
//
// Check file format (JSON):
//
//	{
//	  "name": "python agent still works",
//	  "timeout_seconds": 300,
//	  "steps": [
//	    {
//	      "name": "answers without a sandbox",
//	      "message": "What is 2 + 2?",
//	      "turns": [{"text": "Four."}],
//	      "expect": {"no_sandbox": true}
//	    },
//	    {
//	      "name": "python3 runs",
//	      "message": "Which Python is there?",
//	      "turns": [
//	        {"tool_calls": [{"name": "exec", "arguments": {"command": "python3 -V"}}]},
//	        {"text": "Python 3."}
//	      ],
//	      "expect": {"exit_codes": [0], "output_matches": ["Python 3\\."]}
//	    }
//	  ]
//	}
//
// A step's turns are the scripted model's turns for that message: every turn but the
// last calls tools, and the last one answers (no tool_calls), which ends the message.
package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/scripted"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
)

// Limits of a check (README, "Agent checks").
const (
	DefaultTimeout = 5 * time.Minute  // a whole check, when timeout_seconds is unset
	MaxTimeout     = 30 * time.Minute // the largest timeout_seconds
	MaxFileBytes   = 1 << 20          // a check file
	MaxSteps       = 100
	MaxTurns       = 50 // turns of one step
	// OutputCap bounds the output a step result keeps (and a JUnit report shows): the
	// tail of the step's tool output.
	OutputCap = 4 << 10
)

// File is a parsed check file.
type File struct {
	Name           string `json:"name,omitempty"`
	TimeoutSeconds int64  `json:"timeout_seconds,omitempty"`
	Steps          []Step `json:"steps"`
}

// Step is one user message, the model's scripted turns answering it, and what must hold
// after it.
type Step struct {
	Name    string          `json:"name,omitempty"`
	Message string          `json:"message"`
	Turns   []scripted.Turn `json:"turns"`
	Expect  Expect          `json:"expect"`
}

// Expect is what must hold after a step. Every field set is checked.
type Expect struct {
	// ExitCodes are the exit codes of the step's exec calls, one per call in order;
	// [] means the step runs no exec call.
	ExitCodes []int `json:"exit_codes,omitempty"`
	// OutputMatches are regular expressions (Go syntax) that the step's tool output (each
	// result as the model saw it: "exit_code: N", stdout, stderr) must each match.
	OutputMatches []string `json:"output_matches,omitempty"`
	// OutputNotMatches must each not match it.
	OutputNotMatches []string `json:"output_not_matches,omitempty"`
	// FilesOffered are workspace paths the step must offer for download (offer_artifact).
	FilesOffered []string `json:"files_offered,omitempty"`
	// NoSandbox: the step must not use a sandbox (a Q&A turn): no sandbox tool call, and
	// no sandbox for the session if no earlier step made one.
	NoSandbox bool `json:"no_sandbox,omitempty"`

	matches, notMatches []*regexp.Regexp
}

func (e Expect) empty() bool {
	return e.ExitCodes == nil && len(e.OutputMatches) == 0 && len(e.OutputNotMatches) == 0 && len(e.FilesOffered) == 0 && !e.NoSandbox
}

const formatHint = `a check file is JSON: {"name": ..., "timeout_seconds": ..., "steps": [{"name": ..., "message": ..., ` +
	`"turns": [{"text": ..., "tool_calls": [{"name": "exec", "arguments": {"command": ...}}]}], ` +
	`"expect": {"exit_codes": [...], "output_matches": [...], "output_not_matches": [...], "files_offered": [...], "no_sandbox": true}}]}`

// Parse reads and validates a check file; an error names the field and the fix.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("the check file is %d bytes, more than %d; split it into several checks", len(data), MaxFileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the check file is empty; " + formatHint)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("the check file is not valid JSON at line %d: %v", lineOf(data, se.Offset), err)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, errors.New("the check file is not valid JSON: it ends before its object does (a missing ] or })")
		case errors.As(err, &te):
			return nil, fmt.Errorf("%s (line %d): is %s, want %s; %s", te.Field, lineOf(data, te.Offset), te.Value, te.Type, formatHint)
		}
		return nil, fmt.Errorf("%v; %s", strings.TrimPrefix(err.Error(), "json: "), formatHint)
	}
	if dec.More() {
		return nil, errors.New("the check file holds more than one JSON value; give one object")
	}
	return &f, f.validate()
}

func lineOf(data []byte, offset int64) int {
	return bytes.Count(data[:min(int(offset), len(data))], []byte("\n")) + 1
}

func (f *File) validate() error {
	switch {
	case f.TimeoutSeconds < 0 || time.Duration(f.TimeoutSeconds)*time.Second > MaxTimeout:
		return fmt.Errorf("timeout_seconds: %d is outside 1..%d; leave it out for %d", f.TimeoutSeconds, int(MaxTimeout.Seconds()), int(DefaultTimeout.Seconds()))
	case len(f.Steps) == 0:
		return errors.New(`steps: the check has no steps; add one, for example {"message": "hi", "turns": [{"text": "hello"}], "expect": {"no_sandbox": true}}`)
	case len(f.Steps) > MaxSteps:
		return fmt.Errorf("steps: %d steps, more than %d; split the check", len(f.Steps), MaxSteps)
	}
	names := map[string]int{}
	for i := range f.Steps {
		s := &f.Steps[i]
		at := fmt.Sprintf("steps[%d]", i)
		if s.Name == "" {
			s.Name = fmt.Sprintf("step %d", i+1)
		}
		if j, ok := names[s.Name]; ok {
			return fmt.Errorf("%s.name: %q is also steps[%d]'s name; give each step its own name (reports name the step)", at, s.Name, j)
		}
		names[s.Name] = i
		if strings.TrimSpace(s.Message) == "" {
			return fmt.Errorf("%s.message: empty; give the user message the step sends", at)
		}
		if len(s.Turns) == 0 {
			return fmt.Errorf(`%s.turns: empty; give the model's turns, ending with an answer such as {"text": "done"}`, at)
		}
		if len(s.Turns) > MaxTurns {
			return fmt.Errorf("%s.turns: %d turns, more than %d; split the step", at, len(s.Turns), MaxTurns)
		}
		for j, t := range s.Turns {
			last := j == len(s.Turns)-1
			switch {
			case last && len(t.ToolCalls) > 0:
				return fmt.Errorf(`%s.turns[%d]: the last turn of a step calls tools, so the message would not end; add a final answer turn such as {"text": "done"}`, at, j)
			case !last && len(t.ToolCalls) == 0:
				return fmt.Errorf("%s.turns[%d]: a turn without tool_calls ends the message, but more turns follow; move them to the next step or give this turn tool_calls", at, j)
			}
			for k, tc := range t.ToolCalls {
				if tc.Name == "" {
					return fmt.Errorf("%s.turns[%d].tool_calls[%d].name: empty; name a tool such as %s", at, j, k, tools.NameExec)
				}
				if len(tc.Arguments) > 0 && !json.Valid(tc.Arguments) {
					return fmt.Errorf("%s.turns[%d].tool_calls[%d].arguments: not a JSON object", at, j, k)
				}
			}
		}
		if err := s.Expect.compile(at + ".expect"); err != nil {
			return err
		}
	}
	return nil
}

func (e *Expect) compile(at string) error {
	if e.empty() {
		return fmt.Errorf("%s: no expectation; set at least one of exit_codes, output_matches, output_not_matches, files_offered, no_sandbox", at)
	}
	if e.NoSandbox && (len(e.ExitCodes) > 0 || len(e.FilesOffered) > 0) {
		return fmt.Errorf("%s.no_sandbox: a step without a sandbox can run no exec call and offer no file; drop no_sandbox or exit_codes/files_offered", at)
	}
	for i, p := range e.OutputMatches {
		re, err := regexp.Compile(p)
		if err != nil {
			return fmt.Errorf("%s.output_matches[%d]: %q is not a regular expression (Go syntax; escape a backslash as \\\\ in JSON): %v", at, i, p, err)
		}
		e.matches = append(e.matches, re)
	}
	for i, p := range e.OutputNotMatches {
		re, err := regexp.Compile(p)
		if err != nil {
			return fmt.Errorf("%s.output_not_matches[%d]: %q is not a regular expression (Go syntax; escape a backslash as \\\\ in JSON): %v", at, i, p, err)
		}
		e.notMatches = append(e.notMatches, re)
	}
	for i, p := range e.FilesOffered {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("%s.files_offered[%d]: empty; give a path relative to /workspace", at, i)
		}
	}
	return nil
}

// timeout is the check's whole time limit.
func (f *File) timeout() time.Duration {
	if f.TimeoutSeconds > 0 {
		return time.Duration(f.TimeoutSeconds) * time.Second
	}
	return DefaultTimeout
}

// script is the scripted model's replay of every step's turns, in order.
func (f *File) script() *scripted.Script {
	s := &scripted.Script{Replay: "agent check " + f.Name}
	for _, st := range f.Steps {
		s.Turns = append(s.Turns, st.Turns...)
	}
	return s
}
