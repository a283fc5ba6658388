"""The engine's tests, mirroring engine/'s wings (simulator, tiny random Llama, and the real model where it is the point)."""
