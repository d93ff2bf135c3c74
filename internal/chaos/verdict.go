package chaos

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdict is what a run came to. The fields marked "must be 0" fail the
// run when they are not.
type Verdict struct {
	Backend  string  `json:"backend"`
	Seed     uint64  `json:"seed"`
	Duration string  `json:"duration"`
	Rate     float64 `json:"rate"`

	// Sent counts the events the load sent; Acknowledged those Herald
	// answered 2xx for (accepted means committed).
	Sent         int `json:"sent"`
	Acknowledged int `json:"acknowledged"`
	// Deliveries is Acknowledged times the endpoints; Delivered those the
	// receiver took at least once.
	Deliveries int `json:"deliveries"`
	Delivered  int `json:"delivered"`
	// Lost: acknowledged and never delivered once the run had drained.
	// Must be 0, but with an asynchronous standby that was promoted, where
	// it is reported (LostToAsync) and does not fail the run.
	Lost        int  `json:"lost"`
	LostToAsync bool `json:"lost_to_async_replication,omitempty"`
	// Duplicates counts deliveries the receiver took more than once (each
	// extra taking counts one); each is traced to a fault that cost a lease
	// (DuplicatesTraced) or not (DuplicatesUntraced).
	Duplicates         int     `json:"duplicates"`
	DuplicatesTraced   int     `json:"duplicates_traced"`
	DuplicatesUntraced int     `json:"duplicates_untraced"`
	DuplicateRate      float64 `json:"duplicate_rate"`
	// InDoubt: events never acknowledged (every try of their call failed)
	// that were delivered anyway: committed, but the answer was lost.
	InDoubt          int `json:"in_doubt"`
	InDoubtDelivered int `json:"in_doubt_delivered"`
	// Rejected: events Herald refused with a 4xx. The load sends only
	// valid ones. Must be 0.
	Rejected int `json:"rejected"`
	// IngestedTwice: events that reached an endpoint under two webhook ids,
	// as if the idempotency key had not held. Must be 0.
	IngestedTwice int `json:"ingested_twice"`
	// FIFOViolations: events of the FIFO endpoint that reached it before an
	// event acknowledged before they were sent was first delivered. Must be 0.
	FIFOViolations int `json:"fifo_violations"`
	// RateLimitViolations: arrivals at the rate-limited endpoint that made
	// more than rate + burst within one second (less arrivalJitter). Must
	// be 0.
	RateLimitViolations int `json:"rate_limit_violations"`
	RateLimitPeak       int `json:"rate_limit_peak_per_second"`
	RateLimitAllowed    int `json:"rate_limit_allowed_per_second"`
	// BadSignatures: arrivals whose signature did not verify, or whose
	// body was not what was sent. Must be 0.
	BadSignatures int `json:"bad_signatures"`
	// Strange: requests to the receiver that were not webhooks of the run.
	// Must be 0.
	Strange int64 `json:"strange"`
	// NodesDied: nodes that exited without being killed. Must be 0.
	NodesDied int          `json:"nodes_died"`
	Nodes     []NodeReport `json:"nodes"`
	// Drained: every acknowledged delivery arrived and Herald had nothing
	// left to do before the drain's limit. Must be true.
	Drained     bool     `json:"drained"`
	DrainSecs   float64  `json:"drain_seconds"`
	Faults      []Window `json:"faults"`
	FaultErrors int      `json:"fault_errors"`
	// Replication is PostgreSQL's: sync, async or none ("" on SQLite).
	Replication string `json:"replication,omitempty"`
	// Failovers: each promotion of the standby, and how soon each node
	// was back at work on the new primary. Every node must be within
	// recoveryLimit (15 s), without a restart.
	Failovers []FailoverReport `json:"failovers,omitempty"`
	// Upgrade: a rolling upgrade's run (Upgrade); every node of the
	// previous release must have worked on the migrated schema.
	Upgrade *UpgradeReport `json:"upgrade,omitempty"`
	// Failures names each must that failed; Pass is true when there is none.
	Failures []string `json:"failures"`
	Pass     bool     `json:"pass"`
	// Examples shows a few of each finding, to start looking from.
	Examples map[string][]string `json:"examples,omitempty"`
	// lost names the lost deliveries, for diagnose.
	lost []lostDelivery
}

// lostDelivery is an acknowledged event that never reached an endpoint.
type lostDelivery struct {
	cid, eventID, endpoint, endpointID string
}

