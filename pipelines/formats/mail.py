"""E-mail (.eml, RFC 822) through the standard library's `email` package.

The headers that say who wrote to whom and when become one element, the body (plain text,
else HTML) the rest; attachments are listed by name, not parsed.
"""

from __future__ import annotations

from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from pipelines.formats.base import DocumentProblem, Source, read_all
from pipelines.formats.markup import partition_markup
from pipelines.formats.text import binary_kind, paragraph_element, paragraphs
from pipelines.models import Element

_HEADERS = ("Subject", "From", "To", "Cc", "Date")


def check_head(head: bytes) -> str | None:
    """Why the first bytes cannot start an e-mail; None when they can."""
    if not head:
        return "the file is empty (0 bytes); add it again with its content"
    if what := binary_kind(head):
        return f"not an e-mail: it is {what}; add it with its own extension"
    return None


def partition_eml(source: Source) -> list[Element]:
    """Header summary, body paragraphs, and the attachments' names."""
    data = read_all(source)
    if problem := check_head(data[:16]):
        raise DocumentProblem(problem)
    message = BytesParser(policy=policy.default).parsebytes(data)
    assert isinstance(message, EmailMessage)  # policy.default builds EmailMessage objects
    headers = [f"{name}: {message[name]}" for name in _HEADERS if message[name]]
    if not headers:
        raise DocumentProblem(
            "not an e-mail: no Subject, From, To or Date header; save it as .txt if it is text"
        )
    body = _body(message)
    attachments = [part.get_filename() or "unnamed" for part in message.iter_attachments()]
    if not body and not attachments:
        raise DocumentProblem(
            "the e-mail has no text body and no attachments; there is nothing to ingest"
        )
    elements = [Element(kind="text", text="\n".join(headers))]
    elements.extend(body)
    if attachments:
        elements.append(Element(kind="list", text="Attachments:\n- " + "\n- ".join(attachments)))
    return elements


def _body(message: EmailMessage) -> list[Element]:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return []
    try:
        content = part.get_content()
    except (LookupError, UnicodeError) as err:  # an unknown or wrong charset
        raise DocumentProblem(f"the e-mail body cannot be decoded ({err}); re-export it") from err
    if not isinstance(content, str) or not content.strip():
        return []
    if part.get_content_subtype() == "html":
        return partition_markup(content, "html")
    return [e for block in paragraphs(iter([content])) if (e := paragraph_element(block))]
