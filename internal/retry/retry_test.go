package retry

import (
	"math"
	"testing"
	"time"

	"github.com/heraldhooks/herald"
	"github.com/stretchr/testify/require"
)

// justBelowOne is the largest r a caller's rand.Float64 can return.
var justBelowOne = math.Nextafter(1, 0)

func TestPolicyFor(t *testing.T) {
	t.Parallel()
	exp := &herald.ExponentialPolicy{Base: time.Second, Factor: 2, Cap: time.Minute, Attempts: 4}
	custom := []time.Duration{0, time.Minute}
	tests := []struct {
		name string
		ep   *herald.Endpoint
		want Policy
	}{
		{name: "NilEndpoint", ep: nil, want: Schedule(herald.DefaultRetrySchedule)},
		{name: "NothingSet", ep: &herald.Endpoint{}, want: Schedule(herald.DefaultRetrySchedule)},
		{name: "EmptySchedule", ep: &herald.Endpoint{RetrySchedule: []time.Duration{}}, want: Schedule(herald.DefaultRetrySchedule)},
		{name: "Schedule", ep: &herald.Endpoint{RetrySchedule: custom}, want: Schedule(custom)},
		{name: "Exponential", ep: &herald.Endpoint{RetryExponential: exp}, want: Exponential{*exp}},
		{name: "ExponentialWinsOverSchedule", ep: &herald.Endpoint{RetrySchedule: custom, RetryExponential: exp}, want: Exponential{*exp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, PolicyFor(tt.ep))
		})
	}
}

func TestScheduleNext(t *testing.T) {
	t.Parallel()
	s := Schedule(herald.DefaultRetrySchedule)
	tests := []struct {
		name          string
		failedAttempt int
		r             float64
		want          time.Duration
		wantOK        bool
	}{
		{name: "AfterFirstMiddle", failedAttempt: 1, r: 0.5, want: 30 * time.Second, wantOK: true},
		{name: "AfterFirstLowest", failedAttempt: 1, r: 0, want: 24 * time.Second, wantOK: true},
		{name: "AfterFirstHighest", failedAttempt: 1, r: justBelowOne, want: 36*time.Second - 1, wantOK: true},
		{name: "AfterSecond", failedAttempt: 2, r: 0.5, want: 5 * time.Minute, wantOK: true},
		{name: "AfterThird", failedAttempt: 3, r: 0.5, want: 30 * time.Minute, wantOK: true},
		{name: "AfterFourth", failedAttempt: 4, r: 0.5, want: 2 * time.Hour, wantOK: true},
		{name: "AfterFifth", failedAttempt: 5, r: 0.5, want: 8 * time.Hour, wantOK: true},
		{name: "AfterSixthLowest", failedAttempt: 6, r: 0, want: time.Duration(0.8 * float64(24*time.Hour)), wantOK: true},
		{name: "AfterSixthHighest", failedAttempt: 6, r: justBelowOne, want: 24*time.Hour*12/10 - 1, wantOK: true},
		{name: "AfterLastExhausted", failedAttempt: 7, r: 0.5, wantOK: false},
		{name: "PastLastExhausted", failedAttempt: 8, r: 0.5, wantOK: false},
		{name: "ZeroCountsAsFirst", failedAttempt: 0, r: 0.5, want: 30 * time.Second, wantOK: true},
		{name: "NegativeRClamped", failedAttempt: 1, r: -3, want: 24 * time.Second, wantOK: true},
		{name: "NaNRClamped", failedAttempt: 1, r: math.NaN(), want: 24 * time.Second, wantOK: true},
		{name: "LargeRClamped", failedAttempt: 1, r: 7, want: 36 * time.Second, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := s.Next(tt.failedAttempt, tt.r)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestScheduleJitterBounds(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Second, 30 * time.Second, time.Hour, 24 * time.Hour} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			s := Schedule{0, d}
			low, _ := s.Next(1, 0)
			require.Equal(t, time.Duration(0.8*float64(d)), low)
			high, _ := s.Next(1, justBelowOne)
			require.Less(t, high, time.Duration(1.2*float64(d))+1)
			require.Greater(t, high, time.Duration(1.2*float64(d))-time.Microsecond)
			for i := range 100 {
				got, ok := s.Next(1, float64(i)/100)
				require.True(t, ok)
				require.GreaterOrEqual(t, got, low)
				require.LessOrEqual(t, got, high)
			}
		})
	}
	t.Run("ZeroDelayStaysZero", func(t *testing.T) {
		t.Parallel()
		got, ok := Schedule{0, 0, time.Second}.Next(1, justBelowOne)
		require.True(t, ok)
		require.Zero(t, got)
	})
}

func TestScheduleBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		s        Schedule
		attempts int
	}{
		{name: "Default", s: Schedule(herald.DefaultRetrySchedule), attempts: 7},
		{name: "SingleAttempt", s: Schedule{0}, attempts: 1},
		{name: "Three", s: Schedule{0, time.Second, time.Minute}, attempts: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.attempts, tt.s.Attempts())
			// Every attempt but the last is followed by a retry, then the
			// budget is spent: attempts in all, never more.
			for n := 1; n < tt.attempts; n++ {
				_, ok := tt.s.Next(n, 0.5)
				require.True(t, ok, "after attempt %d", n)
			}
			_, ok := tt.s.Next(tt.attempts, 0.5)
			require.False(t, ok)
		})
	}
}

func TestDefaultScheduleTotal(t *testing.T) {
	t.Parallel()
	total := Schedule(herald.DefaultRetrySchedule).Total()
	require.Equal(t, 34*time.Hour+35*time.Minute+30*time.Second, total)
	// With every delay at its jitter extremes it stays "about 35 hours".
	var low, high time.Duration
	s := Schedule(herald.DefaultRetrySchedule)
	for n := 1; n < s.Attempts(); n++ {
		l, _ := s.Next(n, 0)
		h, _ := s.Next(n, justBelowOne)
		low, high = low+l, high+h
	}
	require.Equal(t, time.Duration(0.8*float64(total)), low.Round(time.Millisecond))
	require.Less(t, high, time.Duration(1.2*float64(total)))
}

func TestExponentialNext(t *testing.T) {
	t.Parallel()
	e := Exponential{herald.ExponentialPolicy{Base: time.Second, Factor: 2, Cap: time.Minute, Attempts: 10}}
	tests := []struct {
		name          string
		failedAttempt int
		r             float64
		want          time.Duration
		wantOK        bool
	}{
		{name: "FirstCeilingIsBase", failedAttempt: 1, r: 1, want: time.Second, wantOK: true},
		{name: "FullJitterBelowCeiling", failedAttempt: 1, r: justBelowOne, want: time.Second - 1, wantOK: true},
		{name: "FullJitterCanBeZero", failedAttempt: 1, r: 0, want: 0, wantOK: true},
		{name: "HalfOfSecond", failedAttempt: 2, r: 0.5, want: time.Second, wantOK: true},
		{name: "Grows", failedAttempt: 3, r: 1, want: 4 * time.Second, wantOK: true},
		{name: "GrowsMore", failedAttempt: 6, r: 1, want: 32 * time.Second, wantOK: true},
		{name: "Capped", failedAttempt: 7, r: 1, want: time.Minute, wantOK: true},
		{name: "StaysCapped", failedAttempt: 9, r: 0.5, want: 30 * time.Second, wantOK: true},
		{name: "Exhausted", failedAttempt: 10, r: 0.5, wantOK: false},
		{name: "ZeroCountsAsFirst", failedAttempt: 0, r: 1, want: time.Second, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := e.Next(tt.failedAttempt, tt.r)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
	t.Run("HugeGrowthDoesNotOverflow", func(t *testing.T) {
		t.Parallel()
		big := Exponential{herald.ExponentialPolicy{Base: time.Hour, Factor: 1e6, Cap: 24 * time.Hour, Attempts: 50}}
		require.Equal(t, 50, big.Attempts())
		for n := 1; n < 50; n++ {
			got, ok := big.Next(n, justBelowOne)
			require.True(t, ok)
			require.Greater(t, got, time.Duration(0))
			require.LessOrEqual(t, got, 24*time.Hour)
		}
	})
	t.Run("FactorOneIsConstant", func(t *testing.T) {
		t.Parallel()
		flat := Exponential{herald.ExponentialPolicy{Base: 10 * time.Second, Factor: 1, Cap: time.Minute, Attempts: 5}}
		for n := 1; n < 5; n++ {
			got, _ := flat.Next(n, 1)
			require.Equal(t, 10*time.Second, got)
		}
	})
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      []string
		want    []time.Duration
		wantErr []string // substrings of the error
	}{
		{name: "Example", in: []string{"0s", "30s", "5m"}, want: []time.Duration{0, 30 * time.Second, 5 * time.Minute}},
		{name: "Default", in: []string{"0s", "30s", "5m", "30m", "2h", "8h", "24h"}, want: herald.DefaultRetrySchedule},
		{name: "Compound", in: []string{"1h30m", " 90s "}, want: []time.Duration{90 * time.Minute, 90 * time.Second}},
		{name: "MaxDelay", in: []string{"24h"}, want: []time.Duration{24 * time.Hour}},
		{name: "Empty", in: []string{}, wantErr: []string{"0 delays, want 1 to 20"}},
		{name: "Nil", in: nil, wantErr: []string{"0 delays"}},
		{name: "TooMany", in: make21("1s"), wantErr: []string{"21 delays"}},
		{name: "NotADuration", in: []string{"0s", "soon"}, wantErr: []string{`delay 2: "soon" is not a duration`}},
		{name: "BareNumber", in: []string{"30"}, wantErr: []string{`delay 1: "30"`}},
		{name: "Negative", in: []string{"-1s"}, wantErr: []string{"delay 1: -1s is not between 0s and 24h"}},
		{name: "OverADay", in: []string{"0s", "24h1s"}, wantErr: []string{"delay 2: 24h0m1s"}},
		{name: "AllProblemsListed", in: []string{"x", "-1s", "25h"}, wantErr: []string{"delay 1", "delay 2", "delay 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSchedule(tt.in)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				require.NoError(t, ValidateSchedule(got))
				return
			}
			require.ErrorIs(t, err, ErrInvalidPolicy)
			require.NotContains(t, err.Error(), "\n")
			for _, want := range tt.wantErr {
				require.Contains(t, err.Error(), want)
			}
			require.Nil(t, got)
		})
	}
}

