package pyeval

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// valueKind is the Python type of a value sent as data.
type valueKind uint8

const (
	kindNone valueKind = iota
	kindBool
	kindInt
	kindFloat
	kindComplex
	kindStr
	kindBytes
	kindList
	kindTuple
	kindSet
	kindFrozenset
	kindDict
	kindType
	kindDatetime
	kindDate
	kindTime
	kindTimedelta
	kindOther
)

// value is a Python value that crossed from a sandboxed process as tagged
// JSON data (see encode in harness.py). Comparing two values follows
// Python's == on the built-in types, without running any code of the
// program that produced them.
type value struct {
	kind  valueKind
	b     bool     // bool; datetime: aware (then s is in UTC)
	i     *big.Int // int
	f, im float64  // float; complex (f the real part)
	s     string   // str, bytes, type and other: the qualified name, date and time: ISO text
	td    [3]int64 // timedelta: days, seconds, microseconds
	// items are the elements of a list, tuple, set or frozenset, or a
	// dict's keys and values interleaved: k0, v0, k1, v1, ….
	items []value
}

// decodeValue parses a tagged JSON value.
func decodeValue(raw json.RawMessage) (value, error) {
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		return value{}, err
	}
	return fromJSON(x)
}

// fromJSON converts a decoded JSON tree to a value.
func fromJSON(x any) (value, error) {
	switch x := x.(type) {
	case nil:
		return value{kind: kindNone}, nil
	case bool:
		return value{kind: kindBool, b: x}, nil
	case string:
		return value{kind: kindStr, s: x}, nil
	case []any:
		if len(x) == 0 {
			return value{}, errors.New("an empty tagged list")
		}
		tag, ok := x[0].(string)
		if !ok {
			return value{}, errors.New("a tagged list without its tag")
		}
		return fromTagged(tag, x[1:])
	}
	return value{}, fmt.Errorf("untagged JSON %T", x)
}

// fromTagged converts ["tag", args...] to a value.
func fromTagged(tag string, args []any) (value, error) {
	str := func(i int) (string, error) {
		if i >= len(args) {
			return "", fmt.Errorf("%q lacks argument %d", tag, i+1)
		}
		s, ok := args[i].(string)
		if !ok {
			return "", fmt.Errorf("%q: argument %d is not a string", tag, i+1)
		}
		return s, nil
	}
	float := func(i int) (float64, error) {
		s, err := str(i)
		if err != nil {
			return 0, err
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %q is not a float", tag, s)
		}
		return f, nil
	}
	items := func(pairs bool) ([]value, error) {
		var out []value
		for _, a := range args {
			if !pairs {
				v, err := fromJSON(a)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
				continue
			}
			kv, ok := a.([]any)
			if !ok || len(kv) != 2 {
				return nil, errors.New(`a "dict" item that is not a [key, value] pair`)
			}
			k, err := fromJSON(kv[0])
			if err != nil {
				return nil, err
			}
			v, err := fromJSON(kv[1])
			if err != nil {
				return nil, err
			}
			out = append(out, k, v)
		}
		return out, nil
	}
	switch tag {
	case "int":
		s, err := str(0)
		if err != nil {
			return value{}, err
		}
		i, ok := new(big.Int).SetString(s, 16)
		if !ok {
			return value{}, fmt.Errorf(`"int": %q is not hexadecimal`, clip(s))
		}
		return value{kind: kindInt, i: i}, nil
	case "float":
		f, err := float(0)
		return value{kind: kindFloat, f: f}, err
	case "complex":
		re, err := float(0)
		if err != nil {
			return value{}, err
		}
		im, err := float(1)
		return value{kind: kindComplex, f: re, im: im}, err
	case "str", "bytes":
		s, err := str(0)
		if err != nil {
			return value{}, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return value{}, fmt.Errorf("%q: %v", tag, err)
		}
		k := kindStr
		if tag == "bytes" {
			k = kindBytes
		}
		return value{kind: k, s: string(b)}, nil
	case "list", "tuple", "set", "frozenset", "dict":
		its, err := items(tag == "dict")
		k := map[string]valueKind{"list": kindList, "tuple": kindTuple, "set": kindSet, "frozenset": kindFrozenset, "dict": kindDict}[tag]
		return value{kind: k, items: its}, err
	case "type", "date", "time", "other":
		s, err := str(0)
		k := map[string]valueKind{"type": kindType, "date": kindDate, "time": kindTime, "other": kindOther}[tag]
		return value{kind: k, s: s}, err
	case "datetime":
		s, err := str(0)
		if err != nil {
			return value{}, err
		}
		aware, ok := false, len(args) == 2
		if ok {
			aware, ok = args[1].(bool)
		}
		if !ok {
			return value{}, errors.New(`"datetime" without its awareness`)
		}
		return value{kind: kindDatetime, s: s, b: aware}, nil
	case "timedelta":
		v := value{kind: kindTimedelta}
		if len(args) != 3 {
			return value{}, errors.New(`"timedelta" wants days, seconds and microseconds`)
		}
		for i, a := range args {
			f, ok := a.(float64)
			if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return value{}, errors.New(`"timedelta" with a part that is not an integer`)
			}
			v.td[i] = int64(f)
		}
		return v, nil
	}
	return value{}, fmt.Errorf("unknown tag %q", clip(tag))
}

