"""The previous store layout (before Delta Lake), read only: its reader
(:mod:`~adaptlab.results.legacy.legacy`), ``adaptlab results migrate`` to a Delta store
(:mod:`~adaptlab.results.legacy.migrate`) and rows of an older schema version upgraded on read
(:mod:`~adaptlab.results.legacy.schema_upgrade`)."""
