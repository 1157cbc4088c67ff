//! Protobuf writer schemas: a `.proto` file (and the files it imports) compiled in
//! process with protox, the message a record names by its message indexes, the JSON that
//! plugins see, and the Iceberg type of each field.
//!
//! | Protobuf | Iceberg |
//! |---|---|
//! | `double`, `float`, `bool`, `string` | `double`, `float`, `boolean`, `string` |
//! | `int32`, `sint32`, `sfixed32` | `int` |
//! | `int64`, `sint64`, `sfixed64`, `uint32`, `fixed32`, `uint64`, `fixed64` | `long` |
//! | enum | `string` (the value's name) |
//! | `bytes`, `BytesValue` | `binary` |
//! | `google.protobuf.Timestamp` | `timestamptz` |
//! | wrappers (`Int64Value`, `StringValue`, …) | their primitive |
//! | message | `struct` |
//! | `repeated` | `list` |
//! | `map<K, V>` | `map` |
//!
//! Columns are optional. A field without presence that is not set holds its default
//! (proto3: `0`, `""`, the first enum value), as Kafka Connect's converter writes it; an
//! unset message, wrapper or `optional` field is null. `google.protobuf.Any`, `Struct`,
//! `Value` and `Duration` have no column yet: a table made from the schema
//! leaves them out, and their values are counted as dropped.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, StructType, Type,
};
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, SerializeOptions,
};
use protox::file::{
    ChainFileResolver, File, FileResolver, GoogleFileResolver, IncludeFileResolver,
};

use super::FormatError;
use super::read::Reader;

/// The deepest nesting followed (a message that contains itself goes no further).
const MAX_DEPTH: usize = 32;
/// The name the main file of a registered schema is compiled under.
const MAIN: &str = "sluice-writer-schema.proto";

/// A compiled `.proto` file: its messages, by the indexes records name them with.
#[derive(Debug, Clone)]
pub struct ProtoSchema {
    messages: Vec<MessageDescriptor>,
}

/// `.proto` sources by the names they are imported by.
struct Sources(HashMap<String, String>);

