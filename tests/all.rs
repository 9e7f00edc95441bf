//! The one integration-test binary: end-to-end suites in `suite/`, shared helpers in
//! `support/`.

// Test helpers panic on the unexpected: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// GitHub's objects (support/github_objects.rs) are written as the JSON they are, and
// `json!` expands one level per field.
#![recursion_limit = "256"]

mod suite;
mod support;
