"""The store's health: damage checks on open (:mod:`~adaptlab.results.health.health`), the shape
of a Delta log's actions (:mod:`~adaptlab.results.health.delta_protocol`), data-file checksums
(:mod:`~adaptlab.results.health.integrity`) and ``adaptlab results repair``
(:mod:`~adaptlab.results.health.repair`)."""
