//! Integration suites, one module per area.

mod action;
mod redaction;
mod reports;
