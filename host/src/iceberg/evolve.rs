//! Schema evolution: the schema a batch needs ([`plan`]), committed with the batch's data
//! in one snapshot ([`super::IcebergTable::commit`] with an [`Evolution`]).
//!
//! A plan adds new optional columns at the end, in name order, with field ids from the
//! table's last assigned id up (never reusing a dropped column's), and widens the types
//! Iceberg allows (`int` to `long`, `float` to `double`, decimal precision). It refuses a
//! column that would take the table past `max-columns` (nested fields counted), and a
//! name that cannot be a column (empty, with a `.`, or a partition field's name).
//!
//! iceberg-rust 0.10's `UpdateSchemaAction` adds and deletes columns but cannot change a
//! type, and it is the only action that changes a schema. So the transaction starts from
//! the table with its current schema replaced by the planned one plus a placeholder column
//! ([`base_for`]), and the action deletes the placeholder: its `AddSchema` update is then
//! exactly the planned schema, under a new schema id, with the requirement that the
//! table's current schema is still the one planned against. The catalog checks that
//! requirement with the append's, so the schema change and the rows land together or not
//! at all.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType,
    TableMetadata, Type,
};
use iceberg::table::Table;

use crate::encode::{Wanted, with_type};

#[path = "evolve_grow.rs"]
mod grow;

/// The name of the placeholder column of [`base_for`], deleted by the schema change.
pub const PLACEHOLDER: &str = "_sluice_schema_change";

/// A schema change a batch commits with its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Evolution {
    /// The schema id the change was planned against: the commit is refused
    /// ([`super::IcebergError::SchemaMoved`]) if the table's current schema is another.
    pub base_schema_id: i32,
    /// The new schema.
    pub schema: Schema,
    /// The columns added, for the log.
    pub added: Vec<String>,
    /// The columns widened, for the log.
    pub promoted: Vec<String>,
}

/// What a batch's schema change adds and widens, and what it refuses.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    /// The change, if anything changes.
    pub evolution: Option<Evolution>,
    /// New fields refused a column: by name, the code and the reason.
    pub refused: BTreeMap<String, (&'static str, String)>,
}

/// The schema `metadata`'s table needs for new columns `added` (types with placeholder
/// ids) and wider types `promoted`, with at most `max_columns` fields in all; `on_top` of
/// a change planned but not committed yet (held triggers), if there is one.
pub fn plan(
    metadata: &TableMetadata,
    on_top: Option<&Evolution>,
    wanted: &Wanted,
    max_columns: usize,
) -> Planned {
    let current = on_top.map_or(metadata.current_schema().as_ref(), |e| &e.schema);
    let base_schema_id = on_top.map_or(current.schema_id(), |e| e.base_schema_id);
    let mut planned = Planned::default();
    let mut fields: Vec<NestedFieldRef> = current.as_struct().fields().to_vec();
    let mut widened = widen(&mut fields, &wanted.promoted);
    let mut ids = Ids {
        next: metadata.last_column_id().max(current.highest_field_id()),
        count: count_fields(&fields),
        max: max_columns,
    };
    let (mut names, mut deeper) =
        grow::grow_columns(&mut fields, &wanted.grown, &mut ids, &mut planned);
    widened.append(&mut deeper);
    names.extend(add(
        metadata,
        current,
        &wanted.added,
        &mut ids,
        &mut fields,
        &mut planned,
    ));
    if names.is_empty() && widened.is_empty() {
        planned.evolution = on_top.cloned();
        return planned;
    }
    let change = Change {
        on_top,
        base_schema_id,
        added: names,
        promoted: widened,
    };
    change.finish(current, fields, &mut planned);
    planned
}

/// What a plan changes, before the schema is built.
struct Change<'a> {
    on_top: Option<&'a Evolution>,
    base_schema_id: i32,
    added: Vec<String>,
    promoted: Vec<String>,
}

impl Change<'_> {
    /// The evolution to schema `fields` (of `current`, changed), in `planned`; or, if the
    /// schema cannot be built, its new columns refused.
    fn finish(self, current: &Schema, fields: Vec<NestedFieldRef>, planned: &mut Planned) {
        let schema = Schema::builder()
            .with_schema_id(current.schema_id())
            .with_fields(fields)
            .with_identifier_field_ids(current.identifier_field_ids())
            .build();
        match schema {
            Ok(schema) => {
                let (mut added, mut promoted) = self
                    .on_top
                    .map(|e| (e.added.clone(), e.promoted.clone()))
                    .unwrap_or_default();
                added.extend(self.added);
                promoted.extend(self.promoted);
                planned.evolution = Some(Evolution {
                    base_schema_id: self.base_schema_id,
                    schema,
                    added,
                    promoted,
                })
            }
            Err(error) => {
                // Unreachable with the checks of `add`; the events are refused, not lost.
                for name in self.added {
                    let message = format!("`{name}` cannot become a column: {error}");
                    planned
                        .refused
                        .insert(name, ("invalid_column_name", message));
                }
            }
        }
    }
}

/// Widens the `fields` that `promoted` asks for where Iceberg allows; their names.
fn widen(fields: &mut [NestedFieldRef], promoted: &BTreeMap<String, PrimitiveType>) -> Vec<String> {
    let mut widened = Vec::new();
    for field in fields {
        if let (Some(to), Type::Primitive(from)) = (promoted.get(&field.name), &*field.field_type)
            && allowed(from, to)
        {
            *field = with_type(field, Type::Primitive(to.clone()));
            widened.push(field.name.clone());
        }
    }
    widened
}

/// Appends to `fields` the new columns of `added` that fit under `max_columns` and have
/// usable names, with fresh ids; the others go to `planned.refused`. Returns the names
/// added.
fn add(
    metadata: &TableMetadata,
    current: &Schema,
    added: &BTreeMap<String, Type>,
    ids: &mut Ids,
    fields: &mut Vec<NestedFieldRef>,
    planned: &mut Planned,
) -> Vec<String> {
    let reserved: HashSet<String> = metadata
        .partition_specs_iter()
        .flat_map(|spec| spec.fields().iter().map(|f| f.name.clone()))
        .collect();
    let mut names = Vec::new();
    for (name, ty) in added {
        let taken = names.iter().any(|n: &String| n.eq_ignore_ascii_case(name));
        if let Some(refusal) = bad_name(name, ty, &reserved, current).or_else(|| {
            taken.then(|| {
                let why = format!("`{name}` cannot become a column: another new column has that name but for its case");
                ("invalid_column_name", why)
            })
        }) {
            planned.refused.insert(name.clone(), refusal);
            continue;
        }
        if let Err(refusal) = ids.take(name, 1 + count_type(ty)) {
            planned.refused.insert(name.clone(), refusal);
            continue;
        }
        fields.push(assign_ids(name, ty, &mut ids.next));
        names.push(name.clone());
    }
    names
}

/// Field ids and the column count of a plan: the last id assigned, the fields the schema
/// has, and the cap on them.
pub(super) struct Ids {
    pub(super) next: i32,
    count: usize,
    max: usize,
}

impl Ids {
    /// Counts `n` more fields for `name`, unless they would pass the cap.
    pub(super) fn take(&mut self, name: &str, n: usize) -> Result<(), (&'static str, String)> {
        if self.count + n > self.max {
            let message = format!(
                "`{name}` would take the table past `[sink] max-columns` ({} columns, nested \
                 fields counted; it has {})",
                self.max, self.count
            );
            return Err(("too_many_columns", message));
        }
        self.count += n;
        Ok(())
    }
}

/// Why `name` cannot become a column, if it cannot.
fn bad_name(
    name: &str,
    ty: &Type,
    reserved: &HashSet<String>,
    current: &Schema,
) -> Option<(&'static str, String)> {
    let why = if name.is_empty()
        || name.contains('.')
        || nested_names(ty).any(|n| n.is_empty() || n.contains('.'))
    {
        "a column's name (and a nested field's) must not be empty or hold a `.`"
    } else if reserved.contains(name) || name == PLACEHOLDER {
        "a partition field has that name"
    } else if current
        .as_struct()
        .fields()
        .iter()
        .any(|f| f.name.eq_ignore_ascii_case(name))
    {
        "a column of that name but for its case exists (Spark and DuckDB would not tell them apart)"
    } else {
        return None;
    };
    Some((
        "invalid_column_name",
        format!("`{name}` cannot become a column: {why}"),
    ))
}

/// The names of the struct fields inside `ty`, at any depth.
fn nested_names(ty: &Type) -> Box<dyn Iterator<Item = &str> + '_> {
    match ty {
        Type::Primitive(_) => Box::new(std::iter::empty()),
        Type::Struct(s) => Box::new(
            s.fields()
                .iter()
                .flat_map(|f| std::iter::once(f.name.as_str()).chain(nested_names(&f.field_type))),
        ),
        Type::List(l) => nested_names(&l.element_field.field_type),
        Type::Map(m) => nested_names(&m.value_field.field_type),
    }
}

/// Whether Iceberg allows widening `from` to `to`.
fn allowed(from: &PrimitiveType, to: &PrimitiveType) -> bool {
    match (from, to) {
        (PrimitiveType::Int, PrimitiveType::Long) => true,
        (PrimitiveType::Float, PrimitiveType::Double) => true,
        (
            PrimitiveType::Decimal { precision, scale },
            PrimitiveType::Decimal {
                precision: p,
                scale: s,
            },
        ) => s == scale && p > precision && *p <= 38,
        _ => false,
    }
}

/// The fields under `fields`, at any depth (list elements, map keys and values count).
pub fn count_fields(fields: &[NestedFieldRef]) -> usize {
    fields.iter().map(|f| 1 + count_type(&f.field_type)).sum()
}

pub(super) fn count_type(ty: &Type) -> usize {
    match ty {
        Type::Primitive(_) => 0,
        Type::Struct(s) => count_fields(s.fields()),
        Type::List(l) => 1 + count_type(&l.element_field.field_type),
        Type::Map(m) => {
            2 + count_type(&m.key_field.field_type) + count_type(&m.value_field.field_type)
        }
    }
}

/// Optional field `name` of type `ty`, with ids after `next_id` (the field first, then
/// what it holds, depth first).
pub(super) fn assign_ids(name: &str, ty: &Type, next_id: &mut i32) -> NestedFieldRef {
    *next_id += 1;
    let id = *next_id;
    Arc::new(NestedField::optional(id, name, with_ids(ty, next_id)))
}

fn with_ids(ty: &Type, next_id: &mut i32) -> Type {
    match ty {
        Type::Primitive(_) => ty.clone(),
        Type::Struct(s) => Type::Struct(StructType::new(
            s.fields()
                .iter()
                .map(|f| assign_ids(&f.name, &f.field_type, next_id))
                .collect(),
        )),
        Type::List(l) => {
            *next_id += 1;
            let id = *next_id;
            let element = with_ids(&l.element_field.field_type, next_id);
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                id, element, false,
            ))))
        }
        Type::Map(m) => {
            *next_id += 1;
            let key_id = *next_id;
            *next_id += 1;
            let value_id = *next_id;
            let key = with_ids(&m.key_field.field_type, next_id);
            let value = with_ids(&m.value_field.field_type, next_id);
            Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(key_id, key)),
                Arc::new(NestedField::map_value_element(value_id, value, false)),
            ))
        }
    }
}

/// The table a schema-changing transaction starts from: `table` with its current schema
/// replaced by `evolution`'s plus the [`PLACEHOLDER`] column (same schema id), so that
/// deleting the placeholder makes exactly the planned schema (see the module's doc). Runs
/// inside a tokio runtime (the table's reads use it).
pub fn base_for(table: &Table, evolution: &Evolution) -> iceberg::Result<Table> {
    let metadata = table.metadata();
    let current_id = metadata.current_schema_id();
    let mut fields = evolution.schema.as_struct().fields().to_vec();
    let placeholder_id = evolution
        .schema
        .highest_field_id()
        .max(metadata.last_column_id())
        + 1;
    fields.push(Arc::new(NestedField::optional(
        placeholder_id,
        PLACEHOLDER,
        Type::Primitive(PrimitiveType::Boolean),
    )));
    let schema = Schema::builder()
        .with_schema_id(current_id)
        .with_fields(fields)
        .with_identifier_field_ids(evolution.schema.identifier_field_ids())
        .build()?;
    let json_error = |e: serde_json::Error| {
        iceberg::Error::new(
            iceberg::ErrorKind::Unexpected,
            format!("table metadata: {e}"),
        )
    };
    let mut json = serde_json::to_value(metadata).map_err(json_error)?;
    let schema_json = serde_json::to_value(&schema).map_err(json_error)?;
    if let Some(schemas) = json.get_mut("schemas").and_then(|s| s.as_array_mut()) {
        for s in schemas.iter_mut() {
            if s.get("schema-id").and_then(|id| id.as_i64()) == Some(i64::from(current_id)) {
                *s = schema_json.clone();
            }
        }
    }
    json["last-column-id"] = placeholder_id.into();
    let base: TableMetadata = serde_json::from_value(json).map_err(json_error)?;
    // Called inside the catalog's tokio runtime (see `try_commit`).
    let mut builder = Table::builder()
        .runtime(iceberg::Runtime::try_current()?)
        .metadata(base)
        .identifier(table.identifier().clone())
        .file_io(table.file_io().clone());
    if let Some(location) = table.metadata_location() {
        builder = builder.metadata_location(location);
    }
    builder.build()
}

#[cfg(test)]
#[path = "evolve_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "evolve_props.rs"]
mod props;
