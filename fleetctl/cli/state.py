"""Process-wide CLI settings set by the root callback."""

debug = False
