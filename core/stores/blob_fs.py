"""Raw document bytes on a filesystem (COGMILL_HOME/blobs, or a volume shared by workers)."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

# ':' separates a tenant from its dataset name in the datasets' folders (core/access.py).
_KEY = re.compile(r"^[A-Za-z0-9_.\-/:]+$")


class FileBlobStore:
    """Blobs as files under one root; writes go to a temp file and are renamed into place."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if not _KEY.fullmatch(key) or ".." in key.split("/"):
            raise ValueError(
                f"invalid blob key {key!r}: use letters, digits, '_', '-', '.', ':', '/'"
            )
        return self.root / key

    def put(self, key: str, stream: BinaryIO) -> int:
        """Store bytes read from `stream` under `key` atomically; returns the size."""
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(stream, out, length=1 << 20)
            os.replace(tmp, target)
        except BaseException as err:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(err, OSError) and err.errno == errno.ENOSPC:
                raise OSError(
                    errno.ENOSPC,
                    f"no space left for stored files under {self.root}; free space there or "
                    "set COGMILL_HOME to a larger volume, then add the file again",
                ) from err
            raise
        return target.stat().st_size

    def open(self, key: str) -> BinaryIO:
        """Open a stored blob for reading. Raises FileNotFoundError."""
        return self._path(key).open("rb")

    def delete(self, key: str) -> None:
        """Remove a blob (no error when missing)."""
        self._path(key).unlink(missing_ok=True)
