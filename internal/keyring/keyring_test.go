package keyring_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/keyring"
)

// key is a fixed key whose every byte is b.
func key(b byte) []byte { return bytes.Repeat([]byte{b}, keyring.KeySize) }

// entry is key(b) under id, as --encryption-key takes it.
func entry(id string, b byte) string { return id + ":" + base64.StdEncoding.EncodeToString(key(b)) }

func ring(t *testing.T, s string) *keyring.Ring {
	t.Helper()
	r, err := keyring.Parse(s)
	require.NoError(t, err)
	return r
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	r := ring(t, entry("k1", 1))
	for _, secret := range []string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"x",
		"enc:v1:k1:looks sealed but is a chosen secret",
		"ünïcødé secret with spaces and : colons",
		strings.Repeat("s", 256),
	} {
		t.Run(fmt.Sprintf("%.12s", secret), func(t *testing.T) {
			t.Parallel()
			sealed, err := r.Seal("ep_1", secret)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(sealed, "enc:v1:k1:"), sealed)
			if len(secret) > 4 {
				require.NotContains(t, sealed, secret)
			}
			again, err := r.Seal("ep_1", secret)
			require.NoError(t, err)
			require.NotEqual(t, sealed, again, "each value has a fresh nonce")
			id, err := keyring.KeyID(sealed)
			require.NoError(t, err)
			require.Equal(t, "k1", id)
			got, err := r.Open("ep_1", sealed)
			require.NoError(t, err)
			require.Equal(t, secret, got)
		})
	}
	t.Run("EmptyStaysEmpty", func(t *testing.T) {
		t.Parallel()
		sealed, err := r.Seal("ep_1", "")
		require.NoError(t, err)
		require.Empty(t, sealed)
		got, err := r.Open("ep_1", "")
		require.NoError(t, err)
		require.Empty(t, got)
	})
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	k1 := ring(t, entry("k1", 1))
	sealed, err := k1.Seal("ep_1", "whsec_secret")
	require.NoError(t, err)
	body := strings.TrimPrefix(sealed, "enc:v1:k1:")
	raw, err := base64.RawStdEncoding.DecodeString(body)
	require.NoError(t, err)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)-1] ^= 1
	flippedNonce := append([]byte(nil), raw...)
	flippedNonce[0] ^= 1

	for _, tc := range []struct {
		name     string
		ring     *keyring.Ring
		endpoint string
		value    string
		unknown  string // the key id an *UnknownKeyError names, if that is the error
	}{
		{"KeyIDNotInTheRing", ring(t, entry("k2", 2)), "ep_1", sealed, "k1"},
		{"OtherKeyUnderTheSameID", ring(t, entry("k1", 9)), "ep_1", sealed, ""},
		{"TamperedCiphertext", k1, "ep_1", "enc:v1:k1:" + base64.RawStdEncoding.EncodeToString(flipped), ""},
		{"TamperedNonce", k1, "ep_1", "enc:v1:k1:" + base64.RawStdEncoding.EncodeToString(flippedNonce), ""},
		{"Truncated", k1, "ep_1", sealed[:len(sealed)-4], ""},
		{"TooShort", k1, "ep_1", "enc:v1:k1:AAAA", ""},
		{"NotBase64", k1, "ep_1", "enc:v1:k1:!!!!", ""},
		{"AnotherEndpoint", k1, "ep_2", sealed, ""},
		{"RelabelledToAnotherKeyOfTheRing", ring(t, entry("k1", 1)+","+entry("k0", 1)), "ep_1", "enc:v1:k0:" + body, ""},
		{"NoPrefix", k1, "ep_1", "whsec_plain", ""},
		{"NoKeyID", k1, "ep_1", "enc:v1:", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.ring.Open(tc.endpoint, tc.value)
			require.Error(t, err)
			require.Empty(t, got)
			require.Contains(t, err.Error(), tc.endpoint, "the error names the endpoint")
			require.NotContains(t, err.Error(), "whsec_secret")
			var unknown *keyring.UnknownKeyError
			if tc.unknown != "" {
				require.ErrorAs(t, err, &unknown)
				require.Equal(t, tc.unknown, unknown.KeyID)
				require.Contains(t, err.Error(), `key "`+tc.unknown+`"`, "the error names the missing key")
				return
			}
			require.False(t, errors.As(err, &unknown), "%v", err)
		})
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	old := ring(t, entry("k1", 1))
	sealed, err := old.Seal("ep_1", "whsec_a")
	require.NoError(t, err)

	rotated := ring(t, entry("k2", 2)+","+entry("k1", 1))
	require.Equal(t, "k2", rotated.CurrentID())
	require.Equal(t, []string{"k2", "k1"}, rotated.IDs())
	require.Equal(t, "enc:v1:k2:", rotated.SealedPrefix())
	require.True(t, rotated.Has("k1"))
	require.False(t, rotated.Has("k3"))

	got, err := rotated.Open("ep_1", sealed)
	require.NoError(t, err, "the old key still opens what it sealed")
	require.Equal(t, "whsec_a", got)
	resealed, err := rotated.Seal("ep_1", got)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(resealed, rotated.SealedPrefix()))

	_, err = old.Open("ep_1", resealed)
	var unknown *keyring.UnknownKeyError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "k2", unknown.KeyID)
}

