"""The event table's Spark and Arrow schemas, derived from :data:`emulator.events.FIELDS`.

The columns are the event fields in their declared order, then one column the
data source adds: ``source_file``, the log file's path relative to the run
directory (or to the loaded directory when no run directory is known).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from emulator.events import FIELDS, FieldType

SOURCE_FILE: Final = "source_file"
"""The extra column naming the file a row came from (not an event field)."""

_SPARK_TYPES: Final[dict[FieldType, DataType]] = {
    "long": LongType(),
    "double": DoubleType(),
    "string": StringType(),
    "boolean": BooleanType(),
}

_ARROW_TYPES: Final[dict[FieldType, pa.DataType]] = {
    "long": pa.int64(),
    "double": pa.float64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
}


def column_names() -> list[str]:
    """The event table's column names in order: every event field, then ``source_file``."""
    return [f.name for f in FIELDS] + [SOURCE_FILE]


def column_types() -> dict[str, FieldType]:
    """Column name to its type name (``long``, ``double``, ``string``, ``boolean``)."""
    out: dict[str, FieldType] = {f.name: f.type for f in FIELDS}
    out[SOURCE_FILE] = "string"
    return out


def spark_schema() -> StructType:
    """The Spark schema of the event table; every column is nullable."""
    return StructType(
        [StructField(name, _SPARK_TYPES[t], True) for name, t in column_types().items()]
    )


def arrow_schema() -> pa.Schema:
    """The Arrow schema of the event table, matching :func:`spark_schema` column for column."""
    return pa.schema([pa.field(name, _ARROW_TYPES[t], True) for name, t in column_types().items()])
