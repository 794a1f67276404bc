package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// llama31Markers are text every Llama 3.1 chat template holds: the header
// and end-of-turn tokens and the system header's knowledge date.
var llama31Markers = []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "Cutting Knowledge Date"}

// CheckChatTemplate reports whether a model's chat template (the
// chat_template of its tokenizer_config.json; "" for none) is one the
// server renders: none, or a Llama 3.1 template — one that holds the Llama
// 3.1 header and end-of-turn tokens and the knowledge-date system header,
// as tokenizer.ChatTemplate and Meta's templates do. Chats are rendered
// by tokenizer.EncodeChat, which renders messages without tools as those
// templates do. Any other template is an error saying so.
func CheckChatTemplate(tmpl string) error {
	if strings.TrimSpace(tmpl) == "" {
		return nil
	}
	var missing []string
	for _, m := range llama31Markers {
		if !strings.Contains(tmpl, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return errors.New("the model's chat_template is not the Llama 3.1 template this server renders (it lacks " + strings.Join(missing, ", ") + "); send its rendered prompt to /v1/completions instead")
	}
	return nil
}

// ReadChatTemplate returns the chat_template of the tokenizer_config.json
// of the Hugging Face directory dir: "" when the file or the field is
// absent. A template given as a list of named templates is read as its
// "default" one.
func ReadChatTemplate(dir string) (string, error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the chat template: %w", err)
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", path, jsonerr.Reword(err))
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return "", nil
	}
	var one string
	if json.Unmarshal(cfg.ChatTemplate, &one) == nil {
		return one, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
		return "", fmt.Errorf("%s: chat_template: want a string or a list of {name, template}", path)
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", fmt.Errorf("%s: chat_template: a list without a \"default\" template", path)
}
