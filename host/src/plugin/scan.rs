//! The `scan` import (contract `0.2.2`): the host's one reading of the fields of the chunk
//! being judged, made before the call ([`super::Chunk`]'s fields) and handed over to the
//! plugin's first call of `scan.fields` during `process`.

use super::bindings::sluice::plugin::scan::{ChunkFields, Host};
use super::sandbox::StoreState;

/// The chunk's fields, once per `process`; later calls find no event read, and calls
/// outside `process` no events.
impl Host for StoreState {
    fn fields(&mut self) -> ChunkFields {
        self.fields.take().unwrap_or_else(|| ChunkFields {
            counts: vec![-1; self.events],
            spans: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plugin::config::Grants;
    use crate::plugin::sandbox::Sandbox;
    use crate::units::ByteSize;

    #[test]
    fn the_fields_are_handed_over_once_per_process() {
        let grants = Grants::default();
        let mut state = StoreState::new(Sandbox {
            plugin: "probe".into(),
            grants: &grants,
            memory: ByteSize::mib(16),
            call_timeout: Duration::from_secs(1),
            seed: 0,
        })
        .unwrap();
        assert_eq!(state.fields().counts, Vec::<i32>::new(), "outside process");
        let read = ChunkFields {
            counts: vec![1, -1],
            spans: vec![2, 1, 6, 1],
        };
        (state.fields, state.events) = (Some(read.clone()), 2);
        let first = state.fields();
        assert_eq!((first.counts, first.spans), (read.counts, read.spans));
        let again = state.fields();
        assert_eq!((again.counts, again.spans), (vec![-1, -1], vec![]));
    }
}
