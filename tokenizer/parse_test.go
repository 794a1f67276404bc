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

// FuzzParseCommandLine feeds what people type after --ids and --chat to
// ParseIDs and ParseConversation: values or errors in JSON's words, never a
// panic; ids read are in range, and every message read has a role.
func FuzzParseCommandLine(f *testing.F) {
	for _, s := range []string{
		"[1, 2, 128009]", " 5 6\n7 ", "[1, \"a\"]", "[1] 2", "-1",
		`[{"role": "user", "content": "hi"}]`, `{"messages": [{"role": "system", "content": ""}]}`,
		`{"messages": [{"role": 1}]}`, `[{"role": "assistant", "content": null, "tool_calls": []}]`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ids, err := ParseIDs(in)
		for _, id := range ids {
			if id < 0 {
				t.Fatalf("ParseIDs(%q) read id %d", in, id)
			}
		}
		if err != nil && strings.Contains(err.Error(), "cannot unmarshal") {
			t.Errorf("ParseIDs(%q): %v, in encoding/json's words", in, err)
		}
		msgs, err := ParseConversation([]byte(in))
		if err != nil {
			if strings.Contains(err.Error(), "cannot unmarshal") || strings.Contains(err.Error(), "Go struct") {
				t.Errorf("ParseConversation(%q): %v, in encoding/json's words", in, err)
			}
			return
		}
		for i, m := range msgs {
			if m.Role == "" {
				t.Fatalf("ParseConversation(%q): message %d has no role", in, i)
			}
		}
	})
}
