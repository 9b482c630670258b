//! Reads of files someone else supplies (a user's flag, an agent's answer, the working tree):
//! open first, then check what was opened.
//!
//! - [`read_confined`] / [`open_confined`] walk `rel` below `root` one component at a time with
//!   `openat(O_NOFOLLOW)` from the directory already opened, so no symlink is followed at all
//!   (in or out of the root) and a symlink swapped in between two reads cannot redirect one;
//! - the final open is non-blocking and the opened file is `fstat`ed: only a regular file is
//!   read (a FIFO never hangs, a device is never read, a socket is refused), and below a root
//!   only one with a single link (a hard link may be the inode of a file outside the root);
//! - every read has a cap: past it the read is refused ([`FsError::TooLarge`]) or, for the
//!   `_prefix` variants, cut and reported.

use super::{ConfineError, lexical};
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// Why a supplied file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path itself is refused (absolute, `..`, …).
    #[error(transparent)]
    Refused(#[from] ConfineError),
    /// Nothing at that path.
    #[error("`{0}` does not exist")]
    NotFound(String),
    /// A component of the path is a symlink (never followed).
    #[error("`{0}` goes through a symlink, which is not followed (it could lead outside the root)")]
    Symlink(String),
    /// Not a regular file.
    #[error("`{path}` is not a regular file (a {kind})")]
    NotRegular {
        /// The path.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// A regular file with more than one link: the same file is also elsewhere, maybe outside
    /// the root (a hard link), so its content is not the root's to give.
    #[error("`{path}` has {links} hard links (the same file may also be outside the root), which are not followed")]
    HardLinked {
        /// The path.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// Larger than the cap.
    #[error("`{path}` is larger than {cap} bytes")]
    TooLarge {
        /// The path.
        path: String,
        /// The cap.
        cap: u64,
    },
    /// Any other OS error.
    #[error("read `{path}`: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl FsError {
    /// Nothing exists at the path.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::NotFound(_))
    }
}

fn errno_err(path: &str, e: nix::errno::Errno) -> FsError {
    match e {
        nix::errno::Errno::ENOENT => FsError::NotFound(path.to_string()),
        nix::errno::Errno::ELOOP => FsError::Symlink(path.to_string()),
        nix::errno::Errno::ENOTDIR => {
            FsError::NotRegular { path: path.to_string(), kind: "path through a non-directory" }
        }
        nix::errno::Errno::ENXIO => FsError::NotRegular { path: path.to_string(), kind: "socket" },
        e => FsError::Io { path: path.to_string(), source: std::io::Error::from(e) },
    }
}

const FINAL: OFlag =
    OFlag::O_RDONLY.union(OFlag::O_NOFOLLOW).union(OFlag::O_NONBLOCK).union(OFlag::O_NOCTTY).union(OFlag::O_CLOEXEC);

/// Opens `rel` below `root` without following any symlink, and checks it is a regular file.
pub fn open_confined(root: &Path, rel: &str) -> Result<File, FsError> {
    let trimmed = lexical(rel)?;
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut dir: OwnedFd =
        File::open(root).map_err(|source| FsError::Io { path: root.display().to_string(), source })?.into();
    let mut parts = trimmed.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            let fd = openat(dir.as_fd(), part, FINAL, Mode::empty()).map_err(|e| errno_err(rel, e))?;
            return single_link(checked_regular(File::from(fd), rel)?, rel);
        }
        let next = openat(dir.as_fd(), part, dir_flags | OFlag::O_NOFOLLOW, Mode::empty()).map_err(|e| {
            if e == nix::errno::Errno::ENOTDIR && is_symlink_at(&dir, part) {
                FsError::Symlink(rel.to_string())
            } else {
                errno_err(rel, e)
            }
        })?;
        dir = next;
    }
    Err(FsError::Refused(ConfineError::Empty))
}

fn is_symlink_at(dir: &OwnedFd, name: &str) -> bool {
    nix::sys::stat::fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK)
}

/// Checks a regular file opened below a root: one with more than one link is refused. A hard
/// link needs no permission on its target, so a file of the tree can be the very inode of a
/// file outside it (`ln /home/me/.ssh/id_ed25519 notes.txt`); the link count is the only trace.
fn single_link(file: File, path: &str) -> Result<File, FsError> {
    let st = fstat(&file).map_err(|e| errno_err(path, e))?;
    // `nlink_t` is u64 here and u32 on other targets.
    #[allow(clippy::useless_conversion)]
    let links = u64::from(st.st_nlink);
    if links > 1 {
        return Err(FsError::HardLinked { path: path.to_string(), links });
    }
    Ok(file)
}

