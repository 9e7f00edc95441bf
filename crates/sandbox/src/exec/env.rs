//! What the processes tollgate starts may see of its environment: never a credential (the
//! provider key, `redact_env` names, token-named variables), neither in their own
//! environment nor by reading tollgate's `/proc/<pid>/environ`.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::sync::Arc;

use tollgate_base::is_secret_env_name;

/// Variables that would make a command the analyser proved read-only do something else:
/// start-up files, library injection, `cd` search paths, tool configs that run programs.
fn changes_what_commands_do(name: &str) -> bool {
    const EXACT: [&str; 10] = [
        "BASH_ENV",
        "ENV",
        "CDPATH",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "RIPGREP_CONFIG_PATH",
        "GIT_EXEC_PATH",
        "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF",
    ];
    EXACT.contains(&name) || name.starts_with("LD_") || name.starts_with("GIT_CONFIG")
}

/// The complete environment of one started process (nothing else is inherited).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv(Arc<[(OsString, OsString)]>);

impl ChildEnv {
    /// tollgate's environment as it is now, less `withheld` names and every token-named one.
    pub fn without_secrets(withheld: &BTreeSet<String>) -> ChildEnv {
        ChildEnv(
            std::env::vars_os()
                .filter(|(name, _)| {
                    !name
                        .to_str()
                        .is_none_or(|name| withheld.contains(name) || is_secret_env_name(name))
                })
                .collect(),
        )
    }

    /// Also without the variables that change what a command proven read-only does: the
    /// environment of the model's commands.
    pub fn for_model_commands(&self) -> ChildEnv {
        ChildEnv(
            self.0
                .iter()
                .filter(|(name, _)| name.to_str().is_some_and(|n| !changes_what_commands_do(n)))
                .cloned()
                .collect(),
        )
    }

    /// This environment with `name` set to `value`.
    pub fn with(&self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> ChildEnv {
        let name = name.as_ref();
        let mut vars: Vec<(OsString, OsString)> = self
            .0
            .iter()
            .filter(|(existing, _)| existing != name)
            .cloned()
            .collect();
        vars.push((name.to_os_string(), value.as_ref().to_os_string()));
        ChildEnv(vars.into())
    }

    /// Exactly these variables (an environment prepared elsewhere, e.g. the sandbox's).
    pub fn from_vars(vars: Vec<(OsString, OsString)>) -> ChildEnv {
        ChildEnv(vars.into())
    }

    /// This environment without the variables `names`.
    pub fn without(&self, names: &[&str]) -> ChildEnv {
        ChildEnv(
            self.0
                .iter()
                .filter(|(name, _)| !names.iter().any(|removed| name == removed))
                .cloned()
                .collect(),
        )
    }

    pub fn vars(&self) -> &[(OsString, OsString)] {
        &self.0
    }

    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.0
            .iter()
            .find(|(existing, _)| existing == name)
            .map(|(_, value)| value.as_os_str())
    }
}

/// The environments of what one run starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEnv {
    /// The model's Bash commands: no secrets, nothing that changes what a command does.
    pub model: ChildEnv,
    /// Hooks (the policy author's): no secrets.
    pub hooks: ChildEnv,
    /// The task author's checks keep tollgate's full environment: a check may need a registry
    /// token the model never sees. What they print back to the model is redacted.
    pub checks: ChildEnv,
}

impl RunEnv {
    /// `withheld`: the provider key's variable and the task's `redact_env`, on top of every
    /// token-named variable.
    pub fn new(withheld: &BTreeSet<String>) -> RunEnv {
        let hooks = ChildEnv::without_secrets(withheld);
        RunEnv {
            model: hooks.for_model_commands(),
            hooks,
            checks: ChildEnv(std::env::vars_os().collect()),
        }
    }
}

