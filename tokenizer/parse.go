package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// ParseIDs reads token ids written as a JSON array or as numbers separated
// by whitespace, as people write them on a command line; an id outside
// [0, 2³¹) is an error.
func ParseIDs(s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	var nums []int64
	if strings.HasPrefix(s, "[") {
		dec := json.NewDecoder(strings.NewReader(s))
		var raw []json.RawMessage // each element as written: 7, 1.5, "a", null
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("parsing ids as a JSON array of integers: %w", jsonerr.Reword(err))
		}
		if dec.More() {
			return nil, errors.New("parsing ids: text after the JSON array")
		}
		for i, n := range raw {
			v, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("id %d (%s) is not an integer", i, n)
			}
			nums = append(nums, v)
		}
	} else {
		for i, f := range strings.Fields(s) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("id %d (%q) is not an integer", i, f)
			}
			nums = append(nums, v)
		}
	}
	ids := make([]int32, len(nums))
	for i, v := range nums {
		if v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("id %d (%d) is out of range", i, v)
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// chatMessage is a message as written in conversation JSON; fields beyond
// role and content are read only to reject what the renderer cannot do.
type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// ParseConversation reads a conversation written as JSON, either
// [{"role": ..., "content": ...}, ...] or {"messages": [...]}. Contents must
// be strings; a message with tool calls is an error (the chat formats have
// none). Roles are checked when the conversation is rendered.
func ParseConversation(data []byte) ([]Message, error) {
	data = bytes.TrimSpace(data)
	var raw []chatMessage
	var err error
	if bytes.HasPrefix(data, []byte("{")) {
		var obj struct {
			Messages *[]chatMessage `json:"messages"`
		}
		if err = json.Unmarshal(data, &obj); err == nil && obj.Messages == nil {
			return nil, errors.New(`parsing the conversation: the object has no "messages" array`)
		}
		if obj.Messages != nil {
			raw = *obj.Messages
		}
	} else {
		err = json.Unmarshal(data, &raw)
	}
	if err != nil {
		return nil, fmt.Errorf(`parsing the conversation (want [{"role": ..., "content": ...}, ...] or {"messages": [...]}): %w`, jsonerr.Reword(err))
	}
	msgs := make([]Message, len(raw))
	for i, m := range raw {
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
			return nil, fmt.Errorf("message %d has tool_calls: tool calls are not supported", i)
		}
		if m.Role == "" {
			return nil, fmt.Errorf("message %d has no role", i)
		}
		var content string
		if err := json.Unmarshal(m.Content, &content); err != nil {
			return nil, fmt.Errorf("message %d: content must be a string", i)
		}
		msgs[i] = Message{Role: m.Role, Content: content}
	}
	return msgs, nil
}
