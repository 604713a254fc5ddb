"""The floor above the records: atomic files and locks, content fingerprints, provenance, model-folder
checks, page-set folders and the console of long commands."""
