//! Reading the files of an entry without trusting what is on disk: only regular files
//! (never a symlink, a FIFO or a device, which could block a reader forever or never
//! end), of a bounded size, read through a bounded reader.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// The largest manifest or `params.json` read (both are a few hundred bytes).
pub(super) const MAX_TEXT: u64 = 1 << 20;

/// The largest file of an entry read (a library or a cubin).
pub(super) const MAX_FILE: u64 = 1 << 30;

/// What a path of an entry is, without following a symlink.
pub(super) fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        special_kind(&t)
    }
}

#[cfg(unix)]
fn special_kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &fs::FileType) -> &'static str {
    "not a regular file"
}

/// Opens `path` for reading only if it is a regular file itself (a symlink is refused,
/// not followed), without blocking (a FIFO swapped in after the check opens at once and
/// is then refused too).
fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let not_regular =
        |m: &Metadata| io::Error::new(io::ErrorKind::InvalidData, format!("is {}", kind_of(m)));
    let before = fs::symlink_metadata(path)?;
    if !before.file_type().is_file() {
        return Err(not_regular(&before));
    }
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(not_regular(&meta));
    }
    Ok((file, meta.len()))
}

/// The bytes of regular file `path`, refused when it is larger than `max` bytes. At most
/// `max + 1` bytes are ever read, whatever the file does meanwhile.
pub(super) fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    if len > max {
        return Err(too_large(len, max));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64, max));
    }
    Ok(bytes)
}

fn too_large(len: u64, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("has {len} bytes, more than the {max} a cache file may have"),
    )
}

/// Why file `name` could not be read, as a phrase (`kernel.so is a FIFO`,
/// `kernel.so: No such file or directory`).
pub(super) fn unreadable(name: &str, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::InvalidData {
        format!("{name} {e}")
    } else {
        format!("{name}: {e}")
    }
}

/// [`read_regular`] as UTF-8 text (lossy), empty when it cannot be read: for display.
pub(super) fn read_text_or_empty(path: &Path) -> String {
    read_regular(path, MAX_TEXT)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Removes `path` whatever it is (a directory tree, or a file, symlink or FIFO: never
/// what a symlink points to).
pub(super) fn remove_any(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}
