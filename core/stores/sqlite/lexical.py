"""BM25 postings of chunks in one SQLite file (embedded mode, beside the state store)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from core.lexical import term_counts
from core.models.lexical import CorpusStats, LexicalDoc, Posting
from core.sequences import batched
from core.stores.sqlite.file import SQLiteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (dataset TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL, length INTEGER NOT NULL, PRIMARY KEY (dataset, chunk_id));
CREATE TABLE IF NOT EXISTS postings (dataset TEXT NOT NULL, term TEXT NOT NULL,
    chunk_id TEXT NOT NULL, tf INTEGER NOT NULL, PRIMARY KEY (dataset, term, chunk_id))
    WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_chunk ON postings (dataset, chunk_id);
"""
# SQLite allows 32k host parameters; stay far below for IN (...) lists.
_IN_BATCH = 500


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" * len(items))


class SQLiteLexicalIndex(SQLiteFile):
    """LexicalIndex on SQLite in WAL mode; thread-safe, other processes may open the file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA, "lexical index")

    def add(self, dataset: str, docs: Sequence[LexicalDoc]) -> None:
        """Index chunks; a chunk id already indexed is left as it is. Raises StoreError."""
        rows: list[tuple[str, str, str, int]] = []
        postings: list[tuple[str, str, str, int]] = []
        for doc in {d.chunk_id: d for d in docs}.values():
            counts, length = term_counts(doc.text)
            rows.append((dataset, doc.chunk_id, doc.document_id, length))
            postings.extend((dataset, term, doc.chunk_id, tf) for term, tf in counts.items())
        with self._db(write=True) as db:
            known: set[str] = set()
            for part in batched([r[1] for r in rows], _IN_BATCH):
                where = f"dataset = ? AND chunk_id IN ({_marks(part)})"
                found = db.execute(f"SELECT chunk_id FROM chunks WHERE {where}", (dataset, *part))
                known.update(r[0] for r in found)
            db.executemany(
                "INSERT INTO chunks VALUES (?, ?, ?, ?)", [r for r in rows if r[1] not in known]
            )
            db.executemany(
                "INSERT INTO postings VALUES (?, ?, ?, ?)",
                [p for p in postings if p[2] not in known],
            )

    def remove(self, dataset: str, ids: Sequence[str]) -> None:
        """Drop the postings of these ids (ids that are not indexed chunks are ignored)."""
        with self._db(write=True) as db:
            for part in batched(list(ids), _IN_BATCH):
                where = f"dataset = ? AND chunk_id IN ({_marks(part)})"
                db.execute(f"DELETE FROM postings WHERE {where}", (dataset, *part))
                db.execute(f"DELETE FROM chunks WHERE {where}", (dataset, *part))

    def remove_dataset(self, dataset: str) -> None:
        """Drop every posting of a dataset. Raises StoreError."""
        with self._db(write=True) as db:
            db.execute("DELETE FROM postings WHERE dataset = ?", (dataset,))
            db.execute("DELETE FROM chunks WHERE dataset = ?", (dataset,))

    def count(self, dataset: str) -> int:
        """Number of chunks indexed for a dataset."""
        with self._db() as db:
            row = db.execute("SELECT count(*) FROM chunks WHERE dataset = ?", (dataset,))
            return int(row.fetchone()[0])

    def corpus_stats(self, datasets: Sequence[str], terms: Sequence[str]) -> CorpusStats:
        """Chunk count, total length and document frequency of `terms` over the datasets."""
        ds = list(datasets)
        with self._db() as db:
            chunks, total = db.execute(
                f"SELECT count(*), coalesce(sum(length), 0) FROM chunks "
                f"WHERE dataset IN ({_marks(ds)})",
                ds,
            ).fetchone()
            df: dict[str, int] = {}
            for part in batched(list(terms), _IN_BATCH):
                found = db.execute(
                    f"SELECT term, count(*) FROM postings WHERE dataset IN ({_marks(ds)}) "
                    f"AND term IN ({_marks(part)}) GROUP BY term",
                    (*ds, *part),
                )
                for term, n in found:
                    df[term] = df.get(term, 0) + int(n)
        return CorpusStats(chunks=int(chunks), total_length=int(total), df=df)

    def postings(self, datasets: Sequence[str], terms: Sequence[str]) -> list[Posting]:
        """Every posting of `terms` in the datasets."""
        ds, found = list(datasets), list[Posting]()
        with self._db() as db:
            for part in batched(list(terms), _IN_BATCH):
                rows = db.execute(
                    f"SELECT p.term, p.chunk_id, p.tf, c.length FROM postings p "
                    f"JOIN chunks c ON c.dataset = p.dataset AND c.chunk_id = p.chunk_id "
                    f"WHERE p.dataset IN ({_marks(ds)}) AND p.term IN ({_marks(part)})",
                    (*ds, *part),
                )
                found.extend(Posting(t, c, int(tf), int(n)) for t, c, tf, n in rows)
        return found
