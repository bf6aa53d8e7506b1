"""Storage: the catalog (``loom.models``, ``loom.indexes``) and the storage formats."""
