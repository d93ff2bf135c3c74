package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/notice"
)

// TestNoticesCountedByKindAndResult: every kind and result is there from
// the start, at zero, and each notice adds one to its own.
func TestNoticesCountedByKindAndResult(t *testing.T) {
	t.Parallel()
	m, _, _, _ := setup(t, Options{})
	r := m.Registry()
	for _, k := range notice.Kinds {
		for _, res := range notice.Results {
			require.Zero(t, must(t, r, NameNoticesSent, "kind", k, "result", res), k+" "+res)
		}
	}
	for _, res := range notice.ConfirmationResults {
		require.Zero(t, must(t, r, NameNoticesSent, "kind", notice.KindConfirmation, "result", res), res)
	}
	m.NoticeCounted(notice.KindDead, notice.ResultSent)
	m.NoticeCounted(notice.KindDead, notice.ResultSent)
	m.NoticeCounted(notice.KindFailing, notice.ResultDropped)
	require.Equal(t, 2.0, must(t, r, NameNoticesSent, "kind", notice.KindDead, "result", notice.ResultSent))
	require.Equal(t, 1.0, must(t, r, NameNoticesSent, "kind", notice.KindFailing, "result", notice.ResultDropped))
	require.Zero(t, must(t, r, NameNoticesSent, "kind", notice.KindDisabled, "result", notice.ResultSent))
}
