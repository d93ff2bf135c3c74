package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckShapes(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckShapes(Options{}, DefaultShapeEndpoints, DefaultShapeDelays))
	for _, tc := range []struct {
		name      string
		o         Options
		endpoints []int
		delays    []time.Duration
		want      string
	}{
		{"NoEndpoints", Options{}, nil, DefaultShapeDelays, "at least one number of endpoints"},
		{"NoDelays", Options{}, DefaultShapeEndpoints, nil, "at least one number of endpoints and one receiver delay"},
		{"ZeroEndpoints", Options{}, []int{0, 5}, DefaultShapeDelays, "--shape-endpoints: each must be from 1 to 10000, not 0"},
		{"TooManyEndpoints", Options{}, []int{MaxEndpoints + 1}, DefaultShapeDelays, "--shape-endpoints: each must be from 1"},
		{"NegativeDelay", Options{}, DefaultShapeEndpoints, []time.Duration{-time.Second}, "--shape-delays: each must be from 0 to 2m0s, not -1s"},
		{"TooManyRuns", Options{}, make([]int, 13), DefaultShapeDelays, "26 runs, more than 24"},
		{"Fanout", Options{Fanout: 2}, DefaultShapeEndpoints, DefaultShapeDelays, "leave --fanout and --consumers out"},
		{"Consumers", Options{Consumers: 1}, DefaultShapeEndpoints, DefaultShapeDelays, "leave --fanout and --consumers out"},
		{"Soak", Options{Soak: time.Minute}, DefaultShapeEndpoints, DefaultShapeDelays, "does not combine with --soak"},
		{"Endpoints", Options{Endpoints: 5}, DefaultShapeEndpoints, DefaultShapeDelays, "sets --endpoints and --receiver-delay itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckShapes(tc.o, tc.endpoints, tc.delays)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestShapeReport: the best and worst p99 over the shapes that measured
// any latency, the shapes that fell behind, and a row each in the text.
func TestShapeReport(t *testing.T) {
	t.Parallel()
	wal := 1900.0
	cpu := 0.5
	shape := func(n int, d time.Duration, p99 float64, samples int, missing int64) Shape {
		r := &Report{LatencyMS: LatencyMS{Samples: samples, P50: p99 / 2, P99: p99}}
		r.Deliveries.PerSecond = 1000
		r.Deliveries.Missing = missing
		r.Herald.CPUMSPerDelivery = &cpu
		r.Herald.WALBytesPerDelivery = &wal
		return Shape{Name: shapeName(n, d), Endpoints: n, ReceiverDelayMS: float64(d.Milliseconds()), Report: r}
	}
	sr := &ShapeReport{Shapes: []Shape{
		shape(1, 0, 8, 100, 0),
		shape(1, 250*time.Millisecond, 40, 100, 3),
		shape(100, 0, 10, 100, 0),
		shape(10_000, 0, 0, 0, 100), // nothing arrived: no latency to compare
	}, Notes: []string{noteShapes}}
	sr.sum()
	require.Equal(t, 8.0, sr.BestP99MS)
	require.Equal(t, 40.0, sr.WorstP99MS)
	require.Equal(t, 5.0, sr.P99Ratio)
	require.Equal(t, []string{"1 endpoint, 250ms", "10000 endpoints, at once"}, sr.Behind)

	var b strings.Builder
	require.NoError(t, sr.WriteText(&b))
	out := b.String()
	require.Regexp(t, `(?m)^shape\s+deliveries/s\s+p50 ms\s+p99 ms\s+missing\s+CPU ms/delivery\s+WAL bytes/delivery\s*$`, out)
	require.Regexp(t, `(?m)^1 endpoint, 250ms\s+1000\s+20\.00\s+40\.00\s+3\s+0\.5\s+1900\s*$`, out)
	require.Contains(t, out, "p99 from 8.00 to 40.00 ms: the worst shape's is 5.00x the best's\n")
	require.Contains(t, out, "fell behind: 10000 endpoints, at once\n")
}
