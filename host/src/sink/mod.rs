//! Sinks: where processed records go. The table sink ([`iceberg`]) receives the records
//! that passed every stage and fit the table; the dead-letter sink ([`deadletter`])
//! receives the others, with the reason.

pub mod deadletter;
pub mod iceberg;
