"""The entity key index: which stored entities an alias rule could join a name to.

Every entity a write creates is filed in the state store under its `match_keys` (a set per
dataset and key: "acronym:nyc", "surname:lopez:2", ...) and looks up the sets its alias rules
could match in ("initials:nyc" for "NYC"). Filing and looking up happen in one atomic call, so
of two batches that write "NYC" and "New York City" at the same time the later one finds the
other. A lookup costs one round trip per batch of entities, where a nearest-neighbour query per
entity cost 7-13 ms of the vector store's time.

The index only proposes candidates: members may have been merged away or deleted since they
were filed (sets are never pruned one by one), so callers read the candidates from the graph
and drop the ones that are gone. A dataset's sets are removed with the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.aliases import match_keys
from core.ports import StateStore
from core.sequences import batched

PREFIX = "entity-keys:"
# Version 2 files names by role ("acronym:", "initials:", "initial:", "surname:"); version 1
# filed acronyms and initials together under "letters:", and every name under "surname:".
FORMAT_KEY, FORMAT = "entity-keys-format", "2"
_REFILE_BATCH = 1000


class EntityKeyIndex:
    """Files entities under their match keys and proposes candidates sharing a key."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def file_and_find(self, dataset: str, names: Mapping[str, str]) -> dict[str, dict[str, str]]:
        """File each entity (id -> name); return, per id, the others it could be (id -> name).

        A member is stored as "id name": an entity's id is derived from its name, so the pair
        never goes stale, and candidates can be judged by name without reading the graph.
        """
        return self._lookup(dataset, names, file=True)

    def find(self, dataset: str, names: Mapping[str, str]) -> dict[str, dict[str, str]]:
        """`file_and_find` for entities filed before, without filing them again."""
        return self._lookup(dataset, names, file=False)

    def _lookup(
        self, dataset: str, names: Mapping[str, str], *, file: bool
    ) -> dict[str, dict[str, str]]:
        keys = {entity: match_keys(name) for entity, name in names.items()}
        wanted: dict[str, list[str]] = {}
        for entity, entity_keys in keys.items():
            for key in entity_keys.sought:  # read only, unless the entity is filed there too
                wanted.setdefault(f"{PREFIX}{dataset}:{key}", [])
            for key in entity_keys.filed if file else ():
                wanted.setdefault(f"{PREFIX}{dataset}:{key}", []).append(
                    f"{entity} {names[entity]}"
                )
        members = self.state.add_members(wanted)
        found: dict[str, dict[str, str]] = {}
        for entity, entity_keys in keys.items():
            others = found.setdefault(entity, {})
            for key in entity_keys.sought:
                for member in members[f"{PREFIX}{dataset}:{key}"]:
                    other, _, name = member.partition(" ")
                    if other != entity:
                        others[other] = name
        return found

    def upgrade(self) -> None:
        """Re-file the names an earlier format filed, once per state store.

        Safe to interrupt and to run in several processes at once: names are re-filed before
        an old set is removed, filing is idempotent, and the version is set last. Old
        "surname:" sets are kept: their abbreviated names are only extra candidates there.
        """
        if self.state.get(FORMAT_KEY) == FORMAT:
            return
        for key in self.state.keys(PREFIX):
            dataset, _, kind = key.removeprefix(PREFIX).partition(":")
            if not kind.startswith(("letters:", "surname:")):
                continue
            members = sorted(self.state.add_members({key: []})[key])
            for part in batched([m.partition(" ") for m in members], _REFILE_BATCH):
                self.file_and_find(dataset, {entity: name for entity, _, name in part})
            if kind.startswith("letters:"):
                self.state.delete(key)
        self.state.put(FORMAT_KEY, FORMAT)

    def forget_dataset(self, dataset: str) -> None:
        """Remove a dataset's sets."""
        for key in self.state.keys(f"{PREFIX}{dataset}:"):
            self.state.delete(key)
