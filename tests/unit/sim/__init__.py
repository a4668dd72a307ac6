"""Unit tests of the sim engine's core (``emulator/sim``)."""
