"""The OpenAI endpoint's parameters, checked: what both endpoints share, the completions prompt in its four forms,
logprobs, echo and n. Every refusal is a `BadParam` naming the parameter (a 400 unless it says otherwise).

Structured output (`response_format` json_object / json_schema, vLLM's `structured_outputs` json / regex / choice /
grammar / json_object) becomes one llguidance grammar here, checked (engine.structured): a bad schema is a 400
naming the parameter before any engine sees it; so does a tool call that `tool_choice` names or makes "required". What
is refused and why (docs/live-api.md has the table): tool_choice "auto" needs the output parsed into tool calls in the
model's own format, which this server does not do; the penalties, `logit_bias` and `suffix` change the logits in ways the engine does not implement;
`best_of` > n would sample candidates the client never sees. Unknown parameters are ignored, as OpenAI does.
This module knows the OpenAI request format and the server's limits, nothing of the live lane or HTTP responses.
"""
from dataclasses import dataclass

from engine import structured

MAX_LOGPROBS = 20   # top alternatives per token, as OpenAI and vLLM allow
MAX_CHOICES = 32    # prompts x n in one request
INT64 = (-2 ** 63, 2 ** 63 - 1)

REFUSED = {"functions": (None, []), "function_call": (None, "none"),
           "logit_bias": (None, {}), "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0),
           "repetition_penalty": (None, 1, 1.0), "suffix": (None, "")}
WHY_NO_GRAMMAR = ("or not needs the output parsed into tool calls in the model's own format, which this server does "
                  "not do; constrained decoding gives a named function's arguments or the calls \"required\" asks "
                  'for: send tool_choice {"type": "function", "function": {"name": ...}} or "required"')


class BadParam(Exception):
    def __init__(self, param: str, message: str, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.message, self.status, self.code = param, message, status, code


def number(body: dict, name: str, lo: float, hi: float, default, integer: bool = False):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise BadParam(name, f"{name} must be {kind} from {lo} to {hi}, got {value!r}")
    return value


def flag(body: dict, name: str) -> bool:
    if not isinstance(body.get(name, False), bool):
        raise BadParam(name, f"{name} must be true or false")
    return body.get(name, False)


@dataclass(frozen=True)
class Params:
    """One request's checked parameters (everything but the prompt or messages)."""
    max_tokens: int               # tokens each choice may write (0: echo only, the prompt and its logprobs)
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]
    ignore_eos: bool
    min_tokens: int
    n: int                        # choices per prompt
    logprobs: int | None          # top alternatives per written token (None: no logprobs)
    echo: bool                    # completions: the prompt before the text (and its logprobs with `logprobs`)
    stream: bool
    include_usage: bool           # stream: a usage chunk before [DONE]
    continuous_usage: bool        # stream: usage on every chunk too (vLLM's continuous_usage_stats, with include_usage)
    grammar: str | None = None    # structured output: the llguidance grammar the text keeps to (None: free text)
    grammar_param: str | None = None  # the parameter that asked for it (response_format, structured_outputs, tool_choice)
    tool: str | None = None       # chat: the function tool_choice names; the text is its arguments, sent as a tool call
    tools_required: bool = False  # chat: tool_choice "required"; the text is a JSON list of {name, parameters}, sent as calls


