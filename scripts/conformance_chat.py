"""Conformance behaviours of POST /v1/chat/completions (vLLM's vllm-project/vllm/tests/entrypoints/openai/chat_completion/test_chat.py,
test_completion_with_function_calling.py, test_tool_choice_null.py, test_chat_echo.py and
test_chat_logit_bias_validation.py)."""
import json
import re

from scripts.conformance_checks import (CHAT, PERSON, WEATHER, Ctx, behaviour, chat, chunks, ensure, person_ok,
                                        refused, still_serves, weather_ok)

LANGUAGES = ["Python", "Java", "JavaScript", "C++", "C#", "PHP", "TypeScript", "Ruby", "Swift", "Kotlin"]
IP = r"((25[0-5]|(2[0-4]|1\d|[1-9]|)\d)\.){3}(25[0-5]|(2[0-4]|1\d|[1-9]|)\d)"
NAMED = {"type": "function", "function": {"name": "get_weather"}}
WHERE = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


@behaviour("chat.no_logprobs", "logprobs false: choice.logprobs is null", "test_chat.py::test_no_logprobs_chat")
def no_logprobs(ctx: Ctx):
    ensure(chat(ctx, max_completion_tokens=3, temperature=0, logprobs=False).choices[0].logprobs is None, "present")


@behaviour("chat.top_logprobs_0", "logprobs true, top_logprobs 0: content entries with no alternatives",
           "test_chat.py::test_zero_logprobs_chat")
def zero_logprobs(ctx: Ctx):
    lp = chat(ctx, max_completion_tokens=3, temperature=0, logprobs=True, top_logprobs=0).choices[0].logprobs
    ensure(lp and lp.content and len(lp.content[0].top_logprobs) == 0, f"got {lp}")


@behaviour("chat.top_logprobs_5", "top_logprobs 5: five alternatives a token",
           "test_chat.py::test_some_logprobs_chat")
def some_logprobs(ctx: Ctx):
    lp = chat(ctx, max_completion_tokens=3, temperature=0, logprobs=True, top_logprobs=5).choices[0].logprobs
    ensure(lp and lp.content and all(len(e.top_logprobs) == 5 for e in lp.content), f"got {lp}")


@behaviour("chat.top_logprobs_over", "top_logprobs above 20 is a 400, streamed or not, and the server goes on",
           "test_chat.py::test_too_many_chat_logprobs")
def too_many(ctx: Ctx):
    refused(lambda: chat(ctx, max_completion_tokens=3, logprobs=True, top_logprobs=21, stream=True))
    refused(lambda: chat(ctx, max_completion_tokens=3, logprobs=True, top_logprobs=30))
    still_serves(ctx)


@behaviour("chat.single", "one chat: finish \"length\" at max_completion_tokens, usage completion = 5 and total = "
           "prompt + completion, role assistant; a second turn with the answer as an assistant message works",
           "test_chat.py::test_single_chat_session")
def single(ctx: Ctx):
    r = chat(ctx, max_completion_tokens=5, temperature=0)
    ch, u = r.choices[0], r.usage
    ensure(r.id and ch.finish_reason == "length" and ch.message.role == "assistant" and ch.message.content, f"{ch}")
    ensure(u.completion_tokens == 5 and u.total_tokens == u.prompt_tokens + 5, f"usage {u}")
    more = CHAT + [{"role": "assistant", "content": ch.message.content}, {"role": "user", "content": "in json"}]
    ensure(chat(ctx, more, max_completion_tokens=3).choices[0].message.content is not None, "no second turn")


@behaviour("chat.stream_equals", "a greedy stream's deltas join into the whole answer, role assistant, one finish "
           "on the last chunk, which carries content", "test_chat.py::test_chat_streaming")
def streaming(ctx: Ctx):
    whole = chat(ctx, max_completion_tokens=6, temperature=0).choices[0]
    got = chunks(chat(ctx, max_completion_tokens=6, temperature=0, stream=True))
    ensure(all(c.choices[0].delta.role in (None, "assistant") for c in got), "a role other than assistant")
    ensure("".join(c.choices[0].delta.content or "" for c in got) == whole.message.content, "the stream's text differs")
    finishes = [c for c in got if c.choices[0].finish_reason]
    ensure(len(finishes) == 1 and got[-1].choices[0].finish_reason == whole.finish_reason, f"{len(finishes)} finishes")
    ensure(got[-1].choices[0].delta.content, "the finishing chunk carries no content (a separate empty finish chunk)")


