package pyeval

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// equalityPairs has Python print, for pairs of values, both encoded as the
// harness sends them and whether a == b.
const equalityPairs = `
import collections, datetime, json, sys, types
harness = types.ModuleType("harness")
exec(compile(sys.stdin.read(), "harness", "exec"), harness.__dict__)
nan = lambda: float("nan")
utc = datetime.timezone.utc
plus1 = datetime.timezone(datetime.timedelta(hours=1))
pairs = [
    (1, 1.0), (True, 1), (True, 1.0), (False, 0), (True, 2), (1, 1 + 0j), (1j, 1j), (1, 1 + 1j),
    (2**53 + 1, float(2**53)), (2**53, float(2**53)), (0.1, 1 / 10), (0.1, 0.1000000001),
    (nan(), nan()), ([nan()], [nan()]), (float("inf"), float("inf")), (float("-inf"), float("inf")),
    (-0.0, 0), (10**400, 10**400), (10**400, float("inf")), (-(10**400), -(10**400) + 1),
    ("a", b"a"), ("é", "é"), ("\udc80", "\udc80"), ("\udc80", "\udc81"), ("", None), (None, None), (None, 0),
    (b"x", bytearray(b"x")), ([1], (1,)), ([1, [2]], [1, [2.0]]), ((1, 2), (1, 2, 3)), ([], ()),
    ({1, 2}, frozenset({2, 1})), ({1, 2}, {1, 2.5}), (set(), frozenset()), ({1, True}, {1}),
    ({frozenset({1})}, {frozenset({1.0})}), ({(1, "a")}, {(1.0, "a")}),
    ({1: "a"}, {1.0: "a"}), ({1: "a", True: "b"}, {1: "b"}), ({(1, 2): [3]}, {(1.0, 2): [3.0]}),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}), ({"a": 1}, {"a": 1, "b": 2}), ({}, []),
    (collections.Counter("aab"), {"a": 2, "b": 1}), (collections.OrderedDict(a=1), {"a": 1}),
    (collections.namedtuple("P", "x y")(1, 2), (1, 2)),
    (datetime.datetime(2020, 1, 2, 3, 4, 5), datetime.datetime(2020, 1, 2, 3, 4, 5)),
    (datetime.datetime(2020, 1, 2, 3, 4, 5), datetime.datetime(2020, 1, 2, 3, 4, 6)),
    (datetime.datetime(2020, 1, 2, 3, tzinfo=utc), datetime.datetime(2020, 1, 2, 4, tzinfo=plus1)),
    (datetime.datetime(2020, 1, 2, 3), datetime.datetime(2020, 1, 2, 3, tzinfo=utc)),
    (datetime.date(2020, 1, 2), datetime.date(2020, 1, 2)), (datetime.timedelta(1), datetime.timedelta(hours=24)),
    (int, int), (int, str), ([int, str], [int, str]),
]
for a, b in pairs:
    print(json.dumps([harness.encode(a), harness.encode(b), a == b, repr((a, b))]))
`

