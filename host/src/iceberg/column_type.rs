//! Column type strings: Iceberg primitives (`string`, `decimal(10,2)`...) and the nested
//! types `struct<name: type, ...>`, `list<type>` and `map<keytype, valuetype>`, nested to
//! any depth, parsed by recursive descent into an iceberg-rust [`Type`] whose nested
//! fields get fresh ids from a counter. Errors name the position (0-based, in characters).

use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};

/// Parses a column type; nested fields take ids `*next_id`, `*next_id + 1`... in the order
/// they are written (a list's element and a map's key and value included).
pub fn parse_column_type(text: &str, next_id: &mut i32) -> Result<Type, String> {
    let mut p = Parser {
        chars: text.chars().collect(),
        i: 0,
        next_id,
    };
    let ty = p.ty()?;
    p.ws();
    if p.i < p.chars.len() {
        return Err(p.error("end of the type"));
    }
    Ok(ty)
}

struct Parser<'a> {
    chars: Vec<char>,
    i: usize,
    next_id: &'a mut i32,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.chars.get(self.i).is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
    }

    fn error(&self, expected: &str) -> String {
        match self.chars.get(self.i) {
            Some(c) => format!("at position {}: expected {expected}, found `{c}`", self.i),
            None => format!("at position {}: expected {expected}, found the end", self.i),
        }
    }

    /// Consumes `c` (after spaces) or fails saying it was expected.
    fn expect(&mut self, c: char) -> Result<(), String> {
        self.ws();
        if self.chars.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.error(&format!("`{c}`")))
        }
    }

    /// A name: letters, digits and `_` (a struct field's name, or a type keyword).
    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self
            .chars
            .get(self.i)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_')
        {
            self.i += 1;
        }
        self.chars[start..self.i].iter().collect()
    }

    fn id(&mut self) -> i32 {
        let id = *self.next_id;
        *self.next_id += 1;
        id
    }

    fn ty(&mut self) -> Result<Type, String> {
        self.ws();
        let start = self.i;
        let word = self.word();
        match word.to_ascii_lowercase().as_str() {
            "" => Err(self.error("a type")),
            "struct" => self.struct_type(),
            "list" => {
                self.expect('<')?;
                let id = self.id();
                let element = self.ty()?;
                self.expect('>')?;
                let field = NestedField::list_element(id, element, false);
                Ok(Type::List(ListType::new(Arc::new(field))))
            }
            "map" => {
                self.expect('<')?;
                let (key_id, value_id) = (self.id(), self.id());
                let at = self.i;
                let key = self.ty()?;
                if !matches!(key, Type::Primitive(_)) {
                    return Err(format!("at position {at}: a map's key must be a primitive"));
                }
                self.expect(',')?;
                let value = self.ty()?;
                self.expect('>')?;
                Ok(Type::Map(MapType::optional(key_id, key, value_id, value)))
            }
            _ => self.primitive(start, word).map(Type::Primitive),
        }
    }

    /// A struct field's name: a word, or any text but a backtick between backticks
    /// (`` `user-agent` ``).
    fn field_name(&mut self) -> Result<String, String> {
        self.ws();
        if self.chars.get(self.i) != Some(&'`') {
            let name = self.word();
            return if name.is_empty() {
                Err(self.error("a field name"))
            } else {
                Ok(name)
            };
        }
        let start = self.i;
        self.i += 1;
        let mut name = String::new();
        loop {
            match self.chars.get(self.i) {
                Some('`') => break,
                Some(c) => name.push(*c),
                None => {
                    return Err(format!(
                        "at position {start}: the quoted field name is not closed with `"
                    ));
                }
            }
            self.i += 1;
        }
        self.i += 1;
        if name.is_empty() {
            return Err(format!("at position {start}: the field name is empty"));
        }
        Ok(name)
    }

    /// `struct<name: type, ...>`, after the keyword.
    fn struct_type(&mut self) -> Result<Type, String> {
        self.expect('<')?;
        let mut fields = Vec::new();
        loop {
            let name = self.field_name()?;
            if fields.iter().any(|f: &Arc<NestedField>| f.name == name) {
                return Err(format!("at position {}: field `{name}` twice", self.i));
            }
            self.expect(':')?;
            let id = self.id();
            let ty = self.ty()?;
            fields.push(Arc::new(NestedField::optional(id, name, ty)));
            self.ws();
            match self.chars.get(self.i) {
                Some(',') => self.i += 1,
                Some('>') => {
                    self.i += 1;
                    return Ok(Type::Struct(StructType::new(fields)));
                }
                _ => return Err(self.error("`,` or `>`")),
            }
        }
    }

    /// A primitive: `word`, or `decimal(P,S)` whose `(P,S)` follows.
    fn primitive(&mut self, start: usize, word: String) -> Result<PrimitiveType, String> {
        let mut text = word;
        self.ws();
        if self.chars.get(self.i) == Some(&'(') {
            while let Some(c) = self.chars.get(self.i) {
                text.push(*c);
                self.i += 1;
                if *c == ')' {
                    break;
                }
            }
        }
        parse_type(&text).map_err(|e| format!("at position {start}: {e}"))
    }
}

