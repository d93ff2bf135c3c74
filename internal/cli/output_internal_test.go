package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCellKeepsTheTerminalsOwn: what a consumer or a receiver wrote (a
// description, a last error, an answer's body) cannot drive the
// operator's terminal from a table or a get view: escapes, C1 controls and
// bidirectional overrides are shown escaped, line breaks and tabs as
// spaces, and other text as it is.
func TestCellKeepsTheTerminalsOwn(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                     "-",
		"orders":               "orders",
		"naïve café ✓":         "naïve café ✓",
		"a\tb\nc\rd":           "a b c d",
		"\x1b[31mred\x1b[0m":   `\x1b[31mred\x1b[0m`,
		"\x1b]0;owned\x07":     `\x1b]0;owned\x07`,
		"csi\u009b31m":         `csi\x9b31m`,
		"nul\x00del\x7f":       `nul\x00del\x7f`,
		"abc\u202edcba":        `abc\u202edcba`,
		"isolate\u2066x\u2069": `isolate\u2066x\u2069`,
		"line\u2028sep\u2029":  `line\u2028sep\u2029`,
	} {
		require.Equal(t, want, cell(in), "%q", in)
	}

	var out bytes.Buffer
	b := newBlock(&out)
	b.line("description", "\x1b[2J\x1b[Hcleared")
	require.NoError(t, b.flush())
	require.Equal(t, "description: \\x1b[2J\\x1b[Hcleared\n", out.String())
	require.NotContains(t, out.String(), "\x1b")
}
