"""Analysis of emulator event logs in PySpark (the only package that imports pyspark)."""