func make21(d string) []string {
	out := make([]string, 21)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestValidateSchedule(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateSchedule(herald.DefaultRetrySchedule))
	require.ErrorIs(t, ValidateSchedule(nil), ErrInvalidPolicy)
	require.ErrorIs(t, ValidateSchedule([]time.Duration{0, -time.Second}), ErrInvalidPolicy)
	require.ErrorIs(t, ValidateSchedule([]time.Duration{25 * time.Hour}), ErrInvalidPolicy)
	require.ErrorIs(t, ValidateSchedule(make([]time.Duration, 21)), ErrInvalidPolicy)
	require.NoError(t, ValidateSchedule(make([]time.Duration, 20)))
}

func TestFormatSchedule(t *testing.T) {
	t.Parallel()
	in := []time.Duration{0, 30 * time.Second, 5 * time.Minute, 2 * time.Hour, 90 * time.Minute, 90 * time.Second, 1500 * time.Millisecond, 24 * time.Hour}
	got := FormatSchedule(in)
	require.Equal(t, []string{"0s", "30s", "5m", "2h", "1h30m", "1m30s", "1.5s", "24h"}, got)
	back, err := ParseSchedule(got)
	require.NoError(t, err)
	require.Equal(t, in, back)
}

func TestValidateExponential(t *testing.T) {
	t.Parallel()
	valid := herald.ExponentialPolicy{Base: time.Second, Factor: 2, Cap: time.Hour, Attempts: 10}
	tests := []struct {
		name    string
		change  func(p *herald.ExponentialPolicy)
		wantErr string
	}{
		{name: "Valid", change: func(*herald.ExponentialPolicy) {}},
		{name: "LimitsInclusive", change: func(p *herald.ExponentialPolicy) {
			p.Factor, p.Cap, p.Attempts = 1, 24*time.Hour, 50
		}},
		{name: "CapEqualsBase", change: func(p *herald.ExponentialPolicy) { p.Cap = p.Base }},
		{name: "ZeroBase", change: func(p *herald.ExponentialPolicy) { p.Base = 0 }, wantErr: "base 0s is not above 0s"},
		{name: "FactorBelowOne", change: func(p *herald.ExponentialPolicy) { p.Factor = 0.5 }, wantErr: "factor 0.5"},
		{name: "FactorNaN", change: func(p *herald.ExponentialPolicy) { p.Factor = math.NaN() }, wantErr: "factor NaN"},
		{name: "FactorInf", change: func(p *herald.ExponentialPolicy) { p.Factor = math.Inf(1) }, wantErr: "factor +Inf"},
		{name: "CapBelowBase", change: func(p *herald.ExponentialPolicy) { p.Cap = p.Base / 2 }, wantErr: "cap 500ms is not between base (1s)"},
		{name: "CapOverADay", change: func(p *herald.ExponentialPolicy) { p.Cap = 25 * time.Hour }, wantErr: "cap 25h"},
		{name: "NoAttempts", change: func(p *herald.ExponentialPolicy) { p.Attempts = 0 }, wantErr: "attempts 0 is not between 1 and 50"},
		{name: "TooManyAttempts", change: func(p *herald.ExponentialPolicy) { p.Attempts = 51 }, wantErr: "attempts 51"},
		{name: "AllProblemsListed", change: func(p *herald.ExponentialPolicy) { *p = herald.ExponentialPolicy{Base: -1, Factor: 0, Cap: -2} }, wantErr: "base -1ns is not above 0s; factor 0 is not a number of at least 1; cap -2ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := valid
			tt.change(&p)
			err := ValidateExponential(p)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidPolicy)
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
