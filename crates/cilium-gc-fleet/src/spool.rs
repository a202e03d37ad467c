//! Finished clusters kept on disk, so a fleet run's memory follows
//! `--parallel`, not the number of clusters.
//!
//! A cluster's entry holds its whole report: one item per identity not in
//! use, about 3 MiB per 10,000-identity cluster in memory. Kept until the
//! document is written, 50 clusters of 65,000 identities would need
//! gigabytes. So each job writes its finished entry to the [`Spool`] (an
//! anonymous temporary file, one JSON line per cluster) and keeps in
//! memory only its slim copy: every field but the report's `items`. The
//! document's `clusters` ([`Clusters`]) are those slim copies, for the
//! table, the summary and the metrics; serializing the document reads the
//! full entries back one at a time, so the written document is exactly
//! what it was (same fields, same schema), and [`Clusters::full`] gives
//! readers that need the items (the Markdown details) one entry at a time.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use cilium_gc_documents::fleet::ClusterEntry;

/// Where finished entries wait for the document: an unnamed temporary
/// file (gone when the process ends, however it ends) and, per cluster
/// index, where its line starts.
#[derive(Debug)]
pub(crate) struct Spool {
    file: Mutex<(File, Vec<Option<u64>>)>,
}

impl Spool {
    /// A spool for `clusters` entries, in the system's temporary directory.
    pub(crate) fn new(clusters: usize) -> io::Result<Self> {
        Ok(Spool {
            file: Mutex::new((tempfile::tempfile()?, vec![None; clusters])),
        })
    }

    /// Write `entry` (cluster number `index`) to the spool and return its
    /// slim copy. When the disk refuses, the entry stays whole in memory:
    /// the run's result matters more than its footprint.
    pub(crate) fn keep(&self, index: usize, entry: ClusterEntry) -> (ClusterEntry, bool) {
        let Ok(mut line) = serde_json::to_vec(&entry) else {
            return (entry, false);
        };
        line.push(b'\n');
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let (file, offsets) = &mut *g;
        let written = file
            .seek(SeekFrom::End(0))
            .and_then(|at| file.write_all(&line).map(|()| at));
        match written {
            Ok(at) if index < offsets.len() => {
                offsets[index] = Some(at);
                (slim(entry), true)
            }
            _ => (entry, false),
        }
    }

    /// The full entry of cluster `index`, if it was spooled.
    fn read(&self, index: usize) -> Option<io::Result<ClusterEntry>> {
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let (file, offsets) = &mut *g;
        let at = (*offsets.get(index)?)?;
        let mut read = || -> io::Result<ClusterEntry> {
            file.seek(SeekFrom::Start(at))?;
            let mut line = Vec::new();
            BufReader::new(&mut *file).read_until(b'\n', &mut line)?;
            serde_json::from_slice(&line).map_err(io::Error::from)
        };
        Some(read())
    }
}

/// `entry` without what only the written document needs: the items.
fn slim(mut entry: ClusterEntry) -> ClusterEntry {
    if let Some(r) = entry.report.as_mut() {
        r.items = Vec::new();
    }
    entry
}

/// The clusters of a fleet document, in the order selected. Derefs to the
/// entries as kept in memory: complete, except that the report of a
/// spooled cluster has no `items` (see the module doc); use
/// [`Clusters::full`] for those. Serializes the full entries.
#[derive(Debug, Clone, Default)]
pub struct Clusters {
    entries: Vec<ClusterEntry>,
    spool: Option<Arc<Spool>>,
}

impl Clusters {
    pub(crate) fn new(entries: Vec<ClusterEntry>, spool: Option<Arc<Spool>>) -> Self {
        Clusters { entries, spool }
    }

    /// The full entry of cluster `index` (its report's items included),
    /// read back from the spool when it was spooled.
    pub fn full(&self, index: usize) -> io::Result<ClusterEntry> {
        let spooled = self.spool.as_ref().and_then(|s| s.read(index));
        match spooled {
            Some(entry) => entry,
            None => self
                .entries
                .get(index)
                .cloned()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such cluster")),
        }
    }
}

impl Clusters {
    /// Apply `f` to every full entry (a spooled one is read back, changed
    /// and spooled again, one at a time), keeping the slim copies in step.
    /// For readers that add to each cluster's report before it is written.
    pub fn update(&mut self, mut f: impl FnMut(&mut ClusterEntry)) {
        for i in 0..self.entries.len() {
            let spooled = self.spool.as_ref().and_then(|s| s.read(i).map(|e| (s, e)));
            match spooled {
                Some((spool, Ok(mut full))) => {
                    f(&mut full);
                    self.entries[i] = spool.keep(i, full).0;
                }
                _ => f(&mut self.entries[i]),
            }
        }
    }
}

impl From<Vec<ClusterEntry>> for Clusters {
    fn from(entries: Vec<ClusterEntry>) -> Self {
        Clusters::new(entries, None)
    }
}

impl Deref for Clusters {
    type Target = Vec<ClusterEntry>;
    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl DerefMut for Clusters {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.entries
    }
}

impl<'a> IntoIterator for &'a Clusters {
    type Item = &'a ClusterEntry;
    type IntoIter = std::slice::Iter<'a, ClusterEntry>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

/// One full entry at a time: at most one cluster's items in memory.
impl Serialize for Clusters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = s.serialize_seq(Some(self.entries.len()))?;
        for i in 0..self.entries.len() {
            match self.spool.as_ref().and_then(|sp| sp.read(i)) {
                Some(full) => seq.serialize_element(&full.map_err(S::Error::custom)?)?,
                None => seq.serialize_element(&self.entries[i])?,
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Clusters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<ClusterEntry>::deserialize(d).map(Clusters::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::BuildEntry as _;
    use cilium_gc_cluster::exit::Exit;

    fn entry(context: &str) -> ClusterEntry {
        ClusterEntry::not_started(context.into(), Exit::Interrupted)
    }

    #[test]
    fn spooled_entries_serialize_whole_and_read_back() {
        let spool = Arc::new(Spool::new(3).unwrap());
        let mut b = entry("b");
        b.diagnosis_error = Some("kept".into());
        let (slim_b, spooled) = spool.keep(1, b.clone());
        assert!(spooled);
        let (slim_c, _) = spool.keep(2, entry("c"));
        // Cluster 0 was not spooled (kept whole in memory).
        let clusters = Clusters::new(vec![entry("a"), slim_b, slim_c], Some(spool.clone()));
        let written = serde_json::to_value(&clusters).unwrap();
        let expected = serde_json::to_value(vec![entry("a"), b.clone(), entry("c")]).unwrap();
        assert_eq!(written, expected);
        assert_eq!(
            serde_json::to_value(clusters.full(1).unwrap()).unwrap(),
            serde_json::to_value(&b).unwrap()
        );
        assert_eq!(clusters.len(), 3);
        assert!(
            !spool.keep(9, entry("z")).1,
            "an index out of range stays in memory"
        );
        // An update reaches the written document too.
        let mut clusters = clusters;
        clusters.update(|e| e.diagnosis_error = Some(format!("updated {}", e.context)));
        let written = serde_json::to_value(&clusters).unwrap();
        assert_eq!(written[1]["diagnosisError"], "updated b");
        assert_eq!(written[0]["diagnosisError"], "updated a");
        assert_eq!(clusters[2].diagnosis_error.as_deref(), Some("updated c"));
        let back: Clusters = serde_json::from_value(written).unwrap();
        assert_eq!(back[1].context, "b");
    }
}
