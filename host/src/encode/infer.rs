//! Schema evolution's half in the encoder: the Iceberg type of a field the table lacks,
//! inferred from its JSON value, and the types a batch asks its table to grow by
//! ([`Wanted`]).
//!
//! A string is a `string` (timestamps too, the value's text kept as it came, unless
//! `[sink] infer-timestamps` makes them `timestamptz` or `timestamp`), an
//! integer a `long`, any other number a `double`, `true`/`false` a `boolean`, an object a
//! `struct` of its fields and an array a `list` of its elements' type. Null, an empty
//! object and an empty array say nothing about a type ([`Inferred::Null`],
//! [`Inferred::Empty`]); neither does a field of an object or an element of an array
//! that does: such fields are left out of the struct, and elements are typed by the
//! others. Types meet with [`unify`]: a `long` and a `double` make a `double`, two
//! structs the union of their fields; any other pair keeps the first, and values of the
//! second then do not fit (`type_mismatch`). Field ids are placeholders (0) until the
//! table's schema change assigns them.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, StructType, Type,
};
use serde_json::Value;

/// Evolution's settings: how deep a new column may nest, and which new fields were refused
/// a column (by name, with the code their events are dead-lettered with).
#[derive(Debug, Clone, Default)]
pub struct Evolving {
    /// The deepest a new column's type may nest (a struct of primitives is 1).
    pub max_depth: usize,
    /// Whether the schema is final for this batch: a field still without a column is
    /// refused, not asked for.
    pub frozen: bool,
    /// Fields refused a column, with the code and the reason.
    pub refused: BTreeMap<String, (&'static str, String)>,
    /// Whether a new field's timestamp strings make it a `timestamptz` or `timestamp`
    /// column rather than a `string` one.
    pub timestamps: bool,
}

/// What a JSON value says about the type of a new column.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Inferred {
    /// `null`: nothing to store, nothing to infer.
    Null,
    /// An empty object or array (or one of nulls only): no type can be inferred, so the
    /// field cannot become a column yet; it is dropped and counted.
    Empty,
    /// Nested deeper than the cap.
    TooDeep,
    /// The type.
    Type(Type),
}

/// The type of JSON text `raw` (a valid JSON value), nested at most `max_depth` deep (a
/// primitive is depth 0, a struct or list of primitives depth 1); strings are strings.
#[cfg(test)]
pub(super) fn infer(raw: &str, max_depth: usize) -> Inferred {
    infer_with(raw, max_depth, false)
}

/// [`infer`], with `timestamps`: a string that is an RFC 3339 timestamp with a zone is a
/// `timestamptz`, one without a zone (`T` or space between date and time) a `timestamp`.
pub(super) fn infer_with(raw: &str, max_depth: usize, timestamps: bool) -> Inferred {
    match serde_json::from_str::<Value>(raw) {
        Ok(value) => Infer { timestamps }.value(&value, max_depth),
        Err(_) => Inferred::Empty,
    }
}

/// Inference's settings.
struct Infer {
    timestamps: bool,
}

impl Infer {
    /// The type of `value`, nested at most `depth_left` deep.
    fn value(&self, value: &Value, depth_left: usize) -> Inferred {
        let nested = matches!(value, Value::Object(_) | Value::Array(_));
        if nested && depth_left == 0 {
            return Inferred::TooDeep;
        }
        match value {
            Value::Null => Inferred::Null,
            Value::Bool(_) => Inferred::Type(Type::Primitive(PrimitiveType::Boolean)),
            Value::Number(n) if n.is_i64() => Inferred::Type(Type::Primitive(PrimitiveType::Long)),
            Value::Number(_) => Inferred::Type(Type::Primitive(PrimitiveType::Double)),
            Value::String(text) => Inferred::Type(Type::Primitive(self.string(text))),
            Value::Object(map) => {
                let mut fields = Vec::new();
                for (name, v) in map {
                    match self.value(v, depth_left - 1) {
                        Inferred::TooDeep => return Inferred::TooDeep,
                        Inferred::Type(t) => fields.push(optional(name, t)),
                        Inferred::Null | Inferred::Empty => {}
                    }
                }
                if fields.is_empty() {
                    return Inferred::Empty;
                }
                Inferred::Type(Type::Struct(StructType::new(fields)))
            }
            Value::Array(items) => {
                let mut element: Option<Type> = None;
                for item in items {
                    match self.value(item, depth_left - 1) {
                        Inferred::TooDeep => return Inferred::TooDeep,
                        Inferred::Type(t) => {
                            element = Some(match element {
                                None => t,
                                Some(e) => unify(&e, &t),
                            })
                        }
                        Inferred::Null | Inferred::Empty => {}
                    }
                }
                match element {
                    Some(t) => Inferred::Type(list_of(t)),
                    None => Inferred::Empty,
                }
            }
        }
    }

