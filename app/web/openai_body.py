"""The OpenAI response bodies of one request's choices: text, finish reason, logprobs in completions' or chat's
shape, usage summed over the choices; and `Choices`, the live streams of one request (n samples of each prompt)
read through one queue.

Shapes (as OpenAI and vLLM spell them): completions `logprobs` = {tokens, token_logprobs, top_logprobs (a dict per
token: its top alternatives and the chosen token itself, as vLLM returns it), text_offset}, with `echo` the
prompt's tokens first (the first one's logprob and alternatives None); chat `logprobs` = {content: [{token,
logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}; a named tool_choice's text is its one tool call's
arguments (content "", tool_calls [{id, type, function: {name, arguments}}], streamed as arguments deltas, the
first with the id and name, as vLLM streams them); tool_choice "required"'s text is a JSON list of {name, parameters},
answered as that many tool calls (streamed whole with the finish); a call max_tokens cut short is no call. Usage counts each prompt once whatever its n (as
vLLM does) and every choice's tokens. This module knows the OpenAI format and app.live's stream events, nothing
of HTTP or validation.
"""
import json
import queue
import secrets

from ..live.stream import DoneEvent, PromptEvent, StreamEvent, TextEvent, next_event
from .openai_params import Params


class Choices:
    """The live streams of one request: prompt p's sample j is choice p * n + j, all feeding one queue."""

    def __init__(self, n: int):
        self.n = n
        self.events: queue.Queue = queue.Queue()
        self.streams: list = []

    def read(self, timeout: float):
        """(choice index, event) or None after `timeout` seconds."""
        return next_event(self.events, timeout)

    def close(self) -> None:
        for stream in self.streams:
            stream.close()


