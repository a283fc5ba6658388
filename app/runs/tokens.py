"""How many tokens a prompt is, as the engine counts it: the model's tokenizer, or the simulator's estimate
when there is no model. The editor's live counts (`POST /api/tokens`) and the OpenAI endpoint's prompts are
counted here, on the side of the process that holds the engine.
This module knows the engine's tokenizer API and the simulator's estimate, nothing of HTTP or runs.
"""


def count_prompt_tokens(engine, prompts: list[str]) -> list[int]:
    """Chat-templated prompt tokens of each prompt (the simulator's estimate without a model)."""
    from engine.worker.sim import estimate_prompt_tokens
    lm = engine.lm
    return [estimate_prompt_tokens(p) if lm is None else len(lm.encode_prompt(p)) for p in prompts]


def encode_chat(engine, messages: list[dict], prompt: str) -> list[int]:
    """The prompt ids of a chat (`prompt`: its text, what the simulator estimates from)."""
    if engine.lm is not None:
        return engine.lm.encode_messages(messages)
    from engine.worker.sim import estimate_prompt_tokens
    return [0] * estimate_prompt_tokens(prompt)


def encode_text(engine, prompt: str) -> list[int]:
    """The prompt ids of a plain completion's prompt (no chat template)."""
    return engine.lm.tokenizer.encode(prompt) if engine.lm is not None else [0] * (len(prompt) // 4 + 1)