/// Checks what was opened: only a regular file passes.
fn checked_regular(file: File, path: &str) -> Result<File, FsError> {
    let st = fstat(&file).map_err(|e| errno_err(path, e))?;
    let kind = match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        k if k == SFlag::S_IFREG => return Ok(file),
        k if k == SFlag::S_IFDIR => "directory",
        k if k == SFlag::S_IFIFO => "FIFO",
        k if k == SFlag::S_IFCHR => "character device",
        k if k == SFlag::S_IFBLK => "block device",
        k if k == SFlag::S_IFSOCK => "socket",
        _ => "special file",
    };
    Err(FsError::NotRegular { path: path.to_string(), kind })
}

/// Reads at most `cap` bytes; `(bytes, truncated)`.
fn read_prefix(file: File, path: &str, cap: u64) -> Result<(Vec<u8>, bool), FsError> {
    let mut buf = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|source| FsError::Io { path: path.to_string(), source })?;
    let truncated = buf.len() as u64 > cap;
    buf.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    Ok((buf, truncated))
}

fn read_whole(file: File, path: &str, cap: u64) -> Result<Vec<u8>, FsError> {
    match read_prefix(file, path, cap)? {
        (_, true) => Err(FsError::TooLarge { path: path.to_string(), cap }),
        (bytes, false) => Ok(bytes),
    }
}

/// Reads the regular file `rel` below `root` (no symlink followed), refusing it past `cap` bytes.
pub fn read_confined(root: &Path, rel: &str, cap: u64) -> Result<Vec<u8>, FsError> {
    read_whole(open_confined(root, rel)?, rel, cap)
}

/// Like [`read_confined`], but a file past `cap` is cut there: `(bytes, truncated)`.
pub fn read_confined_prefix(root: &Path, rel: &str, cap: u64) -> Result<(Vec<u8>, bool), FsError> {
    read_prefix(open_confined(root, rel)?, rel, cap)
}

/// Opens a file a person named (a flag): symlinks are followed (the path is theirs), but only a
/// regular file is accepted, and the open never blocks (a FIFO is refused, not waited on).
pub fn open_user_file(path: &Path) -> Result<File, FsError> {
    let shown = path.display().to_string();
    let fd =
        nix::fcntl::open(path, FINAL.difference(OFlag::O_NOFOLLOW), Mode::empty()).map_err(|e| errno_err(&shown, e))?;
    checked_regular(File::from(fd), &shown)
}

/// Reads a file a person named, refusing it past `cap` bytes and unless it is a regular file.
pub fn read_user_file(path: &Path, cap: u64) -> Result<Vec<u8>, FsError> {
    read_whole(open_user_file(path)?, &path.display().to_string(), cap)
}

/// [`read_user_file`] as text (invalid UTF-8 refused); `Ok(None)` when the file does not exist.
pub fn read_user_text_optional(path: &Path, cap: u64) -> Result<Option<String>, FsError> {
    match read_user_file(path, cap) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| FsError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"),
        }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The cap on a file a person or an agent supplies as input (a plan, a carrier, a goal, answers).
pub const USER_FILE_CAP: u64 = 8 * 1024 * 1024;

impl From<FsError> for std::io::Error {
    fn from(e: FsError) -> Self {
        let kind = match &e {
            FsError::NotFound(_) => std::io::ErrorKind::NotFound,
            FsError::Io { source, .. } => source.kind(),
            _ => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, e.to_string())
    }
}

