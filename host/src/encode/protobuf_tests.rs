//! Protobuf messages (encoded by prost) straight into the columns of a table made from
//! their schema.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};

use super::Encoder;
use crate::format::Framed;
use crate::format::protobuf::columns;
use crate::format::protobuf_tests::{order, schema};

#[test]
fn a_message_lands_in_the_columns_of_a_table_made_from_it() {
    let message = schema().message(&[0]).unwrap();
    let (fields, skipped) = columns(&message);
    assert!(skipped.is_empty(), "{skipped:?}");
    let types: Vec<String> = fields
        .iter()
        .map(|f| format!("{}:{}", f.name, f.field_type))
        .collect();
    assert_eq!(&types[..2], ["order_id:string", "quantity:long"]);
    assert_eq!(types[4], "placed_at:timestamptz");
    assert_eq!(types[8], "points:long");
    let table = ::iceberg::spec::Schema::builder()
        .with_fields(fields)
        .build()
        .unwrap();
    let encoder = Encoder::new(&table, &[]).unwrap();
    let values = [order("o-1", Some("gift")), order("o-2", None)];
    let encoded = encoder
        .encode_framed(
            values
                .iter()
                .map(|v| Ok(Framed::Protobuf(message.clone(), v))),
            0,
        )
        .unwrap();
    assert_eq!(encoded.errors, vec![]);
    let batch = &encoded.batch;
    assert_eq!(
        batch.column(1).as_primitive::<Int64Type>().value(0),
        5_000_000_000
    );
    let customer = batch.column(2).as_struct();
    assert_eq!(customer.column(1).as_primitive::<Int32Type>().value(0), 2);
    let at = batch.column(4).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(at.value(0), 1_767_323_045_678_901);
    assert_eq!(batch.column(5).as_string::<i32>().value(0), "PAID");
    assert_eq!(batch.column(7).as_string::<i32>().value(0), "gift");
    assert!(
        batch.column(7).is_null(1),
        "an unset optional field is null"
    );
    assert_eq!(batch.column(10).as_primitive::<Int64Type>().value(0), 0);
    let total = batch.column(9).as_struct();
    assert_eq!(total.column(0).as_string::<i32>().value(0), "EUR");
}
