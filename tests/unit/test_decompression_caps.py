"""Decompression bombs in PDFs and Office archives get a per-document error.

The bombs are generated small on disk; each test would be accepted (and the bomb inflated in
full) without the caps: a PDF stream unpacking far beyond its file size, a docx whose members
are each small but together declare far more, a docx of many parts each just under the old
1 MiB ratio threshold.
"""

from __future__ import annotations

import binascii
import io
import zipfile
import zlib
from pathlib import Path

import pytest

from core.stores.blob_fs import FileBlobStore
from pipelines.formats.base import DocumentProblem, Limits, Source
from pipelines.formats.pdf import partition_pdf
from tests import sample_files as sf
from tests.unit.test_formats import classify

MIB = 1 << 20
TEXT = b"BT /F1 12 Tf 72 700 Td (Marie Curie was born in Warsaw.) Tj ET\n"


def _deflated(size: int) -> bytes:
    """`TEXT` padded with spaces to `size` bytes, deflated in steps (never held inflated)."""
    packer, out = zlib.compressobj(9), bytearray()
    out += packer.compress(TEXT)
    pad = b" " * MIB
    left = size - len(TEXT)
    while left > 0:
        out += packer.compress(pad[: min(left, MIB)])
        left -= MIB
    return bytes(out + packer.flush())


def _pdf(contents: list[tuple[bytes, str]]) -> bytes:
    """A PDF of one page per (stream data, /Filter value) content stream."""
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for data, filters in contents:
        objects.append((f"<< /Length {len(data)} /Filter {filters} >>\nstream\n", data))  # type: ignore[arg-type]
        objects.append(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {len(objects)} 0 R >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode()
        if isinstance(body, tuple):
            out += body[0].encode() + body[1] + b"\nendstream"
        else:
            out += body.encode()
        out += b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def _partition(data: bytes, limits: Limits) -> list[str]:
    source = Source(name="x.pdf", open=lambda: io.BytesIO(data), limits=limits)
    return [e.text for e in partition_pdf(source)]


def test_a_flate_stream_unpacking_past_the_part_cap_is_refused() -> None:
    bomb = _pdf([(_deflated(24 * MIB), "/FlateDecode")])
    assert len(bomb) < 64 * 1024
    limits = Limits(max_unpacked_part_bytes=8 * MIB)
    with pytest.raises(DocumentProblem, match="stream 4 unpacks to more than 8388608 bytes"):
        _partition(bomb, limits)
    assert _partition(bomb, Limits()) == ["Marie Curie was born in Warsaw."]  # under the caps


def test_streams_unpacking_past_the_document_cap_together_are_refused() -> None:
    pages = [(_deflated(3 * MIB), "/FlateDecode")] * 5
    limits = Limits(max_unpacked_part_bytes=4 * MIB, max_unpacked_bytes=12 * MIB)
    with pytest.raises(DocumentProblem, match="streams unpack to more than 12582912 bytes"):
        _partition(_pdf(pages), limits)


def test_filter_chains_are_followed() -> None:
    hexed = binascii.hexlify(_deflated(6 * MIB)) + b">"
    bomb = _pdf([(hexed, "[/ASCIIHexDecode /FlateDecode]")])
    with pytest.raises(DocumentProblem, match="unpacks to more than 4194304"):
        _partition(bomb, Limits(max_unpacked_part_bytes=4 * MIB))
    runs = bytes([len(TEXT) - 1]) + TEXT + bytes([129, 0x20]) * (6 * MIB // 128) + bytes([128])
    with pytest.raises(DocumentProblem, match="unpacks to more than 4194304"):
        _partition(_pdf([(runs, "/RunLengthDecode")]), Limits(max_unpacked_part_bytes=4 * MIB))


@pytest.mark.slow
def test_the_issues_200_mb_pdf_is_refused_with_the_default_limits(tmp_path: Path) -> None:
    bomb = _pdf([(_deflated(200 * MIB), "/FlateDecode")])
    assert len(bomb) < 300 * 1024  # was 204 kB inflating to 200 MB in memory
    _, errors = classify(FileBlobStore(tmp_path), {"bomb.pdf": bomb, "ok.pdf": sf.pdf_bytes()})
    assert set(errors) == {"bomb.pdf"}
    assert "COGMILL_MAX_UNPACKED_PART_BYTES" in errors["bomb.pdf"]


def _docx(members: dict[str, bytes]) -> bytes:
    return sf.add_members(sf.docx_bytes(), members)


def test_many_small_members_are_capped_as_a_whole(tmp_path: Path) -> None:
    """Each member below the ratio check's threshold; together far above the archive's ratio."""
    parts = {f"word/media/part{i}.bin": bytes(60 * 1024) for i in range(200)}
    bomb = _docx(parts)
    blobs = FileBlobStore(tmp_path)
    _, errors = classify(blobs, {"many.docx": bomb}, max_unpacked_bytes=8 * MIB)
    assert (
        "unpacks to" in errors["many.docx"] and "COGMILL_MAX_UNPACKED_BYTES" in errors["many.docx"]
    )
    _, errors = classify(blobs, {"many.docx": bomb}, max_unpacked_bytes=1 << 30)
    assert "compressed" in errors["many.docx"] and "together" in errors["many.docx"]


def test_one_member_past_the_part_cap_is_refused(tmp_path: Path) -> None:
    noise = bytes((i * 7919 + i // 251) % 256 for i in range(5 * MIB))  # compresses poorly
    bomb = _docx({"word/media/big.bin": noise})
    _, errors = classify(
        FileBlobStore(tmp_path), {"big.docx": bomb}, max_unpacked_part_bytes=4 * MIB
    )
    assert "'word/media/big.bin' unpacks to 5242880 bytes" in errors["big.docx"]


@pytest.mark.slow
def test_the_issues_docx_of_500_one_mib_parts_is_refused_by_default(tmp_path: Path) -> None:
    out = io.BytesIO(sf.docx_bytes())
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for i in range(500):
            archive.writestr(f"word/media/image{i}.bin", bytes(MIB))
    assert len(out.getvalue()) < 1_000_000
    files = {"parts.docx": out.getvalue(), "plain.docx": sf.docx_bytes()}
    _, errors = classify(FileBlobStore(tmp_path), files)
    assert set(errors) == {"parts.docx"} and "zip bomb" in errors["parts.docx"]
