"""Conformance behaviours of POST /v1/completions (vLLM's vllm-project/vllm/tests/entrypoints/openai/completion/test_completion.py,
test_completion_text_offset.py, test_return_token_ids.py, and the structured-output refusals there)."""
import re

from scripts.conformance_checks import Ctx, behaviour, chunks, comp, ensure, refused, still_serves


@behaviour("completion.single", "one completion: an id, one choice, finish \"length\" at max_tokens, usage "
           "completion = max_tokens, total = prompt + completion, prompt_tokens_details.cached_tokens",
           "test_completion.py::test_single_completion")
def single(ctx: Ctx):
    r = comp(ctx, max_tokens=5, temperature=0)
    ensure(r.id and len(r.choices) == 1 and r.choices[0].text, f"got {r}")
    ensure(r.choices[0].finish_reason == "length", f"finish {r.choices[0].finish_reason}")
    u = r.usage
    ensure(u.completion_tokens == 5 and u.total_tokens == u.prompt_tokens + 5 and u.prompt_tokens > 0, f"usage {u}")
    ensure(u.prompt_tokens_details is not None and u.prompt_tokens_details.cached_tokens is not None,
           "no prompt_tokens_details.cached_tokens")


@behaviour("completion.token_ids", "a prompt of token ids is taken", "test_completion.py::test_single_completion")
def token_ids(ctx: Ctx):
    r = comp(ctx, prompt=[1, 2, 3, 4, 5], max_tokens=3, temperature=0)
    ensure(len(r.choices) == 1 and r.usage.prompt_tokens == 5, f"got {r}")


@behaviour("completion.no_logprobs", "logprobs unset: choice.logprobs is null", "test_completion.py::test_no_logprobs")
def no_logprobs(ctx: Ctx):
    ensure(comp(ctx, max_tokens=3, temperature=0).choices[0].logprobs is None, "logprobs present")


@behaviour("completion.logprobs_0", "logprobs 0: each token's logprob, top_logprobs holding the chosen token only",
           "test_completion.py::test_zero_logprobs")
def zero_logprobs(ctx: Ctx):
    lp = comp(ctx, max_tokens=3, temperature=0, logprobs=0).choices[0].logprobs
    ensure(lp is not None and lp.token_logprobs and len(lp.top_logprobs[0]) == 1, f"got {lp}")


@behaviour("completion.logprobs_5", "logprobs 5: 5 or 6 alternatives a token (the chosen one added)",
           "test_completion.py::test_some_logprobs")
def some_logprobs(ctx: Ctx):
    lp = comp(ctx, max_tokens=3, temperature=0, logprobs=5).choices[0].logprobs
    ensure(lp is not None and all(5 <= len(t) <= 6 for t in lp.top_logprobs), f"got {lp and lp.top_logprobs}")


@behaviour("completion.logprobs_over", "logprobs above 20 is a 400, streamed or not, and the server goes on",
           "test_completion.py::test_too_many_completion_logprobs")
def too_many_logprobs(ctx: Ctx):
    refused(lambda: comp(ctx, max_tokens=3, logprobs=21))
    refused(lambda: comp(ctx, max_tokens=3, logprobs=30, stream=True))
    still_serves(ctx)


@behaviour("completion.text_offset", "logprobs' text_offset starts at 0 and advances by each token's length",
           "test_completion_text_offset.py")
