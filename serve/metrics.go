package serve

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
)

// latencyBuckets are the upper bounds, in seconds, of the latency
// histograms' buckets.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// rateWindow is the span over which the tokens/s gauge counts tokens.
const rateWindow = 10 * time.Second

// metrics are the server's counters, exposed at GET /metrics in
// Prometheus' text format. Every method is safe for concurrent use.
type metrics struct {
	mu             sync.Mutex
	requests       map[int]uint64 // by HTTP status
	promptTokens   uint64
	genTokens      uint64
	queue, running int
	ttft, latency  histogram
	// tokens generated per second of the last rateWindow: the second
	// (Unix) each bucket counts, and its count.
	secs   [10]int64
	counts [10]uint64
}

// histogram counts observations into latencyBuckets.
type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func (h *histogram) observe(v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(latencyBuckets)+1)
	}
	i, _ := slices.BinarySearch(latencyBuckets, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

// request counts a finished request: its status, its tokens and its
// latency.
func (m *metrics) request(status, prompt, generated int, latency time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests = map[int]uint64{}
	}
	m.requests[status]++
	m.promptTokens += uint64(prompt)
	m.latency.observe(latency.Seconds())
}

// generated counts tokens as the scheduler samples them.
func (m *metrics) generated(n int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.genTokens += uint64(n)
	sec := now.Unix()
	i := int(sec % int64(len(m.secs)))
	if m.secs[i] != sec {
		m.secs[i], m.counts[i] = sec, 0
	}
	m.counts[i] += uint64(n)
}

// firstToken records a job's time to its first token.
func (m *metrics) firstToken(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ttft.observe(d.Seconds())
}

// setBatch records the running batch's size and the jobs waiting.
func (m *metrics) setBatch(running, queue int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running, m.queue = running, queue
}

// write prints the metrics in Prometheus' text exposition format.
func (m *metrics) write(w io.Writer, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b []byte
	head := func(name, typ, help string) {
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	head("turnwise_requests_total", "counter", "Requests answered, by HTTP status.")
	codes := make([]int, 0, len(m.requests))
	for c := range m.requests {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		b = fmt.Appendf(b, "turnwise_requests_total{status=\"%d\"} %d\n", c, m.requests[c])
	}
	head("turnwise_prompt_tokens_total", "counter", "Prompt tokens of the requests answered.")
	b = fmt.Appendf(b, "turnwise_prompt_tokens_total %d\n", m.promptTokens)
	head("turnwise_generation_tokens_total", "counter", "Tokens generated.")
	b = fmt.Appendf(b, "turnwise_generation_tokens_total %d\n", m.genTokens)
	head("turnwise_queue_depth", "gauge", "Sequences waiting for a slot of the running batch.")
	b = fmt.Appendf(b, "turnwise_queue_depth %d\n", m.queue)
	head("turnwise_running_batch_size", "gauge", "Sequences in the running batch.")
	b = fmt.Appendf(b, "turnwise_running_batch_size %d\n", m.running)
	var recent uint64
	for i, sec := range m.secs {
		if age := now.Unix() - sec; age >= 0 && age < int64(len(m.secs)) {
			recent += m.counts[i]
		}
	}
	head("turnwise_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 seconds.")
	b = fmt.Appendf(b, "turnwise_generation_tokens_per_second %g\n", float64(recent)/rateWindow.Seconds())
	for _, h := range []struct {
		name, help string
		h          *histogram
	}{
		{"turnwise_time_to_first_token_seconds", "Time from a sequence's arrival to its first token.", &m.ttft},
		{"turnwise_request_latency_seconds", "Time from a request's arrival to its reply's end.", &m.latency},
	} {
		head(h.name, "histogram", h.help)
		var cum uint64
		for i, le := range latencyBuckets {
			if h.h.counts != nil {
				cum += h.h.counts[i]
			}
			b = fmt.Appendf(b, "%s_bucket{le=\"%s\"} %d\n", h.name, strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		b = fmt.Appendf(b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", h.name, h.h.n, h.name, h.h.sum, h.name, h.h.n)
	}
	_, err := w.Write(b)
	return err
}
