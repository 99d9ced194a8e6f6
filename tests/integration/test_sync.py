"""Datasets that follow a folder and a git repository, on both backends: after every edit a
sync adds, replaces, renames and removes documents, cognifies only what changed (the LLM
stand-in's calls counted), and the dataset ends equal, node for node and vector for vector,
to a fresh sync of the source's final state."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.models.documents import STATUS
from pipelines.sources.mirror import SOURCE, SOURCE_COMMIT
from pipelines.sources.spec import parse_source
from runtime import Runtime
from tests.backends import Backend
from tests.llm_server import LLMTestServer
from tests.sync_support import git, report, same_as_fresh, synced, write

FIRST = {
    "a.txt": "Ada Lovelace visited London in spring. Ada Lovelace wrote notes about engines.",
    "notes/b.md": "# Engines\n\nCharles Babbage built engines in London.",
    "c.txt": "Grace Hopper met Alan Turing in Paris.",
    "d.txt": "Mary Somerville taught Ada Lovelace mathematics.",
    "e.txt": "John Herschel observed stars from Slough.",
}
# Not valid CSV: its second row has more cells than the header names (fails in cognify).
BROKEN_CSV = "id,name\n1,Kew\n2,Bath,Wells,Ely\n"


def docs(rt: Runtime, dataset: str) -> dict[str, dict]:
    return {d.name: {"id": d.id, **d.properties} for d in rt.catalog.documents(dataset)}


def chat_calls(server: LLMTestServer) -> int:
    return server.calls("/v1/chat/completions")


@pytest.mark.slow
def test_a_folder_edited_between_syncs_ends_as_a_fresh_sync(
    backend: Backend, embedder: object, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    folder = tmp_path / "source"
    write(folder, FIRST)
    (folder / ".hidden.txt").write_text("never synced", encoding="utf-8")
    dataset = backend.dataset("folder")
    spec = parse_source(str(folder))
    llm = {"llm_base_url": llm_server.base_url, "llm_model": "test"}
    with backend.runtime({"embedder": embedder}, **llm) as rt:
        first = report(rt, synced(rt, dataset, spec))
        assert first["counts"]["added"] == 5 and sorted(first["added"]) == sorted(FIRST)
        before = docs(rt, dataset)
        assert all(d[SOURCE] == spec.identity(dataset) for d in before.values())

        write(folder, {"f.txt": "Michael Faraday lectured at the Royal Institution."})
        write(folder, {"e.txt": "John Herschel observed comets from Paris."})
        (folder / "archive").mkdir()
        (folder / "d.txt").rename(folder / "archive" / "d.txt")
        (folder / "c.txt").unlink()
        (folder / "broken.csv").write_text(BROKEN_CSV, encoding="utf-8")
        calls = chat_calls(llm_server)
        job = synced(rt, dataset, spec)
        second = report(rt, job)

        assert sorted(second["added"]) == ["broken.csv", "f.txt"]
        assert second["replaced"] == ["e.txt"]
        assert second["renamed"] == [["d.txt", "archive/d.txt"]]
        assert second["removed"] == ["c.txt"]
        assert sorted(second["unchanged"]) == ["a.txt", "notes/b.md"]
        # Only the two changed texts ask the LLM; the renamed one is answered from the cache.
        after = docs(rt, dataset)
        assert chat_calls(llm_server) - calls == 2, (job, after)
        assert after["archive/d.txt"]["id"] == before["d.txt"]["id"]  # same document, renamed
        assert [e.document_name for e in job.errors] == ["broken.csv"]
        assert after["broken.csv"][STATUS] == "failed" and "c.txt" not in after

        again = report(rt, synced(rt, dataset, spec))  # nothing changed: nothing to do
        assert again["counts"]["unchanged"] == 6 and again["counts"]["added"] == 0
        same_as_fresh(backend, rt, dataset, spec)


@pytest.mark.slow
def test_a_git_repository_followed_commit_by_commit_ends_as_a_fresh_sync(
    backend: Backend, embedder: object, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    write(repo, {k: v for k, v in FIRST.items() if k != "e.txt"})
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "first")
    dataset = backend.dataset("git")
    spec = parse_source(str(repo), ref="main")
    llm = {"llm_base_url": llm_server.base_url, "llm_model": "test"}
    with backend.runtime({"embedder": embedder}, **llm) as rt:
        synced(rt, dataset, spec)
        before = docs(rt, dataset)
        assert {d[SOURCE_COMMIT] for d in before.values()} == {git(repo, "rev-parse", "HEAD")}

        write(repo, {"notes/b.md": "# Engines\n\nCharles Babbage built engines in Cambridge."})
        write(repo, {"f.txt": "Michael Faraday lectured at the Royal Institution."})
        (repo / "people").mkdir()
        git(repo, "mv", "d.txt", "people/d.txt")
        git(repo, "rm", "--quiet", "c.txt")
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", "second")
        (repo / "uncommitted.txt").write_text("Not committed yet.", encoding="utf-8")
        calls = chat_calls(llm_server)
        second = report(rt, synced(rt, dataset, spec))

        assert second["added"] == ["f.txt"] and second["replaced"] == ["notes/b.md"]
        assert second["renamed"] == [["d.txt", "people/d.txt"]]
        assert second["removed"] == ["c.txt"] and second["unchanged"] == ["a.txt"]
        assert chat_calls(llm_server) - calls == 2
        after = docs(rt, dataset)
        assert after["people/d.txt"]["id"] == before["d.txt"]["id"]
        head = git(repo, "rev-parse", "HEAD")
        assert {d[SOURCE_COMMIT] for d in after.values()} == {head}
        assert "uncommitted.txt" not in after

        git(repo, "mv", "people/d.txt", "people/somerville.txt")
        write(repo, {"people/somerville.txt": "Mary Somerville wrote on physical sciences."})
        git(repo, "commit", "--quiet", "-am", "third: a rename with new content")
        third = report(rt, synced(rt, dataset, spec))
        assert third["added"] == ["people/somerville.txt"] and third["removed"] == ["people/d.txt"]
        shutil.rmtree(repo / "people")  # the working tree is not what is synced: the commit is
        assert report(rt, synced(rt, dataset, spec))["counts"]["unchanged"] == 4
        same_as_fresh(backend, rt, dataset, spec)
