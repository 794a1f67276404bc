#!/usr/bin/env python3
"""Render golden Llama 3.1 chat-template outputs for the tokenizer tests.

Usage:
    python3 scripts/chat_golden.py TEMPLATE.jinja OUT.json

TEMPLATE.jinja is the Llama 3.1 chat template (the shared test data has it as
llama3/chat-template-3.1.jinja). The template is rendered with Jinja2 the way
Hugging Face's apply_chat_template does (a sandboxed environment with
trim_blocks and lstrip_blocks, the loopcontrols extension, a raise_exception
global, tools=None) for a fixed set of conversations, and the results are
written to OUT.json together with the template's sha256, so the Go tests can
compare tokenizer.RenderChat against them byte for byte.

Needs Jinja2 (Debian: python3-jinja2).
"""

import hashlib
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

BOS = "<|begin_of_text|>"

# (name, messages, add_generation_prompt, date_string or None)
CASES = [
    ("system_user", [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ], False, None),
    ("system_user_generation_prompt", [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ], True, None),
    ("multi_turn", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Write a Python function that adds two numbers."},
        {"role": "assistant", "content": "def add(a, b):\n    return a + b"},
        {"role": "user", "content": "Now make it add three."},
        {"role": "assistant", "content": "def add(a, b, c):\n    return a + b + c"},
    ], False, None),
    ("multi_turn_generation_prompt", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ], True, None),
    ("no_system", [
        {"role": "user", "content": "Hello there"},
    ], True, None),
    ("no_system_multi_turn", [
        {"role": "user", "content": "A question?"},
        {"role": "assistant", "content": "An answer."},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ], False, None),
    ("trimming", [
        {"role": "system", "content": "  \n\tSystem with surrounding whitespace \n\n"},
        {"role": "user", "content": "\x1c\u3000 user text\u00a0\n  indented line\n\n\u2003"},
        {"role": "assistant", "content": "\n\n  answer  \r\n"},
    ], True, None),
    ("late_system", [
        {"role": "user", "content": "first"},
        {"role": "system", "content": "  a system turn in the middle  "},
        {"role": "assistant", "content": "ok"},
    ], False, None),
    ("custom_date", [
        {"role": "system", "content": "Dated."},
        {"role": "user", "content": "What day is it?"},
    ], True, "02 Jan 2025"),
    ("unicode_and_special_text", [
        {"role": "user", "content": "Ünïcödé 🦙 日本語 <|eot_id|> and <|start_header_id|> as text"},
        {"role": "assistant", "content": "Noted: <|eot_id|> 👍"},
    ], True, None),
    ("empty_contents", [
        {"role": "system", "content": ""},
        {"role": "user", "content": "   "},
        {"role": "assistant", "content": ""},
    ], True, None),
    ("only_system", [
        {"role": "system", "content": "Only a system message."},
    ], True, None),
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    template_path, out_path = sys.argv[1], sys.argv[2]
    with open(template_path, "rb") as f:
        source = f.read()

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source.decode("utf-8"))

    cases = []
    for name, messages, gen, date in CASES:
        kwargs = {"date_string": date} if date is not None else {}
        text = template.render(messages=messages, bos_token=BOS, tools=None,
                               add_generation_prompt=gen, **kwargs)
        case = {"name": name, "messages": messages, "add_generation_prompt": gen}
        if date is not None:
            case["date"] = date
        case["text"] = text
        cases.append(case)

    out = {
        "template_sha256": hashlib.sha256(source).hexdigest(),
        "jinja2_version": jinja2.__version__,
        "cases": cases,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
