"""PostgreSQL: the extension, its installer, the server-side entry and client.  No paper section."""
