"""Production request traces as workloads: a slice of an Azure 2023 or a Mooncake trace, scaled to this machine.

    python -m engine trace demos/traces/azure-code-burst.csv --window 0:60 --time-scale 1 --length-scale 0.0625
    "trace": {"file": "mooncake-conversation.jsonl", "window": "0:120", "time_scale": 0.5, "length_scale": 0.0625,
              "output_scale": 0.0625, "limit": 16, "seed": 0}       (a workload's section, like "generate")

A trace row holds an arrival time and token counts (Azure: `TIMESTAMP,ContextTokens,GeneratedTokens`; Mooncake:
`timestamp` ms, `input_length`, `output_length`, `hash_ids`). A slice keeps the rows arriving in the window
[START, END) seconds from the file's first row (at most `limit`), and becomes requests with `arrival_ms`:
  - times: ms from the slice's first arrival times `time_scale` (every gap alike: order and burstiness kept), or,
    given `rate` (a sweep), the time scale that makes the slice arrive at `rate` requests per second;
  - lengths: prompt tokens times `length_scale`, output tokens times `output_scale` (default: `length_scale`);
    a prompt longer than the limits allow is cut to the longest they do, and the description says how many were;
  - Mooncake: each 512-token hash block becomes one engine block of 512 x length_scale tokens (a whole number,
    at least 32: `trace_text`), the workload's `kv_block_size`, so equal ids share a real prefix.
The workload's description names the slice and the scales. In a workload's `trace` section, `file` names a slice
shipped in demos/traces/ (a page cannot read other files); the CLI's `trace` command reads any file.
This module knows trace files and request dicts; not the engine, the tokenizer or how a lane runs.
"""
import csv
import functools
import json
import math
import random
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from engine.limits import Limits, WorkloadError, check_int, check_number, check_str, reject_unknown
from engine.workload.trace_text import HEAD_TOKENS, MAX_HASH_ID, SIM_TEMPLATE_TOKENS, SUFFIX_TOKENS, blocks_prompt, filler_prompt

SLICES = Path(__file__).resolve().parents[2] / "demos" / "traces"  # the slices shipped as data
SLICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}\.(csv|jsonl)")
TRACE_KEYS = {"file", "window", "time_scale", "rate", "length_scale", "output_scale", "limit", "seed"}
MOONCAKE_BLOCK = 512  # tokens of one Mooncake hash block
MAX_SCALE = 1000.0


@dataclass(frozen=True)
class TraceRow:
    t_ms: float                         # arrival, ms after the file's first row
    prompt_tokens: int                  # ContextTokens (Azure) or input_length (Mooncake)
    output_tokens: int                  # GeneratedTokens or output_length
    hash_ids: tuple[int, ...] | None    # Mooncake: the prompt's 512-token blocks (equal ids, equal content); Azure: None


@dataclass(frozen=True)
class TraceSpec:
    file: str
    start_s: float                      # the window [start_s, end_s), seconds after the file's first row
    end_s: float
    time_scale: float | None            # every arrival gap is multiplied by this (None: from `rate`)
    rate: float | None                  # requests per second the slice is scaled to arrive at (a sweep's point)
    length_scale: float                 # prompt tokens x this (Mooncake: 512 x this tokens a block)
    output_scale: float                 # output tokens x this
    limit: int | None                   # at most this many rows of the window, the first
    seed: int                           # the prompts' words


def _azure_ms(stamp: str) -> float:
    day, _, frac = stamp.strip().partition(".")  # seven decimals: more than fromisoformat takes everywhere
    return (datetime.fromisoformat(day).timestamp() + float(f"0.{frac or 0}")) * 1000


