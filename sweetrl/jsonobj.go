package sweetrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// field is one key and value of a JSON object being written.
type field struct {
	key   string
	value any
}

// decodeObject decodes b as a JSON object; null and other values are errors.
func decodeObject(b []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", jsonerr.Reword(err))
	}
	if obj == nil {
		return nil, errors.New("not a JSON object: null")
	}
	return obj, nil
}

// stringField returns obj[key] as a string; present reports whether the key
// was there. A value that is not a string is an error.
func stringField(obj map[string]json.RawMessage, key string) (s string, present bool, err error) {
	raw, ok := obj[key]
	if !ok {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", true, fmt.Errorf("%q is not a string", key)
	}
	return s, true, nil
}

// extraFields returns the entries of obj whose keys are not in known, or nil
// when there are none.
func extraFields(obj map[string]json.RawMessage, known ...string) map[string]json.RawMessage {
	var extra map[string]json.RawMessage
	for k, v := range obj {
		isKnown := false
		for _, kk := range known {
			if k == kk {
				isKnown = true
				break
			}
		}
		if !isKnown {
			if extra == nil {
				extra = make(map[string]json.RawMessage)
			}
			extra[k] = v
		}
	}
	return extra
}

// marshalValue encodes v as compact JSON without escaping <, > and &, which
// are common in code and would otherwise be written as \u003c and so on.
func marshalValue(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// encodeObject writes the known fields in order, then the extra fields that
// do not collide with a known key, sorted by key.
func encodeObject(known []field, extra map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	seen := make(map[string]bool, len(known))
	write := func(key string, value any) error {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, err := marshalValue(key)
		if err != nil {
			return err
		}
		v, err := marshalValue(value)
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
		return nil
	}
	for _, f := range known {
		seen[f.key] = true
		if err := write(f.key, f.value); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := write(k, extra[k]); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
