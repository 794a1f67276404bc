package tokenizer

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// renderJinja is a Python program that renders a chat template for each case
// read as JSON from standard input with Jinja configured as Hugging Face's
// apply_chat_template configures it, and prints the renderings as JSON.
const renderJinja = `
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
req = json.load(sys.stdin)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
tpl = env.from_string(req["template"])
out = []
for c in req["cases"]:
    kw = {"messages": c["messages"], "bos_token": req["bos"], "eos_token": req["eos"], "add_generation_prompt": c["gen"]}
    if c["date"]:
        kw["date_string"] = c["date"]
    out.append(tpl.render(**kw))
json.dump(out, sys.stdout)
`

// TestChatTemplateMatchesRenderChat renders conversations with ChatTemplate
// under Jinja (Python's jinja2, skipped when absent) and checks each
// against RenderChat byte for byte.
func TestChatTemplateMatchesRenderChat(t *testing.T) {
	cases := []chatCase{
		{Messages: []Message{{"user", "Hello"}}, Gen: true},
		{Messages: []Message{{"system", "  Be brief.\n"}, {"user", "\tHi there \n"}, {"assistant", " Hi! "}, {"user", "2+2?"}}, Gen: true},
		{Messages: []Message{{"system", "sys"}, {"user", "u"}, {"assistant", "a"}}, Gen: false, Date: "01 Jan 2025"},
		{Messages: []Message{{"user", "x"}, {"system", " late system "}, {"assistant", "y\n\n"}}, Gen: false},
	}
	got := renderTemplate(t, ChatTemplate, BeginOfText, EOTID, cases)
	for i, c := range cases {
		want, err := RenderChat(c.Messages, ChatOptions{AddGenerationPrompt: c.Gen, Date: c.Date})
		if err != nil {
			t.Fatal(err)
		}
		if got[i] != want {
			t.Errorf("case %d: the template renders\n%q\nRenderChat renders\n%q", i, got[i], want)
		}
	}
}

// chatCase is a conversation renderTemplate renders.
type chatCase struct {
	Messages []Message `json:"messages"`
	Gen      bool      `json:"gen"`
	Date     string    `json:"date"`
}

// renderTemplate renders the chat template tpl for each case under Jinja
// (Python's jinja2; the test is skipped when it is absent), with the given
// bos_token and eos_token.
func renderTemplate(t *testing.T, tpl, bos, eos string, cases []chatCase) []string {
	t.Helper()
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skip("python3 with jinja2 is not available to render the template")
	}
	req, err := json.Marshal(map[string]any{"template": tpl, "bos": bos, "eos": eos, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", renderJinja)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rendering the template: %v\n%s", err, stderr.String())
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("renderings %q: %v", out, err)
	}
	return got
}

// TestByteChatTemplateMatchesRenderByteChat renders conversations with
// ByteChatTemplate under Jinja and checks each against RenderByteChat
// byte for byte.
func TestByteChatTemplateMatchesRenderByteChat(t *testing.T) {
	cases := []chatCase{
		{Messages: []Message{{"user", "Hello"}}, Gen: true},
		{Messages: []Message{{"system", "  Be brief.\n"}, {"user", "\tHi there \n"}, {"assistant", " Hi! "}, {"user", "2+2?"}}, Gen: true},
		{Messages: []Message{{"user", "x"}, {"system", " late system "}, {"assistant", "y\n\n"}}, Gen: false},
	}
	got := renderTemplate(t, ByteChatTemplate, "<bos>", "<eos>", cases)
	for i, c := range cases {
		want, err := RenderByteChat(c.Messages, ChatOptions{AddGenerationPrompt: c.Gen})
		if err != nil {
			t.Fatal(err)
		}
		if got[i] != want {
			t.Errorf("case %d: the template renders\n%q\nRenderByteChat renders\n%q", i, got[i], want)
		}
	}
}
