"""Optional ontology alignment inside graph extraction: match extracted entities to an ontology.

Entity types are matched to the ontology's classes and entity names to its individuals
(exact normalised label, then fuzzy above `ontology_match_threshold`). The result rides on
each chunk's KnowledgeGraph (`ontology`, and `ontology_uri` in a matched entity's properties)
so the graph builder writes it with the chunk's provenance:

- an entity whose type matched is IS_A the class's EntityType node (named by the class's
  label, carrying `ontology_uri`), and every superclass of a matched class is an EntityType
  too, linked child SUBCLASS_OF parent;
- an entity matched to an individual carries the individual's URI and is IS_A its classes.

The hierarchy is written per chunk, not once per dataset: its nodes and edges then carry the
support of the chunks that caused them, so deleting those documents removes them, and a class
nothing refers to any more does not linger in the graph.
"""

from __future__ import annotations

from core.models.extraction import KnowledgeGraph, OntologyAlignment, OntologyClassRef
from core.ontology import Ontology


class OntologyAligner:
    """Aligns the graphs of a batch with one ontology."""

    def __init__(self, ontology: Ontology, threshold: float) -> None:
        if not 0 < threshold <= 100:
            raise ValueError(f"ontology match threshold must be in (0, 100], got {threshold}")
        self.ontology = ontology
        self.threshold = threshold

    def align(self, graphs: list[KnowledgeGraph]) -> list[KnowledgeGraph]:
        """The graphs with their matches to the ontology recorded (inputs are not changed)."""
        return [self._one(graph) for graph in graphs]

    def _one(self, graph: KnowledgeGraph) -> KnowledgeGraph:
        onto, threshold = self.ontology, self.threshold
        alignment = OntologyAlignment()
        matched: dict[str, None] = {}
        entities = []
        for entity in graph.entities:
            class_uri = onto.match_class(entity.type, threshold)
            if class_uri is not None:
                alignment.type_uris[entity.type] = class_uri
                matched[class_uri] = None
            individual = onto.match_individual(entity.name, threshold)
            if individual is not None:
                kinds = list(onto.individuals[individual].parents)
                alignment.entity_classes[entity.name] = kinds
                matched.update(dict.fromkeys(kinds))
                properties = {**entity.properties, "ontology_uri": individual}
                entity = entity.model_copy(update={"properties": properties})
            entities.append(entity)
        if not matched:
            return graph
        chain = dict(matched)
        for uri in matched:
            chain.update(dict.fromkeys(onto.ancestors(uri)))
        alignment.classes = [
            OntologyClassRef(
                uri=uri,
                label=onto.classes[uri].label,
                parents=[p for p in onto.classes[uri].parents if p in onto.classes],
            )
            for uri in chain
            if uri in onto.classes
        ]
        return graph.model_copy(update={"entities": entities, "ontology": alignment})
