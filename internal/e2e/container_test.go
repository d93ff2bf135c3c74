package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/store/pgstore/pgtest"
)

// readmeServeLine is the walk-through's line that starts Herald; the
// container test runs the image there instead.
const readmeServeLine = "./herald serve --allow-private-networks &"

// TestReadmeWalkthroughInContainer builds the image as `make image` does
// (a static binary FROM scratch) and passes the README's walk-through with
// Herald running in it instead of ./herald serve: as the image's numeric
// non-root user, on a read-only root filesystem with no capabilities, its
// SQLite database in the /data volume, on the host's network so that all
// traffic stays on loopback. The client commands and the receiver are the
// host's binary, as a reader's would be.
//
// It needs a running Docker engine (.ci/run starts Debian's dockerd); on
// CI its absence fails the test, elsewhere it skips it.
func TestReadmeWalkthroughInContainer(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	script := walkthrough(t, string(readme))
	require.Equal(t, 1, strings.Count(script, readmeServeLine), "the walk-through starts Herald with %q", readmeServeLine)

	image := buildImage(t)
	user := dockerOut(t, "image", "inspect", "--format", "{{.Config.User}}", image)
	require.Equal(t, "65532:65532", user, "the image runs as a numeric non-root user")

	label := "herald-e2e=" + randomHex(t)
	t.Cleanup(func() {
		ids := dockerOut(t, "ps", "-aq", "--filter", "label="+label)
		if ids != "" {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(ids)...)...).Run()
		}
	})
	// The walk-through exports HERALD_ADDR (a free port) and
	// HERALD_API_KEY; -e passes them on. Its `kill $HERALD` reaches the
	// container through docker run's signal proxy.
	run := "docker run --rm --label " + label + " --network host --read-only --cap-drop ALL " +
		"--security-opt no-new-privileges -e HERALD_ADDR -e HERALD_API_KEY " + image + " serve --allow-private-networks &"
	passWalkthrough(t, heraldBinary(t), strings.Replace(script, readmeServeLine, run, 1))
}

// TestWorkerInContainer runs the image as compose.yaml and the Kubernetes
// manifests do on PostgreSQL: herald migrate once, then a worker, as the
// image's user on a read-only root, whose probes (herald probe, the image
// having no shell) find /healthz and /readyz on its loopback metrics
// listener, and which stops cleanly on docker stop.
func TestWorkerInContainer(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	db := pgtest.URL(t)
	image := buildImage(t)
	key := "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	label := "herald-e2e=" + randomHex(t)
	t.Cleanup(func() {
		ids := dockerOut(t, "ps", "-aq", "--filter", "label="+label)
		if ids != "" {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(ids)...)...).Run()
		}
	})
	run := func(args ...string) []string {
		return append([]string{"run", "--label", label, "--network", "host", "--read-only", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", "-e", "HERALD_DB=" + db, "-e", "HERALD_ENCRYPTION_KEY=" + key}, args...)
	}

	// What the image holds: the binary, the CA bundle, and the
	// directories its user must write, owned by that user.
	files := imageFiles(t, image)
	for _, dir := range []string{"data/", "tmp/"} {
		require.Contains(t, files, dir)
		require.Equal(t, 65532, files[dir].Uid, "%s belongs to the image's user", dir)
		require.Equal(t, 65532, files[dir].Gid, dir)
	}
	require.Contains(t, files, "herald")
	require.NotZero(t, files["herald"].Mode&0o111, "the binary is executable")
	require.Contains(t, files, "etc/ssl/certs/ca-certificates.crt")
	require.Greater(t, files["etc/ssl/certs/ca-certificates.crt"].Size, int64(1000))

	out := dockerOut(t, run("--rm", image, "migrate")...)
	require.Contains(t, out, "up to date")

	metrics := freeAddr(t)
	id := dockerOut(t, run("-d", "-e", "HERALD_METRICS_ADDR="+metrics, image, "worker")...)
	probe := func(path string) error {
		return exec.Command("docker", "exec", id, "/herald", "probe", "http://"+metrics+path).Run()
	}
	waitFor(t, "the worker's readiness probe", func() bool {
		if dockerOut(t, "inspect", "--format", "{{.State.Running}}", id) != "true" {
			logs, _ := exec.Command("docker", "logs", id).CombinedOutput()
			t.Fatalf("the worker stopped:\n%s", logs)
		}
		return probe("/readyz") == nil
	})
	require.NoError(t, probe("/healthz"))
	require.Error(t, probe("/nope"), "a probe fails on anything but 2xx")

	dockerOut(t, "stop", "--time", "30", id)
	require.Equal(t, "0", dockerOut(t, "inspect", "--format", "{{.State.ExitCode}}", id), "a worker stops cleanly on SIGTERM")
}

// requireDocker skips the test when no Docker engine answers, or fails it
// on CI, which must run it.
func requireDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err == nil {
		return
	}
	msg := "no Docker engine answers (as root: apt-get install docker.io, then start dockerd, as .ci/run does): " +
		err.Error() + ": " + strings.TrimSpace(string(out))
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// buildImage runs `make image` under a tag of the test's own, with its
// build context in a temporary directory, around the binary the other
// tests run (built as make image builds it), and removes the image after.
func buildImage(t *testing.T) string {
	t.Helper()
	image := "herald-e2e:" + randomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "make", "-C", "../..", "image", "IMAGE="+image,
		"IMAGE_CONTEXT="+filepath.Join(t.TempDir(), "image"), "IMAGE_BINARY="+heraldBinary(t))
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make image: %s", tail(string(out), 4000))
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}

// imageFiles lists the files of a container made from image (not
// started), by path without the leading slash.
func imageFiles(t *testing.T, image string) map[string]*tar.Header {
	t.Helper()
	id := dockerOut(t, "create", image)
	defer exec.Command("docker", "rm", "-f", id).Run()
	export := exec.Command("docker", "export", id)
	stdout, err := export.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, export.Start())
	files := map[string]*tar.Header{}
	r := tar.NewReader(stdout)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		files[h.Name] = h
	}
	require.NoError(t, export.Wait())
	return files
}

// dockerOut runs docker with args and returns its trimmed output.
func dockerOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(t, err, "docker %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// randomHex is 8 random hex digits, to name what one run makes.
func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