@behaviour("chat.include_usage", "stream_options include_usage: one last chunk with empty choices and the totals, "
           "none before; include_usage false: none at all", "test_chat.py::test_chat_completion_stream_options")
def include_usage(ctx: Ctx):
    ensure(all(c.usage is None for c in chat(ctx, max_completion_tokens=3, stream=True,
                                              stream_options={"include_usage": False})), "usage without include_usage")
    got = chunks(chat(ctx, max_completion_tokens=3, stream=True, stream_options={"include_usage": True}))
    u = got[-1].usage
    ensure(all(c.usage is None for c in got[:-1]) and got[-1].choices == [] and u and
           u.total_tokens == u.prompt_tokens + u.completion_tokens > u.prompt_tokens, "no single last usage chunk")


@behaviour("chat.continuous_usage", "continuous_usage_stats with min_tokens 10: completion_tokens rises on every "
           "chunk that carries a choice and ends at 10", "test_chat.py::test_chat_completion_stream_options")
def continuous(ctx: Ctx):
    last = 0
    for c in chat(ctx, max_completion_tokens=10, temperature=0, stream=True, extra_body={"min_tokens": 10},
                  stream_options={"include_usage": True, "continuous_usage_stats": True}):
        u = c.usage
        ensure(u is not None and u.total_tokens == u.prompt_tokens + u.completion_tokens, "a chunk without usage")
        ensure(last == 0 or u.completion_tokens > last or (not c.choices and u.completion_tokens == last),
               f"completion_tokens {u.completion_tokens} after {last} on a chunk with a choice")
        last = u.completion_tokens
    ensure(last == 10, f"ended at {last}")


@behaviour("chat.stream_options_unstreamed", "stream_options without stream is a 400",
           "test_chat.py::test_chat_completion_stream_options")
def options_unstreamed(ctx: Ctx):
    for opts in ({"include_usage": None}, {"include_usage": True}):
        refused(lambda: chat(ctx, max_completion_tokens=3, stream_options=opts))


@behaviour("chat.choice", "structured_outputs choice: the content is one of the choices",
           "test_chat.py::test_structured_outputs_choice_chat")
def choice(ctx: Ctx):
    c = chat(ctx, max_completion_tokens=10, temperature=0.7, extra_body={"structured_outputs": {"choice": LANGUAGES}})
    ensure(c.choices[0].message.content in LANGUAGES, f"content {c.choices[0].message.content!r}")


@behaviour("chat.json", "structured_outputs json: the content is JSON that keeps to the schema",
           "test_chat.py::test_structured_outputs_json_chat")
def json_schema(ctx: Ctx):
    c = chat(ctx, [{"role": "user", "content": "An employee profile as JSON."}], max_completion_tokens=60,
             extra_body={"structured_outputs": {"json": PERSON}})
    ensure(person_ok(json.loads(c.choices[0].message.content)), f"content {c.choices[0].message.content!r}")


@behaviour("chat.regex", "structured_outputs regex: the content matches whole", "test_chat.py::test_structured_outputs_regex_chat")
def regex(ctx: Ctx):
    c = chat(ctx, [{"role": "user", "content": "An example IP address."}], max_completion_tokens=20,
             extra_body={"structured_outputs": {"regex": IP}})
    ensure(re.fullmatch(IP, c.choices[0].message.content), f"content {c.choices[0].message.content!r}")


@behaviour("chat.regex_type", "a regex that is not a string is a 400", "test_chat.py::test_structured_outputs_type_error")
def regex_type(ctx: Ctx):
    refused(lambda: chat(ctx, max_completion_tokens=3, extra_body={"structured_outputs": {"regex": {"1": "Python"}}}))


@behaviour("chat.choice_logprobs", "a constrained answer's top logprobs are finite numbers (>= -9999)",
           "test_chat.py::test_structured_outputs_choice_chat_logprobs")
