package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestParseIDs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int32
		err  string
	}{
		{"[1, 2, 128009]", []int32{1, 2, 128009}, ""},
		{" 5 6\n7 ", []int32{5, 6, 7}, ""},
		{"", []int32{}, ""},
		{"[1, 2.5]", nil, "not an integer"},
		{`[1, "a"]`, nil, `id 1 ("a") is not an integer`},
		{"[null]", nil, "id 0 (null) is not an integer"},
		{"[[3]]", nil, "id 0 ([3]) is not an integer"},
		{"[1, 2", nil, "parsing ids as a JSON array of integers"},
		{"1 x", nil, "not an integer"},
		{"[1] 2", nil, "after the JSON array"},
		{"-1", nil, "out of range"},
		{"[2147483648]", nil, "out of range"},
	} {
		got, err := ParseIDs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseIDs(%q): error %v, want one with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseIDs(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseConversation(t *testing.T) {
	want := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}
	for _, in := range []string{
		`[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]`,
		` {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "tool_calls": null}]}`,
	} {
		got, err := ParseConversation([]byte(in))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseConversation(%s) = %v, %v", in, got, err)
		}
	}
	for in, msg := range map[string]string{
		`{"turns": []}`:                    `no "messages" array`,
		`[{"role": "user", "content": 3}]`: "content must be a string",
		`[{"content": "x"}]`:               "has no role",
		`[{"role": "assistant", "content": "", "tool_calls": [{}]}]`: "tool calls are not supported",
		`not json`: "parsing the conversation",
	} {
		if _, err := ParseConversation([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseConversation(%s): error %v, want one with %q", in, err, msg)
		}
	}
}
