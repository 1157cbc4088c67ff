//! The nested half of a plan: struct, list and map columns grown inside (new struct
//! fields, wider primitives), as the encoder asked ([`crate::encode::Wanted::grown`]).
//!
//! The asked type is grown again onto the column as the plan finds it (another writer may
//! have changed it meanwhile: fields match by name, and keep the table's ids). New fields
//! take ids after the plan's last one, depth first; each is counted against
//! `max-columns`. A new field with an empty name, a `.` in it, or the name of a sibling
//! but for its case refuses the whole column's growth (`invalid_column_name`), as a cap
//! passed does (`too_many_columns`): the encoder then dead-letters the values that needed
//! it.

use std::collections::BTreeMap;

use iceberg::spec::{ListType, MapType, NestedFieldRef, StructType, Type};

use super::{Ids, Planned, assign_ids, count_type};
use crate::encode::{grow_type, with_type};

/// Grows the `fields` that `grown` names; returns the paths of the nested fields added
/// (`ctx.browser`, `items[].qty`) and of those widened.
pub(super) fn grow_columns(
    fields: &mut [NestedFieldRef],
    grown: &BTreeMap<String, Type>,
    ids: &mut Ids,
    planned: &mut Planned,
) -> (Vec<String>, Vec<String>) {
    let (mut added, mut widened) = (Vec::new(), Vec::new());
    for field in fields.iter_mut() {
        let Some(asked) = grown.get(&field.name) else {
            continue;
        };
        let target = grow_type(&field.field_type, asked);
        if target == *field.field_type {
            continue;
        }
        let name = field.name.clone();
        if let Some(why) = bad_names(&target, &name) {
            let message = format!("`{name}` cannot grow: {why}");
            planned
                .refused
                .insert(name, ("invalid_column_name", message));
            continue;
        }
        let new_fields = count_type(&target) - count_type(&field.field_type);
        if let Err(refusal) = ids.take(&name, new_fields) {
            planned.refused.insert(name, refusal);
            continue;
        }
        let mut changes = Changes::default();
        let ty = number(
            &field.field_type,
            &target,
            &name,
            &mut ids.next,
            &mut changes,
        );
        *field = with_type(field, ty);
        added.append(&mut changes.added);
        widened.append(&mut changes.widened);
    }
    (added, widened)
}

/// The paths a column's growth adds and widens.
#[derive(Default)]
struct Changes {
    added: Vec<String>,
    widened: Vec<String>,
}

/// `target` (grown from `base`) with ids for its new fields (id 0), noting in `changes`
/// what was added and widened under `path`.
fn number(base: &Type, target: &Type, path: &str, next: &mut i32, changes: &mut Changes) -> Type {
    match (base, target) {
        (Type::Struct(b), Type::Struct(t)) => {
            let fields = t
                .fields()
                .iter()
                .map(|f| {
                    let here = format!("{path}.{}", f.name);
                    match b.fields().iter().find(|g| g.id == f.id && f.id != 0) {
                        Some(g) => with_type(
                            f,
                            number(&g.field_type, &f.field_type, &here, next, changes),
                        ),
                        None => {
                            changes.added.push(here);
                            assign_ids(&f.name, &f.field_type, next)
                        }
                    }
                })
                .collect();
            Type::Struct(StructType::new(fields))
        }
        (Type::List(b), Type::List(t)) => {
            let element = &t.element_field;
            let here = format!("{path}[]");
            let ty = number(
                &b.element_field.field_type,
                &element.field_type,
                &here,
                next,
                changes,
            );
            Type::List(ListType::new(with_type(element, ty)))
        }
        (Type::Map(b), Type::Map(t)) => {
            let value = &t.value_field;
            let here = format!("{path}[]");
            let ty = number(
                &b.value_field.field_type,
                &value.field_type,
                &here,
                next,
                changes,
            );
            Type::Map(MapType::new(t.key_field.clone(), with_type(value, ty)))
        }
        (Type::Primitive(b), Type::Primitive(t)) => {
            if b != t {
                changes.widened.push(path.to_string());
            }
            target.clone()
        }
        _ => base.clone(),
    }
}

/// Why the new fields (id 0) inside `ty` cannot be, if one cannot.
fn bad_names(ty: &Type, column: &str) -> Option<String> {
    match ty {
        Type::Primitive(_) => None,
        Type::Struct(s) => {
            for f in s.fields().iter().filter(|f| f.id == 0) {
                if f.name.is_empty() || f.name.contains('.') {
                    return Some(format!(
                        "a new field inside `{column}` has an empty name or one with a `.`"
                    ));
                }
                let twins = s
                    .fields()
                    .iter()
                    .filter(|g| g.name.eq_ignore_ascii_case(&f.name))
                    .count();
                if twins > 1 {
                    return Some(format!(
                        "`{}` inside `{column}` differs from another field only by case",
                        f.name
                    ));
                }
            }
            s.fields()
                .iter()
                .find_map(|f| bad_names(&f.field_type, column))
        }
        Type::List(l) => bad_names(&l.element_field.field_type, column),
        Type::Map(m) => bad_names(&m.value_field.field_type, column),
    }
}