class ChoiceBody:
    """What one choice has received so far, and its pieces in the OpenAI shapes."""

    def __init__(self, index: int, kind: str, params: Params, prompt_ids: list[int], prompt_text: str, texts):
        self.index, self.kind, self.params, self.texts = index, kind, params, texts  # texts(ids): each id's text
        self.prompt_ids, self.prompt_text = prompt_ids, prompt_text
        self.text: list[str] = [prompt_text] if params.echo else []
        self.entries: list = []           # engine.worker.logprobs.Entry of the written tokens
        self.prompt_entries: list = []    # ...of the prompt (echo with logprobs), the first None
        self.tokens = 0                   # completion tokens so far
        self.finish: str | None = None
        self.usage: dict | None = None
        self.times: dict = {}             # its times on the lane clock, from its DoneEvent (app.web.tracing reads them)
        self.offset = 0                   # text_offset of the next token shown (completions)
        self.echo_only = params.max_tokens == 0                # echo with max_tokens 0: the one token is dropped
        self.tool_id = tool_id() if params.tool else None      # a named tool_choice's call
        self.tool_opened = False                               # stream: its first delta (id, name) has gone
        self.calls_tools = params.tool is not None or params.tools_required   # the text is tool calls, not content

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, PromptEvent):
            self.prompt_entries = event.entries
        elif isinstance(event, TextEvent) and not self.echo_only:
            self.text.append(event.text)
            self.entries += event.entries
            self.tokens = event.tokens
        elif isinstance(event, DoneEvent):
            self.finish, self.usage = ("length", {**event.usage, "completion_tokens": 0}) if self.echo_only \
                else (event.finish, event.usage)
            self.tokens, self.times = self.usage["completion_tokens"], event.times
            if not self.echo_only:
                self.entries += event.entries

    def logprobs(self, entries: list, prompt: bool = False) -> dict | None:
        """`entries` (and the prompt's, when `prompt`) in this choice's endpoint's shape; None if not asked."""
        if self.params.logprobs is None:
            return None
        if self.kind == "chat":
            return {"content": [self.chat_entry(e) for e in entries]}
        shown = [(self.prompt_ids[0], None, None)] + list(self.prompt_entries[1:]) if prompt else []
        shown += entries
        ids = sorted({t for e in shown for t in [e[0], *(i for i, _ in e[2] or ())]})
        name = dict(zip(ids, self.texts(ids)))
        out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for token, lp, top in shown:
            out["tokens"].append(name[token])
            out["token_logprobs"].append(lp)
            out["top_logprobs"].append(None if lp is None else {**{name[i]: v for i, v in top}, name[token]: lp})
            out["text_offset"].append(self.offset)
            self.offset += len(name[token])
        return out

    def chat_entry(self, entry) -> dict:
        token, lp, top = entry
        names = self.texts([token, *(i for i, _ in top)])
        return {"token": names[0], "logprob": lp, "bytes": list(names[0].encode()),
                "top_logprobs": [{"token": s, "logprob": v, "bytes": list(s.encode())}
                                 for s, (_, v) in zip(names[1:], top)]}

    def chat_delta(self, text: str, finished: bool) -> dict:
        """A streamed chat chunk's delta of `text`: content; or a named tool call's arguments (its id and name with
        the first, as vLLM streams them); or, for tool_choice "required", nothing until the choice has `finished`,
        then its whole calls (the list is parsed once complete)."""
        if not self.calls_tools:
            return {"content": text} if text else {}
        if self.params.tools_required:
            calls = self.tool_calls() if finished else None
            return {"tool_calls": [call | {"index": i} for i, call in enumerate(calls)]} if calls else {}
        if not text:
            return {}
        call = {"index": 0, "function": {"arguments": text}}
        if not self.tool_opened:
            self.tool_opened = True
            call = self.tool_call(text) | {"index": 0}
        return {"tool_calls": [call]}

    def tool_call(self, arguments: str) -> dict:
        return {"id": self.tool_id, "type": "function", "function": {"name": self.params.tool, "arguments": arguments}}

    def tool_calls(self) -> list[dict] | None:
        """The whole text's tool calls: a named tool_choice's one call, "required"'s list ({name, parameters} each);
        None where max_tokens cut the text before they were complete (as vLLM answers: no tool_calls)."""
        text = "".join(self.text)
        try:
            parsed = json.loads(text)
        except ValueError:
            if self.params.tools_required or self.finish == "length":
                return None
            parsed = None   # a named call's arguments that the grammar ended: as they came
        if not self.params.tools_required:
            return [self.tool_call(text)]
        return [{"id": tool_id(), "type": "function", "function": {"name": c["name"], "arguments": json.dumps(
            c["parameters"], ensure_ascii=False)}} for c in parsed]

    def whole(self) -> dict:
        """The choice of a whole (non-streamed) response."""
        choice = {"index": self.index, "finish_reason": self.finish}
        self.offset = 0
        if self.kind == "chat":
            calls = self.tool_calls() if self.calls_tools else None
            choice["message"] = {"role": "assistant", "content": "".join(self.text)} if not self.calls_tools else \
                {"role": "assistant", "content": "", **({"tool_calls": calls} if calls else {})}
            choice["logprobs"] = self.logprobs(self.entries)
        else:
            choice["text"] = "".join(self.text)
            echo_logprobs = self.params.echo and self.params.logprobs is not None
            choice["logprobs"] = self.logprobs(self.entries, prompt=echo_logprobs)
        return choice


def tool_id() -> str:
    return f"chatcmpl-tool-{secrets.token_hex(16)}"


def usage(choices: list[ChoiceBody], n: int) -> dict:
    """The request's usage: each prompt's tokens once (its first sample's), every choice's completion tokens."""
    firsts = [c for c in choices if c.index % n == 0]
    prompt = sum(len(c.prompt_ids) for c in firsts)
    cached = sum((c.usage or {}).get("prompt_tokens_details", {}).get("cached_tokens", 0) for c in firsts)
    completion = sum(c.tokens for c in choices)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}
