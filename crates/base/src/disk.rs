//! One view of the disk for a stream of decisions that nothing runs between (`check
//! --calls`): each folder is listed once and each link read once, and every later decision
//! sees what the first one saw. A run never uses one: there a tool may change the disk between
//! two calls, so every decision looks again.
//!
//! A path's parts are answered from its folder's listing (one `getdents` for the folder
//! instead of one `lstat` per name ever asked about: a stream of unique file names is mostly
//! names that do not exist). A listing is trusted only where a name's bytes are what the
//! kernel matches: a folder that folds case (ext4 `casefold`, a case-insensitive mount), one
//! too large to hold, or a name that is not ASCII (which a filesystem may normalise) is
//! asked about with `lstat`, name by name, as without a view.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use foldhash::{HashMap, HashSet, HashSetExt};

/// What one path named when it was first looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Nothing (or nothing the caller may look at).
    Missing,
    /// A file or folder that is not a link.
    Entry,
    /// A symbolic link, with its target as stored (`readlink`), or `None` when it cannot be
    /// read. Whether the target exists is not asked: the resolver walks it.
    Link(Option<PathBuf>),
}

/// Names held before the view starts over: a stream over a million folders must not hold
/// them all (the cost of starting over is one more listing per folder).
const MAX_HELD: usize = 1 << 20;

/// A folder with more names than this is asked about name by name.
const MAX_LISTED: usize = 10_000;

/// The stream's view: folder listings, links read, and answers for paths no listing
/// covers.
#[derive(Debug, Default)]
pub struct DiskView {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    // Keyed by a path's bytes: hashing a `Path` hashes it component by component.
    /// By the folder's canonical path; `None` when its listing is not to be trusted.
    folders: HashMap<Box<[u8]>, Option<Listing>>,
    /// What a link (or a path no listing covers) named.
    paths: HashMap<Box<[u8]>, Seen>,
    /// Glob listings by folder, as the caller's lister returned them.
    names: HashMap<Box<[u8]>, Option<Vec<String>>>,
    count: usize,
}

/// What a folder's listing says of one of its names: missing, or an entry that is no link;
/// `None` when the listing is not trusted or the name is a link.
fn answer(listing: &Option<Listing>, name: &OsStr) -> Option<Seen> {
    match listing {
        Some(listing) if !listing.names.contains(name) => Some(Seen::Missing),
        Some(listing) if !listing.links.contains(name) => Some(Seen::Entry),
        _ => None,
    }
}

/// A folder's names, and which of them are links.
#[derive(Debug)]
struct Listing {
    names: HashSet<OsString>,
    links: HashSet<OsString>,
}

impl DiskView {
    /// What `path` (absolute, its parent canonical) names, as `lstat` would say, with a
    /// link's target as `readlink` reads it.
    pub fn look(&self, path: &Path) -> Seen {
        let Some((parent, name)) = super::parent_and_name(path) else {
            return self.look_alone(path);
        };
        if !name.is_ascii() {
            return self.look_alone(path);
        }
        let key = parent.as_os_str().as_bytes();
        let known = self
            .lock()
            .folders
            .get(key)
            .map(|listing| answer(listing, name));
        let listed = known.unwrap_or_else(|| {
            let listing = list(parent);
            let listed = answer(&listing, name);
            let mut held = self.lock();
            held.count += listing.as_ref().map_or(1, |l| l.names.len());
            held.make_room();
            held.folders.insert(key.into(), listing);
            listed
        });
        listed.unwrap_or_else(|| self.look_alone(path))
    }

    /// The names in `dir` for a glob, listed by `list` the first time; a folder a trusted
    /// listing says is not there has none, without asking.
    pub fn names(
        &self,
        dir: &Path,
        list: impl FnOnce(&Path) -> Option<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(known) = self.lock().names.get(dir.as_os_str().as_bytes()) {
            return known.clone();
        }
        let names = match self.look(dir) {
            Seen::Missing => None,
            _ => list(dir),
        };
        let mut held = self.lock();
        held.count += names.as_ref().map_or(1, Vec::len);
        held.make_room();
        held.names
            .insert(dir.as_os_str().as_bytes().into(), names.clone());
        names
    }

