"""DuckDB: the connection, its database interface and the functions' binding.  No paper section."""