// numeric reports whether v is a number in Python's sense (bool, int,
// float, complex).
func (v *value) numeric() bool {
	return v.kind == kindBool || v.kind == kindInt || v.kind == kindFloat || v.kind == kindComplex
}

// realPart is one part of a number: exact when finite, else an infinity or
// a NaN in f.
type realPart struct {
	exact *big.Rat // nil for inf and nan
	f     float64
}

// parts returns a number's real and imaginary parts.
func (v *value) parts() (re, im realPart) {
	part := func(f float64) realPart {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return realPart{f: f}
		}
		return realPart{exact: new(big.Rat).SetFloat64(f)}
	}
	switch v.kind {
	case kindBool:
		n := int64(0)
		if v.b {
			n = 1
		}
		return realPart{exact: big.NewRat(n, 1)}, part(0)
	case kindInt:
		return realPart{exact: new(big.Rat).SetInt(v.i)}, part(0)
	case kindFloat:
		return part(v.f), part(0)
	}
	return part(v.f), part(v.im)
}

// equal is Python's == on two parts: exact for finite values, NaN equal to
// nothing.
func (p realPart) equal(q realPart) bool {
	if p.exact != nil && q.exact != nil {
		return p.exact.Cmp(q.exact) == 0
	}
	if p.exact != nil || q.exact != nil {
		return false
	}
	return p.f == q.f // infinities of one sign; NaN != NaN
}

// key returns a part's hash key: equal parts have equal keys; a NaN gets a
// key of its own (Python finds a NaN key only by identity, which does not
// cross processes).
func (p realPart) key(nan *int) string {
	if p.exact != nil {
		return p.exact.RatString()
	}
	if math.IsNaN(p.f) {
		*nan++
		return "nan#" + strconv.Itoa(*nan)
	}
	return strconv.FormatFloat(p.f, 'g', -1, 64)
}

