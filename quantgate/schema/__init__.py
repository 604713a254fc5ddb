"""The ground floor: the typed records every file between stages is read and written through, one module
per file kind. Imports nothing of quantgate but ``quantgate.errors``."""
