"""Reasoning traces: the `<think>…</think>` part a reasoning model writes before its answer.

Extraction, exact match and the judge's templates see only the answer after the trace; the trace
is kept apart (the generations' `reasoning` column). A trace that never closes (the model reached
max_new_tokens, or stopped, while thinking) leaves no answer: the answer is empty and the row's
`reasoning_state` is `unclosed` ("reasoning not finished"), and it is never judged.

Settings (`generator.reasoning`, `judge.reasoning`): `strip` is `auto` (on when the chat template
mentions the markers, the prompt opens a trace or the text starts with the open marker), true or
false; `open` and `close` are the markers. A chat template may open the trace in the prompt itself
(DeepSeek-R1 appends `<think>` to the generation prompt): the text then starts inside the trace and
shows only the close marker. The answer is the text after the last close marker (as Qwen3's chat
template keeps it in a conversation's history): a second trace after a first is trace too.
"""

from __future__ import annotations

from dataclasses import dataclass

CLOSED, UNCLOSED, ABSENT = "closed", "unclosed", "absent"
NOT_FINISHED = "reasoning not finished"  # a judge request's decided_by: no answer, so no judge call
REASONING_UNFINISHED = "reasoning not finished: the trace never closed, so there is no answer (not judged)"
JUDGE_REASONING_UNFINISHED = "the judge's reasoning did not finish before its verdict (raise judge.max_new_tokens)"


# Why a trace never closed, from the generator's finish reason: the token limit, or an end of sequence
# (or a stop string) the model wrote inside its trace, which more tokens do not mend.
LIMIT, ENDED = "token limit", "end of sequence inside the trace"


def unfinished_cause(finish_reason) -> str:
    return LIMIT if finish_reason == "length" else ENDED


def unfinished_advice(causes: dict) -> list[str]:
    """What to do about the traces that never closed, one sentence per cause ({cause: answers})."""
    out = []
    if causes.get(LIMIT):
        out.append(
            f"{causes[LIMIT]} reached generator.max_new_tokens inside the trace: raise generator.max_new_tokens, "
            "or turn thinking off through generator.chat_template_kwargs."
        )
    if causes.get(ENDED):
        out.append(
            f"{causes[ENDED]} ended by an end-of-sequence token (or a stop string) inside the trace, before its "
            "close marker: more tokens will not help. Check that generator.reasoning.close is the marker this model "
            "writes and that its chat template and stop settings let it close the trace, or turn thinking off "
            "through generator.chat_template_kwargs."
        )
    return out


def unfinished(row) -> bool:
    """Whether a generations row's trace never closed (files written before traces: never)."""
    return getattr(row, "reasoning_state", None) == UNCLOSED


@dataclass(frozen=True)
class Split:
    answer: str  # the text after the trace ("" for an unclosed one)
    reasoning: str | None  # the trace without its markers; None where there is none
    state: str  # closed, unclosed or absent


def template_shows(template, settings: dict) -> bool:
    """Whether a chat template (a string, or a dict of named templates) mentions either marker."""
    texts = template.values() if isinstance(template, dict) else [template or ""]
    return any(m and m in str(t) for t in texts for m in (settings["open"], settings["close"]))


def prompt_opens(prompt: str | None, settings: dict) -> bool:
    """Whether the prompt as sent ends inside an open trace (its last marker is an open one)."""
    if not isinstance(prompt, str) or not prompt:  # none sent (decided without the judge): NaN in a frame
        return False
    at_open, at_close = prompt.rfind(settings["open"]), prompt.rfind(settings["close"])
    return at_open >= 0 and at_open > at_close and not prompt[at_open + len(settings["open"]) :].strip()


def split(text: str | None, settings: dict, template_shows_markers: bool = False, opened: bool = False) -> Split:
    """The answer and the trace of one output. `opened`: the prompt ended inside an open trace;
    `template_shows_markers`: the chat template mentions the markers (for `strip: auto`). Under
    `auto`, a close marker in the text of a model whose template and prompt show no trace is text
    (a non-reasoning model writing about the tag), not the end of a trace."""
    text = "" if text is None else str(text)
    strip, open_, close = settings["strip"], settings["open"], settings["close"]
    body = text.lstrip()
    starts_open = body.startswith(open_)
    if strip is False or (strip == "auto" and not (template_shows_markers or opened or starts_open)):
        return Split(text, None, ABSENT)
    if starts_open:
        body = body[len(open_) :]
    elif not opened and close not in text:
        return Split(text, None, ABSENT)  # no trace: the whole text is the answer
    at = body.rfind(close)
    if at < 0:
        return Split("", body.strip(), UNCLOSED)
    return Split(body[at + len(close) :].strip(), body[:at].strip(), CLOSED)


def judge_text(text: str | None, settings: dict, prompt: str | None = None) -> tuple[str | None, bool]:
    """A judge's output with its own trace stripped and whether the trace was left unclosed. `prompt`:
    the judge's prompt as sent, where the raw records hold it (a template that opens the trace in the
    prompt leaves an output that starts inside it, and shows no marker at all if it never closed)."""
    if text is None:
        return None, False
    s = split(text, settings, opened=prompt_opens(prompt, settings))
    return (s.answer if s.state != ABSENT else text), s.state == UNCLOSED