def text_offset(ctx: Ctx):
    lp = comp(ctx, max_tokens=5, temperature=0, logprobs=1).choices[0].logprobs
    want = [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    ensure(lp.text_offset == want, f"text_offset {lp.text_offset}, tokens {lp.tokens}")


@behaviour("completion.stream_equals", "a greedy stream's texts join into the whole answer; finish_reason only on "
           "the last chunk, which carries text", "test_completion.py::test_completion_streaming")
def streaming(ctx: Ctx):
    whole = comp(ctx, max_tokens=5, temperature=0).choices[0].text
    got = chunks(comp(ctx, max_tokens=5, temperature=0, stream=True))
    finishes = [c for c in got if c.choices[0].finish_reason is not None]
    ensure("".join(c.choices[0].text for c in got) == whole, "the stream's text differs from the whole answer")
    ensure(len(finishes) == 1 and got[-1].choices[0].finish_reason == "length", f"{len(finishes)} finish chunks")
    ensure(got[-1].choices[0].text, "the finishing chunk carries no text (a separate empty finish chunk)")


@behaviour("completion.n", "n 3 (temperature 1, seed): three choices, indices 0-2, each finished, texts differ",
           "test_completion.py::test_parallel_no_streaming")
def parallel(ctx: Ctx):
    r = comp(ctx, max_tokens=12, n=3, temperature=1.0, seed=42)
    ensure([c.index for c in r.choices] == [0, 1, 2], f"indices {[c.index for c in r.choices]}")
    ensure(all(c.finish_reason for c in r.choices), "a choice has no finish_reason")
    ensure(len({c.text for c in r.choices}) == 3, "samples repeat")


@behaviour("completion.n_stream", "n 3 streamed: every chunk names its index, one finish per choice, texts differ",
           "test_completion.py::test_parallel_streaming")
def parallel_stream(ctx: Ctx):
    texts, finishes = {0: "", 1: "", 2: ""}, 0
    for c in comp(ctx, max_tokens=12, n=3, temperature=1.0, seed=42, stream=True):
        texts[c.choices[0].index] += c.choices[0].text
        finishes += c.choices[0].finish_reason is not None
    ensure(finishes == 3 and len(set(texts.values())) == 3, f"{finishes} finishes, texts {texts}")


def _usage_ok(u) -> bool:
    return u is not None and u.prompt_tokens > 0 and u.completion_tokens > 0 and \
        u.total_tokens == u.prompt_tokens + u.completion_tokens


@behaviour("completion.include_usage", "stream_options include_usage: no usage until one last chunk with empty "
           "choices and the totals; without it (or with {}), no usage at all",
           "test_completion.py::test_completion_stream_options")
def include_usage(ctx: Ctx):
    for opts in ({"include_usage": False}, {"include_usage": False, "continuous_usage_stats": True}, {}):
        ensure(all(c.usage is None for c in comp(ctx, max_tokens=3, stream=True, stream_options=opts)), f"usage with {opts}")
    got = chunks(comp(ctx, max_tokens=3, stream=True, stream_options={"include_usage": True}))
    ensure(all(c.usage is None for c in got[:-1]) and got[-1].choices == [] and _usage_ok(got[-1].usage),
           "usage is not on one last chunk with empty choices")


@behaviour("completion.continuous_usage", "include_usage with continuous_usage_stats: usage on every chunk",
           "test_completion.py::test_completion_stream_options")
def continuous_usage(ctx: Ctx):
    got = chunks(comp(ctx, max_tokens=3, stream=True, stream_options={"include_usage": True,
                                                                        "continuous_usage_stats": True}))
    ensure(all(_usage_ok(c.usage) for c in got), "a chunk without complete usage")
    ensure(got[-1].choices == [], "no last usage chunk")


@behaviour("completion.stream_options_unstreamed", "stream_options without stream is a 400",
           "test_completion.py::test_completion_stream_options")
def options_unstreamed(ctx: Ctx):
    for opts in ({"include_usage": None}, {"include_usage": True}, {"continuous_usage_stats": True}):
        refused(lambda: comp(ctx, max_tokens=3, stream=False, stream_options=opts))


@behaviour("completion.batch", "a list of prompts (texts or token ids): a choice each, greedy twins equal",
           "test_completion.py::test_batch_completions")
def batch(ctx: Ctx):
    for prompts in (["Hello, my name is"] * 2, [[1, 2, 3, 4, 5]] * 2):
        r = comp(ctx, prompt=prompts, max_tokens=4, temperature=0)
        ensure(len(r.choices) == 2 and r.choices[0].text == r.choices[1].text, f"got {[c.text for c in r.choices]}")


@behaviour("completion.batch_n", "two prompts with n 2: four choices, indexed prompt x n + sample",
           "test_completion.py::test_batch_completions")
def batch_n(ctx: Ctx):
    r = comp(ctx, prompt=["Hello, my name is"] * 2, n=2, max_tokens=4, temperature=0)
    ensure([c.index for c in r.choices] == [0, 1, 2, 3], f"indices {[c.index for c in r.choices]}")
    ensure(r.choices[0].text == r.choices[2].text, "the same prompt's greedy samples differ")


@behaviour("completion.batch_stream", "a list of prompts streamed: one choice a chunk, texts by index",
           "test_completion.py::test_batch_completions")
def batch_stream(ctx: Ctx):
    texts = ["", ""]
    for c in comp(ctx, prompt=["Hello, my name is"] * 2, max_tokens=4, temperature=0, stream=True):
        ensure(len(c.choices) == 1, f"{len(c.choices)} choices in a chunk")
        texts[c.choices[0].index] += c.choices[0].text
    ensure(texts[0] == texts[1] and texts[0], f"texts {texts}")


@behaviour("completion.echo_logprobs", "echo with logprobs 0 or 1: the text starts with the prompt; the prompt's "
           "first token has logprob and alternatives null; each other token 1 to logprobs+1 alternatives",
           "test_completion.py::test_echo_logprob_completion")
def echo_logprobs(ctx: Ctx):
    for k in (0, 1):
        for prompt in ("Hello, my name is", [1, 2, 3, 4, 5]):
            ch = comp(ctx, prompt=prompt, max_tokens=3, temperature=0, echo=True, logprobs=k).choices[0]
            if isinstance(prompt, str):
                ensure(ch.text.startswith(prompt), f"text {ch.text!r}")
            lp = ch.logprobs
            ensure(lp.token_logprobs[0] is None and lp.top_logprobs[0] is None, "the first prompt token has a logprob")
            ensure(len(lp.tokens) > 5 and len(lp.text_offset) == len(lp.tokens), f"{len(lp.tokens)} tokens")
            ensure(all(max(k, 1) <= len(t) <= k + 1 for t in lp.top_logprobs[1:]), f"logprobs {k}: alternatives")


@behaviour("completion.stop", "a stop string ends the text before it, finish_reason \"stop\"", "test_completion.py")
def stop(ctx: Ctx):
    whole = comp(ctx, max_tokens=12, temperature=0).choices[0].text
    word = next((w for w in whole.split() if len(w) > 2), None)
    ensure(word, f"no word to stop at in {whole!r}")
    ch = comp(ctx, max_tokens=12, temperature=0, stop=[word]).choices[0]
    ensure(ch.finish_reason == "stop" and word not in ch.text and whole.startswith(ch.text), f"{ch.text!r} {ch.finish_reason}")


@behaviour("completion.seed", "the same seed at temperature 1 gives the same text", "test_completion.py (seed)")
def seed(ctx: Ctx):
    a, b = (comp(ctx, max_tokens=8, temperature=1.0, seed=7).choices[0].text for _ in range(2))
    ensure(a == b, f"{a!r} != {b!r}")


@behaviour("completion.too_long", "max_tokens beyond the context is a 400 (not a 5xx, not a cut)",
           "test_completion_error.py")
def too_long(ctx: Ctx):
    refused(lambda: comp(ctx, max_tokens=10 ** 6))


@behaviour("completion.bad_json_schema", "structured_outputs json with an invalid schema is a 400",
           "test_completion.py::test_invalid_json_schema")
def bad_schema(ctx: Ctx):
    schema = {"type": "object", "properties": {"brand": {"type": "string"}, "foo": "bar"}}
    refused(lambda: comp(ctx, max_tokens=4, extra_body={"structured_outputs": {"json": schema}}))


@behaviour("completion.bad_regex", "structured_outputs regex that does not compile is a 400",
           "test_completion.py::test_invalid_regex")
def bad_regex(ctx: Ctx):
    refused(lambda: comp(ctx, max_tokens=4, extra_body={"structured_outputs": {"regex": "[.*"}}))


@behaviour("completion.bad_grammar", "structured_outputs grammar that does not parse is a 400",
           "test_completion.py::test_invalid_grammar")
def bad_grammar(ctx: Ctx):
    grammar = 'root ::= select_statementinvalidsyntax\nselect_statement ::= "SELECT " column\ncolumn ::= "a" | "b"\n'
    refused(lambda: comp(ctx, max_tokens=4, extra_body={"structured_outputs": {"grammar": grammar}}))


@behaviour("completion.regex", "structured_outputs regex: the whole text matches", "test_completion.py (structured)")
def regex(ctx: Ctx):
    text = comp(ctx, prompt="An IP address:", max_tokens=20, extra_body={
        "structured_outputs": {"regex": r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}"}}).choices[0].text
    ensure(re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}", text), f"text {text!r}")


@behaviour("completion.prompt_logprobs", "vLLM's prompt_logprobs: each choice carries its prompt's logprobs; a "
           "negative value is a 400", "test_completion.py::test_prompt_logprobs_completion")
def prompt_logprobs(ctx: Ctx):
    r = comp(ctx, prompt=["A robot may not injure", "My name is"], max_tokens=2, extra_body={"prompt_logprobs": 1})
    ensure(all(getattr(c, "prompt_logprobs", None) for c in r.choices), "no prompt_logprobs on the choices")
    refused(lambda: comp(ctx, max_tokens=2, extra_body={"prompt_logprobs": -1}))


@behaviour("completion.return_token_ids", "vLLM's return_token_ids: each choice carries prompt_token_ids and "
           "token_ids", "basic/test_return_token_ids.py")
def return_token_ids(ctx: Ctx):
    ch = comp(ctx, prompt=[1, 2, 3, 4], max_tokens=3, temperature=0, extra_body={"return_token_ids": True}).choices[0]
    ensure(getattr(ch, "prompt_token_ids", None) == [1, 2, 3, 4] and len(getattr(ch, "token_ids", None) or []) == 3,
           "no prompt_token_ids / token_ids on the choice")