    /// `lstat` for one path, remembered.
    fn look_alone(&self, path: &Path) -> Seen {
        if let Some(seen) = self.lock().paths.get(path.as_os_str().as_bytes()) {
            return seen.clone();
        }
        // Looked at outside the lock: a second thread asking the same path looks twice and
        // both get the disk's answer.
        let seen = look_now(path);
        let mut held = self.lock();
        held.count += 1;
        held.make_room();
        held.paths
            .insert(path.as_os_str().as_bytes().into(), seen.clone());
        seen
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic while the view was held leaves it whole (insert and clear do not unwind
        // half-done), so the poison carries nothing to distrust.
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Held {
    fn make_room(&mut self) {
        if self.count > MAX_HELD {
            *self = Held::default();
        }
    }
}

/// One path as the disk has it now: one `lstat`, and a `readlink` only for a link.
pub fn look_now(path: &Path) -> Seen {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Seen::Link(std::fs::read_link(path).ok()),
        Ok(_) => Seen::Entry,
        Err(_) => Seen::Missing,
    }
}

/// `dir`'s listing, or `None` when it cannot be read, is too large, or may match a name the
/// listing does not hold.
fn list(dir: &Path) -> Option<Listing> {
    let mut listing = Listing {
        names: HashSet::new(),
        links: HashSet::new(),
    };
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if entry.file_type().ok()?.is_symlink() {
            listing.links.insert(name.clone());
        }
        listing.names.insert(name);
        if listing.names.len() > MAX_LISTED {
            return None;
        }
    }
    matches_by_bytes(dir, &listing.names).then_some(listing)
}

/// Whether the kernel finds a name in `dir` only by its exact bytes, as far as ASCII names
/// go: one name with a letter, its case swapped, must not be found. A folder with no such
/// name proves nothing, so it is trusted only when it holds no name that folding could map
/// onto an ASCII one (every name ASCII without letters).
fn matches_by_bytes(dir: &Path, names: &HashSet<OsString>) -> bool {
    let probe = names
        .iter()
        .find(|n| n.as_bytes().iter().any(u8::is_ascii_alphabetic));
    let Some(probe) = probe else {
        return names.iter().all(|n| n.is_ascii());
    };
    let swapped: Vec<u8> = probe
        .as_bytes()
        .iter()
        .map(|b| {
            if b.is_ascii_lowercase() {
                b.to_ascii_uppercase()
            } else {
                b.to_ascii_lowercase()
            }
        })
        .collect();
    let swapped = OsStr::from_bytes(&swapped);
    names.contains(swapped) || std::fs::symlink_metadata(dir.join(swapped)).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_answers_as_lstat_does_for_files_folders_links_and_missing_names() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("file"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(root.join("Folder")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(root.join("Folder"), root.join("link"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling"))
            .unwrap_or_else(|e| panic!("{e}"));
        let view = DiskView::default();
        for name in [
            "file",
            "Folder",
            "link",
            "dangling",
            "gone",
            "FILE",
            "fold\u{e9}r",
        ] {
            let path = root.join(name);
            assert_eq!(view.look(&path), look_now(&path), "{name}");
            assert_eq!(view.look(&path), look_now(&path), "{name}, asked again");
        }
        assert_eq!(
            view.look(&root.join("link")),
            Seen::Link(Some(root.join("Folder")))
        );
    }

    #[test]
    fn a_stream_sees_the_disk_as_it_was_first_listed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let view = DiskView::default();
        assert_eq!(view.look(&root.join("later")), Seen::Missing);
        std::fs::write(root.join("later"), "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(view.look(&root.join("later")), Seen::Missing);
        assert_eq!(
            DiskView::default().look(&root.join("later")),
            Seen::Entry,
            "a new view looks again"
        );
    }

    #[test]
    fn a_glob_folder_is_listed_once_and_a_missing_one_not_at_all() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let view = DiskView::default();
        let mut lists = 0;
        let mut lister = |_: &Path| {
            lists += 1;
            Some(vec!["a".to_owned()])
        };
        assert_eq!(view.names(&root, &mut lister), Some(vec!["a".to_owned()]));
        assert_eq!(view.names(&root, &mut lister), Some(vec!["a".to_owned()]));
        assert_eq!(view.names(&root.join("none"), &mut lister), None);
        assert_eq!(lists, 1);
    }

    #[test]
    fn a_folder_that_folds_case_is_not_trusted() {
        let names: HashSet<OsString> = [OsString::from("readme")].into_iter().collect();
        // A folder whose swapped-case probe exists outside the listing folds case.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("README"), "x").unwrap_or_else(|e| panic!("{e}"));
        assert!(!matches_by_bytes(dir.path(), &names));
        let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches_by_bytes(empty.path(), &names));
        let unlettered: HashSet<OsString> = [OsString::from("\u{212a}")].into_iter().collect();
        assert!(!matches_by_bytes(empty.path(), &unlettered));
    }
}
