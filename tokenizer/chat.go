package tokenizer

import (
	"errors"
	"fmt"
	"strings"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is "system", "user" or "assistant".
	Role string `json:"role"`
	// Content is the turn's text.
	Content string `json:"content"`
}

// ChatOptions controls how a conversation is rendered.
type ChatOptions struct {
	// AddGenerationPrompt ends the rendering with an assistant header, for
	// the model to write the next turn.
	AddGenerationPrompt bool
	// Date is the "Today Date" of the system header; empty means
	// DefaultChatDate.
	Date string
}

// DefaultChatDate is the template's default "Today Date".
const DefaultChatDate = "26 Jul 2024"

// chatSegment is a piece of a rendered conversation: special-token text or
// ordinary text, and whether it belongs to an assistant turn's body.
type chatSegment struct {
	text      string
	special   bool
	assistant bool
}

// chatSegments renders msgs the way the Llama 3.1 chat template does
// without tools: the beginning-of-text token; a system header carrying the
// knowledge and today dates and the trimmed content of a leading system
// message (or nothing); then each message as a header with its role, a
// blank line, its trimmed content and <|eot_id|>; then, if asked, an empty
// assistant header.
func chatSegments(msgs []Message, opts ChatOptions) ([]chatSegment, error) {
	if err := checkChatMessages(msgs); err != nil {
		return nil, err
	}
	date := opts.Date
	if date == "" {
		date = DefaultChatDate
	}
	system := ""
	if msgs[0].Role == "system" {
		system = pyTrim(msgs[0].Content)
		msgs = msgs[1:]
	}
	segs := []chatSegment{
		{text: BeginOfText, special: true},
		{text: StartHeaderID, special: true},
		{text: "system"},
		{text: EndHeaderID, special: true},
		{text: "\n\nCutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n" + system},
		{text: EOTID, special: true},
	}
	for _, m := range msgs {
		body := m.Role == "assistant"
		segs = append(segs,
			chatSegment{text: StartHeaderID, special: true},
			chatSegment{text: m.Role},
			chatSegment{text: EndHeaderID, special: true},
			chatSegment{text: "\n\n"},
			chatSegment{text: pyTrim(m.Content), assistant: body},
			chatSegment{text: EOTID, special: true, assistant: body},
		)
	}
	if opts.AddGenerationPrompt {
		segs = append(segs,
			chatSegment{text: StartHeaderID, special: true},
			chatSegment{text: "assistant"},
			chatSegment{text: EndHeaderID, special: true},
			chatSegment{text: "\n\n"},
		)
	}
	return segs, nil
}

// checkChatMessages checks that msgs is a conversation both chat formats
// can render: at least one message, each a system, user or assistant turn.
func checkChatMessages(msgs []Message) error {
	if len(msgs) == 0 {
		return errors.New("tokenizer: chat: no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		case "tool", "ipython":
			return fmt.Errorf("tokenizer: chat: message %d has role %q: tool results are not supported, only system, user and assistant messages", i, m.Role)
		default:
			return fmt.Errorf("tokenizer: chat: message %d has role %q; want system, user or assistant", i, m.Role)
		}
	}
	return nil
}

// RenderChat renders a conversation as text, byte for byte as the Llama 3.1
// chat template (chat-template-3.1.jinja, Meta's Llama-3.1-8B-Instruct
// template) renders it when no tools are given.
//
// As in the template, the conversation starts with <|begin_of_text|>, a
// leading system message is folded into the system header (which is
// present, with its dates, even without one), message contents are trimmed
// of surrounding whitespace, and a later system message is rendered like
// any other turn. Tool definitions, tool calls and tool results are not
// supported: a message with role "tool" or "ipython" is an error.
func RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	segs, err := chatSegments(msgs, opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.text)
	}
	return b.String(), nil
}

