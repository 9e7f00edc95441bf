//! The user-facing reference, rendered from what decides it: exit codes, outcomes, `fail_on`
//! kinds and permission modes from their enums; the keys of a task file and of a policy file
//! from the serde types that read them; the programs the Bash analyser proves
//! read-only, what programs write, where they run and how they read options, and the runners'
//! hazards from the analyser's definitions. `--help`, `action.yml`,
//! the README, `docs/reference.md` and `docs/bash.md` show these renderings, and the tests
//! below fail when a file drifts from the code (`TOLLGATE_UPDATE_REFERENCE=1 cargo test --lib
//! reference` rewrites the generated blocks in place).

use std::fmt::Write as _;

use crate::exit::ExitCode;
use crate::policy::PermissionMode;
use crate::task::FailOn;
use crate::transcript::Outcome;

/// The exit code table: `| code | meaning |`, one row per code.
pub fn exit_code_table() -> String {
    let mut table = String::from("| code | meaning |\n|---|---|\n");
    for code in ExitCode::ALL {
        let _ = writeln!(table, "| {} | {} |", code.code(), code.meaning());
    }
    table
}

/// The outcome table: each `outcome` a run can end with, the exit code it gives when
/// `fail_on` counts it, and what it means.
pub fn outcome_table() -> String {
    let mut table = String::from("| outcome | exit code | meaning |\n|---|---|---|\n");
    for outcome in Outcome::ALL {
        let _ = writeln!(
            table,
            "| `{}` | {} | {} |",
            outcome.as_str(),
            outcome.exit_code().code(),
            outcome.meaning()
        );
    }
    table
}

/// The `fail_on` kinds and what each counts.
pub fn fail_on_table() -> String {
    let mut table = String::from("| kind | what it counts |\n|---|---|\n");
    for kind in FailOn::ALL {
        let _ = writeln!(table, "| `{}` | {} |", kind.as_str(), kind.meaning());
    }
    table
}

/// The permission modes and what each does headless.
pub fn mode_table() -> String {
    let mut table = String::from("| mode | what it does headless |\n|---|---|\n");
    for mode in PermissionMode::ALL {
        let _ = writeln!(table, "| `{}` | {} |", mode.as_str(), mode.meaning());
    }
    table
}