// NodeReport is one node's life in a run.
type NodeReport struct {
	Name         string   `json:"name"`
	Starts       int      `json:"starts"`
	PeakRSSBytes int64    `json:"peak_rss_bytes"`
	DiedOnItsOwn int      `json:"died_on_its_own"`
	Deaths       []string `json:"deaths,omitempty"`
}

type judgeInput struct {
	backend   string
	seed      uint64
	duration  time.Duration
	rate      float64
	sent      []sentEvent
	arrivals  []Arrival
	endpoints []endpointSpec
	windows   []Window
	planned   []Nemesis
	strange   int64
	drained   bool
	drainTime time.Duration
	// slack widens each process fault's window when tracing duplicates:
	// a delivery taken just before the fault, or whose outcome was being
	// written as it began, is redelivered once its lease expires.
	slack time.Duration
}

// maxExamples bounds the examples kept per finding.
const maxExamples = 5

// judge computes the verdict of a run from what was sent and what arrived.
func judge(in judgeInput) *Verdict {
	v := &Verdict{
		Backend: in.backend, Seed: in.seed, Duration: in.duration.String(), Rate: in.rate,
		Sent: len(in.sent), Strange: in.strange, Drained: in.drained,
		DrainSecs: in.drainTime.Seconds(), Faults: in.windows, Examples: map[string][]string{},
	}
	example := func(kind, format string, args ...any) {
		if len(v.Examples[kind]) < maxExamples {
			v.Examples[kind] = append(v.Examples[kind], fmt.Sprintf(format, args...))
		}
	}
	for _, w := range in.windows {
		if w.Err != "" {
			v.FaultErrors++
		}
	}

	byCID := make(map[string]*sentEvent, len(in.sent))
	for i := range in.sent {
		ev := &in.sent[i]
		byCID[ev.CID] = ev
		switch {
		case ev.Rejected != "":
			v.Rejected++
			example("rejected", "%s: %s", ev.CID, ev.Rejected)
		case ev.AckAt.IsZero():
			v.InDoubt++
		default:
			v.Acknowledged++
		}
	}

	// Per (event, endpoint): the arrivals, in order.
	type pairKey struct{ cid, ep string }
	pairs := make(map[pairKey][]Arrival)
	for _, a := range in.arrivals {
		if !a.SignatureOK || !a.BodyOK {
			v.BadSignatures++
			example("bad_signature", "%s to %s at %s (signature ok %t, body ok %t)", a.WebhookID, a.Endpoint, a.At.Format(time.RFC3339Nano), a.SignatureOK, a.BodyOK)
		}
		if a.CID == "" {
			continue
		}
		k := pairKey{a.CID, a.Endpoint}
		pairs[k] = append(pairs[k], a)
	}

	faultSpans := processSpans(in.windows, in.slack)
	inDoubtDelivered := map[string]bool{}
	for k, as := range pairs {
		ev := byCID[k.cid]
		ids := map[string]bool{}
		delivered := 0
		var firstDelivered time.Time
		for _, a := range as {
			ids[a.WebhookID] = true
			if !a.Delivered {
				continue
			}
			delivered++
			if delivered == 1 {
				firstDelivered = a.At
				continue
			}
			v.Duplicates++
			if traced(faultSpans, firstDelivered) {
				v.DuplicatesTraced++
			} else {
				v.DuplicatesUntraced++
				example("duplicate_untraced", "%s to %s: first taken %s, again %s", a.WebhookID, k.ep, firstDelivered.Format("15:04:05.000"), a.At.Format("15:04:05.000"))
			}
		}
		if len(ids) > 1 {
			v.IngestedTwice++
			example("ingested_twice", "%s reached %s under %d webhook ids", k.cid, k.ep, len(ids))
		}
		if ev != nil && ev.AckAt.IsZero() && delivered > 0 {
			inDoubtDelivered[k.cid] = true
		}
	}
	v.InDoubtDelivered = len(inDoubtDelivered)

	for _, ev := range in.sent {
		if ev.AckAt.IsZero() || ev.Rejected != "" {
			continue
		}
		for _, ep := range in.endpoints {
			v.Deliveries++
			if deliveredOnce(pairs[pairKey{ev.CID, ep.Name}]) {
				v.Delivered++
				continue
			}
			v.Lost++
			v.lost = append(v.lost, lostDelivery{cid: ev.CID, eventID: ev.EventID, endpoint: ep.Name, endpointID: ep.ID})
			example("lost", "%s (%s) to %s, acknowledged %s", ev.CID, ev.EventID, ep.Name, ev.AckAt.Format("15:04:05.000"))
		}
	}
	if v.Deliveries > 0 {
		v.DuplicateRate = float64(v.Duplicates) / float64(v.Deliveries)
	}

	for _, ep := range in.endpoints {
		var mine []Arrival
		for _, a := range in.arrivals {
			if a.Endpoint == ep.Name {
				mine = append(mine, a)
			}
		}
		if ep.FIFO {
			n, ex := fifoViolations(in.sent, mine)
			v.FIFOViolations += n
			for _, e := range ex {
				example("fifo", "%s", e)
			}
		}
		if ep.Rate > 0 {
			allowed := int(ep.Rate) + ep.Burst
			n, peak, ex := rateViolations(mine, allowed, time.Second-arrivalJitter)
			v.RateLimitViolations += n
			v.RateLimitPeak = max(v.RateLimitPeak, peak)
			v.RateLimitAllowed = allowed
			if ex != "" {
				example("rate_limit", "%s", ex)
			}
		}
	}
	return v
}

