package api

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1500 * time.Millisecond, "1.5s"},
		{30 * time.Second, "30s"},
		{5 * time.Minute, "5m"},
		{90 * time.Minute, "1h30m"},
		{2 * time.Hour, "2h"},
		{time.Hour + time.Second, "1h0m1s"},
		{24 * time.Hour, "24h"},
	} {
		got := formatDuration(tc.d)
		require.Equal(t, tc.want, got)
		back, err := time.ParseDuration(got)
		require.NoError(t, err)
		require.Equal(t, tc.d, back)
	}
}

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
