"""The tiny model the fast tier runs on: a 2-layer random-weight Llama with a tokenizer of its own, so that no test
on it needs the real SmolLM2 (nor its ~15 s first load).

The tokenizer is a byte-level BPE trained, in well under a second, on a fixed corpus (the exactness prompts and a
few sentences), with SmolLM2's special tokens and a ChatML chat template, so the engine builds prompts for it as
it does for the real model. Byte-level means any text encodes (no unknown token); training is deterministic, so
every session gets the same ids. This module knows nothing of lanes or of the tests that use it.
"""
import torch

from engine.worker.model import LoadedModel
from tests.kit.reference import PROMPTS

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2, as in SmolLM2
VOCAB_SIZE = 1024
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a small test assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# English of the kind the tests' prompts are written in, so that a prompt takes about as many tokens as it does
# in SmolLM2's tokenizer (the tests size their KV budgets and chunks by those counts)
CORPUS = PROMPTS + [
    "You are a small test assistant.", "system user assistant",
    "Say hi. Name a colour. Count to three. Tell a story. Hello there. Why? Answer briefly, please.",
    "Answer as a museum guide would: short, friendly, exact, and never more than two sentences.",
    "When do you open? How much is a ticket? Can I take photos? Is there a cafe? Where is the exit? Are dogs allowed?",
    "The quick brown fox jumps over the lazy dog; 0123456789 + - * / = ? ! , . : ' \"",
    "Static batching waits for its group, dynamic batching for a deadline, continuous batching refills each slot.",
    "A request arrives, waits in the queue, is prefilled, decodes token by token and finishes at its end.",
    "To be, or not to be, that is the question: whether it is nobler in the mind to suffer the slings and arrows.",
    "Write a short poem about the sea. Summarise this text in one line. Explain how a bicycle works to a child.",
    "The history of the Roman empire, its roads and its aqueducts, is a long story of engineers and soldiers.",
    "Good morning, good evening, thank you and goodbye: the first words a traveller learns in a new language.",
]


def tiny_tokenizer():
    """A PreTrainedTokenizerFast: byte-level BPE of VOCAB_SIZE tokens, SmolLM2's special tokens, a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>", chat_template=CHAT_TEMPLATE)


def tiny_model() -> LoadedModel:
    """A 2-layer random-weight Llama over `tiny_tokenizer()` (weights sharp enough that greedy argmax has clear
    margins); it never stops by itself (no EOS ids: tests that want one pick it from what the model writes)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, initializer_range=0.2, tie_word_embeddings=True,
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return LoadedModel(model, tokenizer, "tiny-random-llama", torch.device("cpu"), torch.float32, frozenset(),
                       tokenizer.pad_token_id)


def tiny_model_folder(folder) -> LoadedModel:
    """`tiny_model()` saved as a Hugging Face folder under `folder` (its `folder` set): what a tensor-parallel lane's
    ranks each load their shard from."""
    lm = tiny_model()
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    lm.folder = folder
    return lm
