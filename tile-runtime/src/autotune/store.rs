//! Tuned choices on disk: `<namespace>/autotune/<key>/choice.json` (+ `manifest.json`),
//! published and verified through the kernel cache's own staging and manifest code.

use serde::{Deserialize, Serialize};

use super::TuneReport;
use crate::cache::{DiskCache, Lookup};
use crate::config::Config;

use crate::cache::{AUTOTUNE, CHOICE};
const FORMAT: u32 = 1;

/// `choice.json`: the report, and what it was tuned for (checked on every read).
#[derive(Serialize, Deserialize)]
struct ChoiceFile {
    format: u32,
    key: String,
    set: String,
    report: TuneReport,
}

/// The entries of one set of alternatives (a kernel's variants, or a [`super::PlanSet`]).
pub(super) struct Store<'s> {
    cache: DiskCache,
    /// The set's identity (a change to any alternative makes earlier choices stale).
    set: &'s str,
    /// The alternatives' labels, in order.
    labels: &'s [&'static str],
}

impl<'s> Store<'s> {
    /// The disk cache of `cfg`, unless it is disabled or cannot be opened (a choice is
    /// then kept in memory only).
    pub fn open(cfg: &Config, set: &'s str, labels: &'s [&'static str]) -> Option<Store<'s>> {
        if !crate::cache::enabled_with(cfg) {
            return None;
        }
        let cache = DiskCache::open(&cfg.cache_root).ok()?;
        Some(Store { cache, set, labels })
    }

    fn rel(key: &str) -> String {
        format!("{AUTOTUNE}/{key}")
    }

    /// The report stored under `key`, if the entry is sound and describes this set; a
    /// damaged entry, or one that names a variant the set does not have, is removed.
    pub fn read(&self, key: &str) -> Option<TuneReport> {
        let rel = Store::rel(key);
        let mut entry = match self.cache.lookup(&rel, &[CHOICE], &[]) {
            Ok(Lookup::Hit(e)) => e,
            _ => return None,
        };
        let bytes = entry.take(CHOICE)?;
        let parsed: Option<ChoiceFile> = serde_json::from_slice(&bytes).ok();
        let valid = parsed.filter(|c| {
            c.format == FORMAT
                && c.key == key
                && c.set == self.set
                && self.labels.get(c.report.chosen) == Some(&c.report.chosen_label.as_str())
                && c.report.rows.len() == self.labels.len()
        });
        match valid {
            Some(c) => {
                let mut r = c.report;
                r.from_cache = true;
                Some(r)
            }
            None => {
                self.cache.discard(&entry.dir);
                None
            }
        }
    }

    /// Publishes `report` under `key` (best effort: a cache that cannot be written keeps
    /// the choice in memory only). A process that loses a race leaves the winner's.
    pub fn publish(&self, key: &str, report: &TuneReport) {
        let file = ChoiceFile {
            format: FORMAT,
            key: key.to_string(),
            set: self.set.to_string(),
            report: report.clone(),
        };
        let Ok(text) = serde_json::to_vec_pretty(&file) else {
            return;
        };
        let Ok(mut staging) = self.cache.stage(AUTOTUNE) else {
            return;
        };
        if staging.write(CHOICE, &text).is_err() {
            return;
        }
        let _ = staging.publish(&self.cache, &Store::rel(key));
    }
}
