package data

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/tokenizer"
)

func msg(role, content string) tokenizer.Message {
	return tokenizer.Message{Role: role, Content: content}
}

func TestReadJSONLFormats(t *testing.T) {
	tests := []struct {
		name   string
		format Format // forced; empty: auto
		in     string
		want   Format
		recs   []Record
	}{
		{"messages", "", `{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}`,
			FormatMessages, []Record{{Line: 1, Messages: []tokenizer.Message{msg("user", "q"), msg("assistant", "a")}}}},
		{"text", "", `{"text": "once upon a time"}` + "\n\n" + `{"text": "the end", "id": 7}`,
			FormatText, []Record{{Line: 1, Completion: "once upon a time"}, {Line: 3, Completion: "the end"}}},
		{"prompt-completion strings", "", `{"prompt": "2+2=", "completion": "4"}` + "\n" + `{"prompt": "", "completion": "x"}`,
			FormatPromptCompletion, []Record{{Line: 1, Prompt: "2+2=", Completion: "4"}, {Line: 2, Completion: "x"}}},
		{"prompt-completion messages", "",
			`{"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}`,
			FormatPromptCompletion, []Record{{Line: 1, Messages: []tokenizer.Message{msg("system", "s"), msg("user", "q"), msg("assistant", "a")}, PromptMessages: 2}}},
		{"sharegpt", "",
			`{"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}], "id": "x"}`,
			FormatShareGPT, []Record{{Line: 1, Messages: []tokenizer.Message{msg("system", "s"), msg("user", "q"), msg("assistant", "a")}}}},
		{"auto prefers messages", "", `{"messages": [{"role": "assistant", "content": "a"}], "text": "t"}`,
			FormatMessages, []Record{{Line: 1, Messages: []tokenizer.Message{msg("assistant", "a")}}}},
		{"forced text", FormatText, `{"messages": [{"role": "assistant", "content": "a"}], "text": "t"}`,
			FormatText, []Record{{Line: 1, Completion: "t"}}},
		{"forced messages", FormatMessages, `{"messages": [{"role": "assistant", "content": "a"}], "text": "t"}`,
			FormatMessages, []Record{{Line: 1, Messages: []tokenizer.Message{msg("assistant", "a")}}}},
		{"explicit auto", FormatAuto, `{"text": "t"}`, FormatText, []Record{{Line: 1, Completion: "t"}}},
		{"empty file", "", "\n \n", FormatAuto, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, f, skipped, err := ReadJSONL(strings.NewReader(tc.in), "d.jsonl", ReadOptions{Format: tc.format})
			if err != nil || len(skipped) != 0 {
				t.Fatal(err, skipped)
			}
			if f != tc.want {
				t.Errorf("format %q; want %q", f, tc.want)
			}
			if !reflect.DeepEqual(recs, tc.recs) {
				t.Errorf("records %+v\nwant %+v", recs, tc.recs)
			}
		})
	}
}

