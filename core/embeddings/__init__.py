"""Sentence embedders behind the `core.ports.Embedder` port (numpy all-MiniLM-L6-v2)."""
