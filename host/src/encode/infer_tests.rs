use super::*;

fn ty(raw: &str) -> String {
    match infer(raw, 3) {
        Inferred::Type(t) => t.to_string(),
        other => format!("{other:?}"),
    }
}

fn names_and_types(s: &StructType) -> Vec<String> {
    s.fields()
        .iter()
        .map(|f| format!("{}:{}", f.name, f.field_type))
        .collect()
}

#[test]
fn json_values_infer_the_iceberg_types_of_the_issue() {
    for (raw, expected) in [
        ("\"x\"", "string"),
        ("\"2026-12-02T10:00:00Z\"", "string"),
        ("42", "long"),
        ("-42", "long"),
        ("1.5", "double"),
        ("1e3", "double"),
        ("18446744073709551615", "double"),
        ("true", "boolean"),
        ("null", "Null"),
        ("[]", "Empty"),
        ("{}", "Empty"),
        ("[null, null]", "Empty"),
        ("{\"a\": null}", "Empty"),
    ] {
        assert_eq!(ty(raw), expected, "{raw}");
    }
    let Inferred::Type(Type::Struct(s)) = infer("{\"os\": \"ios\", \"n\": 1, \"gone\": null}", 3)
    else {
        panic!("a struct");
    };
    let fields = names_and_types(&s);
    assert_eq!(fields, ["os:string", "n:long"], "in the event's order");
    let Inferred::Type(Type::List(l)) = infer("[1, 2.5, null]", 3) else {
        panic!("a list");
    };
    assert_eq!(l.element_field.field_type.to_string(), "double");
}

#[test]
fn nesting_past_the_cap_is_too_deep() {
    assert_eq!(infer("{\"a\": 1}", 1), infer("{\"a\": 1}", 5));
    assert_eq!(infer("{\"a\": {\"b\": 1}}", 1), Inferred::TooDeep);
    assert_eq!(infer("[[1]]", 1), Inferred::TooDeep);
    assert!(matches!(infer("[[1]]", 2), Inferred::Type(_)));
    assert_eq!(infer("[]", 0), Inferred::TooDeep);
    assert!(matches!(infer("1", 0), Inferred::Type(_)));
}

#[test]
fn types_unify_to_one_both_fit() {
    let long = Type::Primitive(PrimitiveType::Long);
    let double = Type::Primitive(PrimitiveType::Double);
    let string = Type::Primitive(PrimitiveType::String);
    assert_eq!(unify(&long, &double), double);
    assert_eq!(unify(&double, &long), double);
    assert_eq!(unify(&string, &long), string, "the first type stays");
    let Inferred::Type(a) = infer("{\"x\": 1, \"l\": [1]}", 3) else {
        panic!()
    };
    let Inferred::Type(b) = infer("{\"y\": \"s\", \"x\": 2.5, \"l\": [0.5]}", 3) else {
        panic!()
    };
    let Type::Struct(s) = unify(&a, &b) else {
        panic!("a struct");
    };
    let fields = names_and_types(&s);
    assert_eq!(fields, ["x:double", "l:list", "y:string"]);
}

#[test]
fn wanted_columns_from_parts_merge() {
    let mut one = Wanted::default();
    one.add("n".into(), Type::Primitive(PrimitiveType::Long));
    one.promote(
        "price".into(),
        PrimitiveType::Decimal {
            precision: 12,
            scale: 2,
        },
    );
    let mut two = Wanted::default();
    two.add("n".into(), Type::Primitive(PrimitiveType::Double));
    two.add("s".into(), Type::Primitive(PrimitiveType::String));
    two.promote(
        "price".into(),
        PrimitiveType::Decimal {
            precision: 15,
            scale: 2,
        },
    );
    one.merge(two);
    assert_eq!(one.added["n"], Type::Primitive(PrimitiveType::Double));
    assert_eq!(one.added.len(), 2);
    assert_eq!(
        one.promoted["price"],
        PrimitiveType::Decimal {
            precision: 15,
            scale: 2
        }
    );
}

#[test]
fn values_that_outgrow_their_column_ask_for_an_allowed_promotion() {
    assert_eq!(
        promotion(&PrimitiveType::Int, "3000000000"),
        Some(PrimitiveType::Long)
    );
    assert_eq!(promotion(&PrimitiveType::Int, "1e20"), None);
    assert_eq!(promotion(&PrimitiveType::Int, "\"x\""), None);
    assert_eq!(
        promotion(&PrimitiveType::Float, "1e300"),
        Some(PrimitiveType::Double)
    );
    assert_eq!(promotion(&PrimitiveType::Float, "1e400"), None);
    let dec = |precision| PrimitiveType::Decimal {
        precision,
        scale: 2,
    };
    assert_eq!(promotion(&dec(5), "123456.78"), Some(dec(8)));
    assert_eq!(promotion(&dec(5), "\"-123456.78\""), Some(dec(8)));
    assert_eq!(
        promotion(&dec(5), "1.234"),
        None,
        "the scale does not change"
    );
    assert_eq!(promotion(&PrimitiveType::Long, "1e30"), None);
}

#[test]
fn with_infer_timestamps_timestamp_strings_type_their_columns_and_meet_strings_as_strings() {
    let with = |raw: &str| match infer_with(raw, 3, true) {
        Inferred::Type(t) => t.to_string(),
        other => format!("{other:?}"),
    };
    for (raw, expected) in [
        ("\"2026-12-02T10:00:00Z\"", "timestamptz"),
        ("\"2026-12-02T10:00:00.123+01:00\"", "timestamptz"),
        ("\"2026-12-02T10:00:00\"", "timestamp"),
        ("\"2026-12-02 10:00:00.5\"", "timestamp"),
        ("\"2026-12-02\"", "string"),
        ("\"2026-12-02T25:00:00Z\"", "string"),
        ("\"yesterday at noon, roughly\"", "string"),
    ] {
        assert_eq!(with(raw), expected, "{raw}");
    }
    let [tz, local, text] = [
        PrimitiveType::Timestamptz,
        PrimitiveType::Timestamp,
        PrimitiveType::String,
    ]
    .map(Type::Primitive);
    assert_eq!(unify(&tz, &text), text);
    assert_eq!(unify(&text, &local), text);
    assert_eq!(unify(&tz, &local), text);
    assert_eq!(unify(&tz, &tz), tz);
    assert_eq!(
        unify(&tz, &Type::Primitive(PrimitiveType::Long)),
        tz,
        "a timestamp and a number: the first stays, the other misfits"
    );
}
