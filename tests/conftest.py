"""Shared fixtures: the real default model (loaded once per session), a tiny random-weight Llama, and
helpers that build workloads and reference outputs."""
import pytest
import torch

from engine.model import LoadedModel, load_model


@pytest.fixture(scope="session")
def smol() -> LoadedModel:
    """The real default model, SmolLM2-135M-Instruct, float32 on CPU."""
    return load_model(dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def tiny(smol) -> LoadedModel:
    """A 2-layer random-weight Llama with SmolLM2's tokenizer and chat template (weights are sharp enough
    that greedy argmax has clear margins)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(smol.tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, initializer_range=0.2, tie_word_embeddings=True,
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return LoadedModel(model, smol.tokenizer, "tiny-random-llama", torch.device("cpu"), torch.float32,
                       frozenset(), smol.pad_id)


def solo_generate(lm: LoadedModel, prompt_ids, max_new_tokens: int, eos_ids=()) -> list[int]:
    """What `model.generate(do_sample=False)` writes for one request alone (the exactness reference)."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=lm.pad_id,
                              eos_token_id=list(eos_ids) or None)
    x = torch.tensor([list(prompt_ids)])
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
    return out[0, x.shape[1]:].tolist()
