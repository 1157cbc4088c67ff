//! The encoder: a table schema's columns, and the parse of each event into a row of cells
//! (the flat fast path first, serde_json for everything else) and of a batch into Arrow.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use iceberg::spec::{PrimitiveType, Schema, Type};
use rustc_hash::FxHashMap;

use super::cells::{Cell, utf8};
use super::columns::{Column, ColumnBuilder, ColumnKind, Fill};
use super::grow;
use super::infer::{self, Evolving, Inferred, Wanted};
use super::nested::{self, Shape};
use super::{EncodeError, SchemaError, UnknownFields, flat};
use crate::record::{Patch, Record};

/// The code of a row set aside because the table's schema must change first (with
/// [`UnknownFields::Add`]); such rows are encoded again against the new schema and never
/// dead-lettered with it.
pub const SCHEMA_CHANGE: &str = "schema_change";

/// Encodes JSON values to Arrow batches of one table schema. Cheap to share across
/// threads.
#[derive(Debug)]
pub struct Encoder {
    pub(super) columns: Vec<Column>,
    /// Column index by field name (a fast hash: the lookup runs for every field of every
    /// event, and SipHash took ~4% of the CPU per event).
    /// Host-filled columns are in it too: an event's field of their name is not unknown.
    pub(super) by_name: FxHashMap<Box<str>, usize>,
    pub(super) arrow: SchemaRef,
    /// What happens to a field the table has no column for.
    pub(super) unknown: UnknownFields,
    /// With [`UnknownFields::Add`]: the caps, and the fields refused.
    pub(super) evolving: Evolving,
    /// The schema encoded to.
    pub(super) schema: Schema,
}

/// What parsing a row found besides its cells: the fields it drops, and the schema changes
/// it needs.
#[derive(Debug, Default)]
pub(super) struct RowExtra<'a> {
    pub(super) dropped: Vec<Cow<'a, str>>,
    pub(super) wanted: Wanted,
    /// Once the schema is final, a new field that got no column though nothing refused
    /// it: the row failed for another reason when the change was planned, and that
    /// reason, found again, is the row's error rather than this one.
    pub(super) unplanned: Option<EncodeError>,
    /// The cells of the last row, emptied: their room serves the next row (a row costs no
    /// allocation of its own).
    pub(super) spare: Vec<Cell<'a>>,
    /// The column of each field of the last row, by the field's place (`usize::MAX` for
    /// none): see [`Encoder::column_of`].
    pub(super) order: Vec<usize>,
}

impl<'a> RowExtra<'a> {
    /// A row of `n` null cells, in the room of the last one.
    pub(super) fn row(&mut self, n: usize) -> Vec<Cell<'a>> {
        let mut cells = std::mem::take(&mut self.spare);
        if cells.len() == n {
            // One pass that nulls each cell, dropping only those that own memory.
            cells.iter_mut().for_each(Cell::clear);
        } else {
            cells.clear();
            cells.resize_with(n, || Cell::Null);
        }
        cells
    }
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
    /// Fields the table has no column for, dropped from the rows of `batch` (with
    /// [`UnknownFields::Drop`]): how many times each, by field name.
    pub dropped: BTreeMap<String, u64>,
    /// With [`UnknownFields::Add`]: what the rows set aside ([`SCHEMA_CHANGE`]) need.
    pub wanted: Wanted,
}

impl Encoder {
    /// An encoder for `schema` (the table's current schema). Columns named in `generated`
    /// are filled with the ingestion time instead of a JSON field. Fields the table has
    /// no column for are dropped and counted (see [`Encoder::with_unknown_fields`]).
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
            unknown: UnknownFields::Drop,
            evolving: Evolving::default(),
            schema: schema.clone(),
        })
    }

    /// The same encoder, doing `unknown` with the fields the table has no column for.
    pub fn with_unknown_fields(self, unknown: UnknownFields) -> Self {
        Encoder { unknown, ..self }
    }

    /// The same encoder, evolving the schema with `evolving`'s settings (with
    /// [`UnknownFields::Add`]).
    pub fn with_evolving(self, evolving: Evolving) -> Self {
        Encoder { evolving, ..self }
    }

    /// The schema the encoder encodes to.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The Arrow schema of the batches (with Iceberg field ids).
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow
    }

    /// Parses one value, with `patch`'s fields in place of its own of the same names, into
    /// its row of cells; the names of the fields it drops (the table has no column for
    /// them) are put in `dropped`.
    ///
    /// `spans`, where the host already read the value's fields ([`super::index_fields`]),
    /// spare reading it again.
    fn parse<'a>(
        &self,
        value: Option<&'a [u8]>,
        patch: Option<&'a Patch>,
        spans: Option<&[u32]>,
        extra: &mut RowExtra<'a>,
    ) -> Result<Vec<Cell<'a>>, EncodeError> {
        let value = value.ok_or_else(|| EncodeError {
            code: "null_value",
            message: "the record has no value (a tombstone)".into(),
            field: None,
        })?;
        let text = utf8(value)?;
        let mut cells = extra.row(self.columns.len());
        let mut failure = None;
        let patched = |key: &str| patch.is_some_and(|p| p.sets(key));
        let mut at = 0;
        let mut each = |key: &'a str, raw: &'a str| {
            at += 1;
            match self.column_of(key, at - 1, &mut extra.order) {
                _ if patched(key) => {}
                Some(i) => self.field(i, raw, &mut cells, &mut failure, extra),
                None => self.unknown(Cow::Borrowed(key), || self.infer(raw), extra, &mut failure),
            }
        };
        let fast = match spans {
            Some(spans) => flat::each_span(text, spans, &mut each),
            None => flat::each_field(text, &mut each),
        };
        if fast.is_some() {
            self.patch(patch, &mut cells, &mut failure, extra);
            return self.complete(cells, failure, extra.unplanned.take());
        }
        cells.fill(Cell::Null);
        failure = None;
        extra.dropped.clear();
        extra.wanted = Wanted::default();
        extra.unplanned = None;
        let parsed = self.parse_slow(text, patch, &mut cells, &mut failure, extra);
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
        self.patch(patch, &mut cells, &mut failure, extra);
        self.complete(cells, failure, extra.unplanned.take())
    }

    /// The column of field `key`, the `at`-th of its event. The events of a stream mostly
    /// list their fields in one order, so the column the `at`-th field had before
    /// (`order`) is tried before the name is hashed; `order` learns from each answer.
    #[inline]
    fn column_of(&self, key: &str, at: usize, order: &mut Vec<usize>) -> Option<usize> {
        if let Some(&i) = order.get(at)
            && self.columns.get(i).is_some_and(|c| c.name == key)
        {
            return Some(i);
        }
        let found = self.by_name.get(key).copied();
        let slot = found.unwrap_or(usize::MAX);
        if at < order.len() {
            order[at] = slot;
        } else if at == order.len() {
            order.push(slot);
        }
        found
    }

    /// Converts field `raw` into the cell of column `i`, unless an earlier field failed
    /// (the first failure is the event's) or the host fills the column.
    #[inline]
    pub(super) fn field<'a>(
        &self,
        i: usize,
        raw: &'a str,
        cells: &mut [Cell<'a>],
        failure: &mut Option<EncodeError>,
        extra: &mut RowExtra<'a>,
    ) {
        let column = &self.columns[i];
        if failure.is_some() || column.fill != Fill::Field {
            return;
        }
        match column.cell(raw) {
            Ok(cell) => cells[i] = cell,
            Err(error) => match self.promotion(column, raw) {
                Some(wider) => extra.wanted.promote(column.name.clone(), wider),
                None => match self.growth(i, raw) {
                    Ok(Some(ty)) if !self.evolving.frozen => {
                        extra.wanted.grow(column.name.clone(), ty)
                    }
                    // Not planned, not refused: the row failed for another reason.
                    Ok(Some(_)) => {
                        extra.unplanned.get_or_insert(error);
                    }
                    Ok(None) => *failure = Some(error),
                    Err(error) => *failure = Some(error),
                },
            },
        }
    }

    /// The grown type a value that does not fit nested column `i` asks for, when the
    /// schema may evolve (see [`grow`]); once the schema is final, the refusal of the
    /// column's growth, if it was refused.
    fn growth(&self, i: usize, raw: &str) -> Result<Option<Type>, EncodeError> {
        if self.unknown != UnknownFields::Add || matches!(self.columns[i].shape, Shape::Leaf(_)) {
            return Ok(None);
        }
        let field = &self.schema.as_struct().fields()[i];
        if let (true, Some((code, message))) =
            (self.evolving.frozen, self.evolving.refused.get(&field.name))
        {
            return Err(EncodeError {
                code,
                message: message.clone(),
                field: Some(field.name.clone()),
            });
        }
        grow::grown(field, raw, &self.evolving)
    }

    /// The wider type a value that does not fit `column` asks for, when the schema may
    /// evolve and Iceberg allows it.
    fn promotion(&self, column: &Column, raw: &str) -> Option<PrimitiveType> {
        if self.unknown != UnknownFields::Add || self.evolving.frozen {
            return None;
        }
        let kind = match column.shape {
            Shape::Leaf(ColumnKind::Int) => PrimitiveType::Int,
            Shape::Leaf(ColumnKind::Float) => PrimitiveType::Float,
            Shape::Leaf(ColumnKind::Decimal { precision, scale }) => {
                PrimitiveType::Decimal { precision, scale }
            }
            _ => return None,
        };
        infer::promotion(&kind, raw)
    }

    /// A field the table has no column for: dropped and counted, a dead letter, or with
    /// `unknown-fields = "add"` asked for as a column of the type `infer` gives (JSON's
    /// inferred from its text, Avro's and Protobuf's from the writer schema).
    pub(super) fn unknown<'a>(
        &self,
        key: Cow<'a, str>,
        infer: impl FnOnce() -> Inferred,
        extra: &mut RowExtra<'a>,
        failure: &mut Option<EncodeError>,
    ) {
        if failure.is_some() {
            return;
        }
        match self.unknown {
            UnknownFields::Drop => extra.dropped.push(key),
            UnknownFields::Add => self.add(key, infer(), extra, failure),
            UnknownFields::DeadLetter => {
                *failure = Some(EncodeError {
                    code: "unknown_field",
                    message: format!(
                        "the table has no column `{key}` (`[sink] unknown-fields = \"dead-letter\"`)"
                    ),
                    field: Some(key.into_owned()),
                })
            }
        }
    }

    /// The type JSON text `raw` would give a column.
    pub(super) fn infer(&self, raw: &str) -> Inferred {
        infer::infer_with(raw, self.evolving.max_depth, self.evolving.timestamps)
    }

    /// A field to become a column: its type is asked for, unless it cannot have one (a
    /// null, an empty value, a type Iceberg lacks: dropped and counted), nests too deep,
    /// or was refused.
    fn add<'a>(
        &self,
        key: Cow<'a, str>,
        inferred: Inferred,
        extra: &mut RowExtra<'a>,
        failure: &mut Option<EncodeError>,
    ) {
        let refuse = |code: &'static str, message: String| {
            Some(EncodeError {
                code,
                message,
                field: Some(key.to_string()),
            })
        };
        match inferred {
            Inferred::Null => {}
            Inferred::Empty => extra.dropped.push(key),
            Inferred::TooDeep => {
                *failure = refuse(
                    "nested_too_deep",
                    format!(
                        "`{key}` nests deeper than `[sink] max-nesting-depth` ({}), so it cannot become a column",
                        self.evolving.max_depth
                    ),
                )
            }
            Inferred::Type(ty) => match self.evolving.refused.get(key.as_ref()) {
                Some((code, message)) => *failure = refuse(code, message.clone()),
                None if self.evolving.frozen => {
                    if extra.unplanned.is_none() {
                        extra.unplanned =
                            refuse("unknown_field", format!("the table has no column `{key}`"));
                    }
                }
                None => extra.wanted.add(key.into_owned(), ty),
            },
        }
    }

    /// The row of a parsed event: its first failure, a required column left empty, or a
    /// new field left without a column.
    pub(super) fn complete<'a>(
        &self,
        cells: Vec<Cell<'a>>,
        failure: Option<EncodeError>,
        unplanned: Option<EncodeError>,
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
        match unplanned {
            Some(error) => Err(error),
            None => Ok(cells),
        }
    }

    /// Checks one value without building anything.
    pub fn check(&self, value: Option<&[u8]>) -> Result<(), EncodeError> {
        self.parse(value, None, None, &mut RowExtra::default())
            .map(drop)
    }

    /// Encodes `values`; `ingestion_micros` fills the host's timestamp columns.
    pub fn encode<'a>(
        &self,
        values: impl IntoIterator<Item = Option<&'a [u8]>>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        self.encode_patched(values.into_iter().map(|v| (v, None)), ingestion_micros)
    }

    /// Encodes `values`, each with the fields of its patch (if any) in place of its own of
    /// the same names: the value is parsed once, and no patched text is made.
    pub fn encode_patched<'a>(
        &self,
        values: impl IntoIterator<Item = (Option<&'a [u8]>, Option<&'a Patch>)>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        self.encode_rows(values, ingestion_micros, |(value, patch), extra| {
            self.parse(value, patch, None, extra)
        })
    }

    /// Encodes `records`, each with the fields of its patch (if any) in place of its own,
    /// as [`Encoder::encode_patched`]; where the host already read a record's fields
    /// ([`super::index_fields`]), they are not read again.
    pub fn encode_records<'a>(
        &self,
        records: impl IntoIterator<Item = (&'a Record, Option<&'a Patch>)>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        self.encode_rows(records, ingestion_micros, |(record, patch), extra| {
            let spans = record.field_spans();
            self.parse(record.value.as_deref(), patch, spans, extra)
        })
    }

    /// Encodes `items`, each parsed into its row by `parse`.
    pub(super) fn encode_rows<'a, T>(
        &self,
        items: impl IntoIterator<Item = T>,
        ingestion_micros: i64,
        mut parse: impl FnMut(T, &mut RowExtra<'a>) -> Result<Vec<Cell<'a>>, EncodeError>,
    ) -> Result<Encoded, SchemaError> {
        let items = items.into_iter();
        let capacity = items.size_hint().0;
        let mut builders: Vec<ColumnBuilder> = self
            .columns
            .iter()
            .map(|c| ColumnBuilder::new(&c.shape, capacity))
            .collect();
        let mut rows = Vec::with_capacity(capacity);
        let mut errors = Vec::new();
        let mut dropped = BTreeMap::new();
        let mut wanted = Wanted::default();
        let mut extra = RowExtra::default();
        for (i, item) in items.enumerate() {
            extra.dropped.clear();
            extra.unplanned = None;
            let parsed = parse(item, &mut extra);
            if !extra.wanted.is_empty() && parsed.is_ok() {
                wanted.merge(std::mem::take(&mut extra.wanted));
                errors.push((i, schema_change()));
                continue;
            }
            extra.wanted = Wanted::default();
            match parsed {
                Ok(cells) => {
                    count_dropped(&mut dropped, &extra.dropped);
                    for ((builder, column), cell) in
                        builders.iter_mut().zip(&self.columns).zip(&cells)
                    {
                        match column.fill {
                            Fill::IngestionTime => builder.append(&Cell::Micros(ingestion_micros)),
                            Fill::Field => builder.append(cell),
                        }
                    }
                    extra.spare = cells;
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
            dropped,
            wanted,
        })
    }
}

fn schema_change() -> EncodeError {
    EncodeError {
        code: SCHEMA_CHANGE,
        message: "the table's schema must change first".into(),
        field: None,
    }
}

/// Adds one row's dropped fields to the batch's counts.
fn count_dropped(counts: &mut BTreeMap<String, u64>, row: &[Cow<'_, str>]) {
    for name in row {
        match counts.get_mut(name.as_ref()) {
            Some(n) => *n += 1,
            None => {
                counts.insert(name.to_string(), 1);
            }
        }
    }
}
