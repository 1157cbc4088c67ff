//! The pipeline as a graph, for the console (`GET /topology`): source topics → stages →
//! event-time operators → outputs. The pipeline describes itself once at start
//! ([`super::Admin::set_topology`]); what changes batch by batch (a stage's version, its
//! shadow) comes from `GET /status`.

use serde::Serialize;

/// One box of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// What it is called: a topic, a stage's name, an operator's or output's name.
    pub name: String,
    /// What it does, in a few words.
    pub detail: String,
}

impl Node {
    /// A node named `name` that does `detail`.
    pub fn new(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Node {
            name: name.into(),
            detail: detail.into(),
        }
    }
}

/// The pipeline's graph, column by column in the order data flows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// Topics read.
    pub sources: Vec<Node>,
    /// Plugin stages, in order.
    pub stages: Vec<Node>,
    /// Event-time operators: dedup, windows, sessions, joins.
    pub operators: Vec<Node>,
    /// Where results go: the table, dead letters, window and join outputs.
    pub outputs: Vec<Node>,
    /// Lookup tables the stages read.
    pub lookups: Vec<Node>,
}
