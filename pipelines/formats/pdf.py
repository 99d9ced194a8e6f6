"""PDF with a text layer, through pdfminer.six (unstructured's PDF path needs its
inference stack, torch included, even for the "fast" strategy).

pypdf opens the file first: it tells an encrypted PDF (one that needs a password to read)
from a corrupt one, each with its own advice. Every stream is then measured with bounded
decoders (pdf_streams.py: a decompression bomb is refused), and pdfminer lays out each
page's text boxes; each box is one element.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from pipelines.formats.base import DocumentProblem, Source
from pipelines.formats.pdf_streams import check_pdf_streams
from pipelines.formats.text import binary_kind
from pipelines.models import Element

PDF_MAGIC = b"%PDF-"
MAX_GROUPED_BOXES = 200  # a page's text boxes grouped pairwise into reading order (_pages)
MAX_GROUPED_LINES = 500  # a page's text lines joined into boxes with their neighbours
_PAGE_NUMBER = re.compile(r"^(page\s*)?\d{1,4}(\s*(/|of)\s*\d{1,4})?$", re.IGNORECASE)


def check_head(head: bytes) -> str | None:
    """Why the first bytes cannot start a PDF; None when they can."""
    if PDF_MAGIC in head[:1024]:  # the header may follow a little junk
        return None
    what = binary_kind(head) or ("empty" if not head else "not a PDF")
    what = f"it is {what}" if what != "not a PDF" else "it has no %PDF- header"
    return f"not a valid PDF: {what}; add the original file with its own extension"


def _check_tail(stream: BinaryIO) -> None:
    """A complete PDF ends with %%EOF (maybe followed by a little junk); a cut one does not,
    and parsers would otherwise "repair" it into a partial document without a word."""
    size = stream.seek(0, 2)
    stream.seek(max(0, size - 2048))
    if b"%%EOF" not in stream.read():
        raise DocumentProblem(
            f"truncated PDF: no %%EOF marker at its end ({size} bytes); the download or copy "
            "was probably cut short. Get the complete file and add it again"
        )


def _open_checked(stream: BinaryIO) -> int:
    """The page count, after refusing encrypted and unreadable PDFs."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # it warns about every repaired xref
    try:
        reader = PdfReader(stream, strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentProblem("the PDF is encrypted; decrypt it and add it again")
        return len(reader.pages)
    except DocumentProblem:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, EOFError) as err:
        raise DocumentProblem(
            f"corrupt or truncated PDF ({type(err).__name__}: {err}); "
            "re-export or repair it (e.g. print it to a new PDF), then add it again"
        ) from err
    except NotImplementedError as err:  # an encryption scheme pypdf cannot open
        raise DocumentProblem(
            f"the PDF is encrypted with an unsupported scheme ({err}); decrypt it and add it again"
        ) from err


def _check_streams(stream: BinaryIO, source: Source) -> None:
    """Every stream unpacks within the limits (pdfminer would inflate each one whole)."""
    from pdfminer.pdfexceptions import PDFException
    from pdfminer.psexceptions import PSException

    try:
        check_pdf_streams(stream, source.limits)
    except DocumentProblem:
        raise
    except (PDFException, PSException, ValueError, KeyError, TypeError, EOFError) as err:
        raise DocumentProblem(
            f"corrupt PDF: its objects cannot be read ({type(err).__name__}); "
            "re-export or repair it, then add it again"
        ) from err


