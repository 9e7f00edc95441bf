//! The one integration-test binary: end-to-end suites in `suite/`, shared helpers in
//! `support/`.

// Test helpers panic on the unexpected: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
