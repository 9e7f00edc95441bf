//! The one integration-test binary: end-to-end suites in `suite/`, helpers in `support/`.

// clippy.toml allows these inside #[test] functions only; the helpers the tests share
// panic on a broken fixture just as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