func TestReadJSONLErrors(t *testing.T) {
	good := map[Format]string{
		FormatMessages:         `{"messages": [{"role": "assistant", "content": "a"}]}`,
		FormatText:             `{"text": "t"}`,
		FormatPromptCompletion: `{"prompt": "p", "completion": "c"}`,
		FormatShareGPT:         `{"conversations": [{"from": "gpt", "value": "a"}]}`,
	}
	tests := []struct {
		name   string
		format Format // of the file's first, good line
		line   string // line 2
		want   string
	}{
		{"messages row in a text file", FormatText, good[FormatMessages], `text row without "text" (it looks like a messages row; every row of a file must have the same format)`},
		{"text not a string", FormatText, `{"text": 3}`, `text row: "text" is not a string`},
		{"text null", FormatText, `{"text": null}`, `text row: "text" is not a string`},
		{"text empty", FormatText, `{"text": ""}`, `text row with an empty "text"`},
		{"no completion", FormatPromptCompletion, `{"prompt": "p"}`, `prompt-completion row without "completion"`},
		{"no prompt", FormatPromptCompletion, `{"completion": "c"}`, `prompt-completion row without "prompt"`},
		{"text row in a prompt-completion file", FormatPromptCompletion, good[FormatText], `prompt-completion row without "prompt" (it looks like a text row`},
		{"completion not a string", FormatPromptCompletion, `{"prompt": "p", "completion": {"a": 1}}`, `prompt-completion row: "completion" is not a string`},
		{"empty completion", FormatPromptCompletion, `{"prompt": "p", "completion": ""}`, `prompt-completion row with an empty "completion"`},
		{"string and list", FormatPromptCompletion, `{"prompt": "p", "completion": [{"role": "assistant", "content": "a"}]}`, `must both be strings or both be lists of messages`},
		{"empty prompt list", FormatPromptCompletion, `{"prompt": [], "completion": [{"role": "assistant", "content": "a"}]}`, `prompt-completion row: "prompt" is empty`},
		{"bad prompt role", FormatPromptCompletion, `{"prompt": [{"role": "tool", "content": "x"}], "completion": [{"role": "assistant", "content": "a"}]}`, `prompt-completion row: message 0 has unknown role "tool"`},
		{"completion content", FormatPromptCompletion, `{"prompt": [{"role": "user", "content": "x"}], "completion": [{"role": "assistant", "content": 1}]}`, `prompt-completion row: message 0: content is not a string`},
		{"no assistant completion", FormatPromptCompletion, `{"prompt": [{"role": "user", "content": "x"}], "completion": [{"role": "user", "content": "y"}]}`, `no assistant message in "completion"`},
		{"no conversations", FormatShareGPT, `{"text": "t"}`, `sharegpt row without "conversations" (it looks like a text row`},
		{"conversations not array", FormatShareGPT, `{"conversations": {}}`, `sharegpt row: "conversations" is not an array`},
		{"conversations empty", FormatShareGPT, `{"conversations": []}`, `sharegpt row: "conversations" is empty`},
		{"turn not object", FormatShareGPT, `{"conversations": [1]}`, `sharegpt row: turn 0 is not a JSON object`},
		{"no from", FormatShareGPT, `{"conversations": [{"value": "v"}]}`, `sharegpt row: turn 0 has no "from"`},
		{"from not string", FormatShareGPT, `{"conversations": [{"from": 1, "value": "v"}]}`, `sharegpt row: turn 0: "from" is not a string`},
		{"unknown from", FormatShareGPT, `{"conversations": [{"from": "human", "value": "q"}, {"from": "bing", "value": "v"}]}`, `sharegpt row: turn 1 is from "bing"; want human, gpt or system`},
		{"no value", FormatShareGPT, `{"conversations": [{"from": "gpt"}]}`, `sharegpt row: turn 0 has no "value"`},
		{"value not string", FormatShareGPT, `{"conversations": [{"from": "gpt", "value": null}]}`, `sharegpt row: turn 0: "value" is not a string`},
		{"no gpt turn", FormatShareGPT, `{"conversations": [{"from": "human", "value": "q"}]}`, `sharegpt row: no gpt turn`},
		{"not JSON", FormatShareGPT, `{oops`, `not a JSON object`},
		{"text row in a messages file", FormatMessages, good[FormatText], `missing "messages"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := good[tc.format] + "\n" + tc.line + "\n" + good[tc.format] + "\n"
			for _, forced := range []Format{FormatAuto, tc.format} {
				recs, f, _, err := ReadJSONL(strings.NewReader(in), "data.jsonl", ReadOptions{Format: forced})
				var le *LineError
				if !errors.As(err, &le) || le.Line != 2 {
					t.Fatalf("format %s: error %v; want a *LineError for line 2", forced, err)
				}
				if !strings.HasPrefix(err.Error(), "data.jsonl:2: ") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("format %s: error %q; want data.jsonl:2: and %q", forced, err, tc.want)
				}
				if f != tc.format || len(recs) != 1 {
					t.Errorf("format %s: read %q and %d records before the bad line; want %q and 1", forced, f, len(recs), tc.format)
				}
			}
			recs, _, skipped, err := ReadJSONL(strings.NewReader(in), "data.jsonl", ReadOptions{SkipBadLines: true})
			if err != nil || len(recs) != 2 || len(skipped) != 1 || skipped[0].Line != 2 {
				t.Errorf("skipping: %d records, skipped %v, %v; want 2 records and line 2 skipped", len(recs), skipped, err)
			}
		})
	}
}

func TestReadJSONLDetection(t *testing.T) {
	// The first row that is a JSON object tells the format; a row whose
	// keys tell none is an error, even when bad lines are skipped.
	in := "{nope\n" + `{"prompt": "p", "completion": "c"}` + "\n"
	recs, f, skipped, err := ReadJSONL(strings.NewReader(in), "d.jsonl", ReadOptions{SkipBadLines: true})
	if err != nil || f != FormatPromptCompletion || len(recs) != 1 || len(skipped) != 1 {
		t.Errorf("got %q, %d records, skipped %v, %v", f, len(recs), skipped, err)
	}
	for _, skip := range []bool{false, true} {
		in := "\n" + `{"input": "p", "output": "c"}` + "\n"
		_, _, _, err := ReadJSONL(strings.NewReader(in), "d.jsonl", ReadOptions{SkipBadLines: skip})
		want := `d.jsonl:2: unknown data format: a row with the keys "input", "output"; want "messages", "text", "prompt" and "completion", or "conversations"`
		if err == nil || err.Error() != want || !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("skip %v: error %v; want %s", skip, err, want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"auto", "messages", "text", "prompt-completion", "sharegpt"} {
		var f Format
		if err := f.Set(s); err != nil || f.String() != s {
			t.Errorf("Set(%q): %q, %v", s, f, err)
		}
	}
	if _, err := ParseFormat("alpaca"); err == nil || !strings.Contains(err.Error(), `unknown data format "alpaca"; want auto, messages, text, prompt-completion, sharegpt`) {
		t.Errorf("ParseFormat(alpaca): %v", err)
	}
	if got := Format("").String(); got != "auto" {
		t.Errorf("the zero Format is %q; want auto", got)
	}
}

// learned returns the tokens of ids whose mask is set, decoded by tok; the
// byte tokenizer's end-of-sequence token is written "<eos>".
func learned(t *testing.T, tok tokenizer.Tokenizer, ids []int32, mask []bool) string {
	t.Helper()
	if len(ids) != len(mask) {
		t.Fatalf("%d ids, %d mask entries", len(ids), len(mask))
	}
	var b strings.Builder
	for i, m := range mask {
		if !m {
			continue
		}
		if _, ok := tok.(tokenizer.Bytes); ok && ids[i] == tokenizer.BytesEOS {
			b.WriteString("<eos>")
			continue
		}
		s, err := tok.Decode(ids[i : i+1])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s)
	}
	return b.String()
}

func TestTokenizeRecord(t *testing.T) {
	conv := []tokenizer.Message{msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2"), msg("assistant", "a2")}
	tests := []struct {
		name string
		rec  Record
		// want is the text of the tokens that carry loss, for the byte
		// tokenizer (byte chat format: <eos> ends a turn) and a tokenizer
		// with the Llama 3 special tokens.
		wantBytes, wantLlama string
	}{
		{"text", Record{Completion: "ab"}, "ab<eos>", "ab" + tokenizer.EOTID},
		{"prompt-completion strings", Record{Prompt: "Q: 2+2\nA:", Completion: " 4"}, " 4<eos>", " 4" + tokenizer.EOTID},
		{"messages", Record{Messages: conv}, "a1<eos>a2<eos>", "a1" + tokenizer.EOTID + "a2" + tokenizer.EOTID},
		{"prompt-completion messages", Record{Messages: conv, PromptMessages: 3}, "a2<eos>", "a2" + tokenizer.EOTID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				tok  tokenizer.Tokenizer
				want string
			}{{tokenizer.Bytes{}, tc.wantBytes}, {byteTok{}, tc.wantLlama}} {
				ids, mask, err := TokenizeRecord(c.tok, tc.rec)
				if err != nil {
					t.Fatal(err)
				}
				if got := learned(t, c.tok, ids, mask); got != c.want {
					t.Errorf("%T: loss on %q; want %q", c.tok, got, c.want)
				}
			}
		})
	}
	// Raw text is all there is in the ids: BOS, prompt, completion, EOS.
	ids, _, _ := TokenizeRecord(tokenizer.Bytes{}, Record{Prompt: "p", Completion: "c"})
	if want := []int32{tokenizer.BytesBOS, 'p', 'c', tokenizer.BytesEOS}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %v; want %v", ids, want)
	}
	// A text row is a plain-text document.
	ids, mask, _ := TokenizeRecord(tokenizer.Bytes{}, Record{Completion: "doc"})
	if want := TextExamples(tokenizer.Bytes{}, []string{"doc"}); !reflect.DeepEqual([]Example{{IDs: ids, Loss: mask}}, want) {
		t.Errorf("text row %v %v; want %v", ids, mask, want)
	}
	// A conversational prompt-completion row has the ids of the whole
	// conversation, and a ShareGPT row those of the messages row.
	whole, _, _ := tokenizer.EncodeChat(byteTok{}, conv, tokenizer.ChatOptions{})
	ids, _, _ = TokenizeRecord(byteTok{}, Record{Messages: conv, PromptMessages: 3})
	if !reflect.DeepEqual(ids, whole) {
		t.Errorf("prompt-completion ids %v; want those of the conversation, %v", ids, whole)
	}
	// A token that spans the prompt's end and the completion's start is
	// the completion's: it is past the prompt's own tokens.
	ids, mask, _ = TokenizeRecord(mergeTok{}, Record{Prompt: "xa", Completion: "by"})
	if want := []int32{256, 'x', 300, 'y', 259}; !reflect.DeepEqual(ids, want) || !reflect.DeepEqual(mask, []bool{false, false, true, true, true}) {
		t.Errorf("merged boundary: ids %v mask %v; want ids %v with loss from the merged token on", ids, mask, want)
	}
	if _, _, err := TokenizeRecord(byteTok{}, Record{Messages: []tokenizer.Message{msg("tool", "x")}}); err == nil {
		t.Error("no error for a tool message")
	}
}

// TestReadSameAsMessages checks that the rows of each format that say the
// same conversation train the same tokens.
func TestReadSameAsMessages(t *testing.T) {
	rows := map[Format]string{
		FormatMessages:         `{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}`,
		FormatShareGPT:         `{"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}`,
		FormatPromptCompletion: `{"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}`,
	}
	var want Example
	for _, f := range []Format{FormatMessages, FormatShareGPT, FormatPromptCompletion} {
		recs, _, _, err := ReadJSONL(strings.NewReader(rows[f]), "d.jsonl", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids, mask, err := TokenizeRecord(byteTok{}, recs[0])
		if err != nil {
			t.Fatal(err)
		}
		if f == FormatMessages {
			want = Example{IDs: ids, Loss: mask}
		} else if !reflect.DeepEqual(Example{IDs: ids, Loss: mask}, want) {
			t.Errorf("%s: %v; want the messages row's %v", f, Example{IDs: ids, Loss: mask}, want)
		}
	}
}

func TestLoadExamplesFormats(t *testing.T) {
	write := fileWriter(t)
	tok := tokenizer.Bytes{}
	pc := `{"prompt": "p", "completion": "c"}` + "\n"
	want := []Example{{IDs: []int32{tokenizer.BytesBOS, 'p', 'c', tokenizer.BytesEOS}, Loss: []bool{false, false, true, true}}}
	// A .jsonl file's format is told by its rows.
	ex, _, err := LoadExamples(write("pc.jsonl", pc), tok, ReadOptions{})
	if err != nil || !reflect.DeepEqual(ex, want) {
		t.Errorf("pc.jsonl: %v, %v; want %v", ex, err, want)
	}
	// A forced format reads any file as JSONL.
	ex, _, err = LoadExamples(write("pc.json", pc), tok, ReadOptions{Format: FormatPromptCompletion})
	if err != nil || !reflect.DeepEqual(ex, want) {
		t.Errorf("pc.json: %v, %v; want %v", ex, err, want)
	}
	// Without one, a file not named .jsonl is plain text.
	ex, _, err = LoadExamples(write("pc.json", pc), tok, ReadOptions{})
	if err != nil || len(ex) != 1 || len(ex[0].IDs) != len(pc)+1 {
		t.Errorf("pc.json as text: %v, %v", ex, err)
	}
	// A forced format of the wrong shape names the file and the line.
	_, _, err = LoadExamples(write("pc.jsonl", pc), tok, ReadOptions{Format: FormatShareGPT})
	if err == nil || !strings.HasSuffix(err.Error(), `pc.jsonl:1: sharegpt row without "conversations" (it looks like a prompt-completion row; every row of a file must have the same format)`) {
		t.Errorf("forced sharegpt: %v", err)
	}
}

// mergeTok is byteTok with one merge: "ab" is the token 300.
type mergeTok struct{ byteTok }

func (mergeTok) Encode(text string, opts tokenizer.EncodeOptions) []int32 {
	var ids []int32
	for _, id := range (byteTok{}).Encode(text, opts) {
		if n := len(ids); n > 0 && ids[n-1] == 'a' && id == 'b' {
			ids[n-1] = 300
			continue
		}
		ids = append(ids, id)
	}
	return ids
}
