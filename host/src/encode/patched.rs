//! A patch's fields in the encoder: converted into their cells after the value's own
//! fields (whose names the patch sets were skipped), as if the value had them.

use std::borrow::Cow;

use super::EncodeError;
use super::cells::Cell;
use super::encoder::{Encoder, RowExtra};
use crate::record::Patch;

impl Encoder {
    /// Converts the fields of `patch` (JSON text, checked when the plugin answered) into
    /// their cells, as if the value had them.
    pub(super) fn patch<'a>(
        &self,
        patch: Option<&'a Patch>,
        cells: &mut [Cell<'a>],
        failure: &mut Option<EncodeError>,
        extra: &mut RowExtra<'a>,
    ) {
        for (name, raw) in patch.into_iter().flat_map(Patch::fields) {
            let raw = match std::str::from_utf8(raw) {
                Ok(raw) => raw.trim_ascii(),
                Err(_) => {
                    *failure = failure.take().or_else(|| {
                        Some(EncodeError {
                            code: "malformed_json",
                            message: format!("the patched value of `{name}` is not UTF-8"),
                            field: Some(name.into()),
                        })
                    });
                    continue;
                }
            };
            match self.by_name.get(name) {
                Some(&i) => self.field(i, raw, cells, failure, extra),
                None => self.unknown(Cow::Borrowed(name), || self.infer(raw), extra, failure),
            }
        }
    }
}
