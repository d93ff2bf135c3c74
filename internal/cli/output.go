package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// Human output: tables for lists, "key: value" blocks for single objects,
// times in the local zone. Scripts use --json (the API's answer, indented)
// or -q (ids only) instead.

const (
	// tableTime is how a table shows a time: short, local, to the second.
	tableTime = "2006-01-02 15:04:05"
	// blockTime is how a key: value block shows a time: RFC 3339, local.
	blockTime = time.RFC3339
	// none stands for an absent value.
	none = "-"
)

// printRaw prints a JSON answer as the server sent it, indented.
func printRaw(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("indent the answer: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// printJSONValue prints v as indented JSON.
func printJSONValue(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	return printRaw(w, b)
}

// tableWriter writes aligned columns.
type tableWriter struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *tableWriter {
	return &tableWriter{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

// row writes one row; empty cells show as "-", and tabs or newlines inside
// a cell become spaces so the columns stay aligned.
func (t *tableWriter) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *tableWriter) flush() error { return t.tw.Flush() }

// cell makes a value fit one table cell or block line, and safe to print
// to a terminal: tabs and line breaks become spaces, so the columns stay
// aligned, and every other control character (an escape sequence's ESC,
// the C1 controls some terminals obey, bidirectional overrides) is shown
// escaped (\x1b, \u202e), so that text from a consumer or a receiver (a
// description, a last error) cannot drive the operator's terminal.
func cell(s string) string {
	if s == "" {
		return none
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x100 && unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// block writes "key: value" lines with the values aligned.
type block struct{ tw *tabwriter.Writer }

func newBlock(w io.Writer) *block {
	return &block{tw: tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)}
}

func (b *block) line(key, value string) { fmt.Fprintf(b.tw, "%s:\t%s\n", key, cell(value)) }

func (b *block) flush() error { return b.tw.Flush() }

func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(tableTime)
}

func shortTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return shortTime(*t)
}

func longTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(blockTime)
}

func longTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return longTime(*t)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// truncate shortens s to n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// plural writes "1 delivery" or "3 deliveries".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
