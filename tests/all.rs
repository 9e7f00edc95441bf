//! The one integration-test binary: every suite module runs from here.

mod suite;
mod support;
