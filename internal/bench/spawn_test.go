package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/heraldproc"
)

// TestSpawnOnATakenPort gives the spawned serve, first, the port of
// another process that answers /healthz like a Herald but takes no key of
// the bench's (as another test's Herald would, having taken the port
// between heraldproc.FreeAddr and the child's listen): the bench must not take that
// process for its child, and must start the child on another port.
func TestSpawnOnATakenPort(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "herald")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/heraldhooks/herald/cmd/herald").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer impostor.Close()
	taken := impostor.Listener.Addr().String()

	// No other test of this package spawns a serve.
	picks := 0
	pickAddr = func() (string, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return heraldproc.FreeAddr()
	}
	defer func() { pickAddr = heraldproc.FreeAddr }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := spawn(ctx, bin, "", nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.stop()) }()

	require.Equal(t, 2, picks, "a second port after the first was taken")
	require.NotEqual(t, "http://"+taken, c.url)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/v1/endpoints", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "the child answers with the bench's key")
}
