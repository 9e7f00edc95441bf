//! End-to-end suites, one module per area.

mod providers;
