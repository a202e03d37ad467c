//! The views: each document the plugin writes (the report, the diagnosis,
//! the fleet report and fleet diagnosis) as text for a person, Markdown for
//! a ticket, JSON or YAML for a machine; and the report's Prometheus
//! metrics beside them (`metrics`). One module per document (`report`,
//! `diagnosis`, `fleet`), each with its text and its Markdown; what they
//! share has a module of its own: `format` (the formats, colour,
//! [`format::write_document`], the atomic files), `markdown` (tables,
//! escaping), `phrases` (the diagnosis' sentences), `next_steps` (the
//! report's). Pure: a document in, text out; nothing here runs a command.

pub mod diagnosis;
pub(crate) mod fleet;
pub mod format;
mod markdown;
pub mod metrics;
pub(crate) mod next_steps;
mod phrases;
pub(crate) mod report;
#[cfg(test)]
mod tests;
