//! The fakes and helpers tollgate's end-to-end tests (`tests/all.rs`) and benches share, one
//! of each; a dev-dependency of the main crate, never a dependency of the product
//! (`suite::layers` checks that).
//!
//! - the fake servers: `fake_model` (Anthropic and OpenAI over HTTP/SSE, `model_block` for a
//!   task), `fake_forge` (GitHub's REST API, checked against GitHub's own description of it
//!   in `octokit`, answering with `github_objects`), `mcp_http` (an MCP server over
//!   streamable HTTP); `browser` for the HTML reports; `bash` for the analyser's tables.
//! - `identity_fake`: Google's and Microsoft's token endpoints and GitHub's OIDC endpoint,
//!   checking assertions and signatures as the real ones do (the Vertex AI and Azure runs);
//!   `aws_fake_script` for Bedrock's, a Python script beside this crate's manifest.
//! - what a run left: `records` (the transcript's events, S2's invariant over them, the JUnit
//!   report).
//! - waiting on a run in the background: `wait` (`poll_until`, `wait_for_text`); `procs` for
//!   the processes it started (by command line, and their parents).
//! - the folders a test works in: `workspace` (a git repository, a remote and its clone, a
//!   copied tree, a script the gate cannot read into).
//! - `encode`: base64 and hex written apart from the redactor, for a secret's expected forms.
//! - a test that needs a program, package or kernel feature this machine may lack: `skip`
//!   (one line each in the default output, a count at the end; `TOLLGATE_TEST_REQUIRE_ALL=1`
//!   fails them).
//! - the benches' readings: `rusage` (CPU and peak memory), `request_parts` (what each part
//!   of a request costs, against `benches/request-budget.toml`).
//!
//! What starts the binary stays in `tests/support/` (`tollgate_in`, `Isolation`, `Run`,
//! `Sandbox`): cargo names the built `tollgate` only to the root package's own tests and
//! benches (`env!("CARGO_BIN_EXE_tollgate")`), and this crate cannot depend on the main one,
//! which depends on it.

// Test helpers panic on the unexpected: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// GitHub's objects (github_objects.rs) are written as the JSON they are, and `json!` expands
// one level per field.
#![recursion_limit = "256"]

use std::path::{Path, PathBuf};

pub mod bash;
pub mod browser;
pub mod encode;
pub mod fake_forge;
pub mod fake_model;
pub mod github_objects;
pub mod identity_fake;
pub mod mcp_http;
pub mod octokit;
pub mod procs;
pub mod records;
pub mod request_parts;
pub mod rusage;
pub mod skip;
pub mod wait;
pub mod workspace;

/// The repository root, where `examples/`, `policies/` and `tests/` live: this crate is
/// `crates/test-support/` of it.
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or_else(|| panic!("{} is not two folders deep", manifest.display()))
        .to_path_buf()
}

/// The fake Amazon Bedrock, STS and GitHub OIDC endpoints, a Python script (`python3
/// aws_fake.py CONFIG`; its top comment has the config): each request checked as AWS checks
/// it, the SigV4 signature recomputed with botocore.
pub fn aws_fake_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("aws_fake.py")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixtures the fakes read through `repo_root` (GitHub's descriptions from npm) and
    /// the script beside this manifest are where the paths say.
    #[test]
    fn the_paths_lead_to_the_repository_s_files() {
        assert!(repo_root().join("tests/npm/package.json").is_file());
        assert!(repo_root().join("crates/test-support/Cargo.toml").is_file());
        assert!(aws_fake_script().is_file());
    }
}
