"""The sample corpus shipped with cogmill and the questions `cogmill demo` asks about it."""

from pathlib import Path

SAMPLE_CORPUS = Path(__file__).with_name("sample_corpus")

QUESTIONS = [
    "Where was Marie Curie born?",
    "What is the capital of Poland?",
    "Who founded Siemens?",
    "Which river flows through the city where Alan Turing was born?",
]
