//! Opening the files the file tools read and write: regular files only, beneath their root
//! ([`Place`]), and acted on through the one descriptor that was checked. A FIFO, a device or
//! a socket would hold a tool until its timeout (or stream forever, as /dev/zero does), so
//! each is refused with a sentence. The open itself never waits: it is made with O_NONBLOCK
//! and what was opened is then checked with fstat, so a FIFO swapped in after any earlier
//! check cannot block either. A file with more than one name (a hard link) is not written:
//! its other names lie where the gate did not look.

use std::fs::{File, Metadata};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::place::Place;
use crate::base::{BeneathError, OpenFor};

#[derive(Debug, thiserror::Error)]
pub enum RegularFileError {
    #[error("{} is a {kind}, not a regular file; only regular files can be {}", path.display(), purpose.done())]
    NotRegular {
        path: PathBuf,
        kind: &'static str,
        purpose: Purpose,
    },
    #[error("{} is a directory", path.display())]
    Directory { path: PathBuf },
    #[error(
        "{} has {links} names (hard links); a write through one would change the others, which the gate did not judge",
        path.display()
    )]
    HardLinked { path: PathBuf, links: u64 },
    /// A link on the way, or a path leaving its root.
    #[error(transparent)]
    Beneath(BeneathError),
    // Not a `source`: the OS's reason is printed here, once, as a tool result shows it.
    #[error("cannot {} {}: {error}", purpose.verb(), path.display())]
    Io {
        path: PathBuf,
        purpose: Purpose,
        error: std::io::Error,
    },
}

/// What a file was opened for, for the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Read,
    Write,
}

impl Purpose {
    fn verb(self) -> &'static str {
        match self {
            Purpose::Read => "read",
            Purpose::Write => "write",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Purpose::Read => "read",
            Purpose::Write => "written",
        }
    }
}

/// Opens the file at `place` for reading, with its metadata, if it is a regular file.
pub fn open_for_reading(place: &Place) -> Result<(File, Metadata), RegularFileError> {
    let file = open(place, OpenFor::Read, Purpose::Read)?;
    let metadata = checked(place, &file, Purpose::Read)?;
    Ok((file, metadata))
}

/// Opens the existing file at `place` for reading and writing (Edit), with its metadata, if
/// it is a regular file with one name.
pub fn open_for_editing(place: &Place) -> Result<(File, Metadata), RegularFileError> {
    let file = open(place, OpenFor::ReadWrite, Purpose::Write)?;
    let metadata = single(place, checked(place, &file, Purpose::Write)?)?;
    Ok((file, metadata))
}

/// Opens the file at `place` for writing (Write): created when missing (`None`: it was made
/// by this open), else the existing regular file with one name and its metadata. Nothing
/// is truncated here: the caller checks the file first.
pub fn open_for_writing(place: &Place) -> Result<(File, Option<Metadata>), RegularFileError> {
    match place.root.open_file(&place.rel, OpenFor::CreateNew) {
        Ok(file) => return Ok((file, None)),
        Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {}
        Err(err) => return Err(refusal(place, Purpose::Write, err)),
    }
    let file = open(place, OpenFor::Write, Purpose::Write)?;
    let metadata = single(place, checked(place, &file, Purpose::Write)?)?;
    Ok((file, Some(metadata)))
}

/// Reads the rest of `file` (opened at `place`).
pub fn read_all(place: &Place, file: &mut File, hint: u64) -> Result<Vec<u8>, RegularFileError> {
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|error| RegularFileError::Io {
            path: place.path.clone(),
            purpose: Purpose::Read,
            error,
        })?;
    Ok(bytes)
}

/// Replaces the content of `file` (opened at `place` for writing) with `bytes`, through the
/// descriptor that was checked; returns its metadata afterwards (for the file-state cache).
pub fn replace(place: &Place, file: &mut File, bytes: &[u8]) -> Result<Metadata, RegularFileError> {
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.metadata())
        .map_err(|error| RegularFileError::Io {
            path: place.path.clone(),
            purpose: Purpose::Write,
            error,
        })
}

fn open(place: &Place, how: OpenFor, purpose: Purpose) -> Result<File, RegularFileError> {
    place
        .root
        .open_file(&place.rel, how)
        .map_err(|err| refusal(place, purpose, err))
}

