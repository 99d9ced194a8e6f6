"""Make a dataset hold what a source holds: add what is new, replace what changed, remove
what is gone (with whatever only it supported, as `delete --document` does).

The comparison is with the dataset itself (the documents a source's syncs marked as its own,
by name and content hash), never with what an earlier sync meant to do: a sync killed half way
and run again finds its finished part unchanged and does the rest. Files are added first, so
a renamed file whose content is unchanged is the same document renamed (the catalog's record
merges by content), then the documents gone are removed. A content found under several names
is stored once, under the first name in sorted order; the others are reported.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.catalog import AddReport, Catalog, FileCheck
from core.models.graph import Node
from core.models.vocabulary import DOCUMENT
from pipelines.sources.listing import Entry, Listing
from pipelines.structured.key_declarations import declare_keys

SOURCE = "source"  # Document property: the id of the source whose syncs keep the document
SOURCE_COMMIT = "source_commit"  # ... and, for a git source, the commit it was synced at
LISTED = 1000  # names kept per outcome in a sync's report (the counts are whole)


@dataclass
class SyncReport:
    """What a sync did, name by name (renamed: `(old, new)` pairs of unchanged content)."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in self.__dataclass_fields__}

    def summary(self) -> str:
        return ", ".join(f"{count} {name}" for name, count in self.counts().items())

    def bounded(self) -> dict[str, object]:
        """The report as stored with its job: the counts, and at most LISTED names each."""
        return {
            "counts": self.counts(),
            **{name: getattr(self, name)[:LISTED] for name in self.__dataclass_fields__},
        }


class Mirror:
    """Applies a source's listing to the documents of one dataset that the source keeps."""

    def __init__(self, catalog: Catalog, dataset: str, source_id: str, check: FileCheck):
        self.catalog, self.dataset, self.source_id, self.check = catalog, dataset, source_id, check
        self.graph = catalog.graph

    def stored(self) -> dict[str, Node]:
        """The source's documents in the dataset, by name."""
        docs = self.catalog.documents(self.dataset)
        return {d.name: d for d in docs if d.properties.get(SOURCE) == self.source_id}

    def previous(self, name: str, digest: str, into: Path) -> Path | None:
        """A copy of the stored document `name` when its content hash is `digest`."""
        found = self.graph.find_nodes(self.dataset, DOCUMENT, name=name, limit=10)
        doc = next((d for d in found if d.properties.get("content_hash") == digest), None)
        if doc is None or doc.properties.get(SOURCE) != self.source_id:
            return None
        try:
            with self.catalog.blobs.open(str(doc.properties["blob_key"])) as stream:
                into.write_bytes(stream.read())
        except (FileNotFoundError, KeyError):
            return None
        return into

    def apply(self, listing: Listing, quota: Callable[[int], None] | None = None) -> SyncReport:
        """Make the dataset hold the listing's documents; `quota` is asked first with the bytes
        about to be stored (it raises to refuse them)."""
        report = SyncReport(rejected=list(listing.rejected))
        stored = self.stored()
        wanted = self._unique(listing.entries, report)
        stale = [e for e in wanted.values() if _hash(stored.get(e.name)) != e.digest]
        if quota is not None:
            quota(sum(e.size for e in stale))
        report.unchanged = sorted(set(wanted) - {e.name for e in stale})
        if listing.keys is not None:
            declare_keys(self.graph, self.dataset, listing.keys)
        added = self._add(stale)
        report.rejected += added.rejected
        refused = {name for name, _ in added.rejected}
        gone = {n: d for n, d in stored.items() if n not in wanted or n in refused}
        moved = {_hash(d): n for n, d in gone.items()}
        for name in added.added:
            old = moved.pop(wanted[name].digest, None)
            if old is not None:
                report.renamed.append((old, name))
            else:
                report.added.append(name)
        report.replaced = list(added.replaced)
        report.unchanged += added.unchanged
        kept = {n: d for n, d in stored.items() if n in report.unchanged}  # the others are new
        self._mark([n for n in wanted if n not in refused], kept, listing.commit)
        report.removed = self._remove(sorted(set(gone) - {old for old, _ in report.renamed}))
        return report

    def _unique(self, entries: dict[str, Entry], report: SyncReport) -> dict[str, Entry]:
        """The entries with one name per content (the first in sorted order)."""
        first: dict[str, str] = {}
        unique: dict[str, Entry] = {}
        for name in sorted(entries):
            entry = entries[name]
            if entry.digest in first:
                shown = first[entry.digest]
                report.rejected.append((name, f"same content as {shown}, which is kept"))
                continue
            first[entry.digest] = name
            unique[name] = entry
        return unique

    def _add(self, entries: list[Entry]) -> AddReport:
        report = AddReport()
        if entries:
            self.catalog.ensure_dataset(self.dataset)
            files = ((e.name, e.materialize()) for e in entries)
            self.catalog.add_files(self.dataset, files, report, self.check)
        return report

    def _mark(self, names: list[str], kept: dict[str, Node], commit: str | None) -> None:
        """File the documents under the source (and commit) where they are not yet (`kept`:
        the stored documents the sync left as they were, read before it)."""
        wanted = {SOURCE: self.source_id, **({SOURCE_COMMIT: commit} if commit else {})}
        todo = [n for n in names if not _marked(kept.get(n), wanted)]
        for start in range(0, len(todo), LISTED):
            part = todo[start : start + LISTED]
            found = self.graph.find_nodes(self.dataset, DOCUMENT, names=part, limit=10 * len(part))
            marks = [
                Node(id=d.id, type=DOCUMENT, dataset=self.dataset, properties=wanted)
                for d in found
                if not _marked(d, wanted)
            ]
            if marks:
                self.graph.upsert_nodes(marks)

    def _remove(self, names: list[str]) -> list[str]:
        """Remove the source's documents still under these names."""
        removed = []
        for start in range(0, len(names), LISTED):
            part = names[start : start + LISTED]
            found = self.graph.find_nodes(self.dataset, DOCUMENT, names=part, limit=10 * len(part))
            for doc in found:
                if doc.properties.get(SOURCE) == self.source_id:
                    self.catalog.remove_document(self.dataset, doc)
                    removed.append(doc.name)
        return sorted(set(removed))


def _hash(doc: Node | None) -> str | None:
    return None if doc is None else str(doc.properties.get("content_hash"))


def _marked(doc: Node | None, wanted: dict[str, str]) -> bool:
    return doc is not None and all(doc.properties.get(k) == v for k, v in wanted.items())


def scratch_folder(parent: Path | None = None) -> tempfile.TemporaryDirectory[str]:
    """A scratch folder for one sync's copies (removed with it)."""
    return tempfile.TemporaryDirectory(prefix="cogmill-sync-", dir=parent)
