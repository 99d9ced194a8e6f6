"""Per-format partitioners: each turns one document's bytes into typed Elements.

A partitioner takes a `Source` (how to open the document's bytes, and the limits to keep)
and returns Elements, or raises DocumentProblem with a message that says what is wrong and
what to do. `pipelines/classify.py` picks the partitioner for a document's kind.
"""