// pyEqual reports whether a == b in Python, for values of the built-in
// types: numbers compare by value across bool, int, float and complex; a
// list equals only a list and a tuple only a tuple; set and frozenset
// compare with each other; dicts compare by key and value; NaN equals
// nothing. A value of a type that did not cross as data ("other") equals
// nothing.
func pyEqual(a, b *value) bool {
	if a.numeric() && b.numeric() {
		are, aim := a.parts()
		bre, bim := b.parts()
		return are.equal(bre) && aim.equal(bim)
	}
	if (a.kind == kindSet || a.kind == kindFrozenset) && (b.kind == kindSet || b.kind == kindFrozenset) {
		ka, okA := setKeys(a.items)
		kb, okB := setKeys(b.items)
		if !okA || !okB || len(ka) != len(kb) {
			return false
		}
		for k := range ka {
			if !kb[k] {
				return false
			}
		}
		return true
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kindNone:
		return true
	case kindStr, kindBytes, kindType, kindDate, kindTime:
		return a.s == b.s
	case kindDatetime:
		return a.s == b.s && a.b == b.b
	case kindTimedelta:
		return a.td == b.td
	case kindList, kindTuple:
		if len(a.items) != len(b.items) {
			return false
		}
		for i := range a.items {
			if !pyEqual(&a.items[i], &b.items[i]) {
				return false
			}
		}
		return true
	case kindDict:
		da, okA := dictIndex(a.items)
		db, okB := dictIndex(b.items)
		if !okA || !okB || len(da) != len(db) {
			return false
		}
		for k, i := range da {
			j, ok := db[k]
			if !ok || !pyEqual(&a.items[i+1], &b.items[j+1]) {
				return false
			}
		}
		return true
	}
	return false // kindOther
}

// setKeys returns the hash keys of a set's elements; ok is false when one
// is not hashable.
func setKeys(items []value) (map[string]bool, bool) {
	nan := 0
	keys := make(map[string]bool, len(items))
	for i := range items {
		k, ok := hashKey(&items[i], &nan)
		if !ok {
			return nil, false
		}
		keys[k] = true
	}
	return keys, true
}

// dictIndex maps the hash key of each key of a dict (items interleaved
// keys and values) to the key's position in items; a later duplicate wins,
// as when Python builds the dict. ok is false when a key is not hashable.
func dictIndex(items []value) (map[string]int, bool) {
	nan := 0
	idx := make(map[string]int, len(items)/2)
	for i := 0; i+1 < len(items); i += 2 {
		k, ok := hashKey(&items[i], &nan)
		if !ok {
			return nil, false
		}
		idx[k] = i
	}
	return idx, true
}

// hashKey returns a string that two hashable values share exactly when
// Python finds them equal as dict keys or set elements; ok is false for an
// unhashable value (list, set, dict, and tuples holding one).
func hashKey(v *value, nan *int) (string, bool) {
	if v.numeric() {
		re, im := v.parts()
		if im.exact != nil && im.exact.Sign() == 0 {
			return "n" + re.key(nan), true
		}
		return "c" + re.key(nan) + "," + im.key(nan), true
	}
	lp := func(s string) string { return strconv.Itoa(len(s)) + ":" + s }
	switch v.kind {
	case kindNone:
		return "N", true
	case kindStr:
		return "s" + v.s, true
	case kindBytes:
		return "b" + v.s, true
	case kindType:
		return "T" + v.s, true
	case kindDate:
		return "d" + v.s, true
	case kindTime:
		return "h" + v.s, true
	case kindDatetime:
		return "D" + strconv.FormatBool(v.b) + v.s, true
	case kindTimedelta:
		return fmt.Sprintf("Δ%d,%d,%d", v.td[0], v.td[1], v.td[2]), true
	case kindOther:
		*nan++ // equal only to itself
		return "O#" + strconv.Itoa(*nan), true
	case kindTuple:
		var b strings.Builder
		b.WriteString("t(")
		for i := range v.items {
			k, ok := hashKey(&v.items[i], nan)
			if !ok {
				return "", false
			}
			b.WriteString(lp(k))
		}
		return b.String() + ")", true
	case kindFrozenset:
		keys := make([]string, 0, len(v.items))
		seen := map[string]bool{}
		for i := range v.items {
			k, ok := hashKey(&v.items[i], nan)
			if !ok {
				return "", false
			}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, lp(k))
			}
		}
		sort.Strings(keys)
		return "F{" + strings.Join(keys, "") + "}", true
	}
	return "", false
}

// firstOther returns the type name of the first value in v (v included)
// that did not cross as data, or "".
func firstOther(v *value) string {
	if v.kind == kindOther {
		return v.s
	}
	for i := range v.items {
		if s := firstOther(&v.items[i]); s != "" {
			return s
		}
	}
	return ""
}
