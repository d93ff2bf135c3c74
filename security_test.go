package herald_test

import (
	"bytes"
	"os"
	"testing"
)

// TestSecurityModel holds SECURITY.md to the code: every test it names
// exists (as TestArchitecture holds ARCHITECTURE.md), and it has a
// section for each actor of the threat model, each naming at least one
// test.
func TestSecurityModel(t *testing.T) {
	doc, err := os.ReadFile("SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("CitedTests", func(t *testing.T) { checkCitedTests(t, "SECURITY.md", doc) })
	t.Run("EveryActor", func(t *testing.T) {
		body := map[string][]byte{}
		for _, sec := range bytes.Split(doc, []byte("\n## "))[1:] {
			title, text, _ := bytes.Cut(sec, []byte("\n"))
			body[string(title)] = text
		}
		for _, actor := range []string{"Anonymous client", "Receiver", "Portal visitor", "Consumer key",
			"Operator key", "Database reader", "Someone with the host's files"} {
			b, ok := body[actor]
			if !ok {
				t.Errorf("SECURITY.md has no section ## %s", actor)
				continue
			}
			if !citedGoTest.Match(b) && !citedCase.Match(b) {
				t.Errorf("SECURITY.md's section %s names no test", actor)
			}
		}
	})
}