def choice_logprobs(ctx: Ctx):
    c = chat(ctx, max_completion_tokens=10, logprobs=True, top_logprobs=5,
             extra_body={"structured_outputs": {"choice": LANGUAGES}})
    tops = c.choices[0].logprobs.content[0].top_logprobs
    ensure(tops and all(t.logprob >= -9999.0 for t in tops), f"top logprobs {tops}")


@behaviour("chat.json_object", "response_format json_object: the content is a JSON object",
           "test_chat.py::test_response_format_json_object")
def json_object(ctx: Ctx):
    # seeded: a sampled walk may still be inside a string when max tokens cut it (the tiny random model's did in 5 of
    # 60 unseeded draws at 30 tokens, 3 of 100 at 150), which says nothing of the endpoint; a seed repeats one draw
    c = chat(ctx, [{"role": "user", "content": 'what is 1+1? answer as JSON like {"result": 2}'}],
             max_completion_tokens=30, response_format={"type": "json_object"}, seed=0)
    ensure(isinstance(json.loads(c.choices[0].message.content), dict), f"content {c.choices[0].message.content!r}")


@behaviour("chat.json_schema", "response_format json_schema: the content keeps to the schema",
           "test_chat.py::test_response_format_json_schema")
def response_schema(ctx: Ctx):
    c = chat(ctx, [{"role": "user", "content": "An employee as JSON."}], max_completion_tokens=60,
             response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    ensure(person_ok(json.loads(c.choices[0].message.content)), f"content {c.choices[0].message.content!r}")


@behaviour("chat.text_format", "response_format text: plain content", "test_chat.py::test_response_format_text")
def text_format(ctx: Ctx):
    c = chat(ctx, max_completion_tokens=5, response_format={"type": "text"})
    ensure(c.choices[0].message.content is not None, "no content")


@behaviour("chat.extra_fields", "unknown fields in a message are ignored", "test_chat.py::test_extra_fields_allowed")
def extra_fields(ctx: Ctx):
    c = chat(ctx, [{"role": "user", "content": "what is 1+1?", "extra_field": "0"}], max_completion_tokens=3, seed=0)
    ensure(c.choices[0].message.content is not None, "no content")


@behaviour("chat.content_parts", "content as a list of text parts reads as the joined text: the same greedy answer",
           "test_chat.py::test_complex_message_content")
def content_parts(ctx: Ctx):
    a = chat(ctx, [{"role": "user", "content": "what is 1+1?"}], max_completion_tokens=5, temperature=0)
    b = chat(ctx, [{"role": "user", "content": [{"type": "text", "text": "what is 1+1?"}]}],
             max_completion_tokens=5, temperature=0)
    ensure(a.choices[0].message.content == b.choices[0].message.content, "parts answer differently")


@behaviour("chat.custom_role", "a custom role is taken, the same with string or parts content",
           "test_chat.py::test_custom_role")
def custom_role(ctx: Ctx):
    a = chat(ctx, [{"role": "my-custom-role", "content": "what is 1+1?"}], max_completion_tokens=3, temperature=0)
    b = chat(ctx, [{"role": "my-custom-role", "content": [{"type": "text", "text": "what is 1+1?"}]}],
             max_completion_tokens=3, temperature=0)
    ensure(a.choices[0].message.content == b.choices[0].message.content, "differ")


@behaviour("chat.long_seed", "a seed outside int64 is a 400", "test_chat.py::test_long_seed")
def long_seed(ctx: Ctx):
    for seed in (-2 ** 63 - 1, 2 ** 63):
        refused(lambda: chat(ctx, max_completion_tokens=2, temperature=0, seed=seed))


@behaviour("chat.n", "n 3: three choices, indices 0-2, content in each, not all equal",
           "test_chat.py::test_chat_completion_n_parameter_non_streaming")
def n_whole(ctx: Ctx):
    r = chat(ctx, max_completion_tokens=10, temperature=0.7, n=3)
    ensure([c.index for c in r.choices] == [0, 1, 2] and all(c.message.content for c in r.choices), f"{r.choices}")
    ensure(len({c.message.content for c in r.choices}) > 1, "all three samples equal")


@behaviour("chat.n_stream", "n 2 streamed: both indices receive content",
           "test_chat.py::test_chat_completion_n_parameter_streaming")
def n_stream(ctx: Ctx):
    got = {0: "", 1: ""}
    for c in chat(ctx, max_completion_tokens=8, temperature=0.7, n=2, stream=True):
        for ch in c.choices:
            got[ch.index] += ch.delta.content or ""
    ensure(got[0] and got[1], f"texts {got}")


@behaviour("chat.n_seed", "n 2 with a seed: two choices with content", "test_chat.py::test_chat_completion_n_with_seed")
def n_seed(ctx: Ctx):
    r = chat(ctx, max_completion_tokens=8, temperature=0.8, n=2, seed=42)
    ensure([c.index for c in r.choices] == [0, 1] and all(c.message.content for c in r.choices), f"{r.choices}")


@behaviour("chat.tool_named", "tool_choice naming a function: content empty, one tool call whose arguments keep to "
           "its parameters", "test_completion_with_function_calling.py::test_named_tool_use")
def tool_named(ctx: Ctx):
    m = chat(ctx, WHERE, max_completion_tokens=40, temperature=0, tools=WEATHER, tool_choice=NAMED).choices[0].message
    ensure(not m.content and m.tool_calls and m.tool_calls[0].function.name == "get_weather", f"message {m}")
    ensure(weather_ok(json.loads(m.tool_calls[0].function.arguments)), f"arguments {m.tool_calls[0].function.arguments}")


@behaviour("chat.tool_named_stream", "a named tool call streamed: no content, arguments deltas that join into valid "
           "arguments, one finish", "test_completion_with_function_calling.py::test_named_tool_use")
def tool_named_stream(ctx: Ctx):
    args, finishes = [], 0
    for c in chat(ctx, WHERE, max_completion_tokens=40, temperature=0, tools=WEATHER, tool_choice=NAMED, stream=True):
        d = c.choices[0].delta
        ensure(not d.content, f"content {d.content!r}")
        args += [t.function.arguments for t in d.tool_calls or [] if t.function and t.function.arguments]
        finishes += c.choices[0].finish_reason is not None
    ensure(finishes == 1 and weather_ok(json.loads("".join(args))), f"{finishes} finishes, arguments {''.join(args)!r}")


@behaviour("chat.tool_required", "tool_choice \"required\": at least one tool call (whole and streamed), each "
           "naming a given tool with arguments that parse",
           "test_completion_with_function_calling.py::test_function_tool_use")
def tool_required(ctx: Ctx):
    m = chat(ctx, WHERE, max_completion_tokens=60, temperature=0, tools=WEATHER, tool_choice="required").choices[0].message
    ensure(m.tool_calls and all(t.function.name in ("get_weather", "get_time") for t in m.tool_calls), f"message {m}")
    ensure(all(isinstance(json.loads(t.function.arguments), dict) for t in m.tool_calls), "arguments do not parse")
    calls = [t for c in chat(ctx, WHERE, max_completion_tokens=60, temperature=0, tools=WEATHER,
                             tool_choice="required", stream=True) if c.choices for t in c.choices[0].delta.tool_calls or []]
    ensure(calls and calls[0].function.name in ("get_weather", "get_time"), "no streamed tool call")


@behaviour("chat.tool_auto", "tool_choice \"auto\" with tools: answered, with tool calls or content",
           "test_completion_with_function_calling.py::test_function_tool_use")
def tool_auto(ctx: Ctx):
    m = chat(ctx, WHERE, max_completion_tokens=40, temperature=0, tools=WEATHER, tool_choice="auto").choices[0].message
    ensure(m.tool_calls or m.content is not None, f"message {m}")


@behaviour("chat.tool_cut", "a tool call cut by max_completion_tokens 1: finish \"length\", no tool_calls",
           "test_completion_with_function_calling.py::test_max_tokens_with_tool_choice_required")
def tool_cut(ctx: Ctx):
    for how in ("required", NAMED):
        ch = chat(ctx, WHERE, max_completion_tokens=1, temperature=0, tools=WEATHER, tool_choice=how).choices[0]
        ensure(ch.finish_reason == "length" and not ch.message.tool_calls, f"{how}: {ch.finish_reason}, {ch.message}")


@behaviour("chat.tool_inconsistent", "a named tool_choice without tools, naming an absent function, or {} is a 400",
           "test_completion_with_function_calling.py::test_inconsistent_tool_choice_and_tools")
def tool_inconsistent(ctx: Ctx):
    refused(lambda: chat(ctx, WHERE, max_completion_tokens=3, tool_choice=NAMED))
    refused(lambda: chat(ctx, WHERE, max_completion_tokens=3, tools=WEATHER,
                         tool_choice={"type": "function", "function": {"name": "undefined_function"}}))
    refused(lambda: chat(ctx, WHERE, max_completion_tokens=3, tools=WEATHER, tool_choice={}))


@behaviour("chat.tool_choice_null", "tool_choice null reads as absent: no conflict with structured_outputs; a bogus "
           "tool_choice is a 400", "chat_completion/test_tool_choice_null.py")
def tool_choice_null(ctx: Ctx):
    c = chat(ctx, max_completion_tokens=20, tool_choice=None,
             extra_body={"tool_choice": None, "structured_outputs": {"choice": LANGUAGES}})
    ensure(c.choices[0].message.content in LANGUAGES, f"content {c.choices[0].message.content!r}")
    refused(lambda: chat(ctx, max_completion_tokens=3, tools=WEATHER, tool_choice="bogus"))


@behaviour("chat.logit_bias", "logit_bias with a token id in the vocabulary is taken",
           "test_chat_logit_bias_validation.py::test_chat_logit_bias_valid")
def logit_bias(ctx: Ctx):
    ensure(chat(ctx, max_tokens=3, logit_bias={"5": 1.0}).choices[0].message.content is not None, "no content")


@behaviour("chat.logit_bias_bad", "logit_bias with a key that is no token id, or a value that is no number, is a 400 "
           "naming logit_bias", "test_chat_logit_bias_validation.py")
def logit_bias_bad(ctx: Ctx):
    for bias in ({"not_a_token_id": 50}, {"1": "not_a_number"}):
        e = refused(lambda: chat(ctx, max_tokens=3, logit_bias=bias))
        ensure("logit_bias" in str(e), f"the error does not name logit_bias: {e.message}")


@behaviour("chat.continue_final", "vLLM's continue_final_message with echo: the reply continues the last assistant "
           "message and repeats it first", "test_chat_echo.py")
def continue_final(ctx: Ctx):
    saying = "An apple a day, keeps"
    c = chat(ctx, [{"role": "user", "content": "tell me a saying"}, {"role": "assistant", "content": saying}],
             max_completion_tokens=5, extra_body={"echo": True, "continue_final_message": True,
                                                  "add_generation_prompt": False})
    ensure(saying in (c.choices[0].message.content or ""), f"content {c.choices[0].message.content!r}")


@behaviour("chat.prompt_logprobs", "vLLM's prompt_logprobs on chat: the response carries the prompt's logprobs",
           "test_chat.py::test_prompt_logprobs_chat")
def prompt_logprobs(ctx: Ctx):
    c = chat(ctx, max_completion_tokens=2, extra_body={"prompt_logprobs": 1})
    ensure(getattr(c, "prompt_logprobs", None), "no prompt_logprobs")


@behaviour("chat.tool_roundtrip", "a tool call and its result sent back (assistant tool_calls, role \"tool\") are "
           "taken as the next turn", "test_completion_with_function_calling.py::test_no_args_tool_call")
def tool_roundtrip(ctx: Ctx):
    m = chat(ctx, WHERE, max_completion_tokens=40, temperature=0, tools=WEATHER, tool_choice=NAMED).choices[0].message
    call = m.tool_calls[0]
    turn = WHERE + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                    {"role": "tool", "tool_call_id": call.id, "content": "18 degrees"}]
    ensure(chat(ctx, turn, max_completion_tokens=5).choices[0].message.content is not None, "no answer")