// span is a stretch of wall time.
type span struct{ from, to time.Time }

// processSpans are the windows of the process faults (kill, freeze,
// database crash), widened by slack on both sides.
func processSpans(ws []Window, slack time.Duration) []span {
	var out []span
	for _, w := range ws {
		if strings.HasPrefix(w.Kind, "receiver:") {
			continue
		}
		out = append(out, span{w.Start.Add(-slack), w.End.Add(slack)})
	}
	return out
}

// traced reports whether a delivery first taken at t can have lost its
// lease to a process fault: t falls within one's widened window.
func traced(spans []span, t time.Time) bool {
	for _, s := range spans {
		if !t.Before(s.from) && !t.After(s.to) {
			return true
		}
	}
	return false
}

func deliveredOnce(as []Arrival) bool {
	for _, a := range as {
		if a.Delivered {
			return true
		}
	}
	return false
}

// fifoViolations counts the events B of a FIFO endpoint that arrived there
// (any attempt) before some event A was first delivered, where A was
// acknowledged before B's call was sent: Herald knew A came first, so B
// must wait for it. Events whose calls overlapped have no order to keep.
func fifoViolations(sent []sentEvent, arrivals []Arrival) (int, []string) {
	firstArrival := map[string]time.Time{}
	firstDelivered := map[string]time.Time{}
	for _, a := range arrivals {
		if _, ok := firstArrival[a.CID]; !ok {
			firstArrival[a.CID] = a.At
		}
		if _, ok := firstDelivered[a.CID]; !ok && a.Delivered {
			firstDelivered[a.CID] = a.At
		}
	}
	// The acknowledged events by acknowledgement time, each with the
	// latest first delivery among it and those before it.
	type acked struct {
		at        time.Time
		cid       string
		latest    time.Time
		latestCID string
	}
	var as []acked
	for _, ev := range sent {
		if ev.AckAt.IsZero() {
			continue
		}
		as = append(as, acked{at: ev.AckAt, cid: ev.CID})
	}
	sort.Slice(as, func(i, j int) bool { return as[i].at.Before(as[j].at) })
	var latest time.Time
	var latestCID string
	for i := range as {
		if d, ok := firstDelivered[as[i].cid]; ok && d.After(latest) {
			latest, latestCID = d, as[i].cid
		}
		as[i].latest, as[i].latestCID = latest, latestCID
	}
	n := 0
	var ex []string
	for _, b := range sent {
		arr, ok := firstArrival[b.CID]
		if !ok {
			continue
		}
		// The events acknowledged before b was sent.
		i := sort.Search(len(as), func(i int) bool { return !as[i].at.Before(b.SentAt) })
		if i == 0 {
			continue
		}
		if prev := as[i-1]; prev.latest.After(arr) {
			n++
			if len(ex) < maxExamples {
				ex = append(ex, fmt.Sprintf("%s arrived %s, before %s (acknowledged before it was sent) was delivered at %s",
					b.CID, arr.Format("15:04:05.000"), prev.latestCID, prev.latest.Format("15:04:05.000")))
			}
		}
	}
	return n, ex
}

// arrivalJitter is how much later than its claim (where Herald spends the
// token) an attempt may arrive beyond another: the time to hand it to a
// sender, sign it and send it, on a loaded machine. Rate limits are judged
// over windows this much shorter than a second, so that jitter alone never
// counts as a violation: what arrives within (1 s - jitter) was claimed
// within 1 s.
const arrivalJitter = 250 * time.Millisecond