// TestPyEqual compares pyEqual on values sent as data with Python's own ==
// on the values themselves.
func TestPyEqual(t *testing.T) {
	py, err := exec.LookPath(DefaultPython)
	if err != nil {
		t.Skipf("no %s on PATH: %v", DefaultPython, err)
	}
	cmd := exec.Command(py, "-S", "-c", equalityPairs)
	cmd.Stdin = strings.NewReader(harnessSource)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	n := 0
	for sc.Scan() {
		var row [4]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		a, err := decodeValue(row[0])
		if err != nil {
			t.Fatalf("%s: %v", row[0], err)
		}
		b, err := decodeValue(row[1])
		if err != nil {
			t.Fatalf("%s: %v", row[1], err)
		}
		var want bool
		var what string
		json.Unmarshal(row[2], &want)
		json.Unmarshal(row[3], &what)
		if got := pyEqual(&a, &b); got != want {
			t.Errorf("%s: pyEqual %v, Python's == %v (%s vs %s)", what, got, want, row[0], row[1])
		}
		if got := pyEqual(&b, &a); got != want {
			t.Errorf("%s reversed: pyEqual %v, Python's == %v", what, got, want)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("only %d pairs:\n%s", n, out)
	}
}

// TestDecodeValueErrors checks that what an answer may send instead of
// data is refused with an error, never a panic.
func TestDecodeValueErrors(t *testing.T) {
	for _, in := range []string{
		`[]`, `[1]`, `["int"]`, `["int", "xyz"]`, `["float", "one"]`, `["bytes", "!!"]`,
		`["dict", [1]]`, `["dict", [["int", "1"]]]`, `["nope", 1]`, `3`, `{"a": 1}`,
		`["timedelta", 1, 2]`, `["timedelta", 1.5, 0, 0]`, `["datetime", "2020"]`, `["list", ["int"]]`,
		`["complex", "1"]`, `["str", 5]`,
	} {
		if v, err := decodeValue(json.RawMessage(in)); err == nil {
			t.Errorf("%s decoded as %+v, want an error", in, v)
		}
	}
	// Unhashable keys and elements (which Python could not have made)
	// compare unequal rather than fail.
	a, err := decodeValue(json.RawMessage(`["set", ["list"]]`))
	if err != nil {
		t.Fatal(err)
	}
	if pyEqual(&a, &a) {
		t.Errorf("a set holding a list equals itself")
	}
}

// TestReadOutputs checks how an "outputs" process's lines are read: what
// an answer writes out of turn, or instead of data, ends its report.
func TestReadOutputs(t *testing.T) {
	lines := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	v0 := `{"test": 0, "value": ["int", "2"]}`
	e1 := `{"test": 1, "error": "answer raised ValueError: no"}`
	tests := []struct {
		name    string
		out     outcome
		values  int    // tests with a value
		errors  int    // tests with an error
		stop    string // part of why the report stopped; "" when complete
		wantErr bool
	}{
		{"complete", outcome{lines: lines(`{"ready": true}`, v0, e1, `{"done": true}`)}, 1, 1, "", false},
		{"null value", outcome{lines: lines(`{"ready": true}`, `{"test": 0, "value": null}`, e1, `{"done": true}`)}, 1, 1, "", false},
		// A forged line with an empty error counts as a failed test,
		// never a pass.
		{"forged pass", outcome{lines: lines(`{"ready": true}`, `{"test": 0, "passed": true, "error": ""}`, `{"done": true}`)}, 0, 1, "out of turn", false},
		{"neither value nor error", outcome{lines: lines(`{"ready": true}`, `{"test": 0, "passed": true}`), deadline: true}, 0, 0, "out of turn", false},
		{"both", outcome{lines: lines(`{"ready": true}`, `{"test": 0, "value": 1, "error": "x"}`)}, 0, 0, "out of turn", false},
		{"out of order", outcome{lines: lines(`{"ready": true}`, e1, v0, `{"done": true}`)}, 0, 0, "out of turn", false},
		{"garbage", outcome{lines: lines(`{"ready": true}`, v0, `garbage`)}, 1, 0, "not a result", false},
		{"cut off", outcome{lines: lines(`{"ready": true}`, v0), deadline: true}, 1, 0, "wall-clock limit", false},
		{"fatal", outcome{lines: lines(`{"ready": true}`, `{"fatal": "OSError: x"}`)}, 0, 0, "the harness failed", false},
		{"nothing", outcome{exitCode: 1}, 0, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, stop, err := readOutputs(tt.out, 2, time.Second, "answer")
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			values, errs := 0, 0
			for _, o := range got {
				if o.value != nil {
					values++
				}
				if o.err != "" {
					errs++
				}
			}
			if values != tt.values || errs != tt.errors {
				t.Errorf("%d values and %d errors, want %d and %d: %+v", values, errs, tt.values, tt.errors, got)
			}
			if (tt.stop == "") != (stop == "") || !strings.Contains(stop, tt.stop) {
				t.Errorf("stop %q, want %q", stop, tt.stop)
			}
		})
	}
}
