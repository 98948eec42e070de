"""Discovery and adoption: find BMCs on a management network, place them from the switches,
propose site-file entries (docs/discovery.md)."""
