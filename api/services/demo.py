"""The sample corpus shipped with cogmill and the questions `cogmill demo` asks about it."""

from pathlib import Path

# Package data of `api` (pyproject.toml), beside the services folder.
SAMPLE_CORPUS = Path(__file__).parents[1] / "sample_corpus"

QUESTIONS = [
    "Where was Marie Curie born?",
    "What is the capital of Poland?",
    "Who founded Siemens?",
    "Which river flows through the city where Alan Turing was born?",
]
