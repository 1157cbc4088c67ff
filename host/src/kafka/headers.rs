//! Reading a consumed record's headers without trusting their names.
//!
//! rdkafka's `BorrowedHeaders` turns each header name into `&str` with an `unwrap`
//! (`message.rs:284` in rdkafka 0.39), so one record whose header *name* is not UTF-8
//! panics the consumer on every restart, before sluice can dead-letter it. Here the names
//! are read through librdkafka's C API as bytes and made text lossily (invalid bytes become
//! U+FFFD), so such a record is processed or dead-lettered like any other.
//!
//! `unsafe` code: three calls into librdkafka's C API, which rdkafka wraps only with the
//! panicking conversion (`source/kafka/fetch.rs` reads messages through that API too).
#![allow(unsafe_code)]

use std::ffi::CStr;

use rdkafka::bindings as rd;
use rdkafka::message::BorrowedMessage;
use rdkafka::types::RDKafkaRespErr;

use crate::record::Header;

/// The headers of `message`, in producer order; names that are not UTF-8 are made text
/// lossily, values are kept as bytes.
pub fn headers_of(message: &BorrowedMessage<'_>) -> Vec<Header> {
    // SAFETY: `message.ptr()` is a valid message for the lifetime of `message`.
    unsafe { headers_of_raw(message.ptr()) }
}

/// [`headers_of`] a message of librdkafka's C API.
///
/// # Safety
/// `message` must be a valid message, not destroyed before this returns.
pub unsafe fn headers_of_raw(message: *const rd::rd_kafka_message_t) -> Vec<Header> {
    let mut headers: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: `message` is valid (the caller's promise); librdkafka sets `headers` to the
    // message's own header list (or leaves it null), which lives as long as the message.
    let found = unsafe { rd::rd_kafka_message_headers(message, &mut headers) };
    if found != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
        return Vec::new();
    }
    // SAFETY: `headers` is the message's valid header list (see above).
    let count = unsafe { rd::rd_kafka_header_cnt(headers) };
    (0..count)
        .filter_map(|index| header_at(headers, index))
        .collect()
}

/// Header `index` of `headers`, copied out.
fn header_at(headers: *const rd::rd_kafka_headers_t, index: usize) -> Option<Header> {
    let mut name = std::ptr::null();
    let mut value = std::ptr::null();
    let mut size = 0;
    // SAFETY: `headers` is valid (see `headers_of`) and `index` is below its count; the
    // out-pointers are written by librdkafka and point into the header list.
    let error =
        unsafe { rd::rd_kafka_header_get_all(headers, index, &mut name, &mut value, &mut size) };
    if error != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
        return None;
    }
    // SAFETY: librdkafka's header names are NUL-terminated; a non-null value points to
    // `size` bytes; both live as long as the header list.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    let value = (!value.is_null())
        .then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec());
    Some(Header {
        name: String::from_utf8_lossy(name).into_owned(),
        value,
    })
}
