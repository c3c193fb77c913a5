//! Fresh names for a function's variables and buffers.

use super::{Buffer, Var};

/// An index of the names of a function's variables and buffers, so that a
/// fresh name takes constant time (a scan of the tables for every new name
/// made compiling a large kernel quadratic). It is brought up to date from
/// the tables on each use (they only grow; names never change), so code
/// that pushes onto them directly keeps it correct. Never compared.
#[derive(Debug, Clone, Default)]
pub struct NameIndex {
    taken: std::collections::HashSet<String>,
    /// The next suffix to try for each base name.
    next: std::collections::HashMap<String, u32>,
    /// How many vars and buffers are indexed.
    seen: (usize, usize),
}

impl PartialEq for NameIndex {
    fn eq(&self, _: &NameIndex) -> bool {
        true
    }
}

impl NameIndex {
    /// `base`, or `base_1`, `base_2`, .. : the first not taken; taken now.
    pub(super) fn fresh(&mut self, base: &str, vars: &[Var], buffers: &[Buffer]) -> String {
        let (nv, nb) = self.seen;
        for n in vars[nv..].iter().map(|v| &v.name) {
            self.taken.insert(n.clone());
        }
        for n in buffers[nb..].iter().map(|b| &b.name) {
            self.taken.insert(n.clone());
        }
        self.seen = (vars.len(), buffers.len());
        let name = if !self.taken.contains(base) {
            base.to_string()
        } else {
            let next = self.next.entry(base.to_string()).or_insert(1);
            loop {
                let n = format!("{base}_{next}");
                *next += 1;
                if !self.taken.contains(&n) {
                    break n;
                }
            }
        };
        self.taken.insert(name.clone());
        name
    }
}
