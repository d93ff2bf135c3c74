package api

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

func TestResponseText(t *testing.T) {
	t.Parallel()
	t.Run("Short", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "ok", responseText([]byte("ok")))
		require.Equal(t, "", responseText(nil))
	})
	t.Run("InvalidUTF8Replaced", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "a\uFFFDb", responseText([]byte("a\xffb")))
	})
	t.Run("CutAtCharacterBoundary", func(t *testing.T) {
		t.Parallel()
		// 4095 bytes then a 2-byte character: cutting at 4096 would split it.
		in := strings.Repeat("a", herald.MaxResponseBodyKeep-1) + "é" + "tail"
		got := responseText([]byte(in))
		require.True(t, utf8.ValidString(got))
		require.Equal(t, strings.Repeat("a", herald.MaxResponseBodyKeep-1), got)
	})
	t.Run("GrowthFromReplacementIsCut", func(t *testing.T) {
		t.Parallel()
		got := responseText([]byte(strings.Repeat("\xff", herald.MaxResponseBodyKeep)))
		require.LessOrEqual(t, len(got), herald.MaxResponseBodyKeep)
		require.True(t, utf8.ValidString(got))
	})
}

func TestCursor(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", encodeCursor(""))
	c := encodeCursor("ep_01hx")
	q := map[string][]string{"cursor": {c}}
	_, got, err := pageParams(q)
	require.NoError(t, err)
	require.Equal(t, "ep_01hx", got)
}
