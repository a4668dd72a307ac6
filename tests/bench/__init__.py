"""Benchmarks (run by hand; not collected by pytest: no ``test_`` prefix)."""
