"""Coverage-guided fuzzing of the decoders of stored records.

No paper section: loomdb's own check that hostile bytes in a database row never crash, hang or
over-allocate a reader.  ``targets`` says what each input must satisfy and ``seeds`` gives the
starting inputs.
"""
