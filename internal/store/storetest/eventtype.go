package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
	"github.com/heraldhooks/herald/internal/store"
)

func eventTypeCases() []testCase {
	return []testCase{
		{"CreateGetKeepsJSONAsGiven", testEventTypeCreateGet},
		{"NameIsUnique", testEventTypeUnique},
		{"ListInNameOrderByPages", testEventTypeList},
		{"UpdateReplacesAndChecksUpdatedAt", testEventTypeUpdate},
		{"Delete", testEventTypeDelete},
		{"GenerationMovesOnEveryWrite", testEventTypeGeneration},
		{"ConcurrentWritesEachMoveTheGeneration", testEventTypeGenerationConcurrent},
	}
}

// createEventType creates e at now.
func createEventType(t *testing.T, s store.Store, e *herald.EventTypeEntry, now time.Time) *herald.EventTypeEntry {
	t.Helper()
	got, err := s.EventTypeCreate(t.Context(), &store.EventTypeCreateParams{Entry: e, Now: now})
	require.NoError(t, err)
	return got
}

// generation reads the catalog's generation.
func generation(t *testing.T, s store.Store) int64 {
	t.Helper()
	g, err := s.EventTypeGeneration(t.Context())
	require.NoError(t, err)
	return g
}

func testEventTypeCreateGet(t *testing.T, s store.Store) {
	schema := json.RawMessage(`{"type": "object",  "required": ["order_id"]}`)
	example := json.RawMessage(`{"order_id": "o_1"}`)
	got := createEventType(t, s, &herald.EventTypeEntry{
		Name: "order.created", Description: "An order was placed.", Schema: schema, Example: example,
	}, at(0))
	require.Equal(t, "order.created", got.Name)
	require.Equal(t, "An order was placed.", got.Description)
	require.Equal(t, string(schema), string(got.Schema), "the schema is kept byte for byte")
	require.Equal(t, string(example), string(got.Example))
	require.False(t, got.BuiltIn)
	requireTime(t, at(0), got.CreatedAt)
	requireTime(t, at(0), got.UpdatedAt)

	read, err := s.EventTypeGet(t.Context(), "order.created")
	require.NoError(t, err)
	require.Equal(t, got, read)

	bare := createEventType(t, s, &herald.EventTypeEntry{Name: "order.paid"}, at(time.Second))
	require.Nil(t, bare.Schema, "no schema stays none, not JSON null")
	require.Nil(t, bare.Example)
	require.Empty(t, bare.Description)
	read, err = s.EventTypeGet(t.Context(), "order.paid")
	require.NoError(t, err)
	require.Nil(t, read.Schema)
	require.Nil(t, read.Example)

	_, err = s.EventTypeGet(t.Context(), "order.missing")
	expectNotFound(t, err)
}

func testEventTypeUnique(t *testing.T, s store.Store) {
	createEventType(t, s, &herald.EventTypeEntry{Name: "a.b", Description: "first"}, at(0))
	g := generation(t, s)
	_, err := s.EventTypeCreate(t.Context(), &store.EventTypeCreateParams{
		Entry: &herald.EventTypeEntry{Name: "a.b", Description: "second"}, Now: at(time.Second),
	})
	expectConflict(t, err)
	got, err := s.EventTypeGet(t.Context(), "a.b")
	require.NoError(t, err)
	require.Equal(t, "first", got.Description)
	require.Equal(t, g, generation(t, s), "a refused write leaves the generation")
	// Names are compared exactly.
	createEventType(t, s, &herald.EventTypeEntry{Name: "A.b"}, at(0))
}

func testEventTypeList(t *testing.T, s store.Store) {
	empty, err := s.EventTypeList(t.Context(), &store.EventTypeListParams{})
	require.NoError(t, err)
	require.Empty(t, empty.Items)
	require.NotNil(t, empty.Items)
	require.Empty(t, empty.NextCursor)

	// Created out of order; listed in byte order (upper case first).
	names := []string{"order.paid", "Zeta", "invoice.sent", "order.created", "a-b", "a.b", "a_b"}
	for i, n := range names {
		createEventType(t, s, &herald.EventTypeEntry{Name: n, Description: fmt.Sprint(i)}, at(time.Duration(i)*time.Second))
	}
	want := []string{"Zeta", "a-b", "a.b", "a_b", "invoice.sent", "order.created", "order.paid"}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		p, err := s.EventTypeList(t.Context(), &store.EventTypeListParams{Cursor: cursor, Limit: 3})
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Items), 3)
		for _, e := range p.Items {
			got = append(got, e.Name)
		}
		if p.NextCursor == "" {
			break
		}
		require.Equal(t, p.Items[len(p.Items)-1].Name, p.NextCursor)
		cursor = p.NextCursor
	}
	require.Equal(t, want, got)

	all, err := s.EventTypeList(t.Context(), &store.EventTypeListParams{})
	require.NoError(t, err)
	require.Len(t, all.Items, len(names))
	require.Empty(t, all.NextCursor)
}

