"""Log-probabilities of the tokens a request wrote (and of its prompt, for `echo`), from the runner's own logits.

Computed only for the rows whose request asked (`RequestSpec.logprobs` / `prompt_logprobs` not None), so rows that
did not ask cost nothing. The numbers are the model's raw log_softmax over the vocabulary (before temperature,
top_p or the min_tokens EOS mask), as vLLM reports them by default. What it does not know: slots, steps, policies
or the OpenAI format (app.web.openai_body spells that).
"""
import torch

from engine.request import Request

Entry = tuple[int, float, tuple[tuple[int, float], ...]]  # (token id, its logprob, the top-k (id, logprob) pairs)
PROMPT_CHUNK = 256  # prompt positions put through the LM head at once (a (256, V) float32 block, not (T, V))


def entries(logits: torch.Tensor, chosen: list[int], k: int) -> list[Entry]:
    """Each row's chosen token with its logprob and the row's k most likely tokens; logits (W, V)."""
    lp = torch.log_softmax(logits.float(), dim=-1)                              # (W, V)
    picked = lp.gather(1, torch.tensor(chosen, device=lp.device)[:, None])[:, 0].tolist()
    if k > 0:
        top_lp, top_ids = lp.topk(k, dim=-1)                                     # (W, k)
        tops = [tuple(zip(i, v)) for i, v in zip(top_ids.tolist(), top_lp.tolist())]
    else:
        tops = [()] * len(chosen)
    return [(t, p, top) for t, p, top in zip(chosen, picked, tops)]


def note_written(logits: torch.Tensor, wanted: list[tuple[int, int, int, Request]], tokens: list[int]) -> None:
    """Record, on every wanted row whose request asked, the logprob of the token it was given (logits (W, V)), at
    the output index that token will take (a preempted request's recomputed tokens overwrite their own entries)."""
    asking = [i for i, w in enumerate(wanted) if w[3].spec.logprobs is not None]
    if not asking:
        return
    k = max(wanted[i][3].spec.logprobs for i in asking)
    seen: dict[int, int] = {}
    for i, entry in zip(asking, entries(logits[asking], [tokens[i] for i in asking], k)):
        request = wanted[i][3]
        at = len(request.output_ids) + seen.get(id(request), 0)  # a speculative row writes several in a step
        seen[id(request)] = seen.get(id(request), 0) + 1
        entry = (entry[0], entry[1], entry[2][:request.spec.logprobs])
        if at < len(request.token_logprobs):
            request.token_logprobs[at] = entry
        else:
            request.token_logprobs.append(entry)


def note_prompt(lm_head, hidden: torch.Tensor, request: Request, start: int) -> None:
    """The logprob of each prompt token this prefill chunk predicts: hidden (n, E) holds positions start..start+n-1,
    position p predicts the token at p + 1 (the prompt's first token has none: its entry stays None)."""
    prompt = request.spec.prompt_ids
    n = min(hidden.shape[0], len(prompt) - 1 - start)  # positions whose next token is still a prompt token
    if n <= 0:
        return
    if not request.prompt_logprobs:
        request.prompt_logprobs = [None] * len(prompt)
    for a in range(0, n, PROMPT_CHUNK):
        b = min(n, a + PROMPT_CHUNK)
        got = entries(lm_head(hidden[a:b]), list(prompt[start + a + 1:start + b + 1]), request.spec.prompt_logprobs)
        request.prompt_logprobs[start + a + 1:start + b + 1] = got