// rateViolations counts the arrivals that made more than allowed within
// the window up to and including them, and the most seen in one window.
func rateViolations(arrivals []Arrival, allowed int, window time.Duration) (int, int, string) {
	ts := make([]time.Time, len(arrivals))
	for i, a := range arrivals {
		ts[i] = a.At
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	n, peak, lo := 0, 0, 0
	var ex string
	for hi, t := range ts {
		for !ts[lo].After(t.Add(-window)) {
			lo++
		}
		inSecond := hi - lo + 1
		peak = max(peak, inSecond)
		if inSecond > allowed {
			n++
			if ex == "" {
				ex = fmt.Sprintf("%d arrivals in the %s up to %s, allowed %d", inSecond, window, t.Format("15:04:05.000"), allowed)
			}
		}
	}
	return n, peak, ex
}

// finish fills in the failures and Pass from the counts.
func (v *Verdict) finish() {
	v.NodesDied = 0
	for _, n := range v.Nodes {
		v.NodesDied += n.DiedOnItsOwn
	}
	v.Failures = nil
	must := func(ok bool, what string, args ...any) {
		if !ok {
			v.Failures = append(v.Failures, fmt.Sprintf(what, args...))
		}
	}
	must(v.Acknowledged > 0, "no event was acknowledged")
	v.LostToAsync = v.Lost > 0 && v.Replication == ReplicationAsync && len(v.Failovers) > 0
	must(v.Lost == 0 || v.LostToAsync, "lost %d acknowledged deliveries", v.Lost)
	if v.Upgrade != nil {
		for _, name := range sortedKeys(v.Upgrade.WorkOnNewerSchema) {
			must(v.Upgrade.WorkOnNewerSchema[name] > 0, "%s of the previous release did no work once the current release had migrated the schema", name)
		}
	}
	for i, f := range v.Failovers {
		must(len(f.NotRecovered) == 0, "failover %d: %v not back at work within %s of the promotion", i+1, f.NotRecovered, recoveryLimit)
		for _, name := range sortedKeys(f.Recovered) {
			must(f.Recovered[name] <= recoveryLimit.Seconds(), "failover %d: %s back at work %.1fs after the promotion (limit %s)", i+1, name, f.Recovered[name], recoveryLimit)
		}
	}
	must(v.FIFOViolations == 0, "%d FIFO order violations", v.FIFOViolations)
	must(v.RateLimitViolations == 0, "%d rate-limit violations (peak %d a second, allowed %d)", v.RateLimitViolations, v.RateLimitPeak, v.RateLimitAllowed)
	must(v.NodesDied == 0, "%d node(s) died without being killed", v.NodesDied)
	must(v.Rejected == 0, "%d valid events rejected", v.Rejected)
	must(v.IngestedTwice == 0, "%d events ingested twice despite their idempotency key", v.IngestedTwice)
	must(v.BadSignatures == 0, "%d arrivals with a bad signature or body", v.BadSignatures)
	must(v.Strange == 0, "%d requests to the receiver that were not the run's webhooks", v.Strange)
	must(v.Drained, "the queue did not drain")
	must(v.FaultErrors == 0, "%d faults could not be applied or undone", v.FaultErrors)
	v.Pass = len(v.Failures) == 0
}

// Summary is the verdict in one line.
func (v *Verdict) Summary() string {
	status := "PASS"
	if !v.Pass {
		status = "FAIL: " + strings.Join(v.Failures, "; ")
	}
	return fmt.Sprintf("%s: %d acknowledged, %d deliveries, %s, duplicates %d (%.3f%%, %d untraced), %s",
		v.Backend, v.Acknowledged, v.Deliveries, v.lostText(), v.Duplicates, 100*v.DuplicateRate, v.DuplicatesUntraced, status)
}

// lostText is "lost N", saying when the loss is asynchronous replication's.
func (v *Verdict) lostText() string {
	if v.LostToAsync {
		return fmt.Sprintf("lost %d (asynchronous replication)", v.Lost)
	}
	return fmt.Sprintf("lost %d", v.Lost)
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WriteTable writes verdicts side by side, a row per measure.
func WriteTable(w io.Writer, vs []*Verdict) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "measure"
	for _, v := range vs {
		head += "\t" + v.Backend
	}
	fmt.Fprintln(tw, head)
	row := func(name string, f func(v *Verdict) string) {
		line := name
		for _, v := range vs {
			line += "\t" + f(v)
		}
		fmt.Fprintln(tw, line)
	}
	num := func(f func(v *Verdict) int) func(v *Verdict) string {
		return func(v *Verdict) string { return fmt.Sprint(f(v)) }
	}
	row("seed", func(v *Verdict) string { return fmt.Sprint(v.Seed) })
	row("duration", func(v *Verdict) string { return v.Duration })
	row("faults", func(v *Verdict) string { return faultCounts(v.Faults) })
	row("events sent", num(func(v *Verdict) int { return v.Sent }))
	row("acknowledged", num(func(v *Verdict) int { return v.Acknowledged }))
	row("deliveries", num(func(v *Verdict) int { return v.Deliveries }))
	row("lost (must be 0)", func(v *Verdict) string { return v.lostText() })
	row("duplicates", func(v *Verdict) string {
		return fmt.Sprintf("%d (%.3f%%; %d traced to a lost lease, %d not)", v.Duplicates, 100*v.DuplicateRate, v.DuplicatesTraced, v.DuplicatesUntraced)
	})
	row("in doubt (not acknowledged)", func(v *Verdict) string {
		return fmt.Sprintf("%d (%d delivered anyway)", v.InDoubt, v.InDoubtDelivered)
	})
	row("FIFO violations (must be 0)", num(func(v *Verdict) int { return v.FIFOViolations }))
	row("rate-limit violations (must be 0)", func(v *Verdict) string {
		return fmt.Sprintf("%d (peak %d/s, allowed %d)", v.RateLimitViolations, v.RateLimitPeak, v.RateLimitAllowed)
	})
	row("rejected (must be 0)", num(func(v *Verdict) int { return v.Rejected }))
	row("ingested twice (must be 0)", num(func(v *Verdict) int { return v.IngestedTwice }))
	row("bad signatures (must be 0)", num(func(v *Verdict) int { return v.BadSignatures }))
	row("nodes died by themselves (must be 0)", num(func(v *Verdict) int { return v.NodesDied }))
	row("replication", func(v *Verdict) string {
		if v.Replication == "" {
			return "-"
		}
		return v.Replication
	})
	row("failovers: back at work after (s, at most 15)", func(v *Verdict) string {
		if len(v.Failovers) == 0 {
			return "-"
		}
		var parts []string
		for _, f := range v.Failovers {
			var ns []string
			for _, name := range sortedKeys(f.Recovered) {
				ns = append(ns, fmt.Sprintf("%s %.1f", name, f.Recovered[name]))
			}
			for _, name := range f.NotRecovered {
				ns = append(ns, name+" never")
			}
			for _, name := range f.Interrupted {
				ns = append(ns, name+" killed or frozen first")
			}
			parts = append(parts, strings.Join(ns, ", "))
		}
		return strings.Join(parts, "; ")
	})
	if slices.ContainsFunc(vs, func(v *Verdict) bool { return v.Upgrade != nil }) {
		row("previous release's work on the newer schema", func(v *Verdict) string {
			if v.Upgrade == nil {
				return "-"
			}
			var ns []string
			for _, name := range sortedKeys(v.Upgrade.WorkOnNewerSchema) {
				ns = append(ns, fmt.Sprintf("%s %.0f", name, v.Upgrade.WorkOnNewerSchema[name]))
			}
			return strings.Join(ns, ", ")
		})
	}
	row("drained", func(v *Verdict) string { return fmt.Sprintf("%t (%.1fs)", v.Drained, v.DrainSecs) })
	names := map[string]bool{}
	var order []string
	for _, v := range vs {
		for _, n := range v.Nodes {
			if !names[n.Name] {
				names[n.Name] = true
				order = append(order, n.Name)
			}
		}
	}
	for _, name := range order {
		row("peak memory "+name, func(v *Verdict) string {
			for _, n := range v.Nodes {
				if n.Name == name {
					return fmt.Sprintf("%.1f MiB (%d starts)", float64(n.PeakRSSBytes)/(1<<20), n.Starts)
				}
			}
			return "-"
		})
	}
	row("verdict", func(v *Verdict) string {
		if v.Pass {
			return "PASS"
		}
		return "FAIL"
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range vs {
		for _, f := range v.Failures {
			fmt.Fprintf(w, "%s: %s\n", v.Backend, f)
		}
		kinds := make([]string, 0, len(v.Examples))
		for k := range v.Examples {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			for _, e := range v.Examples[k] {
				fmt.Fprintf(w, "%s: %s: %s\n", v.Backend, k, e)
			}
		}
		for _, n := range v.Nodes {
			for _, d := range n.Deaths {
				fmt.Fprintf(w, "%s: %s\n", v.Backend, d)
			}
		}
	}
	return nil
}

// faultCounts says how many faults of each kind a run made.
func faultCounts(ws []Window) string {
	counts := map[string]int{}
	for _, w := range ws {
		k := strings.TrimPrefix(w.Kind, "receiver:")
		counts[k]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return fmt.Sprintf("%d: %s", len(ws), strings.Join(parts, ", "))
}