/// [`read_user_file`] as UTF-8 text, with the error as an [`std::io::Error`] (its kind kept:
/// `NotFound` stays `NotFound`), a drop-in for `std::fs::read_to_string` on supplied files.
pub fn read_user_string(path: &Path, cap: u64) -> std::io::Result<String> {
    let bytes = read_user_file(path, cap)?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

/// The target of the symlink `rel` below `root`, read without following anything; `None` when
/// it is not a symlink.
pub fn symlink_target_confined(root: &Path, rel: &str) -> Option<String> {
    let trimmed = lexical(rel).ok()?;
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, trimmed),
    };
    let mut dir: OwnedFd = File::open(root).ok()?.into();
    for part in parent.into_iter().flat_map(|p| p.split('/')) {
        dir =
            openat(dir.as_fd(), part, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW, Mode::empty()).ok()?;
    }
    nix::fcntl::readlinkat(dir.as_fd(), name).ok().map(|t| t.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree() -> (tempfile::TempDir, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("src")).expect("mkdir");
        fs::write(dir.path().join("src/a.rs"), "inside\n").expect("write");
        fs::write(outside.path().join("secret"), "SECRET\n").expect("write");
        (dir, outside)
    }

    #[test]
    fn reads_a_regular_file_and_refuses_every_symlink() {
        let (dir, outside) = tree();
        let root = dir.path();
        assert_eq!(read_confined(root, "src/a.rs", 100).expect("read"), b"inside\n");
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("leaf")).expect("symlink");
        std::os::unix::fs::symlink(outside.path(), root.join("dir")).expect("symlink");
        std::os::unix::fs::symlink("src/a.rs", root.join("inner")).expect("symlink");
        assert!(matches!(read_confined(root, "leaf", 100), Err(FsError::Symlink(_))));
        assert!(matches!(read_confined(root, "dir/secret", 100), Err(FsError::Symlink(_))));
        assert!(matches!(read_confined(root, "inner", 100), Err(FsError::Symlink(_))));
        assert!(matches!(read_confined(root, "../x", 100), Err(FsError::Refused(_))));
        assert!(matches!(read_confined(root, "/etc/passwd", 100), Err(FsError::Refused(_))));
        assert!(read_confined(root, "nope", 100).expect_err("missing").is_not_found());
        assert!(matches!(read_confined(root, "src", 100), Err(FsError::NotRegular { .. })));
        assert_eq!(symlink_target_confined(root, "inner").as_deref(), Some("src/a.rs"));
        assert_eq!(symlink_target_confined(root, "src/a.rs"), None);
    }

    #[test]
    fn a_hard_link_is_refused_below_a_root_and_read_when_a_person_names_it() {
        let (dir, outside) = tree();
        let root = dir.path();
        std::fs::hard_link(outside.path().join("secret"), root.join("notes.txt")).expect("hard link");
        let e = read_confined(root, "notes.txt", 100).expect_err("refused");
        assert!(matches!(e, FsError::HardLinked { links: 2, .. }), "{e}");
        assert!(matches!(read_confined_prefix(root, "notes.txt", 100), Err(FsError::HardLinked { .. })));
        assert!(read_user_file(&root.join("notes.txt"), 100).is_ok(), "a file a person names is theirs");
        std::fs::remove_file(outside.path().join("secret")).expect("rm the other link");
        assert!(read_confined(root, "notes.txt", 100).is_ok(), "one link: read");
    }

    #[test]
    fn caps_refuse_or_cut() {
        let (dir, _outside) = tree();
        assert!(matches!(read_confined(dir.path(), "src/a.rs", 3), Err(FsError::TooLarge { cap: 3, .. })));
        assert_eq!(read_confined_prefix(dir.path(), "src/a.rs", 3).expect("read"), (b"ins".to_vec(), true));
        assert_eq!(read_confined_prefix(dir.path(), "src/a.rs", 7).expect("read"), (b"inside\n".to_vec(), false));
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let (dir, _outside) = tree();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, Mode::S_IRWXU).expect("mkfifo");
        assert!(matches!(read_confined(dir.path(), "pipe", 100), Err(FsError::NotRegular { kind: "FIFO", .. })));
        assert!(matches!(read_user_file(&fifo, 100), Err(FsError::NotRegular { kind: "FIFO", .. })));
        assert!(matches!(
            read_user_file(Path::new("/dev/zero"), 100),
            Err(FsError::NotRegular { kind: "character device", .. })
        ));
        let user = dir.path().join("src/a.rs");
        assert_eq!(read_user_file(&user, 100).expect("read"), b"inside\n");
        assert!(matches!(read_user_file(&user, 2), Err(FsError::TooLarge { .. })));
        assert_eq!(read_user_text_optional(&dir.path().join("none"), 10).expect("ok"), None);
    }

    #[test]
    fn a_symlink_swapped_during_reads_never_yields_outside_content() {
        let (dir, outside) = tree();
        let root = dir.path().to_path_buf();
        let link = root.join("src/swap.rs");
        fs::write(&link, "inside\n").expect("write");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, link, secret, root) = (stop.clone(), link.clone(), outside.path().join("secret"), root.clone());
            std::thread::spawn(move || {
                let tmp = root.join("src/.swap.tmp");
                let mut flip = false;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = fs::remove_file(&tmp);
                    if flip {
                        let _ = std::os::unix::fs::symlink(&secret, &tmp);
                    } else {
                        let _ = fs::write(&tmp, "inside\n");
                    }
                    let _ = fs::rename(&tmp, &link);
                    flip = !flip;
                }
            })
        };
        let mut leaks = 0;
        for _ in 0..2000 {
            if let Ok(b) = read_confined(&root, "src/swap.rs", 100)
                && b != b"inside\n"
            {
                leaks += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().expect("join");
        assert_eq!(leaks, 0, "outside content leaked through a swapped symlink");
    }
}
