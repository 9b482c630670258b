//! `read_file`, `list_dir`, `edit_file`, `write_file`, and the confined reads and writes the
//! tools share.
//!
//! Reads go through [`work_runtime::fsx::read_confined`]. Writes walk the path from the root
//! one directory at a time with `openat(O_NOFOLLOW | O_DIRECTORY)` (creating missing ones),
//! write a temporary file in the final directory and rename it over the name there: no symlink
//! is followed on the way, a symlink at the name itself is replaced rather than written
//! through, and a reader never sees half a file.

use super::{FILE_CAP, Workspace, arg, num};
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, fstatat, mkdirat};
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// A path argument made relative to the root, refusing the root itself.
fn file_path(ws: &Workspace, input: &Value) -> Result<String, String> {
    ws.relative(arg(input, "path")?)?.ok_or_else(|| "`path` names the repository root, not a file".to_string())
}

/// Reads `rel` as text through the confined read.
pub(super) fn read_text(ws: &Workspace, rel: &str) -> Result<String, String> {
    let bytes = work_runtime::fsx::read_confined(&ws.root, rel, FILE_CAP).map_err(|e| e.to_string())?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(format!("`{rel}` is a binary file"));
    }
    String::from_utf8(bytes).map_err(|_| format!("`{rel}` is not UTF-8 text"))
}

/// `read_file`: the file, or a line range of it, with line numbers.
pub(super) fn read_file(ws: &Workspace, input: &Value) -> Result<String, String> {
    let rel = file_path(ws, input)?;
    let text = read_text(ws, &rel)?;
    let total = text.lines().count();
    let start = num(input, "start_line").unwrap_or(1).max(1) as usize;
    let end = num(input, "end_line").map_or(total, |e| (e as usize).min(total));
    if total == 0 {
        return Ok(format!("`{rel}` is empty"));
    }
    if start > total {
        return Err(format!("`{rel}` has {total} lines; start_line {start} is past the end"));
    }
    let mut out = String::with_capacity(text.len().min(super::RESULT_CAP) + 64);
    for (i, line) in text.lines().enumerate().take(end).skip(start - 1) {
        out.push_str(&format!("{}: {line}\n", i + 1));
        if out.len() > super::RESULT_CAP {
            out.push_str(&format!("… (lines {}–{end} not shown: read a smaller range)\n", i + 2));
            break;
        }
    }
    if start > 1 || end < total {
        out.push_str(&format!("({rel}: lines {start}–{end} of {total})\n"));
    }
    Ok(out)
}

/// Checks that no component of `rel` below the root is a symlink (a listing or a search would
/// otherwise walk wherever it points).
pub(super) fn no_symlink_on_the_way(root: &Path, rel: &str) -> Result<(), String> {
    let mut at = root.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("`{rel}` goes through a symlink, which is not followed"));
            }
            Ok(_) => {}
            Err(_) => return Err(format!("`{rel}` does not exist")),
        }
    }
    Ok(())
}

/// `list_dir`: the directory's entries, `.gitignore`d ones left out, directories marked `/`.
pub(super) fn list_dir(ws: &Workspace, input: &Value) -> Result<String, String> {
    let rel = ws.relative(input.get("path").and_then(Value::as_str).unwrap_or(""))?;
    let dir = match &rel {
        Some(r) => {
            no_symlink_on_the_way(&ws.root, r)?;
            ws.root.join(r)
        }
        None => ws.root.clone(),
    };
    if !dir.is_dir() {
        return Err(format!("`{}` is not a directory", rel.as_deref().unwrap_or(".")));
    }
    let walk = super::search::walker(&dir).max_depth(Some(1)).build();
    let mut names: Vec<String> = walk
        .flatten()
        .filter(|e| e.depth() == 1)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_some_and(|t| t.is_dir()) { format!("{name}/") } else { name }
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok("(empty)".into());
    }
    Ok(names.join("\n"))
}