func TestParse(t *testing.T) {
	t.Parallel()
	k := base64.StdEncoding.EncodeToString(key(7))
	t.Run("Accepts", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, in string
			ids      []string
		}{
			{"One", "k1:" + k, []string{"k1"}},
			{"SealingKeyFirst", entry("k2", 2) + "," + entry("k1", 1), []string{"k2", "k1"}},
			{"SpacesAndNewlines", " k2 : " + k + " ,\n k1:" + base64.StdEncoding.EncodeToString(key(1)) + "\n", []string{"k2", "k1"}},
			{"TrailingComma", "k1:" + k + ",", []string{"k1"}},
			{"Unpadded", "k1:" + base64.RawStdEncoding.EncodeToString(key(7)), []string{"k1"}},
			{"URLSafe", "k1:" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)), []string{"k1"}},
			{"IDCharacters", "2026-06_main.a:" + k, []string{"2026-06_main.a"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r, err := keyring.Parse(tc.in)
				require.NoError(t, err)
				require.Equal(t, tc.ids, r.IDs())
			})
		}
	})
	t.Run("Refuses", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, in, want string
		}{
			{"Empty", "", "no key given"},
			{"OnlyCommas", " , ,", "no key given"},
			{"NoID", k, "want id:base64"},
			{"EmptyID", ":" + k, "key id is empty"},
			{"BadIDCharacters", "k 1:" + k, "only letters"},
			{"IDTooLong", strings.Repeat("k", 33) + ":" + k, "longer than 32"},
			{"KeyWhereTheIDGoes", k + ":k1", "key 1"},
			{"NotBase64", "k1:***", "key 1 (k1): not base64"},
			{"ShortKey", "k1:" + base64.StdEncoding.EncodeToString(make([]byte, 31)), "31 bytes, want 32"},
			{"LongKey", "k1:" + base64.StdEncoding.EncodeToString(make([]byte, 64)), "64 bytes, want 32"},
			{"DuplicateID", entry("k1", 1) + "," + entry("k1", 2), `"k1" is given twice`},
			{"SecondEntryBad", entry("k2", 2) + ",k1", "key 2: want id:base64"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				_, err := keyring.Parse(tc.in)
				require.ErrorContains(t, err, tc.want)
				require.NotContains(t, err.Error(), k, "an error never repeats a key")
				require.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString(key(2)))
			})
		}
	})
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	a, err := keyring.Generate("k3")
	require.NoError(t, err)
	b, err := keyring.Generate("k3")
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	id, b64, ok := strings.Cut(a, ":")
	require.True(t, ok)
	require.Equal(t, "k3", id)
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.Len(t, raw, keyring.KeySize)
	r, err := keyring.Parse(a)
	require.NoError(t, err)
	require.Equal(t, []string{"k3"}, r.IDs())

	_, err = keyring.Generate("bad id")
	require.Error(t, err)
}

func TestRingLogsOnlyIDs(t *testing.T) {
	t.Parallel()
	k := base64.StdEncoding.EncodeToString(key(5))
	r := ring(t, "k2:"+k+","+entry("k1", 1))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("ring", "keys", r)
	fmt.Fprintf(&buf, "%v %s %+v", r, r, r)
	require.Contains(t, buf.String(), "k2,k1")
	require.NotContains(t, buf.String(), k)
	require.NotContains(t, buf.String(), string(key(5)))
}

func TestKeyFile(t *testing.T) {
	t.Parallel()
	t.Run("MadeOnceWithMode0600", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "herald.db.key")
		r, created, err := keyring.LoadOrCreateFile(path)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, []string{keyring.FileID}, r.IDs())
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
		before, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Contains(t, string(before), "Back it up with the database")

		sealed, err := r.Seal("ep_1", "whsec_a")
		require.NoError(t, err)
		again, created, err := keyring.LoadOrCreateFile(path)
		require.NoError(t, err)
		require.False(t, created, "an existing key file is read")
		got, err := again.Open("ep_1", sealed)
		require.NoError(t, err)
		require.Equal(t, "whsec_a", got)

		_, err = keyring.CreateFile(path)
		require.ErrorIs(t, err, fs.ErrExist, "a key file is never replaced")
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, before, after)
		entries, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file is left behind")
	})
	t.Run("ProcessesStartingTogetherShareOneKey", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "herald.db.key")
		rings := make([]*keyring.Ring, 8)
		var wg sync.WaitGroup
		for i := range rings {
			wg.Go(func() {
				r, _, err := keyring.LoadOrCreateFile(path)
				require.NoError(t, err)
				rings[i] = r
			})
		}
		wg.Wait()
		sealed, err := rings[0].Seal("ep_1", "whsec_a")
		require.NoError(t, err)
		for _, r := range rings {
			got, err := r.Open("ep_1", sealed)
			require.NoError(t, err)
			require.Equal(t, "whsec_a", got)
		}
	})
	t.Run("ReadsARingWithComments", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "ring.key")
		require.NoError(t, os.WriteFile(path, []byte("# rotated in June\n"+entry("k2", 2)+"\n"+entry("k1", 1)+"\n"), 0o600))
		r, err := keyring.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, []string{"k2", "k1"}, r.IDs())
	})
	t.Run("BadFileNamesItself", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "bad.key")
		require.NoError(t, os.WriteFile(path, []byte("k1:short\n"), 0o600))
		_, _, err := keyring.LoadOrCreateFile(path)
		require.ErrorContains(t, err, path)
	})
}
