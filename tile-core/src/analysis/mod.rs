//! Analyses shared by passes: facts about the IR that decide nothing by
//! themselves. A pass calls them to make a decision and records the decision
//! in the IR; the code generators read the record and never call these.

pub mod access;
pub mod ownership;
pub mod range;
