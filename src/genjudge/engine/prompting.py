"""The prompt as sent: chat template when the tokenizer has one, plain text otherwise.

A prompt is a text (one user turn) or a conversation: a list of {role, content}
messages (system, few-shot turns, the user's question) from a chat dataset.
"""

from __future__ import annotations

from datetime import date, datetime, time


def uses_chat_template(tokenizer, setting="auto") -> bool:
    if setting == "auto":
        return bool(getattr(tokenizer, "chat_template", None))
    return bool(setting)


def render_prompt(
    tokenizer,
    text: str,
    system_prompt: str | None = None,
    chat: bool = True,
    messages: list[dict] | None = None,
    template_kwargs: dict | None = None,
    chat_date: str | None = None,
) -> str:
    """`messages`, when given, is the conversation to send (text is then its last user turn);
    the configured system prompt goes first unless the conversation has its own. `template_kwargs`
    are variables of the chat template (`chat_template_kwargs`, e.g. enable_thinking). `chat_date`: the
    run's pinned date (genjudge.store.chat_date), which a template's `strftime_now` gives instead of today."""
    turns = list(messages) if messages else [{"role": "user", "content": text}]
    if system_prompt and not any(m["role"] == "system" for m in turns):
        turns.insert(0, {"role": "system", "content": system_prompt})
    if not chat:
        if not messages:
            return text if system_prompt is None else f"{system_prompt}\n\n{text}"
        return "\n\n".join(f"{m['role']}: {m['content']}" for m in turns) + "\n\nassistant:"
    variables = dict(template_kwargs or {})
    if chat_date:
        variables["strftime_now"] = pinned_strftime(chat_date)
    return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True, **variables)


def pinned_strftime(chat_date: str):
    """transformers' `strftime_now` template function at midnight of `chat_date`. It is a global of
    transformers' template environment (utils/chat_template_utils.py: `datetime.now().strftime`); a
    variable passed to the render shadows that global for this call only, in transformers' own renderer."""
    moment = datetime.combine(date.fromisoformat(chat_date), time())

    def strftime_now(format):
        return moment.strftime(format)

    return strftime_now
