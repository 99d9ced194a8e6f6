"""The entity key index: which stored entities an alias rule could join a name to.

Every entity a write creates is filed in the state store under its `match_keys` (a set per
dataset and key: "letters:nyc", "surname:lopez:2", ...). Filing and looking up happen in one
atomic call, so of two batches that write "NYC" and "New York City" at the same time the
later one finds the other. A lookup costs one round trip per batch of entities, where a
nearest-neighbour query per entity cost 7-13 ms of the vector store's time.

The index only proposes candidates: members may have been merged away or deleted since they
were filed (sets are never pruned one by one), so callers read the candidates from the graph
and drop the ones that are gone. A dataset's sets are removed with the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.aliases import match_keys
from core.ports import StateStore

PREFIX = "entity-keys:"


class EntityKeyIndex:
    """Files entities under their match keys and proposes candidates sharing a key."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def file_and_find(
        self, dataset: str, names: Mapping[str, str]
    ) -> dict[str, dict[str, str]]:
        """File each entity (id -> name); return, per id, the others sharing a key (id -> name).

        A member is stored as "id name": an entity's id is derived from its name, so the pair
        never goes stale, and candidates can be judged by name without reading the graph.
        """
        keys = {entity: match_keys(name) for entity, name in names.items()}
        wanted: dict[str, list[str]] = {}
        for entity, entity_keys in keys.items():
            for key in entity_keys:
                wanted.setdefault(f"{PREFIX}{dataset}:{key}", []).append(
                    f"{entity} {names[entity]}"
                )
        members = self.state.add_members(wanted)
        found: dict[str, dict[str, str]] = {}
        for entity, entity_keys in keys.items():
            others = found.setdefault(entity, {})
            for key in entity_keys:
                for member in members[f"{PREFIX}{dataset}:{key}"]:
                    other, _, name = member.partition(" ")
                    if other != entity:
                        others[other] = name
        return found

    def forget_dataset(self, dataset: str) -> None:
        """Remove a dataset's sets."""
        for key in self.state.keys(f"{PREFIX}{dataset}:"):
            self.state.delete(key)