@functools.lru_cache(maxsize=16)
def _read(path: str, mtime: float) -> tuple[TraceRow, ...]:
    rows = []
    with open(path, newline="") as f:
        if path.endswith(".csv"):
            for r in csv.DictReader(f):
                rows.append(TraceRow(_azure_ms(r["TIMESTAMP"]), int(r["ContextTokens"]), int(r["GeneratedTokens"]), None))
        else:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    rows.append(TraceRow(float(r["timestamp"]), int(r["input_length"]), int(r["output_length"]),
                                         tuple(int(h) for h in r["hash_ids"])))
    t0 = rows[0].t_ms if rows else 0.0
    return tuple(TraceRow(r.t_ms - t0, r.prompt_tokens, r.output_tokens, r.hash_ids) for r in rows)


def read_trace(path: str | Path) -> tuple[TraceRow, ...]:
    """Every row of an Azure 2023 CSV or a Mooncake JSONL trace, times from its first row; WorkloadError on `trace.file`."""
    path = Path(path)
    if path.suffix not in (".csv", ".jsonl"):
        raise WorkloadError("trace.file", f"must be an Azure .csv or a Mooncake .jsonl trace, got {path.name[:80]!r}")
    try:
        rows = _read(str(path), path.stat().st_mtime)
    except OSError as e:
        raise WorkloadError("trace.file", f"cannot read {path}: {e.strerror}") from None
    except (KeyError, ValueError, TypeError) as e:
        raise WorkloadError("trace.file", f"{path.name} is not an Azure 2023 or Mooncake trace: {e!r}") from None
    if not rows:
        raise WorkloadError("trace.file", f"{path.name} holds no requests")
    return rows


def shipped_slice(name) -> Path:
    """A slice shipped in demos/traces/, by its file name (a workload's `trace.file`)."""
    if not isinstance(name, str) or not SLICE_NAME.fullmatch(name) or not (SLICES / name).is_file():
        raise WorkloadError("trace.file", f"must name a trace shipped in demos/traces/: {', '.join(shipped_names())}")
    return SLICES / name


def parse_window(text) -> tuple[float, float]:
    """'START:END' seconds (END > START >= 0)."""
    try:
        start, end = (float(v) for v in str(text).split(":"))
    except ValueError:
        raise WorkloadError("trace.window", f"must be START:END in seconds, such as 0:60, got {str(text)[:40]!r}") from None
    if not 0 <= start < end <= 1e7:
        raise WorkloadError("trace.window", f"must have 0 <= START < END, got {text}")
    return start, end


def check_spec(spec) -> TraceSpec:
    """A `trace` section checked field by field (`file` is not resolved here)."""
    if not isinstance(spec, dict):
        raise WorkloadError("trace", f"must be an object, got {type(spec).__name__}")
    reject_unknown(spec, TRACE_KEYS, "trace.")
    for key in ("file", "window", "length_scale"):
        if key not in spec:
            raise WorkloadError(f"trace.{key}", "is required")
    if ("time_scale" in spec) == ("rate" in spec):
        raise WorkloadError("trace.time_scale", "give time_scale (or a rate for the slice to arrive at), one of them")
    start, end = parse_window(spec["window"])
    length = check_number(spec["length_scale"], "trace.length_scale", 1e-4, MAX_SCALE)
    return TraceSpec(
        file=check_str(spec["file"], "trace.file", 1000), start_s=start, end_s=end,
        time_scale=None if "rate" in spec else check_number(spec["time_scale"], "trace.time_scale", 1e-4, MAX_SCALE),
        rate=check_number(spec["rate"], "trace.rate", 0.01, 1000) if "rate" in spec else None,
        length_scale=length, output_scale=check_number(spec.get("output_scale", length), "trace.output_scale", 1e-4,
                                                       MAX_SCALE),
        limit=check_int(spec["limit"], "trace.limit", 1, 10**7) if spec.get("limit") is not None else None,
        seed=check_int(spec.get("seed", 0), "trace.seed", 0, 2**31 - 1))


def slice_rows(rows, spec: TraceSpec) -> list[TraceRow]:
    """The rows arriving in the window, in order, at most `limit` of them."""
    out = [r for r in rows if spec.start_s * 1000 <= r.t_ms < spec.end_s * 1000]
    out.sort(key=lambda r: r.t_ms)  # stable: rows of one instant keep the file's order
    return out[:spec.limit] if spec.limit is not None else out


