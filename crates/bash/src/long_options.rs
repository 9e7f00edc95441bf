//! Options as programs parse them: whether a program takes any unambiguous prefix of a long
//! option for the option (getopt_long, git's parse-options, argparse, nopt), and matching a
//! written word against a hazard table's entries that way. Pure text; the tables are their
//! owners'.

/// How a program reads `--name`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LongOptions {
    /// Only the full spelling (clap, jq, git's global options, Go's flag package).
    Exact,
    /// Every option is a whole word, single-dash ones too: no clusters (find's primaries).
    Words,
    /// Any unambiguous prefix too (`--set-upstream-t`, `--edit-desc`, `--open=`). An ambiguous
    /// prefix is an error for the program, hence harmless; but the table is not the program's
    /// whole option list, so any prefix of a hazard counts as the hazard (fail closed).
    Prefix,
}

/// Whether the word `written` (`--name` or `--name=value`) may be read by the program as the
/// long option `full` (`--name`).
pub(crate) fn spells(written: &str, full: &str, syntax: LongOptions) -> bool {
    let name = written.split_once('=').map_or(written, |(name, _)| name);
    if name == full {
        return true;
    }
    syntax == LongOptions::Prefix
        && full.starts_with("--")
        && name.starts_with("--")
        && name.len() > 2
        && full.starts_with(name)
}

/// Whether the single-dash word `written` holds the letter `letter` as an option, reading it
/// as a cluster (`-vd` is `-v -d`) that a letter taking a value (in `valued`) ends.
pub(crate) fn cluster_has(written: &str, letter: char, valued: &str) -> bool {
    let Some(letters) = written.strip_prefix('-').filter(|l| !l.starts_with('-')) else {
        return false;
    };
    for c in letters.chars() {
        if c == letter {
            return true;
        }
        if valued.contains(c) {
            return false;
        }
    }
    false
}

/// Whether `written` is any of `table`'s options: `--long` entries as `syntax` reads them,
/// `-x` entries as letters of a cluster.
pub(crate) fn any_of(written: &str, table: &[&str], syntax: LongOptions, valued: &str) -> bool {
    table.iter().any(|option| {
        if syntax == LongOptions::Words {
            written == *option
        } else if option.starts_with("--") {
            spells(written, option, syntax)
        } else {
            let mut letters = option.chars().skip(1);
            match (letters.next(), letters.next()) {
                (Some(letter), None) => cluster_has(written, letter, valued),
                _ => written == *option,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::LongOptions::{Exact, Prefix};
    use super::*;

    #[test]
    fn prefixes_and_clusters() {
        let cases = [
            ("--set-upstream-t", "--set-upstream-to", Prefix, true),
            (
                "--set-upstream-t=origin/x",
                "--set-upstream-to",
                Prefix,
                true,
            ),
            ("--set-upstream-t", "--set-upstream-to", Exact, false),
            ("--set-upstream-to", "--set-upstream-to", Exact, true),
            ("--o", "--output", Prefix, true),
            ("--", "--output", Prefix, false),
            ("--outputs", "--output", Prefix, false),
            ("--open=touch M", "--open-files-in-pager", Prefix, true),
        ];
        for (written, full, syntax, want) in cases {
            assert_eq!(spells(written, full, syntax), want, "{written} {full}");
        }
        assert!(cluster_has("-vd", 'd', ""));
        assert!(cluster_has("-ro", 'o', "kt"));
        assert!(!cluster_has("-ko", 'o', "kt"));
        assert!(!cluster_has("--do", 'd', ""));
        assert!(any_of("-ni", &["-i", "--in-place"], Prefix, "efl"));
        assert!(any_of("--in-pl=.bak", &["-i", "--in-place"], Prefix, "efl"));
        assert!(!any_of("-n", &["-i", "--in-place"], Prefix, "efl"));
    }
}
