package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald/internal/config"
)

func TestParseRequestRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want config.RequestRate
		err  string
	}{
		{"50/s", config.RequestRate{PerSecond: 50, Burst: 100}, ""},
		{"600/m,burst=20", config.RequestRate{PerSecond: 10, Burst: 20}, ""},
		{"3600/h", config.RequestRate{PerSecond: 1, Burst: 2}, ""},
		{"1/m", config.RequestRate{PerSecond: 1.0 / 60, Burst: 1}, ""},
		{" 0.5/s , burst = 4 ", config.RequestRate{PerSecond: 0.5, Burst: 4}, ""},
		{"off", config.RequestRate{}, ""},
		{"0", config.RequestRate{}, ""},
		{"50", config.RequestRate{}, "not a rate"},
		{"50/d", config.RequestRate{}, "unit"},
		{"-5/s", config.RequestRate{}, "positive"},
		{"0/s", config.RequestRate{}, "positive"},
		{"NaN/s", config.RequestRate{}, "positive"},
		{"50/s,burst=0", config.RequestRate{}, "burst=N"},
		{"50/s,size=10", config.RequestRate{}, "burst=N"},
		{"5000000/s", config.RequestRate{}, "no limit"},
	}
	for _, tt := range tests {
		got, err := config.ParseRequestRate(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.InDelta(t, tt.want.PerSecond, got.PerSecond, 1e-12, tt.in)
		require.Equal(t, tt.want.Burst, got.Burst, tt.in)
	}

	// The defaults: 50 a second with a burst of 100 for consumers,
	// operators unlimited; a bad value is one of Validate's problems.
	c := config.Default()
	consumer, err := config.ParseRequestRate(c.ConsumerRateLimit)
	require.NoError(t, err)
	require.Equal(t, config.RequestRate{PerSecond: 50, Burst: 100}, consumer)
	operator, err := config.ParseRequestRate(c.OperatorRateLimit)
	require.NoError(t, err)
	require.Zero(t, operator)
	c.ConsumerRateLimit, c.OperatorRateLimit = "fast", "50/week"
	err = c.Validate(true)
	require.ErrorContains(t, err, "consumer-rate-limit:")
	require.ErrorContains(t, err, "operator-rate-limit:")
}
