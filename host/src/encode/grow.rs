//! Evolution inside a nested column: a struct that gains fields and a primitive inside one
//! that widens, asked for by a value that does not fit the column as it is.
//!
//! The value's type is inferred ([`super::infer`]) and grown onto the column's
//! ([`grow`]): fields
//! the column has keep their ids and grow in turn, fields it lacks are appended with the
//! placeholder id 0 (the table's schema change numbers them), an `int` meets a `long` as
//! a `long` and a `float` a `double`; a decimal the value outgrows gains precision, as a
//! top-level one does. Any other pair keeps the column's type. The grown
//! type is asked for only if the value fits it; otherwise the value's error is the fit
//! against the grown type, which names the real misfit (a string for a `long` inside, say)
//! rather than the first unknown field.

use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, StructType, Type};
use serde_json::Value;

use super::EncodeError;
use super::columns::Column;
use super::infer::{self, Evolving, Inferred, grow, with_type};
use super::nested;

/// What a value that does not fit nested `field` asks for: `Ok(Some(type))` the grown
/// column type it fits, `Ok(None)` nothing (no growth helps: the column's own error
/// stands), `Err` the value's error against the grown type, or why it cannot grow.
pub(super) fn grown(
    field: &NestedFieldRef,
    raw: &str,
    evolving: &Evolving,
) -> Result<Option<Type>, EncodeError> {
    let max_depth = evolving.max_depth;
    let value = match infer::infer_with(raw, max_depth, evolving.timestamps) {
        Inferred::Type(ty) => ty,
        Inferred::TooDeep => {
            return Err(EncodeError {
                code: "nested_too_deep",
                message: format!(
                    "`{}` nests deeper than `[sink] max-nesting-depth` ({max_depth}), so its new fields cannot become columns",
                    field.name
                ),
                field: Some(field.name.clone()),
            });
        }
        Inferred::Null | Inferred::Empty => return Ok(None),
    };
    let mut ty = grow(&field.field_type, &value);
    // Each round widens one decimal the value outgrows; a value has few.
    for _ in 0..MAX_ROUNDS {
        let error = match column_of(field, &ty)?.cell(raw) {
            Ok(_) => return Ok((ty != *field.field_type).then_some(ty)),
            Err(error) => error,
        };
        match wider_decimal(&ty, &error, &field.name, raw) {
            Some(wider) => ty = wider,
            None if ty == *field.field_type => return Ok(None),
            None => return Err(error),
        }
    }
    Ok(None)
}

/// Decimals widened in one value at most this many times.
const MAX_ROUNDS: usize = 8;

/// The column `field` would be with type `ty`.
fn column_of(field: &NestedFieldRef, ty: &Type) -> Result<Column, EncodeError> {
    let wider = Arc::new(NestedField::optional(field.id, &field.name, ty.clone()));
    nested::column(&wider, &[]).map_err(|e| EncodeError {
        code: "type_mismatch",
        message: format!("`{}` cannot grow to hold the value: {e}", field.name),
        field: Some(field.name.clone()),
    })
}

/// `ty` with the decimal that `error` (a value of column `column`, JSON `raw`) does not
/// fit widened to the precision the value needs, if Iceberg allows it (see
/// [`infer::promotion`]).
fn wider_decimal(ty: &Type, error: &EncodeError, column: &str, raw: &str) -> Option<Type> {
    if error.code != "invalid_decimal" {
        return None;
    }
    let path = error.field.as_deref()?.strip_prefix(column)?;
    let value: Value = serde_json::from_str(raw).ok()?;
    widen_at(ty, &value, path)
}

/// `ty` with the decimal at `path` (`.name`, `[i]`, `["key"]` steps) inside `value`
/// widened.
fn widen_at(ty: &Type, value: &Value, path: &str) -> Option<Type> {
    if path.is_empty() {
        let Type::Primitive(kind) = ty else {
            return None;
        };
        return infer::promotion(kind, &value.to_string()).map(Type::Primitive);
    }
    let (step, rest) = first_step(path)?;
    match (ty, step) {
        (Type::Struct(s), Step::Name(name)) => {
            let fields = s.fields().iter().map(|f| {
                if f.name != name {
                    return Some(f.clone());
                }
                let inner = widen_at(&f.field_type, value.get(name)?, rest)?;
                Some(with_type(f, inner))
            });
            Some(Type::Struct(StructType::new(
                fields.collect::<Option<_>>()?,
            )))
        }
        (Type::List(l), Step::Index(i)) => {
            let inner = widen_at(&l.element_field.field_type, value.get(i)?, rest)?;
            Some(Type::List(ListType::new(with_type(
                &l.element_field,
                inner,
            ))))
        }
        (Type::Map(m), Step::Key(key)) => {
            let inner = widen_at(&m.value_field.field_type, value.get(&key)?, rest)?;
            let value_field = with_type(&m.value_field, inner);
            Some(Type::Map(MapType::new(m.key_field.clone(), value_field)))
        }
        _ => None,
    }
}

/// One step of a field path into a nested value.
enum Step<'a> {
    Name(&'a str),
    Index(usize),
    Key(String),
}

/// The first step of `path` and the rest.
fn first_step(path: &str) -> Option<(Step<'_>, &str)> {
    if let Some(rest) = path.strip_prefix('.') {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        return Some((Step::Name(&rest[..end]), &rest[end..]));
    }
    let rest = path.strip_prefix('[')?;
    if rest.starts_with('"') {
        let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let key = de.next()?.ok()?;
        let after = rest[de.byte_offset()..].strip_prefix(']')?;
        return Some((Step::Key(key), after));
    }
    let end = rest.find(']')?;
    Some((Step::Index(rest[..end].parse().ok()?), &rest[end + 1..]))
}

