//! Reading the options by which a program or a wrapper runs in another directory than the
//! shell's (`env -C DIR cmd`, `make -C DIR`, `tar -C DIR`): the relative paths of that one
//! command are relative to the folder they name, which is where its reads must be looked for.
//! Which options do so is each program's definition (`programs`, `RunsIn`); git's own `-C`
//! is git's.

use super::programs;
use super::word::Word;

/// The folders `name` changes to before it works, in order, among `args` (its own options,
/// for a wrapper): `None` in the list for one whose name is not known statically. A word
/// that is not known statically may be such an option, so it counts as an unknown folder.
pub(crate) fn directories(name: &str, args: &[Word]) -> Vec<Option<Word>> {
    let Some(runs_in) = programs::effects(name).map(|e| &e.runs_in) else {
        return Vec::new();
    };
    let (short, long) = (runs_in.short, runs_in.long);
    if short.is_empty() && long.is_empty() {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let Some(v) = word.fixed() else {
            let raw = word.raw.trim_start_matches(['"', '\'']);
            let may_be_option = raw.starts_with(['$', '`'])
                || short
                    .iter()
                    .chain(long.iter())
                    .any(|opt| raw.starts_with(opt));
            if may_be_option {
                found.push(None);
            }
            continue;
        };
        if v == "--" {
            break;
        }
        if short.contains(&v) || long.contains(&v) {
            found.push(words.next().filter(|w| w.fixed().is_some()).cloned());
        } else if let Some(value) = long
            .iter()
            .find_map(|opt| v.strip_prefix(opt).and_then(|rest| rest.strip_prefix('=')))
        {
            found.push(Some(Word::literal(value)));
        } else if let Some(value) = short
            .iter()
            .find_map(|opt| v.strip_prefix(opt).filter(|rest| !rest.is_empty()))
            .filter(|_| !v.starts_with("--"))
        {
            found.push(Some(Word::literal(value)));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(words: &str) -> Vec<Word> {
        words.split_whitespace().map(Word::literal).collect()
    }

    fn dirs(name: &str, args: &str) -> Vec<Option<String>> {
        directories(name, &fixed(args))
            .into_iter()
            .map(|w| w.and_then(|w| w.fixed().map(str::to_owned)))
            .collect()
    }

    #[test]
    fn every_spelling_of_a_directory_option_is_found() {
        let some = |d: &str| vec![Some(d.to_owned())];
        assert_eq!(dirs("env", "-C sub cat ../.env"), some("sub"));
        assert_eq!(dirs("env", "-Csub cat"), some("sub"));
        assert_eq!(dirs("env", "--chdir=sub cat"), some("sub"));
        assert_eq!(dirs("env", "--chdir sub cat"), some("sub"));
        assert_eq!(
            dirs("make", "-f x -C a -C b"),
            vec![Some("a".into()), Some("b".into())]
        );
        assert_eq!(dirs("tar", "--directory=sub -cf - ../.env"), some("sub"));
        assert_eq!(dirs("yarn", "--cwd pkg build"), some("pkg"));
        assert_eq!(dirs("make", "-C"), vec![None]);
        assert_eq!(dirs("make", "test"), Vec::<Option<String>>::new());
        assert_eq!(dirs("ls", "-C src"), Vec::<Option<String>>::new());
        assert_eq!(dirs("make", "-- -C x"), Vec::<Option<String>>::new());
    }
}
