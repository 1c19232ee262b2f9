"""The prompt as sent: chat template when the tokenizer has one, plain text otherwise."""

from __future__ import annotations


def uses_chat_template(tokenizer, setting="auto") -> bool:
    if setting == "auto":
        return bool(getattr(tokenizer, "chat_template", None))
    return bool(setting)


def render_prompt(tokenizer, text: str, system_prompt: str | None = None, chat: bool = True) -> str:
    if not chat:
        return text if system_prompt is None else f"{system_prompt}\n\n{text}"
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": text})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