// ByteChat reports whether conversations encoded with tok use the byte chat
// format (RenderByteChat) rather than the Llama 3.1 format (RenderChat):
// whether tok is the byte tokenizer, which has no chat special tokens. It
// is the one place the format is chosen; EncodeChat and RenderChatFor ask it.
func ByteChat(tok Tokenizer) bool {
	switch tok.(type) {
	case Bytes, *Bytes:
		return true
	}
	return false
}

// RenderChatFor renders a conversation as text in the chat format EncodeChat
// encodes it in for tok: the byte chat format for the byte tokenizer, the
// Llama 3.1 format otherwise.
func RenderChatFor(tok Tokenizer, msgs []Message, opts ChatOptions) (string, error) {
	if ByteChat(tok) {
		return RenderByteChat(msgs, opts)
	}
	return RenderChat(msgs, opts)
}

// EncodeChat renders a conversation as RenderChat does and encodes it with
// tok. When tok is the byte tokenizer (Bytes), which has no chat special
// tokens, it renders the compact byte chat format instead (see
// RenderByteChat and the last paragraph). It also returns a mask, parallel to the ids, that is true for the
// tokens of assistant turns: from after each assistant header
// ("<|start_header_id|>assistant<|end_header_id|>\n\n") through the turn's
// <|eot_id|> inclusive. These are the tokens a model is trained to produce.
//
// The template's structure tokens are encoded as special tokens; message
// content is encoded as ordinary text even if it contains special-token
// text, so that a message cannot forge turn boundaries. For content without
// special-token text the ids equal
// tok.Encode(RenderChat(msgs, opts), EncodeOptions{AllowSpecial: true}).
//
// In the byte chat format the ids are BytesBOS, then for each message its
// role tag ("s>", "u>" or "a>"), its trimmed content bytes and BytesEOS,
// then "a>" if opts.AddGenerationPrompt is set; opts.Date is not used. The
// mask is true for an assistant message's content bytes and its closing
// BytesEOS, the same rule as the Llama format's. Roles are checked as for
// the Llama format.
func EncodeChat(tok Tokenizer, msgs []Message, opts ChatOptions) (ids []int32, assistantMask []bool, err error) {
	if ByteChat(tok) {
		return encodeByteChat(msgs, opts)
	}
	segs, err := chatSegments(msgs, opts)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < len(segs); {
		s := segs[i]
		if s.special {
			id, ok := tok.SpecialID(s.text)
			if !ok {
				return nil, nil, fmt.Errorf("tokenizer: chat: the tokenizer has no %s token; the Llama 3.1 chat format needs a Llama 3 tokenizer", s.text)
			}
			ids = append(ids, id)
			assistantMask = append(assistantMask, s.assistant)
			i++
			continue
		}
		// Encode each run of ordinary text as one string, as encoding the
		// rendered text would, but keep the header's blank line apart from
		// an assistant body: the body is trimmed, so it starts with
		// non-whitespace and the pre-tokenizer splits there anyway.
		text := s.text
		j := i + 1
		for j < len(segs) && !segs[j].special && segs[j].assistant == s.assistant {
			text += segs[j].text
			j++
		}
		n := len(ids)
		ids = append(ids, tok.Encode(text, EncodeOptions{})...)
		for range len(ids) - n {
			assistantMask = append(assistantMask, s.assistant)
		}
		i = j
	}
	return ids, assistantMask, nil
}

// pyTrim trims what Python's str.strip (and so Jinja's trim filter) trims:
// Unicode whitespace and also the separators U+001C to U+001F.
func pyTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		switch {
		case r >= 0x1C && r <= 0x1F:
			return true
		case r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == ' ':
			return true
		case r < 0x80:
			return false
		}
		return isUnicodeSpace(r)
	})
}

// isUnicodeSpace reports the non-ASCII characters Python counts as
// whitespace (the White_Space property less the ones below U+0080).
func isUnicodeSpace(r rune) bool {
	switch r {
	case 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