    /// The type of a string value.
    fn string(&self, text: &str) -> PrimitiveType {
        let maybe = self.timestamps && text.len() >= 19 && text.as_bytes()[4] == b'-';
        if maybe && chrono::DateTime::parse_from_rfc3339(text).is_ok() {
            PrimitiveType::Timestamptz
        } else if maybe
            && (chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
                || chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").is_ok())
        {
            PrimitiveType::Timestamp
        } else {
            PrimitiveType::String
        }
    }
}

fn optional(name: &str, ty: Type) -> NestedFieldRef {
    Arc::new(NestedField::optional(0, name, ty))
}

fn list_of(element: Type) -> Type {
    Type::List(ListType::new(Arc::new(NestedField::list_element(
        0, element, false,
    ))))
}

/// The type both `a` and `b` fit: a `double` for a `long` and a `double`, a `string` for a
/// timestamp and another string, the union of two structs' fields (each unified), a list of the unified elements; otherwise `a`.
pub(super) fn unify(a: &Type, b: &Type) -> Type {
    match (a, b) {
        (Type::Primitive(PrimitiveType::Long), Type::Primitive(PrimitiveType::Double))
        | (Type::Primitive(PrimitiveType::Double), Type::Primitive(PrimitiveType::Long)) => {
            Type::Primitive(PrimitiveType::Double)
        }
        // A timestamp and another string, or timestamps with and without a zone: both fit
        // a string.
        (Type::Primitive(x), Type::Primitive(y)) if x != y && texts(x) && texts(y) => {
            Type::Primitive(PrimitiveType::String)
        }
        (Type::Struct(x), Type::Struct(y)) => {
            let mut fields: Vec<NestedFieldRef> = x.fields().to_vec();
            for f in y.fields() {
                match fields.iter_mut().find(|g| g.name == f.name) {
                    Some(g) => *g = optional(&f.name, unify(&g.field_type, &f.field_type)),
                    None => fields.push(f.clone()),
                }
            }
            Type::Struct(StructType::new(fields))
        }
        (Type::List(x), Type::List(y)) => list_of(unify(
            &x.element_field.field_type,
            &y.element_field.field_type,
        )),
        _ => a.clone(),
    }
}

/// Whether values inferred as `ty` are JSON strings.
fn texts(ty: &PrimitiveType) -> bool {
    matches!(
        ty,
        PrimitiveType::String | PrimitiveType::Timestamp | PrimitiveType::Timestamptz
    )
}

/// What the rows of a batch ask the table's schema to become: new top-level columns,
/// wider types for existing ones, and nested columns grown inside.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wanted {
    /// New columns, by name, with the type their values unify to.
    pub added: BTreeMap<String, Type>,
    /// Existing columns whose values outgrew their type, by name, with the wider type.
    pub promoted: BTreeMap<String, PrimitiveType>,
    /// Existing struct, list and map columns whose values need more inside (struct fields,
    /// wider primitives; see [`super::grow`]), by name: the column's type grown, with the
    /// placeholder id 0 on what is new.
    pub grown: BTreeMap<String, Type>,
}

impl Wanted {
    /// Nothing is asked.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.promoted.is_empty() && self.grown.is_empty()
    }

    /// Adds a later part's wants: types of the same column unify, promotions widen,
    /// growths of one column grow each other.
    pub fn merge(&mut self, later: Wanted) {
        for (name, ty) in later.added {
            self.add(name, ty);
        }
        for (name, ty) in later.promoted {
            self.promote(name, ty);
        }
        for (name, ty) in later.grown {
            self.grow(name, ty);
        }
    }

    pub(super) fn grow(&mut self, name: String, ty: Type) {
        match self.grown.get_mut(&name) {
            Some(t) => *t = grow(t, &ty),
            None => {
                self.grown.insert(name, ty);
            }
        }
    }

    pub(super) fn add(&mut self, name: String, ty: Type) {
        match self.added.get_mut(&name) {
            Some(t) => *t = unify(t, &ty),
            None => {
                self.added.insert(name, ty);
            }
        }
    }

    pub(super) fn promote(&mut self, name: String, ty: PrimitiveType) {
        match self.promoted.get_mut(&name) {
            Some(PrimitiveType::Decimal { precision, .. }) => {
                if let PrimitiveType::Decimal { precision: p, .. } = ty {
                    *precision = (*precision).max(p);
                }
            }
            Some(_) => {}
            None => {
                self.promoted.insert(name, ty);
            }
        }
    }
}