/// Parses a primitive column type (`decimal(10, 2)`, `string`...), case-insensitively.
pub fn parse_type(text: &str) -> Result<PrimitiveType, String> {
    let t = text.trim().to_ascii_lowercase();
    Ok(match t.as_str() {
        "string" => PrimitiveType::String,
        "int" | "integer" => PrimitiveType::Int,
        "long" | "bigint" => PrimitiveType::Long,
        "boolean" => PrimitiveType::Boolean,
        "float" => PrimitiveType::Float,
        "double" => PrimitiveType::Double,
        "date" => PrimitiveType::Date,
        "timestamp" => PrimitiveType::Timestamp,
        "timestamptz" => PrimitiveType::Timestamptz,
        "binary" => PrimitiveType::Binary,
        _ => {
            let inner = t
                .strip_prefix("decimal(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("unknown column type `{text}`"))?;
            let (p, s) = inner
                .split_once(',')
                .ok_or_else(|| format!("decimal needs a precision and a scale: `{text}`"))?;
            let precision: u32 = p
                .trim()
                .parse()
                .map_err(|_| format!("bad precision in `{text}`"))?;
            let scale: u32 = s
                .trim()
                .parse()
                .map_err(|_| format!("bad scale in `{text}`"))?;
            if precision == 0 || precision > 38 || scale > precision {
                return Err(format!(
                    "`{text}`: need 1 <= precision <= 38 and scale <= precision"
                ));
            }
            PrimitiveType::Decimal { precision, scale }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Type, String> {
        parse_column_type(text, &mut 10)
    }

    #[test]
    fn nested_types_parse_with_fresh_ids() {
        let mut next = 4;
        let ty = parse_column_type(
            "list<struct<sku: string, qty: int, price: decimal(10, 2)>>",
            &mut next,
        )
        .unwrap();
        let Type::List(list) = &ty else {
            panic!("{ty:?}")
        };
        assert_eq!(list.element_field.id, 4);
        let Type::Struct(item) = list.element_field.field_type.as_ref() else {
            panic!("{ty:?}")
        };
        let fields: Vec<_> = item
            .fields()
            .iter()
            .map(|f| (f.id, f.name.as_str(), f.field_type.to_string()))
            .collect();
        assert_eq!(
            fields,
            [
                (5, "sku", "string".to_string()),
                (6, "qty", "int".to_string()),
                (7, "price", "decimal(10, 2)".to_string()),
            ]
        );
        assert_eq!(next, 8);
        let Type::Map(map) = parse("MAP<string, list<map<int, double>>>").unwrap() else {
            panic!("not a map")
        };
        assert_eq!((map.key_field.id, map.value_field.id), (10, 11));
        let Type::List(list) = map.value_field.field_type.as_ref() else {
            panic!("{map:?}")
        };
        assert_eq!(list.element_field.id, 12);
        let Type::Map(inner) = list.element_field.field_type.as_ref() else {
            panic!("{map:?}")
        };
        assert_eq!((inner.key_field.id, inner.value_field.id), (13, 14));
        assert_eq!(
            *inner.value_field.field_type,
            Type::Primitive(PrimitiveType::Double)
        );
        let Type::Struct(context) =
            parse(" struct< device :string,os: string, `user-agent`: string > ").unwrap()
        else {
            panic!("not a struct")
        };
        let names: Vec<_> = context.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["device", "os", "user-agent"]);
        assert_eq!(parse("long").unwrap(), Type::Primitive(PrimitiveType::Long));
    }

    #[test]
    fn bad_types_are_refused_with_the_position() {
        for (text, says) in [
            ("list<string", "position 11: expected `>`, found the end"),
            ("struct<a string>", "position 9: expected `:`, found `s`"),
            (
                "struct<`a b: int>",
                "position 7: the quoted field name is not closed",
            ),
            ("struct<``: int>", "position 7: the field name is empty"),
            ("struct<a: int,>", "position 14: expected a field name"),
            ("struct<a: int, a: long>", "field `a` twice"),
            ("map<string>", "position 10: expected `,`"),
            (
                "map<list<int>, string>",
                "position 4: a map's key must be a primitive",
            ),
            ("list<varchar>", "position 5: unknown column type `varchar`"),
            ("struct<p: decimal(2,3)>", "position 10: `decimal(2,3)`"),
            ("list<int> x", "position 10: expected end of the type"),
            ("", "position 0: expected a type"),
            ("<int>", "position 0: expected a type, found `<`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
