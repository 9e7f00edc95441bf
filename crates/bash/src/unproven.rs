//! Why the analyser could not prove a command harmless: one variant per reason, its text the
//! reason a decision and `check --explain` show. Data only; the deciding happens elsewhere.

use std::path::PathBuf;

use thiserror::Error;

use super::sed::ProgramRefused;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum Unproven {
    // The command word (command.rs).
    #[error("there is no command")]
    NoCommand,
    #[error("the command name `{0}` is not known statically")]
    DynamicName(String),
    #[error("`{0}` is a program outside the system's bin folders")]
    OutsideBinFolders(String),

    // `cd`, `pushd` (command.rs).
    #[error("`{0}` without exactly one directory (`cd` alone goes home)")]
    DirectoryCount(String),
    #[error("`{name} {target}` goes to a directory not known here")]
    UnknownDirectory { name: String, target: String },
    #[error("`{name}` leaves the workspace ({})", outside.display())]
    LeavesWorkspace { name: String, outside: PathBuf },

    // Locating a word as a path (paths.rs); each holds the word as written.
    #[error("`{0}` is not known statically")]
    NotStatic(String),
    #[error("`{0}`: cannot expand `~` here")]
    Tilde(String),
    #[error("`{0}`: the names this glob matches cannot be listed")]
    GlobUnknown(String),
    #[error("`{0}`: a glob that may reach `..` cannot be located")]
    GlobReachesParent(String),
    #[error("`{0}` is relative and the working directory is not known after `cd`")]
    RelativeAfterCd(String),
    #[error("`{word}`: {reason}")]
    Unresolvable {
        word: String,
        reason: tollgate_base::Unresolvable,
    },
    #[error("`{word}` reads {}, which never ends", path.display())]
    EndlessRead { word: String, path: PathBuf },
    #[error("`{word}` reads {} outside the workspace", path.display())]
    ReadsOutside { word: String, path: PathBuf },

    // Read-only commands and their options (readonly.rs). `command` is the program's name,
    // `option` the option as written.
    #[error("`{0}` is not a known read-only command")]
    UnknownCommand(String),
    #[error("`{word}` may expand to an option of `{command}`")]
    MayBeOption { word: String, command: String },
    #[error("`{command} {option}` needs a value")]
    NeedsValue { command: String, option: String },
    #[error("`{command} {option}` reads the names of the files to read from a file")]
    NamesFromFile { command: String, option: String },
    #[error("`{command} {option}` is not known to be read-only")]
    NotReadOnly { command: String, option: String },
    #[error("`{command}` with more than {most} file operand(s) writes or is not understood")]
    TooManyOperands { command: String, most: usize },
    #[error("{command} argument `{word}` is not known statically")]
    ArgumentNotStatic { command: &'static str, word: String },
    #[error("`{0}` with an argument not known statically")]
    SomeArgumentNotStatic(&'static str),
    #[error("`{command} {option}` is not known to be harmless")]
    NotHarmless {
        command: &'static str,
        option: String,
    },
    #[error("`printf` with an unknown first argument may be `-v`")]
    PrintfMayBeV,
    #[error("`{0}` may expand to a sed option such as `-i`")]
    SedMayBeOption(String),
    #[error("`sed -e` needs a script")]
    SedNeedsScript,
    #[error("`sed {0}` is not known to be read-only (`-i` edits files)")]
    SedOption(String),
    #[error("`sed` without a script")]
    SedWithoutScript,
    #[error("sed script `{0}` is not known statically")]
    SedScriptNotStatic(String),
    #[error("`awk` without a program")]
    AwkWithoutProgram,
    #[error(transparent)]
    Program(#[from] ProgramRefused),
    #[error("`find -L` follows symlinks out of the workspace")]
    FindFollowsLinks,
    #[error("`find {0}` runs a command")]
    FindRuns(String),
    #[error("`find {0}` deletes or writes files")]
    FindWrites(String),
    #[error("`jq` modules (`import`, `include`, `-L`) read files from elsewhere")]
    JqModules,
    #[error("jq: missing file")]
    JqMissingFile,
    #[error("`set {0}` is not understood")]
    SetNotUnderstood(String),
    #[error("`date -s` sets the clock")]
    DateSetsClock,
    #[error("`date -f/-r` reads a file")]
    DateReadsFile,
    /// A variable-binding builtin's name or option (bindings.rs).
    #[error("{0}")]
    Binding(String),

    // git (git.rs).
    #[error("`git` without a subcommand")]
    GitWithoutSubcommand,
    #[error("`git -C` needs a directory")]
    GitCNeedsDirectory,
    #[error("`git {0}` can change what git runs or where it writes")]
    GitRedirects(String),
    #[error("git option `{0}` is not known to be safe")]
    GitOption(String),
    #[error("`git {0}` is not a read-only git command")]
    GitNotReadOnly(String),
    #[error("git argument `{0}` may expand to an option")]
    GitMayBeOption(String),
    #[error("`git {sub} {option}` can write files or run programs")]
    GitWritesOrRuns { sub: String, option: String },
    #[error("`git grep -O` runs a pager program")]
    GitGrepPager,
    #[error("`git {sub} {option}` is not a listing")]
    GitNotListing { sub: String, option: String },
    #[error("`git {0}` with a name creates one")]
    GitCreates(String),
    #[error("only `git remote`, `git remote -v` and `get-url` are read-only")]
    GitRemote,
    #[error("`git stash` changes the working tree")]
    GitStash,
    #[error("only `git reflog show` is read-only")]
    GitReflog,
    #[error("`{0}` is a path outside the directory given to `git -C`")]
    GitOutsideC(String),

    // Wrappers (wrappers.rs): `wrapper` is the wrapper's name.
    #[error("`{wrapper}` has an argument `{word}` that is not known")]
    WrapperArgument { wrapper: String, word: String },
    #[error("`{wrapper}` option `{option}` is not understood")]
    WrapperOption { wrapper: String, option: String },

    // Here-documents (syntax.rs).
    #[error("the here-document word `{0}` is read differently by the parser")]
    HeredocWord(String),
    #[error("where the here-document `<<{0}` ends is not certain")]
    HeredocEnd(String),
}