#[cfg(test)]
mod tests {
    use iceberg::spec::PrimitiveType;

    use super::*;

    fn depth(max_depth: usize) -> Evolving {
        Evolving {
            max_depth,
            ..Evolving::default()
        }
    }

    fn prim(p: PrimitiveType) -> Type {
        Type::Primitive(p)
    }

    fn field(id: i32, name: &str, ty: Type) -> NestedFieldRef {
        Arc::new(NestedField::optional(id, name, ty))
    }

    fn structure(fields: Vec<NestedFieldRef>) -> Type {
        Type::Struct(StructType::new(fields))
    }

    #[test]
    fn a_struct_gains_fields_with_placeholder_ids_and_keeps_its_own() {
        let base = structure(vec![
            field(5, "os", prim(PrimitiveType::String)),
            field(6, "v", prim(PrimitiveType::Int)),
        ]);
        let value = structure(vec![
            field(0, "v", prim(PrimitiveType::Long)),
            field(0, "browser", prim(PrimitiveType::String)),
        ]);
        let expected = structure(vec![
            field(5, "os", prim(PrimitiveType::String)),
            field(6, "v", prim(PrimitiveType::Long)),
            field(0, "browser", prim(PrimitiveType::String)),
        ]);
        assert_eq!(grow(&base, &value), expected);
        // A long does not become a double (Iceberg has no such promotion).
        let long = structure(vec![field(6, "v", prim(PrimitiveType::Long))]);
        let double = structure(vec![field(0, "v", prim(PrimitiveType::Double))]);
        assert_eq!(grow(&long, &double), long);
    }

    #[test]
    fn values_that_fit_ask_for_nothing_and_misfits_name_the_real_field() {
        let ctx = field(
            4,
            "ctx",
            structure(vec![field(5, "v", prim(PrimitiveType::Long))]),
        );
        assert_eq!(grown(&ctx, r#"{"v": 1}"#, &depth(5)).unwrap(), None);
        let wider = grown(&ctx, r#"{"v": 1, "b": true}"#, &depth(5))
            .unwrap()
            .unwrap();
        assert_eq!(
            wider,
            structure(vec![
                field(5, "v", prim(PrimitiveType::Long)),
                field(0, "b", prim(PrimitiveType::Boolean)),
            ])
        );
        let error = grown(&ctx, r#"{"b": true, "v": "x"}"#, &depth(5)).unwrap_err();
        assert_eq!(
            (error.code, error.field.as_deref()),
            ("type_mismatch", Some("ctx.v"))
        );
        let deep = grown(&ctx, r#"{"b": {"c": {"d": 1}}}"#, &depth(2)).unwrap_err();
        assert_eq!(deep.code, "nested_too_deep");
    }

    #[test]
    fn lists_of_structs_and_maps_grow_their_elements_and_values() {
        let items = field(
            7,
            "items",
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                8,
                structure(vec![field(9, "sku", prim(PrimitiveType::String))]),
                false,
            )))),
        );
        let grown_items = grown(
            &items,
            r#"[{"sku": "a"}, {"sku": "b", "qty": 2}]"#,
            &depth(5),
        )
        .unwrap()
        .unwrap();
        let Type::List(list) = &grown_items else {
            panic!("{grown_items:?}")
        };
        assert_eq!(list.element_field.id, 8);
        assert_eq!(
            *list.element_field.field_type,
            structure(vec![
                field(9, "sku", prim(PrimitiveType::String)),
                field(0, "qty", prim(PrimitiveType::Long)),
            ])
        );
        let counts = field(
            10,
            "counts",
            Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(
                    11,
                    prim(PrimitiveType::String),
                )),
                Arc::new(NestedField::map_value_element(
                    12,
                    prim(PrimitiveType::Int),
                    false,
                )),
            )),
        );
        let grown_counts = grown(&counts, r#"{"a": 1, "b": 3000000000}"#, &depth(5))
            .unwrap()
            .unwrap();
        let Type::Map(map) = &grown_counts else {
            panic!("{grown_counts:?}")
        };
        assert_eq!(
            (map.value_field.id, &*map.value_field.field_type),
            (12, &prim(PrimitiveType::Long))
        );
    }

    #[test]
    fn decimals_inside_widen_to_the_precision_their_values_need() {
        let decimal = |precision| {
            prim(PrimitiveType::Decimal {
                precision,
                scale: 2,
            })
        };
        let items = field(
            1,
            "items",
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                2,
                structure(vec![field(3, "price", decimal(6))]),
                false,
            )))),
        );
        let raw = r#"[{"price": "1.50"}, {"price": 123456.78}, {"price": "-12345678.90"}]"#;
        let Type::List(list) = grown(&items, raw, &depth(5)).unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(
            *list.element_field.field_type,
            structure(vec![field(3, "price", decimal(10))])
        );
        let prices = field(
            4,
            "prices",
            Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(5, prim(PrimitiveType::String))),
                Arc::new(NestedField::map_value_element(6, decimal(4), false)),
            )),
        );
        let Type::Map(map) = grown(&prices, r#"{"a\"b": 123.45}"#, &depth(5))
            .unwrap()
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(*map.value_field.field_type, decimal(5));
        // A scale too fine fits no widening: the column's own error stands.
        assert_eq!(
            grown(&items, r#"[{"price": "1.505"}]"#, &depth(5)).unwrap(),
            None
        );
    }
}
