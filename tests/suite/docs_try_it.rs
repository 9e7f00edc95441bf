//! The "Try it" commands of `docs/extensions.md`, run as written: every ```sh block after a
//! paragraph that starts with "Try it" is taken from the page (so the page and this test
//! cannot part) and run with `sh` in the repository's root, as a reader of a fresh clone
//! would; each must exit 0, and the run it made must end `success` with every MCP server it
//! lists started.
//!
//! `cargo` in those commands is a stand-in on `PATH` that runs the binaries this test run
//! built (`cargo run -- ARGS` is tollgate, `cargo run --quiet --bin tollgate-mcp-test-server`
//! the test server) and refuses any other use: a real `cargo run` would build the crate
//! again under the dev profile (`cargo test` builds it under the test profile), minutes of a
//! test for cargo's part, which is not what the page claims.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{AMBIENT, repo_root, transcript};

/// The shell blocks of the page's "Try it" paragraphs, in order.
fn try_it_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut armed = false;
    let mut block: Option<String> = None;
    for line in page.lines() {
        match &mut block {
            Some(text) if line.trim_end() == "```" => {
                blocks.push(std::mem::take(text));
                block = None;
            }
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None if line.starts_with("Try it") => armed = true,
            None if line.starts_with('#') => armed = false,
            None if armed && line.trim_end() == "```sh" => {
                block = Some(String::new());
                armed = false;
            }
            None => {}
        }
    }
    blocks
}

const CARGO_STAND_IN: &str = r#"#!/bin/sh
# cargo as the page's commands use it, running what this test run built.
fail() { echo "cargo stand-in: not a use the docs test knows: cargo $ARGS" >&2; exit 97; }
ARGS="$*"
[ "$1" = run ] || fail
shift
bin=tollgate
while [ $# -gt 0 ]; do
  case "$1" in
    -q|--quiet) shift ;;
    --bin) [ $# -ge 2 ] || fail; bin=$2; shift 2 ;;
    --) shift; break ;;
    *) fail ;;
  esac
done
case "$bin" in
  tollgate) exec "$TOLLGATE_TEST_BIN" "$@" ;;
  tollgate-mcp-test-server) exec "$TOLLGATE_TEST_MCP_SERVER" "$@" ;;
  *) fail ;;
esac
"#;

/// A folder holding the `cargo` stand-in.
fn stand_in() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cargo = dir.path().join("cargo");
    std::fs::write(&cargo, CARGO_STAND_IN).unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The transcript the summary on stdout names.
fn transcript_named(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("transcript: "))
        .unwrap_or_else(|| panic!("no transcript line in the summary:\n{stdout}"));
    let path = PathBuf::from(line.trim());
    if path.is_absolute() {
        path
    } else {
        repo_root().join(path)
    }
}

/// Runs one block as written, in the repository's root, seeing no operator's configuration
/// but what the block itself gives.
fn run_block(block: &str, bin: &Path, config: &Path) -> std::process::Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(block)
        .current_dir(repo_root())
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .env("XDG_CONFIG_HOME", config)
        .env("TOLLGATE_MANAGED_DIR", config.join("no-managed-policy"))
        .env("TOLLGATE_TEST_BIN", env!("CARGO_BIN_EXE_tollgate"))
        .env(
            "TOLLGATE_TEST_MCP_SERVER",
            env!("CARGO_BIN_EXE_tollgate-mcp-test-server"),
        );
    for name in AMBIENT {
        command.env_remove(name);
    }
    command.output().unwrap()
}

#[test]
fn the_extensions_pages_try_it_commands_run_as_written() {
    let page = std::fs::read_to_string(repo_root().join("docs/extensions.md")).unwrap();
    let blocks = try_it_blocks(&page);
    assert!(
        blocks
            .iter()
            .any(|block| block.contains("examples/mcp.yaml")),
        "the MCP section's Try it is not a ```sh block after a \"Try it\" paragraph: {blocks:?}"
    );
    let bin = stand_in();
    let config = tempfile::tempdir().unwrap();
    for block in &blocks {
        let output = run_block(block, bin.path(), config.path());
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{block}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        let path = transcript_named(&stdout);
        let events = transcript(&path);
        // The run folder is the default one under the root's .tollgate/runs/: not kept.
        if let Some(folder) = path.parent()
            && folder.starts_with(repo_root().join(".tollgate/runs"))
        {
            let _ = std::fs::remove_dir_all(folder);
        }
        let of = |kind: &str| -> Vec<&Value> {
            events
                .iter()
                .filter(|event| event["type"] == kind)
                .collect()
        };
        let finished = of("run_finished")[0];
        assert_eq!(finished["outcome"], "success", "{block}\n{finished}");
        assert!(finished.get("held_back").is_none(), "{block}\n{finished}");
        let started = of("run_started")[0];
        for server in started["mcp_servers"].as_array().into_iter().flatten() {
            assert_eq!(server["status"], "started", "{block}\n{server}");
        }
        if block.contains("examples/mcp.yaml") {
            let echoed = of("tool_result")
                .into_iter()
                .any(|result| result["content"] == "echo: hello from tollgate");
            assert!(
                echoed,
                "{block}: the server's echo is not in the transcript"
            );
        }
    }
}

#[test]
fn try_it_blocks_are_the_sh_blocks_after_a_try_it_paragraph() {
    let page = "# A\n\nTry it:\n\n```sh\ncargo run -- one\n```\n\n```sh\nnot taken\n```\n\nTry it too —\nmore words\n\n```text\nnot a command\n```\n```sh\ntwo\nthree\n```\n# B\nTry it\n# C\n```sh\nnot after one\n```\n";
    assert_eq!(try_it_blocks(page), ["cargo run -- one\n", "two\nthree\n"]);
}
