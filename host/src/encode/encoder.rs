//! The encoder: a table schema's columns, and the parse of each event into a row of cells
//! (the flat fast path first, serde_json for everything else) and of a batch into Arrow.

use std::fmt;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use iceberg::spec::{Schema, Type};
use rustc_hash::FxHashMap;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::cells::{Cell, utf8};
use super::columns::{Column, ColumnBuilder, ColumnKind, Fill};
use super::nested::{self, Shape};
use super::{EncodeError, SchemaError, flat};

/// Encodes JSON values to Arrow batches of one table schema. Cheap to share across
/// threads.
#[derive(Debug)]
pub struct Encoder {
    columns: Vec<Column>,
    /// Column index by field name (a fast hash: the lookup runs for every field of every
    /// event, and SipHash took ~4% of the CPU per event).
    by_name: FxHashMap<Box<str>, usize>,
    arrow: SchemaRef,
}

/// The result of encoding a batch.
#[derive(Debug)]
pub struct Encoded {
    /// The rows that fit, in input order.
    pub batch: RecordBatch,
    /// For each row of `batch`, the index of its input value.
    pub rows: Vec<usize>,
    /// The inputs that did not fit, by index.
    pub errors: Vec<(usize, EncodeError)>,
}

impl Encoder {
    /// An encoder for `schema` (the table's current schema). Columns named in `generated`
    /// are filled with the ingestion time instead of a JSON field.
    pub fn new(schema: &Schema, generated: &[String]) -> Result<Self, SchemaError> {
        let mut columns = Vec::new();
        for field in schema.as_struct().fields() {
            let unsupported = || SchemaError::Unsupported {
                column: field.name.clone(),
                ty: field.field_type.to_string(),
            };
            let Type::Primitive(p) = field.field_type.as_ref() else {
                columns.push(nested::column(field, generated)?);
                continue;
            };
            let kind = ColumnKind::of(p).ok_or_else(unsupported)?;
            let fill = if generated.contains(&field.name) {
                if !matches!(kind, ColumnKind::Timestamp | ColumnKind::Timestamptz) {
                    return Err(SchemaError::GeneratedType(field.name.clone()));
                }
                Fill::IngestionTime
            } else {
                Fill::Field
            };
            columns.push(Column {
                name: field.name.clone(),
                shape: Shape::Leaf(kind),
                required: field.required,
                fill,
            });
        }
        let by_name = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.fill == Fill::Field)
            .map(|(i, c)| (c.name.as_str().into(), i))
            .collect();
        let arrow = Arc::new(
            iceberg::arrow::schema_to_arrow_schema(schema)
                .map_err(|e| SchemaError::Arrow(Box::new(e)))?,
        );
        Ok(Encoder {
            columns,
            by_name,
            arrow,
        })
    }

    /// The Arrow schema of the batches (with Iceberg field ids).
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow
    }

    /// Parses one value into its row of cells.
    fn parse<'a>(&self, value: Option<&'a [u8]>) -> Result<Vec<Cell<'a>>, EncodeError> {
        let value = value.ok_or_else(|| EncodeError {
            code: "null_value",
            message: "the record has no value (a tombstone)".into(),
            field: None,
        })?;
        let text = utf8(value)?;
        let mut cells = vec![Cell::Null; self.columns.len()];
        let mut failure = None;
        let fast = flat::each_field(text, |key, raw| {
            if let Some(&i) = self.by_name.get(key) {
                self.field(i, raw, &mut cells, &mut failure);
            }
        });
        if fast.is_some() {
            return self.complete(cells, failure);
        }
        cells.fill(Cell::Null);
        failure = None;
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = RowSeed {
            encoder: self,
            cells: &mut cells,
            failure: &mut failure,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end());
        if failure.is_none()
            && let Err(error) = parsed
        {
            let not_object =
                error.is_data() && value.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{');
            return Err(if not_object {
                EncodeError {
                    code: "not_an_object",
                    message: format!("the value must be a JSON object: {error}"),
                    field: None,
                }
            } else {
                EncodeError {
                    code: "malformed_json",
                    message: format!("the value is not valid JSON: {error}"),
                    field: None,
                }
            });
        }
        self.complete(cells, failure)
    }

    /// Converts field `raw` into the cell of column `i`, unless an earlier field failed:
    /// the first failure is the event's.
    #[inline]
    fn field<'a>(
        &self,
        i: usize,
        raw: &'a str,
        cells: &mut [Cell<'a>],
        failure: &mut Option<EncodeError>,
    ) {
        if failure.is_some() {
            return;
        }
        match self.columns[i].cell(raw) {
            Ok(cell) => cells[i] = cell,
            Err(error) => *failure = Some(error),
        }
    }

    /// The row of a parsed event: its first failure, or a required column left empty.
    fn complete<'a>(
        &self,
        cells: Vec<Cell<'a>>,
        failure: Option<EncodeError>,
    ) -> Result<Vec<Cell<'a>>, EncodeError> {
        if let Some(error) = failure {
            return Err(error);
        }
        for (column, cell) in self.columns.iter().zip(&cells) {
            if column.required && column.fill == Fill::Field && *cell == Cell::Null {
                return Err(EncodeError {
                    code: "missing_required",
                    message: format!("required column `{}` has no value", column.name),
                    field: Some(column.name.clone()),
                });
            }
        }
        Ok(cells)
    }

    /// Checks one value without building anything.
    pub fn check(&self, value: Option<&[u8]>) -> Result<(), EncodeError> {
        self.parse(value).map(drop)
    }

    /// Encodes `values`; `ingestion_micros` fills the host's timestamp columns.
    pub fn encode<'a>(
        &self,
        values: impl IntoIterator<Item = Option<&'a [u8]>>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        let values = values.into_iter();
        let capacity = values.size_hint().0;
        let mut builders: Vec<ColumnBuilder> = self
            .columns
            .iter()
            .map(|c| ColumnBuilder::new(&c.shape, capacity))
            .collect();
        let mut rows = Vec::with_capacity(capacity);
        let mut errors = Vec::new();
        for (i, value) in values.enumerate() {
            match self.parse(value) {
                Ok(cells) => {
                    for ((builder, column), cell) in
                        builders.iter_mut().zip(&self.columns).zip(cells)
                    {
                        let cell = match column.fill {
                            Fill::IngestionTime => Cell::Micros(ingestion_micros),
                            Fill::Field => cell,
                        };
                        builder.append(cell);
                    }
                    rows.push(i);
                }
                Err(error) => errors.push((i, error)),
            }
        }
        let arrays: Vec<ArrayRef> = builders
            .into_iter()
            .map(ColumnBuilder::finish)
            .collect::<Result<_, _>>()?;
        let batch = RecordBatch::try_new(self.arrow.clone(), arrays)?;
        Ok(Encoded {
            batch,
            rows,
            errors,
        })
    }
}

/// Parses a JSON object into the cells of a row.
struct RowSeed<'s, 'de> {
    encoder: &'s Encoder,
    cells: &'s mut [Cell<'de>],
    failure: &'s mut Option<EncodeError>,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(column) = map.next_key_seed(KeySeed(self.encoder))? {
            let Some(i) = column else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let raw: &'de RawValue = map.next_value()?;
            // After a failure, parsing goes on: the rest must still be valid JSON.
            self.encoder.field(i, raw.get(), self.cells, self.failure);
        }
        Ok(())
    }
}

/// Maps an object key to its column index (`None` for fields the table lacks).
struct KeySeed<'a>(&'a Encoder);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.by_name.get(v).copied())
    }
}