/// `edit_file`: one exact, unique replacement.
pub(super) fn edit_file(ws: &Workspace, input: &Value) -> Result<String, String> {
    let rel = file_path(ws, input)?;
    let (old, new) = (arg(input, "old")?, arg(input, "new")?);
    if old.is_empty() {
        return Err("`old` is empty: use write_file to create a file".into());
    }
    let text = read_text(ws, &rel)?;
    match text.matches(old).count() {
        0 => return Err(format!("`old` does not occur in `{rel}` (it must match exactly, whitespace included)")),
        1 => {}
        n => return Err(format!("`old` occurs {n} times in `{rel}`: include more lines to make it unique")),
    }
    write_confined(ws, &rel, text.replacen(old, new, 1).as_bytes())?;
    Ok(format!("edited `{rel}`"))
}

/// `write_file`: the whole file.
pub(super) fn write_file(ws: &Workspace, input: &Value) -> Result<String, String> {
    let rel = file_path(ws, input)?;
    let content = arg(input, "content")?;
    write_confined(ws, &rel, content.as_bytes())?;
    Ok(format!("wrote `{rel}` ({} bytes)", content.len()))
}

/// Writes `bytes` to `rel` below the root without following any symlink (see the module doc);
/// refuses `.git/` and the state directory.
pub(super) fn write_confined(ws: &Workspace, rel: &str, bytes: &[u8]) -> Result<(), String> {
    if let Some(why) = ws.protected_reason(rel) {
        return Err(why);
    }
    let (dir, name) = open_parent(&ws.root, rel, true)?;
    let old_mode = fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).ok().map(|st| st.st_mode);
    if let Some(mode) = old_mode
        && mode & nix::sys::stat::SFlag::S_IFMT.bits() == nix::sys::stat::SFlag::S_IFDIR.bits()
    {
        return Err(format!("`{rel}` is a directory"));
    }
    let tmp = format!(".{name}.work-tool-{}", std::process::id());
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(old_mode.map_or(0o644, |m| m & 0o7777));
    let fd = openat(dir.as_fd(), tmp.as_str(), flags, mode).map_err(|e| format!("write `{rel}`: {e}"))?;
    let mut file = File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_data());
    let renamed = written
        .map_err(|e| e.to_string())
        .and_then(|()| renameat(dir.as_fd(), tmp.as_str(), dir.as_fd(), name).map_err(|e| e.to_string()));
    if let Err(e) = renamed {
        let _ = nix::unistd::unlinkat(dir.as_fd(), tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(format!("write `{rel}`: {e}"));
    }
    Ok(())
}

/// Removes the file `rel` below the root (no symlink followed on the way).
pub(super) fn remove_confined(ws: &Workspace, rel: &str) -> Result<(), String> {
    if let Some(why) = ws.protected_reason(rel) {
        return Err(why);
    }
    let (dir, name) = open_parent(&ws.root, rel, false)?;
    nix::unistd::unlinkat(dir.as_fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir)
        .map_err(|e| format!("delete `{rel}`: {e}"))
}

/// The directory holding `rel`, opened by walking from the root with `O_NOFOLLOW` (missing
/// directories created when `create`), and the last component's name.
fn open_parent<'a>(root: &Path, rel: &'a str, create: bool) -> Result<(OwnedFd, &'a str), String> {
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir: OwnedFd = File::open(root).map_err(|e| format!("open the repository root: {e}"))?.into();
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            return Ok((dir, part));
        }
        let next = match openat(dir.as_fd(), part, dir_flags, Mode::empty()) {
            Err(nix::errno::Errno::ENOENT) if create => {
                mkdirat(dir.as_fd(), part, Mode::from_bits_truncate(0o755))
                    .map_err(|e| format!("create the directory of `{rel}`: {e}"))?;
                openat(dir.as_fd(), part, dir_flags, Mode::empty())
            }
            other => other,
        };
        dir = next.map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                format!("`{rel}` goes through a symlink or a file, which is not followed")
            }
            nix::errno::Errno::ENOENT => format!("`{rel}` does not exist"),
            e => format!("open the directory of `{rel}`: {e}"),
        })?;
    }
    Err("the path is empty".into())
}