/// Makes tollgate's original environment block unreadable: `/proc/<pid>/environ` shows the
/// block the process started with, whatever `std::env` says later, and root can read it
/// even in a non-dumpable process. So every variable is first copied to the heap (libc's
/// `setenv` allocates a fresh string and repoints `environ`, which `std::env` reads), then
/// the original block is overwritten with zeros. Must run before any thread starts (the
/// first thing `main` does); an `Err` leaves the block as it was.
pub fn seal_process_environment() -> std::io::Result<()> {
    let (start, end) = environ_block()?;
    // `set_var` panics on a name that is empty or holds `=` (an entry like `=x` can reach a
    // process); such a variable is not copied and reads as gone once the block is cleared.
    let vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| !name.is_empty() && !name.as_encoded_bytes().contains(&b'='))
        .collect();
    for (name, value) in &vars {
        // SAFETY: no other thread exists yet (documented precondition), so nothing reads
        // the environment while it is rewritten.
        unsafe { std::env::set_var(name, value) };
    }
    if vars
        .iter()
        .any(|(name, value)| std::env::var_os(name).is_none_or(|seen| &seen != value))
    {
        return Err(std::io::Error::other(
            "the environment did not survive its copy",
        ));
    }
    let len = end.saturating_sub(start);
    // SAFETY: [start, end) is the environment block the kernel placed at the top of the main
    // thread's stack; it is writable, belongs to no Rust object, and after the copies above
    // no `environ` entry points into it any more.
    unsafe { std::ptr::write_bytes(start as *mut u8, 0, len) };
    Ok(())
}

/// `env_start` and `env_end` of this process (fields 50 and 51 of `/proc/self/stat`).
fn environ_block() -> std::io::Result<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may hold spaces and parentheses: count after its last ')'.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| std::io::Error::other("unexpected /proc/self/stat"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| -> std::io::Result<usize> {
        fields
            .get(number - 3)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| std::io::Error::other("unexpected /proc/self/stat"))
    };
    let (start, end) = (field(50)?, field(51)?);
    if start == 0 || end < start {
        return Err(std::io::Error::other(
            "no environment block in /proc/self/stat",
        ));
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_hijacks_are_named() {
        for name in [
            "BASH_ENV",
            "ENV",
            "CDPATH",
            "LD_PRELOAD",
            "GIT_CONFIG_GLOBAL",
            "RIPGREP_CONFIG_PATH",
        ] {
            assert!(changes_what_commands_do(name), "{name}");
        }
        assert!(!changes_what_commands_do("GIT_AUTHOR_NAME"));
    }

    #[test]
    fn withheld_and_token_named_variables_are_left_out() {
        // Names no other test uses; set before the environment is read.
        unsafe {
            std::env::set_var("TOLLGATE_ENV_TEST_TOKEN", "t");
            std::env::set_var("TOLLGATE_ENV_TEST_URL", "u");
            std::env::set_var("TOLLGATE_ENV_TEST_PLAIN", "p");
            std::env::set_var("LD_TOLLGATE_ENV_TEST", "l");
        }
        let withheld = BTreeSet::from(["TOLLGATE_ENV_TEST_URL".to_string()]);
        let env = RunEnv::new(&withheld);
        for child in [&env.model, &env.hooks] {
            assert_eq!(child.get("TOLLGATE_ENV_TEST_TOKEN"), None);
            assert_eq!(child.get("TOLLGATE_ENV_TEST_URL"), None);
            assert_eq!(child.get("TOLLGATE_ENV_TEST_PLAIN"), Some(OsStr::new("p")));
        }
        assert_eq!(env.hooks.get("LD_TOLLGATE_ENV_TEST"), Some(OsStr::new("l")));
        assert_eq!(env.model.get("LD_TOLLGATE_ENV_TEST"), None);
        assert_eq!(
            env.checks.get("TOLLGATE_ENV_TEST_TOKEN"),
            Some(OsStr::new("t"))
        );
        let with = env.model.with("TOLLGATE_ENV_TEST_PLAIN", "q");
        assert_eq!(with.get("TOLLGATE_ENV_TEST_PLAIN"), Some(OsStr::new("q")));
    }
}
