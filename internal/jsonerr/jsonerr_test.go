package jsonerr

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Size int `json:"size"`
}

type doc struct {
	Hidden *int               `json:"hidden_size"`
	Eps    float64            `json:"eps"`
	Name   string             `json:"name"`
	Tied   bool               `json:"tied"`
	Ids    []int              `json:"ids"`
	Vision inner              `json:"vision_config"`
	Map    map[string]string  `json:"map"`
	Any    any                `json:"any"`
	Nested map[string][]inner `json:"nested"`
}

func TestReword(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"syntax end", `{"hidden_size": 64,`, "malformed JSON at byte 19: unexpected end of JSON input"},
		{"syntax mid", `{"hidden_size" 64}`, "malformed JSON at byte 16: invalid character '6' after object key"},
		{"string for int", `{"hidden_size": "64"}`, "hidden_size is a JSON string, want an integer"},
		{"float for int", `{"hidden_size": 64.5}`, "hidden_size is a JSON number 64.5, want an integer"},
		{"string for float", `{"eps": "x"}`, "eps is a JSON string, want a number"},
		{"number for string", `{"name": 1}`, "name is a JSON number, want a string"},
		{"string for bool", `{"tied": "yes"}`, "tied is a JSON string, want a boolean"},
		{"object for array", `{"ids": {}}`, "ids is a JSON object, want an array"},
		{"nested field", `{"vision_config": {"size": "768"}}`, "vision_config.size is a JSON string, want an integer"},
		{"map value", `{"map": {"a": 1}}`, "map is a JSON number, want a string"},
		{"top level array", `[1, 2]`, "a JSON array, want an object"},
		{"top level string", `"x"`, "a JSON string, want an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := Reword(json.Unmarshal([]byte(tt.json), &d))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Reword(Unmarshal(%s)) = %v, want %q", tt.json, err, tt.want)
			}
			if strings.Contains(err.Error(), "json:") || strings.Contains(err.Error(), "main.") {
				t.Errorf("%q still names encoding/json or a Go type", err)
			}
		})
	}
}

func TestRewordDecoder(t *testing.T) {
	var d doc
	for _, tt := range []struct{ in, want string }{
		{``, "the JSON ends early"},
		{`{"name": `, "the JSON ends early"},
	} {
		err := Reword(json.NewDecoder(strings.NewReader(tt.in)).Decode(&d))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Reword(Decode(%q)) = %v, want %q", tt.in, err, tt.want)
		}
	}
	dec := json.NewDecoder(strings.NewReader(`{"extra": 1}`))
	dec.DisallowUnknownFields()
	if err := Reword(dec.Decode(&d)); err == nil || err.Error() != `unknown field "extra"` {
		t.Errorf("Reword(unknown field) = %v, want the message without its prefix", err)
	}
}

func TestRewordPassesOthers(t *testing.T) {
	if Reword(nil) != nil {
		t.Error("Reword(nil) != nil")
	}
	other := errors.New("disk on fire")
	if got := Reword(other); got != other {
		t.Errorf("Reword(%v) = %v, want it unchanged", other, got)
	}
	if got := Reword(io.ErrUnexpectedEOF); got.Error() != "the JSON ends early" {
		t.Errorf("Reword(ErrUnexpectedEOF) = %v", got)
	}
}

func TestKind(t *testing.T) {
	var i int
	tests := []struct {
		v    any
		want string
	}{
		{int8(0), "an integer"}, {uint64(0), "an integer"}, {&i, "an integer"},
		{float32(0), "a number"}, {"", "a string"}, {false, "a boolean"},
		{[]int{}, "an array"}, {[2]int{}, "an array"}, {map[string]int{}, "an object"},
		{inner{}, "an object"}, {(*any)(nil), "any JSON value"},
	}
	for _, tt := range tests {
		if got := Kind(reflect.TypeOf(tt.v)); got != tt.want {
			t.Errorf("Kind(%T) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
