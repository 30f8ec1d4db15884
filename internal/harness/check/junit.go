package check

import (
	"encoding/xml"
	"fmt"
	"io"
)

// JUnit XML, as CI systems read it: one test suite per check, one test case per step,
// a failure per failed step naming the step and its expectations.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes r as JUnit XML.
func WriteJUnit(w io.Writer, r Result) error {
	name := r.Check
	if name == "" {
		name = "agent check"
	}
	suite := junitSuite{Name: fmt.Sprintf("%s (agent %s)", name, r.Agent), Tests: len(r.Steps), Time: seconds(r.Duration.Seconds())}
	for _, s := range r.Steps {
		c := junitCase{Name: s.Name, ClassName: "trueforge.check." + r.Agent, Time: seconds(s.Duration.Seconds()), SystemOut: s.Output}
		switch {
		case s.Skipped:
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: "not run: an earlier step's message did not complete"}
		case len(s.Failures) > 0:
			suite.Failures++
			f := s.Failures[0]
			c.Failure = &junitFailure{Message: fmt.Sprintf("step %q: %s: %s", s.Name, f.Expectation, f.Message), Type: f.Expectation}
			for _, f := range s.Failures {
				c.Failure.Text += fmt.Sprintf("%s: %s\n", f.Expectation, f.Message)
			}
		}
		suite.Cases = append(suite.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }
