//! A lookup table from an Iceberg table in the sink's catalog: the table scanned at a
//! snapshot, each row a JSON object keyed by the text of its key column (rows whose key
//! is null are skipped and counted). A refresh scans again when the table's current
//! snapshot changed; a replay scans at the recorded snapshot.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use iceberg::TableIdent;
use serde_json::{Map, Value};

use super::load::{Loader, LookupError, check_size};
use super::{Table, Version};
use crate::iceberg::IcebergCatalog;
use crate::iceberg::read::scan_all;

/// The loader of a lookup table from an Iceberg table.
pub struct IcebergLoader {
    name: String,
    ident: TableIdent,
    key: String,
    max: u64,
    catalog: IcebergCatalog,
    /// Rows skipped since the process started: their key was null.
    skipped: u64,
}

impl std::fmt::Debug for IcebergLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergLoader")
            .field("name", &self.name)
            .field("table", &self.ident)
            .finish_non_exhaustive()
    }
}

impl IcebergLoader {
    /// A loader of the lookup table `name` from `table` (`namespace.table`) in `catalog`,
    /// keyed by `key`, capped at `max` bytes.
    pub fn new(
        name: &str,
        table: &str,
        key: &str,
        catalog: &IcebergCatalog,
        max: u64,
    ) -> Result<Self, LookupError> {
        let ident =
            TableIdent::from_strs(table.split('.')).map_err(|error| LookupError::Invalid {
                table: name.to_string(),
                message: format!("table `{table}`: {error}"),
            })?;
        Ok(IcebergLoader {
            name: name.to_string(),
            ident,
            key: key.to_string(),
            max,
            catalog: catalog.clone(),
            skipped: 0,
        })
    }

    fn failed(&self, what: String) -> impl FnOnce(iceberg::Error) -> LookupError + '_ {
        move |error| LookupError::source(&self.name, what, error)
    }

    /// The table as the catalog has it now.
    fn load(&self) -> Result<iceberg::table::Table, LookupError> {
        let loading = self.catalog.catalog().load_table(&self.ident);
        self.catalog
            .block_on(loading)
            .map_err(self.failed(format!("loading table {}", self.ident)))
    }

    /// The lookup table of `source` at `snapshot` (`None`: empty).
    fn scan(
        &mut self,
        source: &iceberg::table::Table,
        snapshot: Option<i64>,
    ) -> Result<Table, LookupError> {
        let mut table = Table::new(Version::Snapshot { id: snapshot });
        let Some(id) = snapshot else {
            return Ok(table);
        };
        let batches: Vec<RecordBatch> = self
            .catalog
            .block_on(scan_all(source, Some(id)))
            .map_err(self.failed(format!("scanning {} at snapshot {id}", self.ident)))?;
        let mut skipped = 0;
        for batch in &batches {
            skipped += self.add_rows(&mut table, batch)?;
        }
        if skipped > 0 {
            self.skipped += skipped;
            tracing::warn!(lookup = %self.name, table = %self.ident, skipped, total = self.skipped, "skipped lookup rows whose key is null");
        }
        Ok(table)
    }

    /// Adds the rows of `batch` to `table`; returns how many were skipped (null key).
    fn add_rows(&self, table: &mut Table, batch: &RecordBatch) -> Result<u64, LookupError> {
        let invalid = |message: String| LookupError::Invalid {
            table: self.name.clone(),
            message,
        };
        let schema = batch.schema();
        let key = schema.index_of(&self.key).map_err(|_| {
            invalid(format!(
                "table {} has no key column `{}`",
                self.ident, self.key
            ))
        })?;
        let options = FormatOptions::default();
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("cannot show a column: {e}")))?;
        let mut skipped = 0;
        for row in 0..batch.num_rows() {
            if batch.column(key).is_null(row) {
                skipped += 1;
                continue;
            }
            let mut object = Map::new();
            for (i, field) in schema.fields().iter().enumerate() {
                let value = match batch.column(i).is_null(row) {
                    true => Value::Null,
                    false => json_value(field.data_type(), formatters[i].value(row).to_string()),
                };
                object.insert(field.name().clone(), value);
            }
            let key = formatters[key].value(row).to_string();
            let value = serde_json::to_vec(&object).map_err(|e| invalid(e.to_string()))?;
            table.insert(key.as_bytes(), &value);
            check_size(&self.name, table, self.max)?;
        }
        Ok(skipped)
    }
}

/// A column's value as JSON: numbers and booleans as themselves, the rest as their text
/// (timestamps in RFC 3339, decimals with their scale).
fn json_value(data_type: &DataType, text: String) -> Value {
    if data_type.is_integer() || data_type.is_floating() || *data_type == DataType::Boolean {
        return serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    Value::String(text)
}

impl Loader for IcebergLoader {
    fn empty(&self) -> Table {
        Table::new(Version::Snapshot { id: None })
    }

    fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
        let source = self.load()?;
        let current = source.metadata().current_snapshot_id();
        if *table.version() == (Version::Snapshot { id: current }) {
            return Ok(false);
        }
        *table = Arc::new(self.scan(&source, current)?);
        Ok(true)
    }

    fn at(&mut self, version: &Version) -> Result<Table, LookupError> {
        let Version::Snapshot { id } = version else {
            return Err(LookupError::Invalid {
                table: self.name.clone(),
                message: format!(
                    "its source is now table {}, which cannot be read at {version:?}",
                    self.ident
                ),
            });
        };
        let source = self.load()?;
        self.scan(&source, *id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_booleans_stay_themselves_and_the_rest_is_text() {
        assert_eq!(json_value(&DataType::Int64, "42".into()), Value::from(42));
        assert_eq!(
            json_value(&DataType::Float64, "1.5".into()),
            Value::from(1.5)
        );
        assert_eq!(
            json_value(&DataType::Float64, "NaN".into()),
            Value::from("NaN")
        );
        assert_eq!(
            json_value(&DataType::Boolean, "true".into()),
            Value::from(true)
        );
        let decimal = DataType::Decimal128(10, 2);
        assert_eq!(json_value(&decimal, "12.50".into()), Value::from("12.50"));
        assert_eq!(json_value(&DataType::Utf8, "7".into()), Value::from("7"));
    }
}
