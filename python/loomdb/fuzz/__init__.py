"""``loomdb fuzz``: coverage-guided fuzzing of the decoders of stored records.

No paper section: loomdb's own check that hostile bytes in a database row never crash, hang or
over-allocate a reader.  ``campaign`` runs it (one child process per decoder, ``child``),
``targets`` says what each input must satisfy, ``seeds`` gives the starting inputs,
``mutators`` mutates TOC blobs with their structure in mind and ``tally`` is what a child
shares with its parent.
"""
