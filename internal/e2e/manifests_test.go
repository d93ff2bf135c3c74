package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/heraldhooks/herald/internal/cli"
)

// The container files are parsed and checked here, since no cluster and no
// PostgreSQL image can be had on the machines that run the tests: the
// probes, the non-root user, the migration, one image name everywhere, and
// only environment variables that the started command reads (its flags'
// HERALD_* twins, from internal/cli), so the files cannot drift from the
// flags.

// k8sObject is what the tests read of a Kubernetes manifest.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		// Selector is a Deployment's or a PodDisruptionBudget's
		// {matchLabels: …}, or a Service's labels.
		Selector map[string]any `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec k8sPod `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"` // a kustomization's
}

type k8sPod struct {
	SecurityContext struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    int   `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []k8sContainer `yaml:"containers"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

// env is the container's explicit environment.
func (c k8sContainer) env() map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// imageFacts are what the Makefile and the Dockerfile say the image is.
type imageFacts struct {
	name string // the Makefile's IMAGE
	user int    // the Dockerfile's numeric USER
}

func readImageFacts(t *testing.T) imageFacts {
	t.Helper()
	makefile, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile names the image (IMAGE ?= …)")
	dockerfile, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	u := regexp.MustCompile(`(?m)^USER (\d+):(\d+)$`).FindSubmatch(dockerfile)
	require.NotNil(t, u, "the Dockerfile runs as a numeric user and group")
	user, err := strconv.Atoi(string(u[1]))
	require.NoError(t, err)
	return imageFacts{name: string(m[1]), user: user}
}

// TestDockerfile: FROM scratch around the binary, as a numeric non-root
// user, with the CA certificates and a health check the binary runs.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	text := string(b)
	require.Regexp(t, `(?m)^FROM scratch$`, text, "nothing to pull")
	require.NotZero(t, readImageFacts(t).user, "not root")
	require.Regexp(t, `(?m)^COPY ca-certificates\.crt /etc/ssl/certs/ca-certificates\.crt$`, text)
	require.Regexp(t, `(?m)^ENTRYPOINT \["/herald"\]$`, text)
	require.Regexp(t, `(?m)^CMD \["serve"\]$`, text)
	require.Regexp(t, `(?m)^HEALTHCHECK .*CMD \["/herald", "probe"\]$`, text)
	require.Regexp(t, `(?m)^WORKDIR /data$`, text)
	require.Regexp(t, `(?m)^ENV HERALD_ADDR=:8080$`, text)
	require.Regexp(t, `(?m)^EXPOSE 8080$`, text)
}

// TestKubernetesManifests checks deploy/kubernetes/: serve and worker
// Deployments with liveness (/healthz) and readiness (/readyz) probes,
// a migration Job running herald migrate, a Secret for the key ring,
// resource requests, a non-root read-only pod as the image's user, the
// image's name, a Service and PodDisruptionBudgets that select the pods.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	facts := readImageFacts(t)
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	require.NoError(t, err)
	objects := map[string]k8sObject{} // by "Kind/name"
	var kustomization k8sObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			if o.Kind == "Kustomization" {
				kustomization = o
				continue
			}
			key := o.Kind + "/" + o.Metadata.Name
			require.NotContains(t, objects, key, "%s twice", key)
			objects[key] = o
		}
	}
	for _, r := range kustomization.Resources {
		require.FileExists(t, filepath.Join("../../deploy/kubernetes", r), "the kustomization's")
	}
	get := func(key string) k8sObject {
		o, ok := objects[key]
		require.True(t, ok, "deploy/kubernetes has no %s", key)
		return o
	}

	secret := get("Secret/herald")
	secretReaders := map[string]bool{} // the twins of the commands that read it
	pods := map[string]k8sObject{"serve": get("Deployment/herald-serve"), "worker": get("Deployment/herald-worker"), "migrate": get("Job/herald-migrate")}
	for command, o := range pods {
		pod := o.Spec.Template.Spec
		require.NotNil(t, pod.SecurityContext.RunAsNonRoot, command)
		require.True(t, *pod.SecurityContext.RunAsNonRoot, "%s runs as non-root", command)
		require.Equal(t, facts.user, pod.SecurityContext.RunAsUser, "%s runs as the image's user", command)
		require.Len(t, pod.Containers, 1, command)
		c := pod.Containers[0]
		require.Equal(t, facts.name, c.Image, "%s runs the image make image builds", command)
		require.Equal(t, []string{command}, c.Args, "the %s pod runs herald %s", command, command)
		require.NotEmpty(t, c.Resources.Requests["cpu"], "%s requests CPU", command)
		require.NotEmpty(t, c.Resources.Requests["memory"], "%s requests memory", command)
		require.True(t, c.SecurityContext.ReadOnlyRootFilesystem, "%s: read-only root", command)
		require.NotNil(t, c.SecurityContext.AllowPrivilegeEscalation, command)
		require.False(t, *c.SecurityContext.AllowPrivilegeEscalation, command)
		twins, err := cli.EnvTwins(command)
		require.NoError(t, err)
		for name := range c.env() {
			require.Contains(t, twins, name, "herald %s has no flag whose twin is %s", command, name)
		}
		require.Len(t, c.EnvFrom, 1, command)
		require.Equal(t, "herald", c.EnvFrom[0].SecretRef.Name, "%s reads the Secret", command)
		for _, n := range twins {
			secretReaders[n] = true
		}
		if o.Kind == "Deployment" {
			require.Equal(t, o.Spec.Template.Metadata.Labels, matchLabels(t, o.Spec.Selector), "%s selects its pods", command)
			require.NotNil(t, c.LivenessProbe, "%s has a liveness probe", command)
			require.NotNil(t, c.ReadinessProbe, "%s has a readiness probe", command)
		}
	}
	require.Subset(t, keys(secret.StringData), []string{"HERALD_DB", "HERALD_ENCRYPTION_KEY"}, "the Secret holds the database and the key ring")
	for name := range secret.StringData {
		require.True(t, secretReaders[name], "no command the Secret is given to reads %s", name)
	}

	// serve answers its probes on its API port.
	serve := pods["serve"].Spec.Template.Spec.Containers[0]
	require.Equal(t, ":8080", serve.env()["HERALD_ADDR"])
	require.Len(t, serve.Ports, 1)
	require.Equal(t, 8080, serve.Ports[0].ContainerPort)
	for probe, path := range map[*k8sProbe]string{serve.LivenessProbe: "/healthz", serve.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe.HTTPGet)
		require.Equal(t, path, probe.HTTPGet.Path)
		require.Equal(t, serve.Ports[0].Name, probe.HTTPGet.Port)
	}
	// A worker has no API: herald probe asks its metrics listener.
	worker := pods["worker"].Spec.Template.Spec.Containers[0]
	metrics := worker.env()["HERALD_METRICS_ADDR"]
	require.NotEmpty(t, metrics, "the worker's probes need its metrics listener")
	for probe, path := range map[*k8sProbe]string{worker.LivenessProbe: "/healthz", worker.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe.Exec, "the image has no shell: the binary probes")
		requireProbeCommand(t, probe.Exec.Command, metrics, path)
	}

	service := get("Service/herald")
	require.Equal(t, pods["serve"].Spec.Template.Metadata.Labels, stringMap(service.Spec.Selector), "the Service selects serve")
	require.Len(t, service.Spec.Ports, 1)
	require.Equal(t, serve.Ports[0].Name, service.Spec.Ports[0].TargetPort)
	for _, command := range []string{"serve", "worker"} {
		budget := get("PodDisruptionBudget/herald-" + command)
		require.Equal(t, pods[command].Spec.Template.Metadata.Labels, matchLabels(t, budget.Spec.Selector), "the budget of %s selects it", command)
	}
}