def _pages(stream: BinaryIO) -> Iterator[Any]:
    """pdfminer's `extract_pages` with its default layout analysis, bounded where it grows
    faster than the page: a page of more than MAX_GROUPED_BOXES text boxes has them ordered by
    pdfminer's reading-order key rather than grouped pairwise (that grouping grows about with
    the cube of the boxes: a page of 2,000 scattered words, 80 KB of PDF, took 109 CPU-s,
    1,000 took 11), and one of more than MAX_GROUPED_LINES lines makes each line a box of its
    own rather than joining neighbouring lines (which grows faster than their square where
    they crowd: 1,900 words in a 50-point square took 21 CPU-s, 32,000 scattered words ran
    for over 10 minutes). Pages within both bounds are laid out as by pdfminer alone."""
    from pdfminer.converter import PDFPageAggregator
    from pdfminer.layout import (
        LAParams,
        LTPage,
        LTTextBoxHorizontal,
        LTTextBoxVertical,
        LTTextGroupLRTB,
        LTTextLineVertical,
    )
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage

    class BoundedPage(LTPage):
        def group_textlines(self, laparams: Any, lines: Iterable[Any]) -> Iterator[Any]:
            lines = list(lines)
            if len(lines) <= MAX_GROUPED_LINES:
                yield from super().group_textlines(laparams, lines)
                return
            for line in lines:  # each line a box of its own
                vertical = isinstance(line, LTTextLineVertical)
                box = LTTextBoxVertical() if vertical else LTTextBoxHorizontal()
                box.add(line)
                if not box.is_empty():
                    yield box

        def group_textboxes(self, laparams: Any, boxes: Sequence[Any]) -> list[Any]:
            if len(boxes) <= MAX_GROUPED_BOXES:
                return super().group_textboxes(laparams, boxes)
            return [LTTextGroupLRTB(list(boxes))]  # its analyze() sorts them by that key

    class BoundedAggregator(PDFPageAggregator):
        def begin_page(self, page: Any, ctm: Any) -> None:
            super().begin_page(page, ctm)
            self.cur_item = BoundedPage(self.pageno, self.cur_item.bbox)

    resources = PDFResourceManager(caching=True)
    device = BoundedAggregator(resources, laparams=LAParams())
    interpreter = PDFPageInterpreter(resources, device)
    for page in PDFPage.get_pages(stream, caching=True):
        interpreter.process_page(page)
        yield device.get_result()


def partition_pdf(source: Source) -> list[Element]:
    """Text boxes of every page, in reading order; a PDF without text is refused."""
    from pdfminer.layout import LTTextContainer
    from pdfminer.pdfexceptions import PDFException
    from pdfminer.psexceptions import PSException

    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    with source.open() as stream:
        problem = check_head(stream.read(1024))
        if problem:
            raise DocumentProblem(problem)
        _check_tail(stream)
        stream.seek(0)
        pages = _open_checked(stream)
        if pages > source.limits.max_pages:
            raise DocumentProblem(
                f"the PDF has {pages} pages, over the limit of {source.limits.max_pages} "
                "(COGMILL_MAX_DOCUMENT_PAGES); split it into smaller files"
            )
        stream.seek(0)
        _check_streams(stream, source)
        stream.seek(0)
        elements: list[Element] = []
        try:
            for page in _pages(stream):
                for box in page:
                    if isinstance(box, LTTextContainer) and (text := _box_text(box.get_text())):
                        elements.append(Element(kind="text", text=text))
        except (
            PDFException,
            PSException,
            ValueError,
            KeyError,
            TypeError,
            EOFError,
            RuntimeError,
        ) as err:  # RuntimeError: pdfminer's decoders on truncated data
            raise DocumentProblem(
                f"corrupt PDF: its pages cannot be read ({type(err).__name__}: {err}); "
                "re-export or repair it, then add it again"
            ) from err
    if not elements:
        raise DocumentProblem(
            f"the PDF has no text layer ({pages} page(s) of images or vector drawings only); "
            "run OCR on it (e.g. ocrmypdf) and add the searchable PDF"
        )
    return elements


def _box_text(text: str) -> str:
    """A text box's lines joined; hyphenated line ends rejoined; page numbers dropped."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = ""
    for line in lines:
        if joined.endswith("-") and line[:1].islower():
            joined = joined[:-1] + line
        else:
            joined = f"{joined} {line}" if joined else line
    return "" if _PAGE_NUMBER.match(joined) else joined
