package metrics

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	w, err := Create(path, WriterOptions{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Step: 0, Values: map[string]float64{Loss: 10.5, LR: 0}},
		{Step: 1, Values: map[string]float64{Loss: 9.25, LR: 1e-4, TokensPerS: 5120, GradNorm: 1.5}},
		{Step: 2, Values: map[string]float64{EvalLoss: 8}},
		{Step: 3, Values: map[string]float64{Loss: math.Inf(1), GradNorm: math.Inf(-1)}},
		{Step: 4},
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	if lines[1] != `{"step":1,"grad_norm":1.5,"loss":9.25,"lr":0.0001,"tokens_per_s":5120}` {
		t.Errorf("line 2 is %s", lines[1])
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if recs[i].Values == nil {
			recs[i].Values = map[string]float64{}
		}
	}
	if !reflect.DeepEqual(got, recs) {
		t.Errorf("read back %v; want %v", got, recs)
	}
	// NaN does not compare equal; check it separately.
	var buf bytes.Buffer
	NewWriter(&buf, "buf", WriterOptions{}).Write(Record{Step: 5, Values: map[string]float64{Loss: math.NaN()}})
	nr, err := ReadFrom(&buf, "buf")
	if err != nil || len(nr) != 1 || !math.IsNaN(nr[0].Values[Loss]) {
		t.Errorf("NaN round trip: %v, %v", nr, err)
	}
}

func TestReadErrors(t *testing.T) {
	good := `{"step":1,"loss":2}`
	tests := []struct{ line, want string }{
		{`{"step":`, "not a JSON object"},
		{`[1]`, "not a JSON object"},
		{`null`, "not a JSON object"},
		{`{"loss":2}`, `missing "step"`},
		{`{"step":"x"}`, `"step" is not a number`},
		{`{"step":1.5}`, "non-negative integer"},
		{`{"step":-1}`, "non-negative integer"},
		{`{"step":1,"loss":"high"}`, `"loss" is "high"`},
		{`{"step":1,"loss":[1]}`, `"loss" is not a number`},
	}
	for _, tc := range tests {
		_, err := ReadFrom(strings.NewReader(good+"\n\n"+tc.line+"\n"), "m.jsonl")
		if err == nil || !strings.Contains(err.Error(), "m.jsonl:3: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want m.jsonl:3: and %q", tc.line, err, tc.want)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("reading a missing file succeeded")
	}
	recs, err := ReadFrom(strings.NewReader(`{"step":1,"loss":null}`), "x")
	if err != nil || len(recs) != 1 || len(recs[0].Values) != 0 {
		t.Errorf("null value: %v, %v", recs, err)
	}
	if err := NewWriter(&bytes.Buffer{}, "b", WriterOptions{}).Write(Record{Values: map[string]float64{"step": 1}}); err == nil {
		t.Error(`a "step" value key was accepted`)
	}
}

// clock is a fake time source that advances by step on every call.
type clock struct {
	t    time.Time
	step time.Duration
}

func (c *clock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func TestProgressTerminal(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0), step: time.Second}
	p := NewProgress(&buf, ProgressOptions{Total: 100, Mode: Terminal, Now: c.now})
	p.Update(1, 2.5, 1e-4, 1000)
	p.Update(2, 2.25, 1e-4, math.NaN())
	p.Println("eval loss 2.0")
	p.Update(3, math.NaN(), math.NaN(), math.NaN())
	p.Done()
	want := "\r\x1b[Kstep 1/100  loss 2.5000  lr 0.0001  1000 tok/s" +
		"\r\x1b[Kstep 2/100  loss 2.2500  lr 0.0001  ETA 1:38" +
		"\r\x1b[Keval loss 2.0\n" +
		"\r\x1b[Kstep 3/100  ETA 1:37\n"
	if got := buf.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0), step: time.Second}
	p := NewProgress(&buf, ProgressOptions{Total: 25, Every: 10, Interval: 4 * time.Second, Now: c.now})
	for s := int64(1); s <= 25; s++ {
		p.Update(s, 1, 0.5, 10)
	}
	p.Done()
	var steps []string
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if strings.ContainsAny(l, "\r\x1b") {
			t.Fatalf("plain line %q has terminal control", l)
		}
		steps = append(steps, strings.Fields(l)[1])
	}
	// The first step, then every 10 steps or 4 seconds, and the last.
	want := []string{"1/25", "5/25", "9/25", "10/25", "14/25", "18/25", "20/25", "24/25", "25/25"}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("printed steps %v; want %v", steps, want)
	}
	if !strings.Contains(buf.String(), "step 10/25  loss 1.0000  lr 0.5  10 tok/s  ETA 0:15") {
		t.Errorf("unexpected line format:\n%s", buf.String())
	}
}

func TestProgressAuto(t *testing.T) {
	if NewProgress(&bytes.Buffer{}, ProgressOptions{}).term {
		t.Error("a buffer was taken for a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "p")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file was taken for a terminal")
	}
	if d, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer d.Close()
		if !IsTerminal(d) {
			t.Error("the null device is a character device and was not detected as one")
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0:00", 61 * time.Second: "1:01", 3723 * time.Second: "1:02:03"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %s; want %s", d, got, want)
		}
	}
}

func TestProgressLabel(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0), step: time.Second}
	p := NewProgress(&buf, ProgressOptions{Total: 8, Label: "rollout episodes", Mode: Plain, Now: c.now})
	p.Update(4, math.NaN(), math.NaN(), math.NaN())
	if got, want := buf.String(), "rollout episodes 4/8\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTruncate(t *testing.T) {
	const s1, s2, s3 = `{"step":1,"loss":3}`, `{"step":2,"loss":2.5}`, `{"step":3,"loss":2}`
	tests := []struct {
		name    string
		in      string
		step    int64
		want    string
		dropped int
		errWant string
	}{
		{"steps after the resumed one", s1 + "\n" + s2 + "\n" + s3 + "\n", 1, s1 + "\n", 2, ""},
		{"nothing to drop", s1 + "\n" + s2 + "\n", 2, s1 + "\n" + s2 + "\n", 0, ""},
		{"cut last line", s1 + "\n" + s2 + "\n" + `{"step":3,"lo`, 5, s1 + "\n" + s2 + "\n", 1, ""},
		{"resumed from scratch", s1 + "\n" + s2 + "\n", 0, "", 2, ""},
		{"damaged middle line", s1 + "\n{oops\n" + s2 + "\n", 1, "", 0, "m.jsonl:2: not a JSON object"},
		{"invalid UTF-8", s1 + "\n{\"step\":2,\"\xff\":1}\n", 1, "", 0, "m.jsonl:2: invalid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.jsonl")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			n, err := Truncate(path, tc.step)
			got, _ := os.ReadFile(path)
			if tc.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errWant) {
					t.Fatalf("Truncate: %v, want an error saying %q", err, tc.errWant)
				}
				if string(got) != tc.in {
					t.Error("a failed Truncate changed the file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want || n != tc.dropped {
				t.Errorf("file %q, %d dropped; want %q, %d", got, n, tc.want, tc.dropped)
			}
		})
	}
	if n, err := Truncate(filepath.Join(t.TempDir(), "none.jsonl"), 3); n != 0 || err != nil {
		t.Errorf("Truncate of a missing file: %d, %v", n, err)
	}
}
