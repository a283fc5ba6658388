"""The short chat questions every benchmark script uses as its built-in mix (bench.py, serve_bench.py)."""

CHAT_PROMPTS = [
    "What is the capital of France?", "Why is the sky blue? Answer briefly.",
    "Name three colours of the rainbow, please.", "Translate 'good morning' into French.",
    "List two planets.", "What is 2 + 2?", "Write a haiku about the sea.", "Who wrote Hamlet?",
    "Give me one tip for sleeping better.", "What does a bee make?", "Explain what a noun is in one sentence.",
    "How many legs does a spider have?", "Suggest a name for a black cat.", "What is the boiling point of water?",
    "Describe a rainbow to a child.", "Is a tomato a fruit?",
]
