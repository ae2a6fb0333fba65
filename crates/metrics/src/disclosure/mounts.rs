//! The mount table (/proc/self/mountinfo) and the filesystem holding a path.
//!
//! Parsed here rather than by procfs, whose `MountInfo` keeps options in a
//! hash map (their order lost) and leaves the octal escapes of mount points
//! (`\040` for a space) in place.

use super::Filesystem;
use super::read::Sys;
use std::path::Path;

/// The most mounts kept (mountinfo is also capped in bytes).
const MAX_MOUNTS: usize = 100_000;

/// The mount table, in the file's order (later mounts on top), or why it
/// could not be read.
pub(crate) struct Mounts(Result<Vec<Filesystem>, String>);

impl Mounts {
    pub(crate) fn read(sys: &Sys) -> Mounts {
        Mounts(sys.table("/proc/self/mountinfo").and_then(|t| {
            let v: Vec<Filesystem> = t.lines().take(MAX_MOUNTS).filter_map(parse_line).collect();
            if v.is_empty() {
                Err("/proc/self/mountinfo lists no mount".into())
            } else {
                Ok(v)
            }
        }))
    }

    /// The filesystem holding the canonical path `p`: the mount whose mount
    /// point is its longest prefix, by whole components; of equal mount
    /// points the last mounted.
    pub(crate) fn holding(&self, p: &Path) -> Result<Filesystem, String> {
        let mounts = self.0.as_ref().map_err(Clone::clone)?;
        let mut best: Option<&Filesystem> = None;
        for m in mounts {
            let mp = Path::new(&m.mount_point);
            if p.starts_with(mp)
                && best.is_none_or(|b| mp.components().count() >= depth(&b.mount_point))
            {
                best = Some(m);
            }
        }
        best.cloned()
            .ok_or_else(|| format!("no mount in /proc/self/mountinfo holds {}", p.display()))
    }
}

fn depth(p: &str) -> usize {
    Path::new(p).components().count()
}

/// One mountinfo line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3
/// /dev/root rw,errors=continue` (proc(5)); None for a line not in that form.
fn parse_line(line: &str) -> Option<Filesystem> {
    let (left, right) = line.split_once(" - ")?;
    let l: Vec<&str> = left.split(' ').collect();
    let r: Vec<&str> = right.split(' ').collect();
    if l.len() < 6 || r.len() < 3 {
        return None;
    }
    let device_number = l[2];
    let (maj, min) = device_number.split_once(':')?;
    maj.parse::<u32>().ok()?;
    min.parse::<u32>().ok()?;
    Some(Filesystem {
        fs_type: unescape(r[0]),
        source: unescape(r[1]),
        mount_point: unescape(l[4]),
        mount_options: unescape(l[5]),
        super_options: unescape(r[2]),
        device_number: device_number.to_string(),
    })
}

/// Undoes the kernel's octal escapes of space, tab, newline and backslash
/// (`\040`, `\011`, `\012`, `\134`); any other backslash is kept as is.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (b[i], code) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_escapes_and_optional_fields() {
        let f = parse_line(
            "36 35 98:0 / /mnt/my\\040disk rw,noatime master:1 shared:2 - ext4 /dev/sda1 rw,errors=remount-ro",
        );
        let f = f.unwrap_or_else(|| panic!("not parsed"));
        assert_eq!(f.mount_point, "/mnt/my disk");
        assert_eq!(f.fs_type, "ext4");
        assert_eq!(f.source, "/dev/sda1");
        assert_eq!(f.mount_options, "rw,noatime");
        assert_eq!(f.super_options, "rw,errors=remount-ro");
        assert_eq!(f.device_number, "98:0");
        assert!(parse_line("garbage").is_none());
        assert!(parse_line("1 2 x:y / / rw - ext4 /dev/x rw").is_none());
        assert_eq!(unescape("a\\134b\\9zz\\"), "a\\b\\9zz\\");
    }

    #[test]
    fn the_longest_whole_component_prefix_wins_and_the_last_of_equals() {
        let m = |mp: &str, fs: &str| Filesystem {
            fs_type: fs.into(),
            source: "s".into(),
            mount_point: mp.into(),
            mount_options: String::new(),
            super_options: String::new(),
            device_number: "0:1".into(),
        };
        let t = Mounts(Ok(vec![
            m("/", "ext4"),
            m("/data", "xfs"),
            m("/data", "tmpfs"),
            m("/dat", "btrfs"),
        ]));
        let fs = |p: &str| t.holding(Path::new(p)).map(|f| f.fs_type);
        assert_eq!(fs("/database/x"), Ok("ext4".into()));
        assert_eq!(fs("/data/x"), Ok("tmpfs".into()));
        assert_eq!(fs("/data"), Ok("tmpfs".into()));
        assert_eq!(fs("/"), Ok("ext4".into()));
        let none = Mounts(Ok(vec![m("/data", "xfs")]));
        assert!(none.holding(Path::new("/x")).is_err());
    }
}
