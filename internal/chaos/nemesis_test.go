package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFaultsOnOneTargetTakeTurns: a fault whose turn comes while the one
// before on the same target is still on (a database slow to come back
// from a crash, say) waits for it to be undone, rather than cut it short
// or be cut short by it; faults on other targets do not wait. The windows
// recorded, which the verdict traces duplicates to, are the faults' own.
func TestFaultsOnOneTargetTakeTurns(t *testing.T) {
	t.Parallel()
	r := setupReceiver(t, ReceiverOptions{})
	x := &executor{rcv: r, log: t.Logf}
	sched := []Nemesis{
		{Kind: "receiver:" + string(FaultHang), Target: "a", At: 0, For: 300 * time.Millisecond},
		{Kind: "receiver:" + string(Fault500), Target: "a", At: 50 * time.Millisecond, For: 50 * time.Millisecond},
		{Kind: "receiver:" + string(Fault500), Target: "b", At: 50 * time.Millisecond, For: 50 * time.Millisecond},
	}
	x.run(t.Context(), time.Now(), sched)
	windows := x.done()
	require.Len(t, windows, 3)
	byTarget := map[string][]Window{}
	for _, w := range windows {
		require.Empty(t, w.Err)
		byTarget[w.Target] = append(byTarget[w.Target], w)
	}
	a := byTarget["a"]
	require.Len(t, a, 2)
	require.Equal(t, string(FaultHang), a[0].Kind[len("receiver:"):], "the first fault on a")
	require.False(t, a[1].Start.Before(a[0].End), "the second fault on a began once the first was undone")
	require.Less(t, byTarget["b"][0].Start.Sub(a[0].Start), 250*time.Millisecond, "b did not wait for a")
}
