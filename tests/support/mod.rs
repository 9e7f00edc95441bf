//! Helpers shared by the integration suites.

pub mod fake_model;
