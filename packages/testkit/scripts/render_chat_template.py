#!/usr/bin/env python3
"""Reference chat-template rendering for the tokenizer parity fixtures.

This mirrors Hugging Face transformers' `apply_chat_template(..., tokenize=False)` (transformers
4.5x, `transformers/utils/chat_template_utils.py`: `_compile_jinja_template` and
`render_jinja_template`) with nothing but jinja2, because transformers cannot be installed here
(no PyPI). Every line that matters is a copy of what transformers does:

- the environment: `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
  extensions=[AssistantTracker, jinja2.ext.loopcontrols])`; the `{% generation %}` tag of
  AssistantTracker only marks assistant spans for `return_assistant_tokens_mask`, it renders its
  body unchanged, and is reproduced as such;
- the `tojson` filter: `json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
  sort_keys=sort_keys)` (replacing jinja's own, which escapes HTML characters and sorts keys);
- the globals `raise_exception` (raises `TemplateError`) and `strftime_now` (here pinned to
  2024-07-26 so fixtures do not depend on the day they were generated; the tests pin it too);
- the render call: `messages`, `tools`, `documents`, `add_generation_prompt`, then the
  tokenizer's special tokens (`special_tokens_map`: bos/eos/unk/pad tokens as strings,
  `additional_special_tokens`), then the caller's `chat_template_kwargs`;
- `continue_final_message`: the rendered text is cut after the final message's content exactly as
  transformers does (rindex of the stripped content; keep trailing whitespace only if the template
  kept it), and it may not be combined with `add_generation_prompt`.

Two serving choices are applied on top, the same ones the frontend makes (apps/frontend/src/
tokenizer/template.ts), because transformers would refuse what every OpenAI client sends:
- an assistant message with `content: None` reaches the template as None only when the template
  tests contents against none (`content is none` / `is not none`), else as "" (what vLLM passes);
- tool-call `arguments` given as an object are passed as compact JSON text
  (`json.dumps(a, ensure_ascii=False, separators=(",", ":"))`, what JSON.stringify writes);
- content given as a list of parts is joined into one string (text parts joined by "\n", image
  parts replaced by the image placeholder) unless the template iterates over message content.

Input (stdin): {"tokenizer_config": {...}, "chat_template": str, "conversations": [...]}.
Output (stdout): [{"id": str, "text": str} | {"id": str, "error": str}, ...].
"""
import json
import re
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime(2024, 7, 26, 12, 0, 0)


class AssistantTracker(Extension):
    """transformers' `{% generation %}...{% endgeneration %}`: renders its body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(chat_template):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(chat_template)


def token_text(v):
    """tokenizer_config.json values: "<s>" or {"content": "<s>", ...} (AddedToken)."""
    if isinstance(v, dict):
        return v.get("content")
    return v


def special_tokens_map(cfg):
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        t = token_text(cfg.get(k))
        if t is not None:
            out[k] = t
    extra = cfg.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [token_text(t) for t in extra]
    return out


NONE_TEST = re.compile(r"\bcontent['\"]?\]?\s+is\s+(not\s+)?none")
PARTS_LOOP = re.compile(r"for\s+\w+\s+in\s+(message|msg|m)(\.content|\[['\"]content['\"]\])")


def image_placeholder(cfg, source):
    if "<|image_pad|>" in json.dumps(special_tokens_map(cfg), ensure_ascii=False):
        return "<|vision_start|><|image_pad|><|vision_end|>"
    return "<|image|>" if "<|image|>" in source else "<image>"


def prepare(messages, cfg, source):
    parts_ok = PARTS_LOOP.search(source) is not None
    null_ok = NONE_TEST.search(source) is not None
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list) and not parts_ok:
            texts = []
            for p in c:
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    texts.append(p["text"])
                elif isinstance(p, dict) and p.get("type") in ("image_url", "image", "input_image"):
                    texts.append(image_placeholder(cfg, source))
            m = {**m, "content": "\n".join(texts)}
        elif c is None and "content" in m and not null_ok:
            m = {**m, "content": ""}
        calls = m.get("tool_calls")
        if isinstance(calls, list) and any(object_arguments(tc) for tc in calls):
            m = {**m, "tool_calls": [
                {**tc, "function": {**tc["function"], "arguments": json.dumps(tc["function"]["arguments"], ensure_ascii=False, separators=(",", ":"))}}
                if object_arguments(tc) else tc
                for tc in calls
            ]}
        out.append(m)
    return out


def object_arguments(tc):
    f = tc.get("function") if isinstance(tc, dict) else None
    return isinstance(f, dict) and "arguments" in f and not isinstance(f["arguments"], str)


def render(template, cfg, conv, source):
    return render_once(template, cfg, conv, prepare(conv["messages"], cfg, source))


def render_once(template, cfg, conv, messages):
    add_generation_prompt = conv.get("add_generation_prompt", False)
    continue_final_message = conv.get("continue_final_message", False)
    if continue_final_message and add_generation_prompt:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible.")
    kwargs = {**special_tokens_map(cfg), **conv.get("chat_template_kwargs", {})}
    text = template.render(
        messages=messages,
        tools=conv.get("tools"),
        documents=conv.get("documents"),
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    if continue_final_message:
        final = messages[-1]["content"]
        if isinstance(final, (list, tuple)):
            for block in reversed(final):
                if "text" in block:
                    final = block["text"]
                    break
            else:
                raise ValueError("continue_final_message is set but the final message has no text content.")
        if final.strip() not in text:
            raise ValueError("continue_final_message is set but the final message does not appear in the chat")
        loc = text.rindex(final.strip())
        if text[loc : loc + len(final.lstrip())] == final:
            text = text[: loc + len(final)]
        else:
            text = text[: loc + len(final.strip())]
    return text


def main():
    job = json.load(sys.stdin)
    template = compile_template(job["chat_template"])
    cfg = job["tokenizer_config"]
    out = []
    for conv in job["conversations"]:
        try:
            out.append({"id": conv["id"], "text": render(template, cfg, conv, job["chat_template"])})
        except Exception as e:  # the template (or the continuation check) refused the conversation
            out.append({"id": conv["id"], "error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
