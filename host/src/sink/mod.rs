//! Sinks: where processed records go. The table sink ([`iceberg`]) receives the records
//! that passed every stage and fit the table; the dead-letter sink ([`deadletter`])
//! receives the others, with the reason. [`topic`] writes keyed records to any topic (late
//! data, window results); [`window`] sends window results to their topic and table.

pub mod deadletter;
pub mod iceberg;
pub mod topic;
pub mod window;