def native_rate(rows: list[TraceRow]) -> float | None:
    """Requests per second of the rows as recorded: (n - 1) gaps over the span (None: one row, or all at once)."""
    span = (rows[-1].t_ms - rows[0].t_ms) / 1000 if rows else 0
    return (len(rows) - 1) / span if len(rows) > 1 and span > 0 else None


def block_size_of(spec: TraceSpec) -> int:
    """Mooncake: tokens of the engine block one 512-token hash block becomes."""
    size = MOONCAKE_BLOCK * spec.length_scale
    if abs(size - round(size)) > 1e-6 or round(size) < HEAD_TOKENS:
        raise WorkloadError("trace.length_scale", f"a Mooncake trace maps each {MOONCAKE_BLOCK}-token hash block to one "
                                                  f"engine block: length_scale x {MOONCAKE_BLOCK} must be a whole number "
                                                  f"of tokens from {HEAD_TOKENS}, such as 0.0625 (32) or 0.125 (64), "
                                                  f"got {size:g}")
    return round(size)


def trace_blocks(rows: list[TraceRow], spec: TraceSpec, max_tokens: int) -> list[tuple[list[int], int]]:
    """Mooncake: (hash ids, prompt tokens) of each request: its length scaled, at most `max_tokens`, whole blocks
    for all but the last id it keeps."""
    size = block_size_of(spec)
    out = []
    for i, r in enumerate(rows):
        if any(not 0 <= h <= MAX_HASH_ID for h in r.hash_ids) or not r.hash_ids:
            raise WorkloadError("trace.file", f"row {i + 1} of the slice has no hash ids or one above {MAX_HASH_ID}")
        n = min(max(HEAD_TOKENS, round(r.prompt_tokens * spec.length_scale)), len(r.hash_ids) * size, max_tokens)
        out.append((list(r.hash_ids[:math.ceil(n / size)]), n))
    return out


