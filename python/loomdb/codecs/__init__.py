"""Pure codecs: bytes ↔ arrays.  Nothing here imports loomdb except :mod:`loomdb.errors`.
No paper section."""
