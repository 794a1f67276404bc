package tokenizer

// ChatTemplate is a Jinja chat template, for tokenizer_config.json's
// chat_template, that renders a conversation of system, user and assistant
// messages as RenderChat does: the beginning-of-text token (bos_token), the
// system header with the knowledge date and date_string (default
// DefaultChatDate) and a leading system message's trimmed content, each
// further message as a header, a blank line, its trimmed content and
// <|eot_id|>, and with add_generation_prompt an empty assistant header. It
// has no tool support, as RenderChat has none.
const ChatTemplate = `{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
{%- set system_message = messages[0]['content'] | trim %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set system_message = '' %}
{%- set loop_messages = messages %}
{%- endif %}
{%- if date_string is not defined %}
{%- set date_string = '` + DefaultChatDate + `' %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}
{{- 'Cutting Knowledge Date: December 2023\nToday Date: ' + date_string + '\n\n' }}
{{- system_message + '<|eot_id|>' }}
{%- for message in loop_messages %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}
{{- (message['content'] | trim) + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`

// HasChatTokens reports whether tok has the special tokens of the Llama 3.1
// chat format (ChatTemplate, RenderChat).
func HasChatTokens(tok Tokenizer) bool {
	for _, name := range []string{BeginOfText, StartHeaderID, EndHeaderID, EOTID} {
		if _, ok := tok.SpecialID(name); !ok {
			return false
		}
	}
	return true
}