func testEventTypeUpdate(t *testing.T, s store.Store) {
	created := createEventType(t, s, &herald.EventTypeEntry{
		Name: "order.created", Description: "old", Schema: json.RawMessage(`{"type":"object"}`),
	}, at(0))
	upd, err := s.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{
		Entry: &herald.EventTypeEntry{Name: "order.created", Description: "new", Example: json.RawMessage(`{"n":1}`)},
		Now:   at(time.Minute),
	})
	require.NoError(t, err)
	require.Equal(t, "new", upd.Description)
	require.Nil(t, upd.Schema, "the schema is replaced, here by none")
	require.Equal(t, `{"n":1}`, string(upd.Example))
	requireTime(t, at(0), upd.CreatedAt)
	requireTime(t, at(time.Minute), upd.UpdatedAt)
	read, err := s.EventTypeGet(t.Context(), "order.created")
	require.NoError(t, err)
	require.Equal(t, upd, read)

	t.Run("IfUpdatedAt", func(t *testing.T) {
		g := generation(t, s)
		_, err := s.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{
			Entry:       &herald.EventTypeEntry{Name: "order.created", Description: "stale"},
			IfUpdatedAt: created.UpdatedAt, Now: at(2 * time.Minute),
		})
		expectConflict(t, err)
		require.Equal(t, g, generation(t, s))
		read, err := s.EventTypeGet(t.Context(), "order.created")
		require.NoError(t, err)
		require.Equal(t, "new", read.Description)

		fresh, err := s.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{
			Entry:       &herald.EventTypeEntry{Name: "order.created", Description: "fresh"},
			IfUpdatedAt: read.UpdatedAt, Now: at(3 * time.Minute),
		})
		require.NoError(t, err)
		require.Equal(t, "fresh", fresh.Description)
	})

	_, err = s.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{
		Entry: &herald.EventTypeEntry{Name: "order.missing"}, Now: at(time.Minute),
	})
	expectNotFound(t, err)
	_, err = s.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{
		Entry: &herald.EventTypeEntry{Name: "order.missing"}, IfUpdatedAt: at(0), Now: at(time.Minute),
	})
	expectNotFound(t, err)
}

func testEventTypeDelete(t *testing.T, s store.Store) {
	createEventType(t, s, &herald.EventTypeEntry{Name: "order.created"}, at(0))
	require.NoError(t, s.EventTypeDelete(t.Context(), &store.EventTypeDeleteParams{Name: "order.created", Now: at(time.Second)}))
	_, err := s.EventTypeGet(t.Context(), "order.created")
	expectNotFound(t, err)
	expectNotFound(t, s.EventTypeDelete(t.Context(), &store.EventTypeDeleteParams{Name: "order.created", Now: at(time.Second)}))
	// The name can be used again.
	createEventType(t, s, &herald.EventTypeEntry{Name: "order.created", Description: "again"}, at(2*time.Second))
}

func testEventTypeGeneration(t *testing.T, s store.Store) {
	g0 := generation(t, s)
	require.Equal(t, g0, generation(t, s), "reading moves nothing")
	createEventType(t, s, &herald.EventTypeEntry{Name: "a"}, at(0))
	g1 := generation(t, s)
	require.Greater(t, g1, g0, "create")
	_, err := s.EventTypeUpdate(t.Context(), &store.EventTypeUpdateParams{Entry: &herald.EventTypeEntry{Name: "a", Description: "d"}, Now: at(time.Second)})
	require.NoError(t, err)
	g2 := generation(t, s)
	require.Greater(t, g2, g1, "update")
	require.NoError(t, s.EventTypeDelete(t.Context(), &store.EventTypeDeleteParams{Name: "a", Now: at(2 * time.Second)}))
	g3 := generation(t, s)
	require.Greater(t, g3, g2, "delete")
	expectNotFound(t, s.EventTypeDelete(t.Context(), &store.EventTypeDeleteParams{Name: "a", Now: at(3 * time.Second)}))
	require.Equal(t, g3, generation(t, s), "a write that fails moves nothing")
}

// testEventTypeGenerationConcurrent: writes racing on several connections
// each move the generation on; none is lost (a cache that compared
// generations would otherwise miss a change).
func testEventTypeGenerationConcurrent(t *testing.T, s store.Store) {
	g0 := generation(t, s)
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.EventTypeCreate(t.Context(), &store.EventTypeCreateParams{
				Entry: &herald.EventTypeEntry{Name: fmt.Sprintf("t%d", i)}, Now: at(0),
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, g0+writers, generation(t, s))
}