/// The wider type a value that does not fit a column of type `kind` asks for, if Iceberg
/// allows the promotion and the value fits it: an `int` becomes a `long`, a `float` a
/// `double`, a decimal gains precision (up to 38, the scale unchanged).
pub(super) fn promotion(kind: &PrimitiveType, raw: &str) -> Option<PrimitiveType> {
    match kind {
        PrimitiveType::Int => raw.parse::<i64>().ok().map(|_| PrimitiveType::Long),
        PrimitiveType::Float => raw
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|_| PrimitiveType::Double),
        PrimitiveType::Decimal { precision, scale } => {
            let text = if raw.starts_with('"') {
                serde_json::from_str::<String>(raw).ok()?
            } else {
                raw.to_string()
            };
            let unscaled = crate::decimal::parse_decimal(&text, 38, *scale).ok()?;
            let digits = unscaled
                .unsigned_abs()
                .checked_ilog10()
                .map_or(1, |d| d + 1);
            (digits > *precision).then_some(PrimitiveType::Decimal {
                precision: digits,
                scale: *scale,
            })
        }
        _ => None,
    }
}

/// Column type `base` grown to hold values of type `value` (see [`super::grow`]): fields
/// it has keep their ids and grow in turn, fields it lacks are appended (id 0), an `int`
/// meets a `long` as a `long`, a `float` a `double` and a decimal a more precise one of
/// its scale; any other pair keeps `base`.
pub fn grow(base: &Type, value: &Type) -> Type {
    match (base, value) {
        (Type::Primitive(PrimitiveType::Int), Type::Primitive(PrimitiveType::Long)) => {
            Type::Primitive(PrimitiveType::Long)
        }
        (Type::Primitive(PrimitiveType::Float), Type::Primitive(PrimitiveType::Double)) => {
            Type::Primitive(PrimitiveType::Double)
        }
        (
            Type::Primitive(PrimitiveType::Decimal { precision, scale }),
            Type::Primitive(PrimitiveType::Decimal {
                precision: wider,
                scale: same,
            }),
        ) if same == scale && wider > precision => value.clone(),
        (Type::Struct(b), Type::Struct(v)) => {
            let mut fields: Vec<NestedFieldRef> = b.fields().to_vec();
            for f in v.fields() {
                match fields.iter_mut().find(|g| g.name == f.name) {
                    Some(g) => *g = with_type(g, grown_field(g, &f.field_type)),
                    None => fields.push(f.clone()),
                }
            }
            Type::Struct(StructType::new(fields))
        }
        (Type::List(b), Type::List(v)) => {
            let element = &b.element_field;
            let ty = grown_field(element, &v.element_field.field_type);
            Type::List(ListType::new(with_type(element, ty)))
        }
        // A map is a JSON object: each of its fields is a value of the map.
        (Type::Map(b), Type::Struct(v)) => {
            let value = &b.value_field;
            let ty = v
                .fields()
                .iter()
                .fold((*value.field_type).clone(), |ty, f| {
                    grow_or_unify(value.id, &ty, &f.field_type)
                });
            Type::Map(MapType::new(b.key_field.clone(), with_type(value, ty)))
        }
        _ => base.clone(),
    }
}

/// `field`'s type grown by `value`: new fields (id 0, asked for by another value of the
/// batch) unify, as new columns' types do.
fn grown_field(field: &NestedFieldRef, value: &Type) -> Type {
    grow_or_unify(field.id, &field.field_type, value)
}

fn grow_or_unify(id: i32, ty: &Type, value: &Type) -> Type {
    if id == 0 {
        unify(ty, value)
    } else {
        grow(ty, value)
    }
}

/// `field` with type `ty` (id, name, optionality and doc kept).
pub fn with_type(field: &NestedFieldRef, ty: Type) -> NestedFieldRef {
    let mut f = (**field).clone();
    f.field_type = Box::new(ty);
    Arc::new(f)
}

#[cfg(test)]
#[path = "infer_tests.rs"]
mod tests;