impl FileResolver for Sources {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(source) => File::from_source(name, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

impl ProtoSchema {
    /// Compiles `source` with its imports `imports` (name, source); the well-known types
    /// (`google/protobuf/*.proto`) need not be among them.
    pub fn compile(source: &str, imports: Vec<(String, String)>) -> Result<Self, String> {
        let mut files: HashMap<String, String> = imports.into_iter().collect();
        files.insert(MAIN.into(), source.into());
        Self::compile_with(Sources(files), None)
    }

    /// Compiles the file `path`, whose imports are found in its folder (and the well-known
    /// types).
    pub fn compile_file(path: &Path) -> Result<Self, String> {
        let source = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let folder = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let main = Sources(HashMap::from([(MAIN.to_string(), source)]));
        Self::compile_with(main, Some(IncludeFileResolver::new(folder)))
    }

    fn compile_with(main: Sources, folder: Option<IncludeFileResolver>) -> Result<Self, String> {
        let mut resolver = ChainFileResolver::new();
        resolver.add(main);
        if let Some(folder) = folder {
            resolver.add(folder);
        }
        resolver.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.include_imports(true);
        compiler.open_file(MAIN).map_err(|e| e.to_string())?;
        let pool: DescriptorPool = compiler.descriptor_pool();
        let file = pool
            .get_file_by_name(MAIN)
            .ok_or("the compiled schema has no main file")?;
        let messages: Vec<MessageDescriptor> = file.messages().collect();
        if messages.is_empty() {
            return Err("the schema defines no message".into());
        }
        Ok(ProtoSchema { messages })
    }

    /// The message at `indexes` (the first top-level message is `[0]`, its first nested
    /// message `[0, 0]`).
    pub fn message(&self, indexes: &[i64]) -> Option<MessageDescriptor> {
        let (&first, rest) = indexes.split_first()?;
        let mut message = self.messages.get(usize::try_from(first).ok()?)?.clone();
        for &i in rest {
            let child = message.child_messages().nth(usize::try_from(i).ok()?)?;
            message = child;
        }
        Some(message)
    }

    /// The message named `name` (full name, or relative to the file's package), or the
    /// first one.
    pub fn named(&self, name: Option<&str>) -> Result<MessageDescriptor, String> {
        let Some(name) = name else {
            return Ok(self.messages[0].clone());
        };
        let pool = self.messages[0].parent_pool();
        let package = self.messages[0].package_name();
        let full = format!("{package}.{name}");
        pool.get_message_by_name(name)
            .or_else(|| pool.get_message_by_name(&full))
            .ok_or_else(|| format!("the schema has no message `{name}`"))
    }
}

/// The message indexes after the schema id (zig-zag varints: their count, then each; a
/// lone `0` stands for `[0]`), and the payload after them.
pub fn unindex(payload: &[u8]) -> Result<(Vec<i64>, &[u8]), FormatError> {
    let mut r = Reader::new(payload);
    let bad = |e: super::read::ReadError| FormatError::NotFramed(format!("message indexes: {e}"));
    let count = r.long().map_err(bad)?;
    let indexes = match count {
        0 => vec![0],
        n if (1..=MAX_DEPTH as i64).contains(&n) => (0..n)
            .map(|_| r.long())
            .collect::<Result<_, _>>()
            .map_err(bad)?,
        n => return Err(FormatError::NotFramed(format!("{n} message indexes"))),
    };
    Ok((indexes, r.rest()))
}

/// Decodes `payload` as a `message`.
pub fn decode(message: &MessageDescriptor, payload: &[u8]) -> Result<DynamicMessage, FormatError> {
    DynamicMessage::decode(message.clone(), payload)
        .map_err(|e| FormatError::Undecodable(e.to_string()))
}

/// The JSON object plugins see: field names as in the `.proto`, every field (unset ones
/// with their defaults), 64-bit integers as numbers, enums by name, timestamps as RFC 3339
/// text, wrappers as their values, bytes as base64.
pub fn to_json(message: &MessageDescriptor, payload: &[u8]) -> Result<Vec<u8>, FormatError> {
    let decoded = decode(message, payload)?;
    let options = SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let mut out = Vec::with_capacity(payload.len() * 2);
    let mut serializer = serde_json::Serializer::new(&mut out);
    decoded
        .serialize_with_options(&mut serializer, &options)
        .map_err(|e| FormatError::Undecodable(e.to_string()))?;
    Ok(out)
}

/// The message `message` made from a JSON object by protobuf's JSON mapping (what
/// `sluice produce --format protobuf` sends), encoded; `Err` says why the object does not
/// map (a field of the wrong type, an unknown field, a bad timestamp).
pub fn from_json(message: &MessageDescriptor, json: &str) -> Result<Vec<u8>, String> {
    use prost::Message;
    let mut de = serde_json::Deserializer::from_str(json);
    let decoded =
        DynamicMessage::deserialize(message.clone(), &mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(decoded.encode_to_vec())
}

/// The well-known message types read as a primitive: `Timestamp` and the wrappers.
pub fn well_known(message: &MessageDescriptor) -> Option<PrimitiveType> {
    Some(match message.full_name() {
        "google.protobuf.Timestamp" => PrimitiveType::Timestamptz,
        "google.protobuf.DoubleValue" => PrimitiveType::Double,
        "google.protobuf.FloatValue" => PrimitiveType::Float,
        "google.protobuf.Int64Value"
        | "google.protobuf.UInt64Value"
        | "google.protobuf.UInt32Value" => PrimitiveType::Long,
        "google.protobuf.Int32Value" => PrimitiveType::Int,
        "google.protobuf.BoolValue" => PrimitiveType::Boolean,
        "google.protobuf.StringValue" => PrimitiveType::String,
        "google.protobuf.BytesValue" => PrimitiveType::Binary,
        _ => return None,
    })
}

/// The fields of `message` as the columns of a new table (ids 1..=n at the top, nested
/// ids after); fields without a type are left out, named with the reason.
pub fn columns(message: &MessageDescriptor) -> (Vec<NestedFieldRef>, Vec<String>) {
    let mut next_id = message.fields().len() as i32;
    let mut ids = || {
        next_id += 1;
        next_id
    };
    let mut fields = Vec::new();
    let mut skipped = Vec::new();
    for field in message.fields() {
        match field_type(&field, &mut ids) {
            Ok(ty) => {
                let id = fields.len() as i32 + 1;
                fields.push(Arc::new(NestedField::optional(id, field.name(), ty)));
            }
            Err(reason) => skipped.push(format!("{}: {reason}", field.name())),
        }
    }
    (fields, skipped)
}

/// The Iceberg type of `field`, its nested fields numbered by `ids`.
pub fn field_type(field: &FieldDescriptor, ids: &mut dyn FnMut() -> i32) -> Result<Type, String> {
    type_of(field, ids, 0)
}

fn type_of(
    field: &FieldDescriptor,
    ids: &mut dyn FnMut() -> i32,
    depth: usize,
) -> Result<Type, String> {
    if depth > MAX_DEPTH {
        return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
    }
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return Err("a map without its entry type".into());
        };
        let (key_id, value_id) = (ids(), ids());
        let key = kind_type(&entry.map_entry_key_field().kind(), ids, depth + 1)?;
        let value = kind_type(&entry.map_entry_value_field().kind(), ids, depth + 1)?;
        return Ok(Type::Map(MapType::optional(key_id, key, value_id, value)));
    }
    let element = kind_type(&field.kind(), ids, depth + 1)?;
    if field.is_list() {
        let id = ids();
        let element = NestedField::list_element(id, element, false);
        return Ok(Type::List(ListType::new(Arc::new(element))));
    }
    Ok(element)
}

fn kind_type(kind: &Kind, ids: &mut dyn FnMut() -> i32, depth: usize) -> Result<Type, String> {
    let p = |p: PrimitiveType| Ok(Type::Primitive(p));
    match kind {
        Kind::Double => p(PrimitiveType::Double),
        Kind::Float => p(PrimitiveType::Float),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => p(PrimitiveType::Int),
        Kind::Int64
        | Kind::Sint64
        | Kind::Sfixed64
        | Kind::Uint32
        | Kind::Fixed32
        | Kind::Uint64
        | Kind::Fixed64 => p(PrimitiveType::Long),
        Kind::Bool => p(PrimitiveType::Boolean),
        Kind::String | Kind::Enum(_) => p(PrimitiveType::String),
        Kind::Bytes => p(PrimitiveType::Binary),
        Kind::Message(m) => {
            if let Some(primitive) = well_known(m) {
                return p(primitive);
            }
            if m.full_name().starts_with("google.protobuf.") {
                return Err(format!("{} has no column yet", m.full_name()));
            }
            let mut fields = Vec::new();
            for f in m.fields() {
                let id = ids();
                let ty = type_of(&f, ids, depth + 1).map_err(|e| format!("{}: {e}", f.name()))?;
                fields.push(Arc::new(NestedField::optional(id, f.name(), ty)));
            }
            Ok(Type::Struct(StructType::new(fields)))
        }
    }
}
