//! The one integration-test binary: end-to-end suites in `suite/`, shared helpers in
//! `support/` (what starts the binary, and the test-support crate's fakes re-exported).

// Test helpers panic on the unexpected: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
