//! The diagnosis: its text (`text`) and its Markdown (`markdown`); JSON
//! and YAML are the diagnosis itself.

use std::io::{self, Write};

use cilium_gc_diagnose::Diagnosis;

use super::format::{write_document, OutputFormat, Style};

mod charts;
mod glyphs;
mod markdown;
mod text;

pub(crate) use self::markdown::{diagnosis as markdown, findings_table};
pub(crate) use self::text::text;

/// Writes `d` in `format`: one pretty JSON document and a newline, one YAML
/// document, the text or the Markdown view. Errs only when `out` does.
pub fn render(
    d: &Diagnosis,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    write_document(d, format, || text(d, style), || markdown(d), out)
}
