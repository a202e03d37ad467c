//! What every finding is judged with: the diagnosis so far
//! ([`Evidence`]) and where findings are collected ([`Findings`]). Its own
//! module so that the finding functions, spread over several modules by
//! subject, all read it without reading each other.

use std::time::Duration;

use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_documents::diagnosis::{Diagnosis, Finding, FindingCode, Severity};

use crate::input::Input;

/// What every finding may use: the diagnosis so far and the phrases
/// several of them repeat.
pub(super) struct Evidence<'a> {
    pub(super) input: &'a Input,
    pub(super) d: &'a Diagnosis,
    pub(super) settings: &'a CiliumSettings,
    pub(super) gc_interval: Option<Duration>,
    pub(super) space_line: String,
    pub(super) delete_hint: String,
}

/// The findings collected so far.
#[derive(Default)]
pub(super) struct Findings(pub(super) Vec<Finding>);

impl Findings {
    pub(super) fn add(
        &mut self,
        severity: Severity,
        code: FindingCode,
        message: String,
        evidence: Vec<String>,
        suggestion: Option<String>,
    ) {
        self.0.push(Finding {
            severity,
            code,
            message,
            evidence,
            suggestion,
        });
    }
}
