"""Accelerator backends: compute on batches of a storage format (ARCHITECTURE "Seams").
No paper section."""
