"""A damaged store repaired: ``adaptlab results repair`` (:mod:`~adaptlab.results.health.repair`),
built on the core's damage checks (:mod:`~adaptlab.results.damage`, the shape of a Delta log's
actions in :mod:`~adaptlab.results.delta_protocol`, data-file checksums in
:mod:`~adaptlab.results.integrity`), which every open and commit runs."""
