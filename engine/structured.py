"""Structured output: what a request's text must keep to (a JSON Schema, any JSON object, a regex, one of a few
choices, a Lark or GBNF grammar), as one llguidance grammar, checked.

The grammar is plain text, and it is what `RequestSpec.grammar` carries: it crosses Redis to an engine worker as
it is, and the worker compiles it against its own tokenizer (engine.worker.grammar). Checking needs neither the
tokenizer nor torch, so a web process of a scale-out deployment refuses a bad schema before any worker sees it.
JSON is compact (no whitespace between tokens: a small model cannot wander in runs of spaces), as xgrammar's and
vLLM's `disable_any_whitespace` make it. This module knows llguidance's grammar formats, nothing of HTTP, the
OpenAI format or a model.
"""
import json

from llguidance import LLMatcher, grammar_from

KINDS = {"json": "JSON schema", "json_object": "JSON object", "regex": "regex", "choice": "choice",
         "grammar": "grammar"}                                  # vLLM's structured_outputs, less structural_tag
COMPACT = {"whitespace_flexible": False}                        # {"a":1,"b":[2,3]}


def grammar(kind: str, value) -> str:
    """The llguidance grammar of one constraint: `json` a JSON Schema (an object, or its text), `json_object` any
    JSON object (`value` ignored), `regex` a regular expression the whole text matches, `choice` a list of strings
    the text is exactly one of, `grammar` a Lark or GBNF grammar. ValueError saying what is wrong with it."""
    if kind == "json_object":
        text = LLMatcher.grammar_from_json_schema({"type": "object"}, defaults=COMPACT)
    elif kind == "json":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as e:
                raise ValueError(f"the JSON schema is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise ValueError("the JSON schema must be an object")
        text = LLMatcher.grammar_from_json_schema(value, defaults=COMPACT)
    elif kind == "regex":
        if not isinstance(value, str) or not value:
            raise ValueError("the regex must be a non-empty string")
        text = LLMatcher.grammar_from_regex(value)
    elif kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(c, str) and c for c in value):
            raise ValueError("the choice must be a non-empty list of non-empty strings")
        text = grammar_from("choice", value)
    elif kind == "grammar":
        if not isinstance(value, str) or not value.strip():
            raise ValueError("the grammar must be a non-empty string (Lark or GBNF)")
        try:
            text = grammar_from("grammar", value)
        except ValueError as e:   # GBNF that does not convert to Lark
            raise ValueError(f"the grammar cannot be compiled: {e}") from None
    else:
        raise ValueError(f"the constraint must be one of {', '.join(KINDS)}, got {kind!r}")
    error = LLMatcher.validate_grammar(text)
    if error:
        raise ValueError(f"the {KINDS[kind]} cannot be compiled: {error.strip()}")
    return text
