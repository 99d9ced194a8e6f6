"""A job's per-document errors stay small whatever the exception said (core/models/jobs.py)."""

from __future__ import annotations

from core.models.jobs import MESSAGE_CHARS, DocumentError, Job


def error(message: str) -> DocumentError:
    return DocumentError(document_id="d", document_name="a.pdf", step="classify", message=message)


def test_a_long_message_is_cut_and_says_how_much_was_cut() -> None:
    quoted = "ValueError: bad object " + "x" * 100_000  # a parser quoting its whole input
    cut = error(quoted).message
    kept = cut.removesuffix(f"... ({len(quoted) - (MESSAGE_CHARS - 40)} more characters cut)")
    assert kept == quoted[: MESSAGE_CHARS - 40]
    assert len(cut) <= MESSAGE_CHARS
    # A job of many such documents keeps them small, and reading it back cuts nothing more.
    job = Job(
        id="j", dataset="d", pipeline="p", pipeline_version="1", errors=[error(quoted)] * 1000
    )
    raw = job.model_dump_json()
    assert len(raw) < 1000 * (MESSAGE_CHARS + 200)
    assert Job.model_validate_json(raw).errors[0].message == cut


def test_a_message_within_the_bound_is_kept_whole() -> None:
    exact = "y" * MESSAGE_CHARS
    assert error(exact).message == exact
    assert error("could not parse").message == "could not parse"
