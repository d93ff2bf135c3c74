package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/clock"
	"github.com/heraldhooks/herald/internal/schema"
	"github.com/heraldhooks/herald/internal/store"
	"github.com/heraldhooks/herald/internal/store/sqlitestore"
	"github.com/heraldhooks/herald/internal/store/sqlitestore/sqlitetest"
)

// countingStore counts the reads the cache makes, and fails them on
// demand.
type countingStore struct {
	store.EventTypeStore
	generations, lists atomic.Int64
	fail               atomic.Bool
}

func (s *countingStore) EventTypeGeneration(ctx context.Context) (int64, error) {
	s.generations.Add(1)
	if s.fail.Load() {
		return 0, errors.New("database away")
	}
	return s.EventTypeStore.EventTypeGeneration(ctx)
}

func (s *countingStore) EventTypeList(ctx context.Context, p *store.EventTypeListParams) (*store.Page[*herald.EventTypeEntry], error) {
	s.lists.Add(1)
	return s.EventTypeStore.EventTypeList(ctx, p)
}

type cacheEnv struct {
	st    store.Store
	cs    *countingStore
	clock *clock.Test
	cache *schema.Cache
}

func setupCache(t *testing.T) *cacheEnv {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	cs := &countingStore{EventTypeStore: st}
	clk := clock.NewTest(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &cacheEnv{st: st, cs: cs, clock: clk,
		cache: schema.NewCache(schema.CacheConfig{Store: cs, Clock: clk, Refresh: time.Second})}
}

func (e *cacheEnv) put(t *testing.T, name, schema string) {
	t.Helper()
	entry := &herald.EventTypeEntry{Name: name}
	if schema != "" {
		entry.Schema = json.RawMessage(schema)
	}
	if _, err := e.st.EventTypeGet(t.Context(), name); err == nil {
		_, err := e.st.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{Entry: entry, Now: e.clock.Now()})
		require.NoError(t, err)
		return
	}
	_, err := e.st.EventTypeCreate(t.Context(), &store.EventTypeCreateParams{Entry: entry, Now: e.clock.Now()})
	require.NoError(t, err)
}

func (e *cacheEnv) check(t *testing.T, typ, payload string) error {
	t.Helper()
	err := e.cache.Check(t.Context(), typ, []byte(payload))
	if err != nil {
		var me *schema.MismatchError
		require.ErrorAs(t, err, &me)
	}
	return err
}

func TestCache(t *testing.T) {
	t.Parallel()

	t.Run("UnknownTypesPass", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		require.NoError(t, e.check(t, "order.created", `"anything"`))
		e.put(t, "order.paid", "")
		e.cache.Invalidate()
		require.NoError(t, e.check(t, "order.paid", `1`), "an entry without a schema checks nothing")
	})

	t.Run("MismatchNamesTypeAndPointer", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		e.put(t, "order.created", orderSchema)
		err := e.check(t, "order.created", `{"order_id":1,"items":[]}`)
		require.Error(t, err)
		require.Regexp(t, `^payload does not match event type order.created: at /order_id: .*want string`, err.Error())
		require.NoError(t, e.check(t, "order.created", `{"order_id":"o","items":[]}`))
	})

	t.Run("ReadsTheGenerationOncePerRefresh", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		e.put(t, "order.created", orderSchema)
		for range 100 {
			require.NoError(t, e.check(t, "other", `1`))
		}
		require.EqualValues(t, 1, e.cs.generations.Load())
		require.EqualValues(t, 1, e.cs.lists.Load())
		e.clock.Advance(time.Second)
		for range 100 {
			require.NoError(t, e.check(t, "other", `1`))
		}
		require.EqualValues(t, 2, e.cs.generations.Load())
		require.EqualValues(t, 1, e.cs.lists.Load(), "the generation did not move: nothing is reloaded")
	})

	t.Run("ChangeElsewhereIsSeenWithinRefresh", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		require.NoError(t, e.check(t, "order.created", `{}`))
		// Written without a word to this cache, as another node would.
		e.put(t, "order.created", orderSchema)
		e.clock.Advance(999 * time.Millisecond)
		require.NoError(t, e.check(t, "order.created", `{}`), "within the refresh the old catalog holds")
		e.clock.Advance(time.Millisecond)
		require.Error(t, e.check(t, "order.created", `{}`), "past the refresh the new schema holds")

		e.put(t, "order.created", `{"type":"object"}`)
		e.clock.Advance(time.Second)
		require.NoError(t, e.check(t, "order.created", `{}`), "an updated schema replaces the old")

		require.NoError(t, e.st.EventTypeDelete(t.Context(), &store.EventTypeDeleteParams{Name: "order.created"}))
		e.clock.Advance(time.Second)
		require.NoError(t, e.check(t, "order.created", `1`), "a deleted type is accepted unchecked")
	})

	t.Run("InvalidateLooksAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		require.NoError(t, e.check(t, "order.created", `{}`))
		e.put(t, "order.created", orderSchema)
		e.cache.Invalidate()
		require.Error(t, e.check(t, "order.created", `{}`))
	})

	t.Run("FailedReadKeepsTheCopyHeld", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		e.put(t, "order.created", orderSchema)
		require.Error(t, e.check(t, "order.created", `{}`))
		e.cs.fail.Store(true)
		e.clock.Advance(time.Second)
		require.Error(t, e.check(t, "order.created", `{}`), "the schema held is still enforced")
		n := e.cs.generations.Load()
		require.Error(t, e.check(t, "order.created", `{}`))
		require.Greater(t, e.cs.generations.Load(), n, "a failed look is tried again at the next check")
		e.cs.fail.Store(false)
		require.Error(t, e.check(t, "order.created", `{}`))
	})

	t.Run("NothingLoadedAndNoDatabaseIsAnError", func(t *testing.T) {
		t.Parallel()
		e := setupCache(t)
		e.cs.fail.Store(true)
		err := e.cache.Check(t.Context(), "order.created", []byte(`{}`))
		require.Error(t, err)
		var me *schema.MismatchError
		require.False(t, errors.As(err, &me))
	})
}

// BenchmarkCacheCheck is the cost ingest pays per event: for a type
// without a schema, a clock reading, two atomic loads and a map lookup;
// for one with a schema, the payload's validation too (1 KiB).
func BenchmarkCacheCheck(b *testing.B) {
	st, err := sqlitestore.Open(b.Context(), sqlitetest.Path(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		_, err := st.EventTypeCreate(b.Context(), &store.EventTypeCreateParams{Entry: &herald.EventTypeEntry{
			Name: "type" + strconv.Itoa(i), Schema: json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},"pad":{"type":"string"}}}`),
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
	cache := schema.NewCache(schema.CacheConfig{Store: st})
	payload := []byte(`{"order_id":"o_1","pad":"` + strings.Repeat("x", 1024-28) + `"}`)
	for _, c := range []struct{ name, typ string }{{"type=unlisted", "order.created"}, {"type=schema", "type7"}} {
		if err := cache.Check(b.Context(), c.typ, payload); err != nil {
			b.Fatal(err) // and the catalog is loaded before the clock starts
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if err := cache.Check(b.Context(), c.typ, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := cache.Check(context.Background(), c.typ, payload); err != nil {
						panic(err)
					}
				}
			})
		})
	}
}

func TestCacheLookOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	e := setupCache(t)
	e.put(t, "order.created", orderSchema)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// The caller has gone, but the look is the node's: it loads, and the
	// schema holds.
	err := e.cache.Check(ctx, "order.created", []byte(`{}`))
	var me *schema.MismatchError
	require.ErrorAs(t, err, &me)
}
