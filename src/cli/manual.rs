//! What a shell and `man` know of the command line: completion scripts and man pages, both
//! rendered from the same clap definition the parser uses, so they cannot drift from it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;
use crate::exit::ExitCode;

#[derive(Debug, Args)]
pub(super) struct CompletionsArgs {
    /// The shell to complete for.
    shell: Shell,
}

#[derive(Debug, Args)]
pub(super) struct ManArgs {
    /// Write `tollgate.1` and one page per command (`tollgate-run.1`, …) into this folder
    /// instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub(super) fn completions(args: CompletionsArgs) -> Result<ExitCode> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "tollgate", &mut script);
    write_stdout(&script)?;
    Ok(ExitCode::Success)
}

pub(super) fn man(args: ManArgs) -> Result<ExitCode> {
    let command = Cli::command();
    match args.out {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            write_stdout(&page)?;
        }
        Some(folder) => write_pages(&folder, command)?,
    }
    Ok(ExitCode::Success)
}

/// `tollgate.1`, and `tollgate-<sub>.1` for every subcommand down the tree.
fn write_pages(folder: &Path, command: clap::Command) -> Result<()> {
    std::fs::create_dir_all(folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let mut pending = vec![(String::from("tollgate"), command)];
    while let Some((name, command)) = pending.pop() {
        let command = command.name(name.clone());
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                pending.push((format!("{name}-{}", sub.get_name()), sub.clone()));
            }
        }
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page)?;
        let path = folder.join(format!("{name}.1"));
        std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// A closed stdout (`tollgate man | head`) ends the output quietly, as a pager expects.
fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(err).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::policy::PermissionMode;
    use crate::task::FailOn;

    fn completion(shell: Shell) -> String {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "tollgate", &mut script);
        String::from_utf8(script).unwrap()
    }

    #[test]
    fn completions_name_the_commands_and_the_modes() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = completion(shell);
            for word in [
                "run",
                "check",
                "batch",
                "policy",
                "dontAsk",
                "bypassPermissions",
            ] {
                assert!(script.contains(word), "{shell} completion lacks {word}");
            }
        }
    }

    #[test]
    fn run_help_lists_every_code_mode_and_kind() {
        let mut command = Cli::command();
        let run = command.find_subcommand_mut("run").unwrap();
        let help = run.render_long_help().to_string();
        for code in ExitCode::ALL {
            assert!(
                help.contains(&format!("{} {}", code.code(), code.summary())),
                "run --help lacks exit code {}",
                code.code()
            );
        }
        for mode in PermissionMode::ALL {
            assert!(help.contains(mode.as_str()), "run --help lacks {mode}");
        }
        for kind in FailOn::ALL {
            assert!(help.contains(kind.as_str()), "run --help lacks {kind}");
        }
    }

    #[test]
    fn man_pages_cover_every_command() {
        let folder = tempfile::tempdir().unwrap();
        write_pages(folder.path(), Cli::command()).unwrap();
        for page in [
            "tollgate",
            "tollgate-run",
            "tollgate-check",
            "tollgate-policy-lint",
        ] {
            let text = std::fs::read_to_string(folder.path().join(format!("{page}.1"))).unwrap();
            assert!(
                text.starts_with(".ie") || text.contains(".TH"),
                "{page}: {text}"
            );
            assert!(
                text.contains(&page.replace('-', "\\-")),
                "{page} names itself"
            );
        }
        let run = std::fs::read_to_string(folder.path().join("tollgate-run.1")).unwrap();
        assert!(run.contains("dontAsk"), "the run page lists the modes");
    }
}