/// A file's key table: one row per block, its keys as the types that read them take them.
/// Keys with a capital letter are Claude Code's spellings (aliases of tollgate's keys, or its
/// own keys that tollgate reads the same way), listed apart so a reader sees tollgate's names
/// first.
fn key_table<'a>(levels: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> String {
    let mut table =
        String::from("| block | keys | Claude Code spellings also read |\n|---|---|---|\n");
    let code = |keys: &[&str]| {
        if keys.is_empty() {
            "—".to_string()
        } else {
            keys.iter()
                .map(|key| format!("`{key}`"))
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    for (path, mut keys) in levels {
        keys.sort_unstable();
        keys.dedup();
        let (claude, own): (Vec<&str>, Vec<&str>) = keys
            .into_iter()
            .partition(|key| key.chars().any(|c| c.is_ascii_uppercase()) || key.starts_with('$'));
        let block = if path.is_empty() {
            "(top level)".to_string()
        } else {
            format!("`{path}`")
        };
        let _ = writeln!(table, "| {block} | {} | {} |", code(&own), code(&claude));
    }
    table
}

/// Every key of a task file, by block, from the serde types that read it.
pub fn task_keys_table() -> String {
    key_table(
        crate::task::key_levels()
            .into_iter()
            .map(|(path, keys)| (path, keys.to_vec())),
    )
}

/// Every key of a policy file, by block, from the serde types that read it (the Claude Code
/// keys it loads and ignores are in the policy docs' own table).
pub fn policy_keys_table() -> String {
    key_table(crate::policy::key_levels_for_reference())
}

/// `0 success, 1 task failed, …`: the codes in one line, for help texts and action.yml.
pub fn exit_codes_inline() -> String {
    ExitCode::ALL
        .map(|code| format!("{} {}", code.code(), code.summary()))
        .join(", ")
}

/// Every outcome name, comma-separated.
pub fn outcomes_inline() -> String {
    Outcome::ALL.map(Outcome::as_str).join(", ")
}

/// Every `fail_on` kind, comma-separated.
pub fn fail_on_inline() -> String {
    FailOn::ALL.map(FailOn::as_str).join(", ")
}

/// Every permission mode, comma-separated.
pub fn modes_inline() -> String {
    PermissionMode::ALL.map(PermissionMode::as_str).join(", ")
}

/// The lines `tollgate run --help` ends with.
pub fn run_after_help() -> String {
    format!(
        "Examples:\n  tollgate run examples/quickstart.yaml --out /tmp/run1\n  \
tollgate run -p \"Review {{{{ file }}}}\" --var file=src/lib.rs --output-format json\n\n\
Without a task file (-p or --prompt-file) the run uses model anthropic/claude-sonnet-4-5\n\
and, unless --policy is given, policies/prompt-default.yaml: Read, Glob, Grep, dontAsk.\n\
With a task file, each flag wins over the task's key (-p over prompt:, --model over\n\
model.name, --max-turns over limits.max_turns, ...; --max-cost caps max_cost_usd): the\n\
table is in docs/task-file.md. --var values are filled into the prompt as text, once.\n\n\
Writes transcript.jsonl and the reports (junit.xml, tollgate.sarif) to the output folder\n\
and prints a summary. Under GitHub Actions it also appends a step summary, writes step\n\
outputs and prints annotations.\n\n\
Permission modes: {}.\n\
Exit codes: {}.\n\
Which problems fail the run is the task's `fail_on` (default: all of {}, but a task\n\
file's default leaves out empty_answer), or --fail-on.",
        modes_inline(),
        exit_codes_inline(),
        fail_on_inline()
    )
}

/// What `--mode` accepts, so `--help` and completions list the modes.
pub fn mode_values() -> impl clap::builder::TypedValueParser<Value = PermissionMode> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(PermissionMode::ALL.map(PermissionMode::as_str))
        .try_map(|name| name.parse::<PermissionMode>())
}

/// The help line of `--fail-on`.
pub fn fail_on_help() -> String {
    format!(
        "What makes the run exit non-zero, comma-separated: {}, or none. Overrides the task's \
`fail_on` [default: all; a task file's default leaves out empty_answer]",
        fail_on_inline()
    )
}

