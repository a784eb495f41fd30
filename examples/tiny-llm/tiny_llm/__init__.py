"""tiny_llm: a tiny character-level language model in numpy, used as the trainops example."""

__version__ = "0.1.0"
