"""Real sample files of every supported format, generated in memory for tests.

Office files are written by python-docx / python-pptx / openpyxl, PDFs by hand (a minimal
valid PDF with a Helvetica text layer) and pypdf (encryption), e-mails by the stdlib.
"""

from __future__ import annotations

import io
import random
import zipfile
from email.message import EmailMessage

DOCX_PARAGRAPH = "Revenue grew in every region and the board approved the plan."
PDF_PAGES = [
    ["Marie Curie was born in Warsaw in 1867.", "She won two Nobel prizes."],
    ["Page two talks about radio- activity research in Paris."],
]


def docx_bytes(extra: dict[str, bytes] | None = None) -> bytes:
    """A Word document: heading, paragraph, bullet list and a 3x2 table."""
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", 1)
    document.add_paragraph(DOCX_PARAGRAPH)
    document.add_paragraph("hire two engineers", style="List Bullet")
    document.add_paragraph("open an office", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for r, row in enumerate([("Region", "Revenue"), ("North", "120"), ("South", "95")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return add_members(out.getvalue(), extra) if extra else out.getvalue()


def add_members(archive: bytes, members: dict[str, bytes]) -> bytes:
    """The ZIP archive with more (deflated) members."""
    out = io.BytesIO(archive)
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def pptx_bytes() -> bytes:
    """Two slides: a title with bullet text, and a title with a table."""
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Ship the graph engine\nHire a designer"
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Numbers"
    shape = slide.shapes.add_table(3, 2, Inches(1), Inches(1.5), Inches(4), Inches(1))
    for r, row in enumerate([("City", "Population"), ("Paris", "2.1M"), ("Rome", "2.8M")]):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_bytes(rows: int = 2) -> bytes:
    """Two sheets: People (name, age, city) with `rows` rows and Cities."""
    import openpyxl

    book = openpyxl.Workbook()
    people = book.active
    people.title = "People"
    people.append(("name", "age", "city"))
    for i in range(rows):
        people.append(("Ann", 31, "Oslo") if i == 0 else (f"Person {i}", None, "Rome"))
    cities = book.create_sheet("Cities")
    cities.append(("city", "country"))
    cities.append(("Oslo", "Norway"))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf_bytes(pages: list[list[str]] | None = None, *, text: bool = True) -> bytes:
    """A minimal valid PDF; each page's paragraphs are placed well apart (one text box each).

    `text=False` draws only a line on each page: a PDF without a text layer.
    """
    pages = PDF_PAGES if pages is None else pages
    if not text:
        return _pdf_document([["1 w 72 72 m 500 700 l S"] for _ in pages])
    placed = "BT /F1 12 Tf 72 {y} Td {text} Tj ET"  # paragraphs 80 points apart
    return _pdf_document(
        [
            [placed.format(y=720 - 80 * i, text=_pdf_string(p)) for i, p in enumerate(page)]
            for page in pages
        ]
    )


def scattered_words_pdf(count: int, seed: int = 1) -> bytes:
    """A one-page PDF of `count` small words w0, w1, ... at random places (a crowded page)."""
    draw = random.Random(seed)
    ops = [
        f"BT /F1 6 Tf {draw.uniform(0, 600):.1f} {draw.uniform(0, 780):.1f} Td (w{i}) Tj ET"
        for i in range(count)
    ]
    return _pdf_document([ops])


def _pdf_document(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF whose pages hold these content-stream operators (font /F1 is
    Helvetica)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")  # object 3
    kids = []
    for ops in pages:
        content = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Length {len(content)} >>\nstream\n{content.decode('latin-1')}\nendstream"
        )
        content_id = len(objects)
        objects.append(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def encrypted_pdf_bytes(password: str = "secret") -> bytes:
    """The sample PDF encrypted with a user password (pypdf)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes())))
    writer.encrypt(user_password=password, owner_password=password, algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def eml_bytes(
    *,
    body: str | None = "Hi Bob,\n\nThe graph engine ships on Friday.\n\nAnn",
    html: str | None = None,
    attachment: bool = True,
) -> bytes:
    """An e-mail with a plain (or HTML) body and, optionally, a PDF attachment."""
    message = EmailMessage()
    message["Subject"] = "Release plan"
    message["From"] = "Ann Lee <ann@example.com>"
    message["To"] = "bob@example.com"
    message["Date"] = "Tue, 04 Mar 2025 10:00:00 +0000"
    if body is not None:
        message.set_content(body)
    if html is not None:
        if body is None:
            message.set_content(html, subtype="html")
        else:
            message.add_alternative(html, subtype="html")
    if attachment:
        message.add_attachment(
            pdf_bytes(), maintype="application", subtype="pdf", filename="plan.pdf"
        )
    return bytes(message)


def slow_eml_bytes(size: int) -> bytes:
    """An e-mail whose To header lists `size` bytes of addresses. The standard library's
    header parser spends ~50 us a byte on it (100 KB: 5 CPU-s; 400 KB: 29), so a file within
    any sensible size limit can hold a worker for hours."""
    return b"From: a@b.c\nSubject: s\nTo: " + b"a@b.c, " * (size // 7) + b"\n\nHello.\n"


PYTHON_SOURCE = '''"""Tiny graph helpers."""

import math
from dataclasses import dataclass

SCALE = 2


@dataclass
class Node:
    """A node."""

    name: str

    def label(self) -> str:
        return self.name.upper()


# Distance between two points, used by layout.
def distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    dx = a[0] - b[0]

    dy = a[1] - b[1]
    return math.hypot(dx, dy) * SCALE
'''
JS_SOURCE = """import { readFile } from "fs";

const LIMIT = 10;

function parse(text) {
  const rows = text.split("\\n");

  return rows.slice(0, LIMIT);
}

class Store {
  constructor() {
    this.items = [];
  }
}
"""