def check(body: dict, kind: str, limits, default_max: int) -> Params:
    """The parameters of a chat (`kind` "chat") or completions ("text") body, checked against `limits`."""
    for name, allowed in REFUSED.items():
        if name in body and body[name] not in allowed:
            raise BadParam(name, f"{name} is not supported by this server")
    tool = named_tool(body, kind)
    grammar, grammar_param = structured_output(body)
    if tool is not None:
        if grammar is not None:
            raise BadParam("tool_choice", f"a named tool_choice constrains the text to its arguments: no {grammar_param}")
        try:
            grammar, grammar_param = structured.grammar("json", tool[1]), "tool_choice"
        except ValueError as e:
            raise BadParam("tools", f"the parameters of {tool[0] or 'the tools'!r}: {e}") from None
    echo = flag(body, "echo") if kind == "text" else False
    if kind == "chat" and body.get("echo") not in (None, False):
        raise BadParam("echo", "echo is a completions parameter (POST /v1/completions)")
    n = number(body, "n", 1, limits.max_n, 1, True)   # samples per prompt: siblings on the live lane
    if body.get("best_of") not in (None, n):
        raise BadParam("best_of", f"best_of must equal n ({n}): this server returns every sample it draws")
    length = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = number(body, length, 0 if echo else 1, limits.max_new_tokens,
                        min(default_max, limits.max_new_tokens), True)
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else [] if stop is None else stop
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and 0 < len(s) <= 100 for s in stop):
        raise BadParam("stop", "stop must be a string or a list of up to 4 non-empty strings of at most 100 characters")
    stream = flag(body, "stream")
    options = body.get("stream_options")
    if options is not None:
        if not stream:
            raise BadParam("stream_options", "stream_options is only allowed with stream: true")
        if not isinstance(options, dict) or not all(isinstance(options.get(k, False), bool)
                                                    for k in ("include_usage", "continuous_usage_stats")):
            raise BadParam("stream_options", 'stream_options must be an object like {"include_usage": true}')
    options = options or {}
    if grammar is not None and (flag(body, "ignore_eos") or body.get("min_tokens")):
        raise BadParam("ignore_eos" if body.get("ignore_eos") else "min_tokens",
                       f"{grammar_param} ends the text where its grammar ends: ignore_eos and min_tokens cannot apply")
    return Params(max_tokens=max_tokens, temperature=number(body, "temperature", 0, 2, 1.0),
                  top_p=number(body, "top_p", 1e-6, 1, 1.0), seed=number(body, "seed", *INT64, None, True),
                  stop=tuple(stop), ignore_eos=flag(body, "ignore_eos"),
                  min_tokens=number(body, "min_tokens", 0, max_tokens, 0, True), n=n,
                  logprobs=logprobs(body, kind), echo=echo, stream=stream,
                  include_usage=bool(options.get("include_usage")),
                  continuous_usage=bool(options.get("include_usage") and options.get("continuous_usage_stats")),
                  grammar=grammar, grammar_param=grammar_param, tool=tool[0] if tool else None,
                  tools_required=tool is not None and tool[0] is None)