def max_prompt_tokens(limits: Limits) -> int:
    """The longest prompt (in tokens, template included) the limits take: tokens and characters (4 a token)."""
    return min(limits.max_prompt_tokens - SUFFIX_TOKENS, HEAD_TOKENS + (limits.max_prompt_chars - 8) // 4)


def trace_workload(rows, spec: TraceSpec, limits: Limits = Limits()) -> dict:
    """The workload object (name, description, requests and, for Mooncake, kv_block_size) of a slice of `rows`."""
    picked = slice_rows(rows, spec)
    window = f"{spec.start_s:g}-{spec.end_s:g}"
    if not picked:
        raise WorkloadError("trace.window", f"no request of {Path(spec.file).name} arrives in seconds {window}")
    if len(picked) > limits.max_requests:
        raise WorkloadError("trace.limit", f"seconds {window} hold {len(picked)} requests, the limit is "
                                           f"{limits.max_requests}: set limit or narrow the window")
    rate = native_rate(picked)
    time_scale = spec.time_scale if spec.rate is None else (rate / spec.rate if rate else 1.0)
    cap, mooncake = max_prompt_tokens(limits), picked[0].hash_ids is not None
    if mooncake:
        blocks = trace_blocks(picked, spec, cap)
        prompts = [blocks_prompt(ids, n, block_size_of(spec), spec.seed) for ids, n in blocks]
        clipped = sum(1 for r, (_, n) in zip(picked, blocks) if n == cap and r.prompt_tokens * spec.length_scale > cap)
    else:
        rng = random.Random(spec.seed)
        wanted = [max(SIM_TEMPLATE_TOKENS + 1, round(r.prompt_tokens * spec.length_scale)) for r in picked]
        prompts = [filler_prompt(min(n, cap), rng) for n in wanted]
        clipped = sum(1 for n in wanted if n > cap)
    t0 = picked[0].t_ms
    requests = [{"id": f"T{i + 1}", "prompt": p,
                 "max_new_tokens": min(limits.max_new_tokens, max(1, round(r.output_tokens * spec.output_scale))),
                 "ignore_eos": True, "arrival_ms": round((r.t_ms - t0) * time_scale, 1)}
                for i, (r, p) in enumerate(zip(picked, prompts))]
    shown = f"{len(picked)} requests" + (f" (the first {spec.limit})" if spec.limit is not None else "")
    rates = f"{rate:.2f}/s as recorded, {rate / time_scale:.2f}/s here" if rate else "all at once"
    description = (f"Trace {Path(spec.file).name}, seconds {window}: {shown}, {rates}. Times x{time_scale:.4g}, "
                   f"prompt lengths x{spec.length_scale:g}, output lengths x{spec.output_scale:g}"
                   + (f", each 512-token hash block one {block_size_of(spec)}-token block" if mooncake else "")
                   + (f"; {clipped} prompts cut to {cap} tokens" if clipped else "") + ".")
    obj = {"name": Path(spec.file).stem, "description": description, "requests": requests}
    if mooncake:
        obj["kv_block_size"] = block_size_of(spec)
    return obj


def shipped_names() -> list[str]:
    """The slices shipped in demos/traces/, by file name."""
    return sorted(p.name for p in SLICES.glob("*.*") if SLICE_NAME.fullmatch(p.name))


def shipped_trace(spec, limits: Limits) -> dict:
    """`POST /api/generate {"trace": {...}}`: a shipped slice's requests, and its name, description and (Mooncake)
    kv_block_size for the editor to keep."""
    checked = check_spec(spec)
    made = trace_workload(read_trace(shipped_slice(checked.file)), checked, limits)
    return {"requests": made.pop("requests"), "workload": made}


def expand_trace(obj: dict, limits: Limits) -> dict:
    """A workload object with a `trace` section as one with its requests (and Mooncake's kv_block_size, which a
    workload that sets its own must set to the same); the name and description are the slice's unless given."""
    if "requests" in obj or "generate" in obj:
        raise WorkloadError("trace", "give requests, generate or trace, one of them")
    spec = check_spec(obj["trace"])
    made = trace_workload(read_trace(shipped_slice(spec.file)), spec, limits)
    if "kv_block_size" in made and obj.get("kv_block_size", made["kv_block_size"]) != made["kv_block_size"]:
        raise WorkloadError("kv_block_size", f"must be {made['kv_block_size']}: the trace maps each hash block to a "
                                             f"block of that many tokens")
    return {**made, **{k: v for k, v in obj.items() if k != "trace"}, "requests": made["requests"]}


def trace_at_rate(obj: dict, rate: float, burstiness: float | None = None) -> dict:
    """A sweep's point: the workload's trace slice compressed (or stretched) in time to arrive at `rate` per second."""
    if burstiness is not None:
        raise WorkloadError("burstiness", "a trace keeps its own burstiness: leave burstiness out")
    spec = obj["trace"] if isinstance(obj["trace"], dict) else {}
    return {**obj, "trace": {**{k: v for k, v in spec.items() if k != "time_scale"}, "rate": rate}}


def hash_hit_ratio(blocks: list[tuple[list[int], int]], block_size: int, as_cache: bool = False) -> float:
    """The share of prompt tokens in blocks an earlier request already had, from (hash ids, prompt tokens) in order:
    the trace's own ratio at `block_size` tokens a block, each block counted at its length (the last one partial).
    `as_cache`: as a prefix cache finds them, one request after another: only full blocks are kept and hit, and a
    hit leaves at least the last token to compute."""
    seen, hit, total = set(), 0, 0
    for ids, n in blocks:
        total += n
        chain: tuple[int, ...] = ()
        for i, h in enumerate(ids):
            chain += (h,)
            length = min(block_size, n - i * block_size)
            if chain in seen and (not as_cache or (i + 1) * block_size <= n - 1):
                hit += length
            if length == block_size or not as_cache:
                seen.add(chain)
    return hit / total if total else 0.0
