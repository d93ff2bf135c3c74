package store_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store"
)

func TestStoredPayload(t *testing.T) {
	t.Parallel()
	json := []byte(`{"items":[` + string(bytes.Repeat([]byte(`{"sku":"A-1","quantity":1},`), 40)) + `{}]}`)

	t.Run("CompressedWhenItSavesAnEighth", func(t *testing.T) {
		stored := store.StoredPayload(json, true)
		require.Less(t, len(stored), len(json)/4)
		got, err := store.ReadPayload(stored)
		require.NoError(t, err)
		require.Equal(t, json, got)
	})
	t.Run("AsItIsWhenOff", func(t *testing.T) {
		require.Equal(t, json, store.StoredPayload(json, false))
	})
	t.Run("AsItIsWhenItGainsTooLittle", func(t *testing.T) {
		raw := make([]byte, 600)
		_, _ = rand.Read(raw)
		var ids []string
		for i := range 12 {
			ids = append(ids, `{"id":"`+hex.EncodeToString(raw[i*32:i*32+32])+`","kind":"line_item"}`)
		}
		hexed := []byte(`{"items":[` + strings.Join(ids, ",") + `]}`)
		require.Less(t, len(store.StoredPayload(hexed, true)), len(hexed)*7/8, "JSON of random ids: its keys repeat")
		random := append([]byte{'{'}, raw...)
		require.Equal(t, random, store.StoredPayload(random, true), "random bytes: as they are")
	})
	t.Run("SmallAsItIs", func(t *testing.T) {
		small := []byte(`{"n":1}`)
		require.Equal(t, small, store.StoredPayload(small, true))
	})
	t.Run("PlainReadsAsACopy", func(t *testing.T) {
		b := []byte(`{"n":1}`)
		got, err := store.ReadPayload(b)
		require.NoError(t, err)
		require.Equal(t, b, got)
		got[0] = 'x'
		require.Equal(t, byte('{'), b[0], "not the same bytes")
		empty, err := store.ReadPayload(nil)
		require.NoError(t, err)
		require.NotNil(t, empty)
	})
	t.Run("DamagedFrameFails", func(t *testing.T) {
		stored := store.StoredPayload(json, true)
		_, err := store.ReadPayload(stored[:len(stored)/2])
		require.ErrorContains(t, err, "decompress payload")
	})
}
