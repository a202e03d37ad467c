//! The fleet report and the fleet diagnosis: their text (a table of the
//! clusters) and their Markdown (the table, then each cluster's own
//! document folded); JSON and YAML are the documents themselves.

use std::io::{self, Write};

use cilium_gc_fleet::{FleetDiagnosis, FleetReport};

use super::format::{write_document, OutputFormat, Style};

mod markdown;
mod text;

pub(crate) use self::text::fleet_confirmation;

/// Writes the fleet report to `out` in `format`. JSON and YAML are
/// streamed: the clusters are read back from disk one at a time.
pub(crate) fn render_fleet_report(
    f: &FleetReport,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    write_document(
        f,
        format,
        || text::fleet_text(f, style),
        || markdown::fleet(f),
        out,
    )
}

/// Writes the fleet diagnosis to `out` in `format`.
pub(crate) fn render_fleet_diagnosis(
    doc: &FleetDiagnosis,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    write_document(
        doc,
        format,
        || text::fleet_diagnosis_text(doc, style),
        || markdown::fleet_diagnosis(doc),
        out,
    )
}