/// The metadata of the opened `file`, if it is a regular file.
fn checked(place: &Place, file: &File, purpose: Purpose) -> Result<Metadata, RegularFileError> {
    let metadata = file.metadata().map_err(|error| RegularFileError::Io {
        path: place.path.clone(),
        purpose,
        error,
    })?;
    if metadata.is_file() {
        return Ok(metadata);
    }
    if metadata.is_dir() {
        return Err(RegularFileError::Directory {
            path: place.path.clone(),
        });
    }
    Err(RegularFileError::NotRegular {
        path: place.path.clone(),
        kind: kind(&metadata),
        purpose,
    })
}

/// `metadata` if its file has one name.
fn single(place: &Place, metadata: Metadata) -> Result<Metadata, RegularFileError> {
    if metadata.nlink() > 1 {
        return Err(RegularFileError::HardLinked {
            path: place.path.clone(),
            links: metadata.nlink(),
        });
    }
    Ok(metadata)
}

/// An open that failed: a FIFO without a reader or a socket refuses a non-blocking open
/// (ENXIO), and a sentence saying what the path is beats "No such device or address"; a
/// folder opened for writing is named as one.
fn refusal(place: &Place, purpose: Purpose, err: BeneathError) -> RegularFileError {
    match err.raw_os_error() {
        Some(libc::ENXIO) => {
            if let Ok(metadata) = place.root.metadata(&place.rel)
                && !metadata.is_file()
            {
                return RegularFileError::NotRegular {
                    path: place.path.clone(),
                    kind: kind(&metadata),
                    purpose,
                };
            }
        }
        Some(libc::EISDIR) => {
            return RegularFileError::Directory {
                path: place.path.clone(),
            };
        }
        _ => {}
    }
    match err {
        BeneathError::Io { source, .. } => RegularFileError::Io {
            path: place.path.clone(),
            purpose,
            error: source,
        },
        other => RegularFileError::Beneath(other),
    }
}

fn kind(metadata: &Metadata) -> &'static str {
    crate::input_file::special_kind(metadata.file_type())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::place::{Intent, place};
    use super::*;
    use crate::policy::Workspace;

    fn at(root: &Path, path: &Path, intent: Intent) -> Place {
        place(
            &Workspace::new(root.to_path_buf(), vec![], None),
            path,
            intent,
        )
        .unwrap()
    }

    fn fifo(dir: &Path) -> PathBuf {
        let path = dir.join("pipe");
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        path
    }

    #[test]
    fn a_fifo_is_refused_at_once_for_reading_and_writing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let pipe = fifo(&root);
        let read = open_for_reading(&at(&root, &pipe, Intent::Read))
            .unwrap_err()
            .to_string();
        assert_eq!(
            read,
            format!(
                "{} is a FIFO, not a regular file; only regular files can be read",
                pipe.display()
            )
        );
        let written = open_for_writing(&at(&root, &pipe, Intent::Write))
            .unwrap_err()
            .to_string();
        assert!(
            written.contains("is a FIFO, not a regular file"),
            "{written}"
        );
    }

    #[test]
    fn devices_folders_and_hard_links_are_refused_and_regular_files_pass() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let dev_null = Path::new("/dev/null");
        if dev_null.exists() {
            let err = open_for_reading(&at(&root, dev_null, Intent::Read))
                .unwrap_err()
                .to_string();
            assert!(err.contains("is a character device"), "{err}");
        }
        let file = root.join("a.txt");
        let write = |text: &[u8]| {
            let place = at(&root, &file, Intent::Write);
            let (mut opened, _) = open_for_writing(&place).unwrap();
            replace(&place, &mut opened, text).unwrap();
        };
        write(b"long first text");
        write(b"short");
        let place = at(&root, &file, Intent::Read);
        let (mut opened, metadata) = open_for_reading(&place).unwrap();
        assert_eq!(
            read_all(&place, &mut opened, metadata.len()).unwrap(),
            b"short"
        );
        assert!(matches!(
            open_for_reading(&at(&root, &root, Intent::Read)),
            Err(RegularFileError::Directory { .. })
        ));
        assert!(matches!(
            open_for_editing(&at(&root, &root, Intent::Write)),
            Err(RegularFileError::Directory { .. })
        ));
        std::fs::hard_link(&file, root.join("second-name")).unwrap();
        let edited = open_for_editing(&at(&root, &file, Intent::Write)).unwrap_err();
        assert!(
            edited.to_string().contains("has 2 names (hard links)"),
            "{edited}"
        );
        assert!(open_for_writing(&at(&root, &file, Intent::Write)).is_err());
        assert!(open_for_reading(&at(&root, &file, Intent::Read)).is_ok());
    }
}
