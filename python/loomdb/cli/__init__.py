"""The ``loomdb`` command line.  No paper section."""