/// The descriptions `action.yml` gives its inputs and outputs that name these values, by
/// input or output name.
pub fn action_descriptions() -> [(&'static str, String); 4] {
    [
        (
            "mode",
            format!(
                "Permission mode: {}. Empty: the task's, the policy's, else dontAsk.",
                modes_inline()
            ),
        ),
        (
            "fail-on",
            format!(
                "What fails the step, comma-separated: {}, or none. Empty: the task's fail_on (default: all but empty_answer; a prompt run's: all).",
                fail_on_inline()
            ),
        ),
        (
            "exit-code",
            format!("tollgate's exit code ({}).", exit_codes_inline()),
        ),
        (
            "outcome",
            format!("How the run ended: {}.", outcomes_inline()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::Path;

    /// A generated block in a Markdown file: the text between its markers is `render()`.
    struct Block {
        name: &'static str,
        render: fn() -> String,
    }

    const BLOCKS: [Block; 10] = [
        Block {
            name: "exit-codes",
            render: exit_code_table,
        },
        Block {
            name: "outcomes",
            render: outcome_table,
        },
        Block {
            name: "fail-on",
            render: fail_on_table,
        },
        Block {
            name: "modes",
            render: mode_table,
        },
        Block {
            name: "task-keys",
            render: task_keys_table,
        },
        Block {
            name: "policy-keys",
            render: policy_keys_table,
        },
        Block {
            name: "read-only-programs",
            render: crate::bash::read_only_table,
        },
        Block {
            name: "runner-hazards",
            render: crate::bash::runner_hazards_table,
        },
        Block {
            name: "program-effects",
            render: crate::bash::program_effects_table,
        },
        Block {
            name: "option-syntax",
            render: crate::bash::option_syntax_table,
        },
    ];

    fn start_marker(name: &str) -> String {
        format!("<!-- generated: {name} (crates/core/src/reference; do not edit by hand) -->\n")
    }

    const END_MARKER: &str = "<!-- end generated -->";

    /// `text` with every generated block it holds rendered afresh, and the names it holds.
    fn refresh(text: &str) -> Result<(String, Vec<&'static str>), String> {
        let mut text = text.to_string();
        let mut found = Vec::new();
        for block in &BLOCKS {
            let start = start_marker(block.name);
            let Some(at) = text.find(&start) else {
                continue;
            };
            let body = at + start.len();
            let Some(len) = text[body..].find(END_MARKER) else {
                return Err(format!("block `{}` has no end marker", block.name));
            };
            text.replace_range(body..body + len, &(block.render)());
            found.push(block.name);
        }
        Ok((text, found))
    }

    /// The repository's root, where the docs are: two folders above this crate's.
    fn root() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    /// Each file holds the blocks named, rendered from today's enums; with
    /// `TOLLGATE_UPDATE_REFERENCE=1` the file is rewritten instead.
    #[test]
    fn the_docs_show_what_the_code_decides() {
        let files: [(&str, &[&str]); 3] = [
            ("README.md", &["exit-codes"]),
            (
                "docs/reference.md",
                &[
                    "exit-codes",
                    "outcomes",
                    "fail-on",
                    "modes",
                    "task-keys",
                    "policy-keys",
                ],
            ),
            (
                "docs/bash.md",
                &[
                    "read-only-programs",
                    "runner-hazards",
                    "program-effects",
                    "option-syntax",
                ],
            ),
        ];
        let update = std::env::var_os("TOLLGATE_UPDATE_REFERENCE").is_some();
        for (file, wanted) in files {
            let path = root().join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let (fresh, found) = refresh(&text).unwrap();
            assert_eq!(found, wanted, "{file}: generated blocks");
            if update {
                std::fs::write(&path, &fresh).unwrap();
            } else {
                assert!(
                    fresh == text,
                    "{file} has drifted from the code; run TOLLGATE_UPDATE_REFERENCE=1 cargo test --lib reference"
                );
            }
        }
    }

    #[test]
    fn the_action_describes_every_value() {
        let text = std::fs::read_to_string(root().join("action.yml")).unwrap();
        let action: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        for (name, wanted) in action_descriptions() {
            let described = action["inputs"][name]["description"]
                .as_str()
                .or_else(|| action["outputs"][name]["description"].as_str());
            assert_eq!(
                described,
                Some(wanted.as_str()),
                "action.yml `{name}` description"
            );
        }
    }

    /// Every variant, in declaration order, as serde numbers them: a variant added to an
    /// enum but not to its `ALL` fails here.
    fn variants<T: serde::de::DeserializeOwned>() -> Vec<T> {
        use serde::de::value::{Error, U32Deserializer};
        (0u32..)
            .map_while(|index| T::deserialize(U32Deserializer::<Error>::new(index)).ok())
            .collect()
    }

    #[test]
    fn every_list_is_whole() {
        assert_eq!(variants::<ExitCode>(), ExitCode::ALL);
        assert_eq!(variants::<Outcome>(), Outcome::ALL);
        assert_eq!(variants::<FailOn>(), FailOn::ALL);
        assert_eq!(variants::<PermissionMode>(), PermissionMode::ALL);
    }

    #[test]
    fn outcome_names_are_their_serde_names() {
        for outcome in Outcome::ALL {
            assert_eq!(
                serde_json::to_value(outcome).unwrap(),
                serde_json::json!(outcome.as_str())
            );
        }
    }
}