def named_tool(body: dict, kind: str) -> tuple[str | None, dict] | None:
    """The tool call `tool_choice` asks for among chat's `tools`: (the function's name, its parameters' JSON Schema)
    for a named function; (None, a schema of a list of one or more {name, parameters} of the tools) for "required",
    as vLLM constrains it; None when no tool is called (no tools, or tool_choice "none"). A tool the model would pick
    itself or not ("auto", the default with tools) is refused: its call would have to be parsed out of free text."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools in (None, []) or choice == "none":
        if isinstance(choice, dict) or choice == "required":
            raise BadParam("tool_choice", "tool_choice asks for a tool call, but no tools are given")
        if choice not in (None, "none", "auto"):
            raise BadParam("tool_choice", 'tool_choice must be "none", "auto", "required" or {"type": "function", ...}')
        return None
    if kind != "chat" or not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
            for t in tools):
        raise BadParam("tools", 'tools must be a list of {"type": "function", "function": {"name": ..., "parameters": '
                                '{...}}} (POST /v1/chat/completions)')
    if choice == "required":
        return None, {"type": "array", "minItems": 1, "items": {"anyOf": [
            {"type": "object", "properties": {"name": {"const": t["function"]["name"]},
                                              "parameters": t["function"].get("parameters") or {"type": "object"}},
             "required": ["name", "parameters"], "additionalProperties": False} for t in tools]}}
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) and isinstance(choice.get("function"), dict) \
        else None
    if name is None:
        raise BadParam("tool_choice" if choice is not None else "tools",
                       f"tool_choice {choice or 'auto'!r} is not supported: a tool the model picks {WHY_NO_GRAMMAR}")
    function = next((t["function"] for t in tools if t["function"]["name"] == name), None)
    if function is None:
        raise BadParam("tool_choice", f"tool_choice names {name!r}, which is not among the tools")
    return name, function.get("parameters") or {"type": "object"}


def structured_output(body: dict) -> tuple[str | None, str | None]:
    """The llguidance grammar that `response_format` or `structured_outputs` asks for, and which of them asked
    ((None, None): free text). One constraint a request, as vLLM allows."""
    for old in ("guided_json", "guided_regex", "guided_choice", "guided_grammar"):
        if body.get(old) is not None:   # removed from vLLM: refused, so that a client never gets free text unawares
            raise BadParam(old, f'{old} is vLLM\'s older spelling: send structured_outputs: {{"{old[7:]}": ...}}')
    fmt = response_format(body.get("response_format"))
    outputs = body.get("structured_outputs")
    if outputs is not None:
        if not isinstance(outputs, dict):
            raise BadParam("structured_outputs", "structured_outputs must be an object like {\"regex\": \"[0-9]+\"}")
        if outputs.get("structural_tag") is not None:
            raise BadParam("structured_outputs", "structured_outputs.structural_tag is not supported by this server")
        asked = [k for k in structured.KINDS if outputs.get(k) not in (None, False)]
        if len(asked) != 1 or fmt is not None:
            given = asked + (["response_format"] if fmt is not None else [])
            raise BadParam("structured_outputs", f"structured_outputs takes exactly one of {', '.join(structured.KINDS)}"
                                                 f" (and no response_format); got {', '.join(given) or 'none'}")
        fmt, param = (asked[0], outputs[asked[0]]), "structured_outputs"
    elif fmt is None:
        return None, None
    else:
        param = "response_format"
    try:
        return structured.grammar(*fmt), param
    except ValueError as e:
        raise BadParam(param, f"{param}: {e}") from None


def response_format(fmt) -> tuple[str, object] | None:
    """`{"type": "text"}` (None), `{"type": "json_object"}` (any JSON object) or `{"type": "json_schema",
    "json_schema": {"name", "schema", ...}}` (JSON that keeps to the schema), as an engine.structured constraint."""
    if fmt is None or fmt == {"type": "text"}:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "json_object":
        return "json_object", None
    spec = fmt.get("json_schema") if kind == "json_schema" else None
    if kind == "json_schema" and isinstance(spec, dict) and isinstance(spec.get("schema", {}), dict):
        return "json", spec.get("schema", {})
    raise BadParam("response_format", 'response_format must be {"type": "text"}, {"type": "json_object"} or '
                                      '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}')


def logprobs(body: dict, kind: str) -> int | None:
    """Completions: `logprobs` 0-20 (alternatives per token). Chat: `logprobs` true, with `top_logprobs` 0-20."""
    if kind == "text":
        return number(body, "logprobs", 0, MAX_LOGPROBS, None, True)
    if not flag(body, "logprobs"):
        if body.get("top_logprobs") not in (None, 0):
            raise BadParam("top_logprobs", "top_logprobs needs logprobs: true")
        return None
    return number(body, "top_logprobs", 0, MAX_LOGPROBS, 0, True)


def prompts(body: dict, vocab_size: int | None) -> list[str | list[int]]:
    """A completions prompt as a list of prompts, each a string or a list of token ids: the prompt may be a string,
    a list of ids, a list of strings or a list of id lists."""
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(is_id(t) for t in prompt)):
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt or len(prompt) > MAX_CHOICES:
        raise BadParam("prompt", f"prompt must be a non-empty string, a list of token ids, or a list of up to "
                                 f"{MAX_CHOICES} of either")
    for i, p in enumerate(prompt):
        if isinstance(p, str) and p:
            continue
        if not isinstance(p, list) or not p or not all(is_id(t) for t in p):
            raise BadParam("prompt", f"prompt[{i}] must be a non-empty string or a non-empty list of token ids")
        if vocab_size is None:
            raise BadParam("prompt", "token id prompts need a model (this server runs the simulator)")
        bad = [t for t in p if not 0 <= t < vocab_size]
        if bad:
            raise BadParam("prompt", f"prompt[{i}] holds token id {bad[0]}, outside the vocabulary (0 to {vocab_size - 1})")
    return prompt


def is_id(t) -> bool:
    return isinstance(t, int) and not isinstance(t, bool)