// composeFile is what the tests read of compose.yaml.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		User        string            `yaml:"user"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck struct {
			Test    []string `yaml:"test"`
			Disable bool     `yaml:"disable"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

// TestComposeFile checks compose.yaml: PostgreSQL, then a one-shot herald
// migrate, then serve and worker, all Herald services from the image make
// image builds as its user, with health checks, and only the twins of the
// started command's flags in their environment.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	facts := readImageFacts(t)
	b, err := os.ReadFile("../../compose.yaml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(b, &f))

	pg, ok := f.Services["postgres"]
	require.True(t, ok, "compose.yaml has PostgreSQL")
	require.True(t, strings.HasPrefix(pg.Image, "postgres:"), pg.Image)
	require.NotEmpty(t, pg.Healthcheck.Test, "PostgreSQL's readiness gates the migration")

	for _, command := range []string{"migrate", "serve", "worker"} {
		s, ok := f.Services[command]
		require.True(t, ok, "compose.yaml has %s", command)
		require.Equal(t, facts.name, s.Image, command)
		require.Equal(t, strconv.Itoa(facts.user)+":"+strconv.Itoa(facts.user), s.User, command)
		require.Equal(t, []string{command}, s.Command, command)
		twins, err := cli.EnvTwins(command)
		require.NoError(t, err)
		for name := range s.Environment {
			require.Contains(t, twins, name, "herald %s has no flag whose twin is %s", command, name)
		}
		require.Contains(t, s.Environment, "HERALD_DB", command)
		require.Contains(t, s.Environment, "HERALD_ENCRYPTION_KEY", "%s gets the key ring", command)
		require.True(t, strings.HasPrefix(s.Environment["HERALD_DB"], "postgres://"), command)
		if command == "migrate" {
			require.Equal(t, "service_healthy", s.DependsOn["postgres"].Condition)
			continue
		}
		require.Equal(t, "service_completed_successfully", s.DependsOn["migrate"].Condition, "%s starts once migrated", command)
		require.False(t, s.Healthcheck.Disable)
		require.GreaterOrEqual(t, len(s.Healthcheck.Test), 3, "%s has a health check", command)
		require.Equal(t, "CMD", s.Healthcheck.Test[0], "no shell in the image")
		if command == "serve" {
			require.Equal(t, []string{"CMD", "/herald", "probe"}, s.Healthcheck.Test, "/readyz at its HERALD_ADDR")
		} else {
			requireProbeCommand(t, s.Healthcheck.Test[1:], s.Environment["HERALD_METRICS_ADDR"], "/readyz")
		}
	}
}

// requireProbeCommand checks that command is /herald probe asking path at
// addr.
func requireProbeCommand(t *testing.T, command []string, addr, path string) {
	t.Helper()
	require.Len(t, command, 3, "%q", command)
	require.Equal(t, []string{"/herald", "probe"}, command[:2])
	u, err := url.Parse(command[2])
	require.NoError(t, err)
	require.Equal(t, addr, u.Host, "the probe asks the metrics listener")
	require.Equal(t, path, u.Path)
}

// matchLabels is a Deployment's or a PodDisruptionBudget's selector.
func matchLabels(t *testing.T, selector map[string]any) map[string]string {
	t.Helper()
	m, ok := selector["matchLabels"].(map[string]any)
	require.True(t, ok, "a selector by matchLabels: %v", selector)
	return stringMap(m)
}

func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		s, _ := v.(string)
		out[k] = s
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
