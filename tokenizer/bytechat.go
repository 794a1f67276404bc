package tokenizer

import "strings"

// Role tags of the byte chat format: the bytes that open a system, user or
// assistant message.
const (
	ByteChatSystemTag    = "s>"
	ByteChatUserTag      = "u>"
	ByteChatAssistantTag = "a>"
)

// ByteChatTemplate is a Jinja chat template, for tokenizer_config.json's
// chat_template and GGUF's tokenizer.chat_template, that renders a
// conversation in the byte chat format as RenderByteChat does: bos_token,
// each message's role tag, trimmed content and eos_token, and with
// add_generation_prompt the assistant tag.
const ByteChatTemplate = `{{- bos_token }}
{%- for message in messages %}
{%- if message['role'] == 'system' %}
{{- '` + ByteChatSystemTag + `' }}
{%- elif message['role'] == 'user' %}
{{- '` + ByteChatUserTag + `' }}
{%- else %}
{{- '` + ByteChatAssistantTag + `' }}
{%- endif %}
{{- (message['content'] | trim) + eos_token }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '` + ByteChatAssistantTag + `' }}
{%- endif %}
`

// byteChatTag returns the role tag of a checked role.
func byteChatTag(role string) string {
	switch role {
	case "system":
		return ByteChatSystemTag
	case "user":
		return ByteChatUserTag
	}
	return ByteChatAssistantTag
}

// RenderByteChat renders a conversation as text in the byte chat format, the
// compact format EncodeChat uses for the byte tokenizer (Bytes), which has
// no chat special tokens and serves models trained from scratch.
//
// The rendering is "<bos>", then for each message its role tag
// (ByteChatSystemTag, ByteChatUserTag or ByteChatAssistantTag), its content
// trimmed of surrounding whitespace as RenderChat trims it, and "<eos>";
// then ByteChatAssistantTag if opts.AddGenerationPrompt is set. "<bos>" and
// "<eos>" stand for the tokens BytesBOS and BytesEOS; every other byte is
// the token of that byte. A system message is rendered like any other
// message, wherever it is; opts.Date is not used. Roles are checked as for
// RenderChat: "tool" and "ipython" messages and unknown roles are errors.
func RenderByteChat(msgs []Message, opts ChatOptions) (string, error) {
	if err := checkChatMessages(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("<bos>")
	for _, m := range msgs {
		b.WriteString(byteChatTag(m.Role))
		b.WriteString(pyTrim(m.Content))
		b.WriteString("<eos>")
	}
	if opts.AddGenerationPrompt {
		b.WriteString(ByteChatAssistantTag)
	}
	return b.String(), nil
}

// encodeByteChat is EncodeChat for the byte tokenizer: the ids of the
// byte chat format (see RenderByteChat) and the mask of an assistant
// message's content bytes and closing BytesEOS.
func encodeByteChat(msgs []Message, opts ChatOptions) (ids []int32, assistantMask []bool, err error) {
	if err := checkChatMessages(msgs); err != nil {
		return nil, nil, err
	}
	add := func(text string, assistant bool) {
		for i := 0; i < len(text); i++ {
			ids = append(ids, int32(text[i]))
			assistantMask = append(assistantMask, assistant)
		}
	}
	ids = append(ids, BytesBOS)
	assistantMask = append(assistantMask, false)
	for _, m := range msgs {
		body := m.Role == "assistant"
		add(byteChatTag(m.Role), false)
		add(pyTrim(m.Content), body)
		ids = append(ids, BytesEOS)
		assistantMask = append(assistantMask, body)
	}
	if opts.AddGenerationPrompt {
		add(ByteChatAssistantTag, false)
	}
	return ids, assistantMask, nil
}
