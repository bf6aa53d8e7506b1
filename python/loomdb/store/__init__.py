"""Storage (no paper section of its own): the catalog, layouts and the storage formats."""
