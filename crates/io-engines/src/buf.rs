//! Page-aligned heap buffers for O_DIRECT.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::Arc;

/// Size and alignment of a region carved into buffers (one mmap instead of a
/// heap allocation, and a heap growth, per buffer). Regions are advised for
/// transparent huge pages (`MADV_HUGEPAGE`): a buffer inside one huge page is
/// physically contiguous, so an O_DIRECT read or write of it is one DMA
/// segment instead of one per 4 KiB page (a 32 KiB read took ten virtio
/// descriptors, now three). Where the kernel gives no huge page (THP off,
/// memory fragmented) the region is plain small pages, as before
/// (docs/ARCHITECTURE.md, "Performance notes").
pub const REGION: usize = 2 << 20;
/// The largest region of [`AlignedBuf::carve_populated_wide`]: the most io_uring
/// registers as one fixed buffer.
pub const WIDE_REGION: usize = 1 << 30;

/// A zeroed heap buffer aligned to [`crate::ALIGN`]. Its address never changes
/// while it lives, so it can be handed to the kernel by pointer. It owns its
/// memory, or a disjoint part of a shared [`Region`] (see [`AlignedBuf::carve`]).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
    region: Option<Arc<Region>>,
}

// The buffer is plain owned memory (or a part of a region no other buffer has).
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

/// Anonymous memory mapped for [`AlignedBuf::carve`], unmapped when its last
/// buffer is dropped.
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
}

// The region is only reached through its buffers, which never overlap.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// `len` bytes (a multiple of [`REGION`]) of zeroed memory aligned to
    /// [`REGION`]. None if mmap fails. `populate`: fault every page in now
    /// (`MADV_POPULATE_WRITE`; left to first use where the kernel lacks it).
    fn map(len: usize, populate: bool) -> Option<Region> {
        let span = len + REGION;
        // SAFETY: an anonymous private mapping of `span` bytes; no memory is aliased.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(REGION);
        // SAFETY: unmapping the unaligned head and tail of our own mapping.
        unsafe {
            if aligned > start {
                libc::munmap(raw, aligned - start);
            }
            let end = aligned + len;
            if start + span > end {
                libc::munmap(end as *mut libc::c_void, start + span - end);
            }
            // A hint: refused (THP built out) or unfulfilled, the region keeps small pages.
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            if populate {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE);
            }
        }
        Some(Region {
            base: NonNull::new(aligned as *mut u8)?,
            len,
        })
    }
}

impl Region {
    /// Start address and length, for registering the region with the kernel.
    pub(crate) fn span(&self) -> (usize, usize) {
        (self.base.as_ptr() as usize, self.len)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`; every buffer into it is gone.
        unsafe {
            libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (capacity rounded up to the alignment);
    /// `new(0)` allocates nothing (see [`AlignedBuf::empty`]).
    pub fn new(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf::empty();
        }
        let cap = len.div_ceil(crate::ALIGN) * crate::ALIGN;
        let layout = Self::layout(cap);
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        AlignedBuf {
            ptr,
            len,
            cap,
            region: None,
        }
    }

    /// `count` zeroed buffers of `size` bytes (a multiple of [`crate::ALIGN`])
    /// carved from shared huge-page-aligned regions: for memory allocated in
    /// bulk (a buffer cache, a pool), touched later. Falls back to one
    /// allocation per buffer where mapping fails.
    pub fn carve(count: usize, size: usize) -> Vec<AlignedBuf> {
        Self::carve_with(count, size, false, REGION)
    }

    /// [`AlignedBuf::carve`], with every page of the regions faulted in at
    /// once: for memory that will all be used (a buffer cache at its maximum),
    /// so that its first touch (zeroing by the kernel: per 512 MiB in this
    /// project's VM, 0.05 s of CPU as huge pages once the host backs the
    /// memory, 1.1 s on memory it never backed; 0.17 s as small pages) is paid
    /// when it is set up, not during the load.
    pub fn carve_populated(count: usize, size: usize) -> Vec<AlignedBuf> {
        Self::carve_with(count, size, true, REGION)
    }

    /// [`AlignedBuf::carve_populated`] in as few regions as it takes (each up
    /// to [`WIDE_REGION`]) instead of one per [`REGION`]: buffers of one region
    /// share one fixed-buffer index of io_uring, so a vectored read into any
    /// two of them goes as READV_FIXED (pages registered once) instead of a
    /// READV whose pages the kernel pins per I/O.
    pub fn carve_populated_wide(count: usize, size: usize) -> Vec<AlignedBuf> {
        Self::carve_with(count, size, true, WIDE_REGION)
    }

    fn carve_with(count: usize, size: usize, populate: bool, most: usize) -> Vec<AlignedBuf> {
        assert!(
            size > 0 && size.is_multiple_of(crate::ALIGN),
            "carved buffers are whole pages"
        );
        let mut out = Vec::with_capacity(count);
        let per_region = (most / size).max(1);
        while out.len() < count {
            let n = per_region.min(count - out.len());
            let len = (n * size).next_multiple_of(REGION);
            let Some(region) = Region::map(len, populate).map(Arc::new) else {
                out.extend((0..n).map(|_| AlignedBuf::new(size)));
                continue;
            };
            for k in 0..n {
                // SAFETY: k * size + size <= len: inside the region, disjoint per k.
                let ptr = unsafe { region.base.add(k * size) };
                out.push(AlignedBuf {
                    ptr,
                    len: size,
                    cap: size,
                    region: Some(region.clone()),
                });
            }
        }
        out
    }

    /// A buffer of no bytes that owns no memory: the placeholder of a buffer lent
    /// to an I/O, and the buffer of an fdatasync.
    pub fn empty() -> AlignedBuf {
        AlignedBuf {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
            region: None,
        }
    }

    fn layout(cap: usize) -> Layout {
        match Layout::from_size_align(cap, crate::ALIGN) {
            Ok(l) => l,
            // cap is a non-zero multiple of a power of two: always valid.
            Err(_) => std::process::abort(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Changes the length within the capacity (no reallocation).
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.cap, "AlignedBuf::set_len beyond capacity");
        self.len = len;
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for cap >= len bytes, initialised (zeroed at alloc).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The region this buffer was carved from, if any.
    pub(crate) fn region(&self) -> Option<&Arc<Region>> {
        self.region.as_ref()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap == 0 || self.region.is_some() {
            return; // `empty()`, or a part of a region (unmapped with its last part).
        }
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) }
    }
}

/// Aligned buffers kept for reuse, by capacity class (powers of two times
/// [`crate::ALIGN`]). I/O buffers come back with their completions and are handed
/// out again, so a hot I/O path neither allocates nor zeroes (and page-faults in)
/// fresh memory per I/O. A reused buffer holds the bytes of its last use: callers
/// overwrite it (a read) or fill it (a write). Classes up to a quarter of a
/// [`REGION`] are filled a region at a time ([`AlignedBuf::carve`]); a class
/// keeps at most `keep` buffers given back, or a region's worth if more.
#[derive(Debug)]
pub struct BufPool {
    classes: Vec<Vec<AlignedBuf>>,
    /// Buffers kept per class at most; more are freed.
    keep: usize,
}

impl BufPool {
    /// A pool keeping at most `keep` buffers of each capacity class.
    pub fn new(keep: usize) -> BufPool {
        BufPool {
            classes: Vec::new(),
            keep,
        }
    }

    /// Buffers of a class allocated at once.
    fn batch(class: usize) -> usize {
        let cap = crate::ALIGN << class;
        if cap <= REGION / 4 { REGION / cap } else { 1 }
    }

    fn class_of(cap: usize) -> usize {
        cap.div_ceil(crate::ALIGN)
            .max(1)
            .next_power_of_two()
            .trailing_zeros() as usize
    }

    /// A buffer of `len` bytes: a kept one of the right class, else a new one
    /// with the class's capacity (so it can be kept when it comes back).
    pub fn get(&mut self, len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf::empty();
        }
        let class = Self::class_of(len);
        if self.classes.len() <= class {
            self.classes.resize_with(class + 1, Vec::new);
        }
        let kept = &mut self.classes[class];
        if kept.is_empty() {
            // A region's worth at once for small classes: no fault per 4 KiB.
            *kept = AlignedBuf::carve(Self::batch(class), crate::ALIGN << class);
        }
        let mut buf = match kept.pop() {
            Some(b) => b,
            None => AlignedBuf::new(crate::ALIGN << class),
        };
        buf.set_len(len);
        buf
    }

    /// Fills the class of `len`-byte buffers now, with its memory faulted in
    /// ([`AlignedBuf::carve_populated`]), unless the class holds buffers already:
    /// for a size the caller will use, so that the first touch of its region
    /// (the kernel zeroing it, on the first I/O that registers or uses it) is
    /// paid at setup and not during the load.
    pub fn prefill(&mut self, len: usize) {
        if len == 0 {
            return;
        }
        let class = Self::class_of(len);
        if self.classes.len() <= class {
            self.classes.resize_with(class + 1, Vec::new);
        }
        if self.classes[class].is_empty() {
            self.classes[class] =
                AlignedBuf::carve_populated(Self::batch(class), crate::ALIGN << class);
        }
    }

    /// Gives a buffer back for reuse (freed if its class is full or its
    /// capacity is not a class size).
    pub fn put(&mut self, buf: AlignedBuf) {
        let cap = buf.capacity();
        if cap == 0 {
            return;
        }
        let class = Self::class_of(cap);
        if crate::ALIGN << class != cap {
            return;
        }
        if self.classes.len() <= class {
            self.classes.resize_with(class + 1, Vec::new);
        }
        if self.classes[class].len() < self.keep.max(Self::batch(class)) {
            self.classes[class].push(buf);
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::new(5000);
        assert_eq!(b.as_ptr() as usize % crate::ALIGN, 0);
        assert_eq!(b.capacity(), 8192);
        assert!(b.as_slice().iter().all(|x| *x == 0));
        b.as_mut_slice()[4999] = 7;
        b.set_len(8192);
        assert_eq!(b.as_slice()[4999], 7);
        let e = AlignedBuf::new(0);
        assert_eq!((e.len(), e.capacity()), (0, 0));
        assert!(e.as_slice().is_empty());
    }

    #[test]
    fn carved_buffers_are_disjoint_zeroed_and_outlive_each_other() {
        let mut bufs = AlignedBuf::carve(70, 32768);
        assert_eq!(bufs.len(), 70, "two regions' worth");
        let mut addrs: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
        addrs.sort_unstable();
        assert!(addrs.windows(2).all(|w| w[1] - w[0] >= 32768));
        assert!(addrs.iter().all(|a| a % crate::ALIGN == 0));
        for (i, b) in bufs.iter_mut().enumerate() {
            assert!(b.as_slice().iter().all(|x| *x == 0));
            b.as_mut_slice().fill(i as u8);
        }
        // Dropping most of a region's buffers leaves the others intact.
        let last = bufs.pop().unwrap();
        let first = bufs.swap_remove(0);
        drop(bufs);
        assert!(first.as_slice().iter().all(|x| *x == 0));
        assert!(last.as_slice().iter().all(|x| *x == 69));
    }

    /// The `VmFlags` of the mapping holding `addr`, from /proc/self/smaps.
    fn vm_flags_at(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = head.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.trim().to_string());
            }
        }
        None
    }

    #[test]
    fn regions_are_advised_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let bufs = AlignedBuf::carve(2, 32768);
        let base = bufs[0].region().map(|r| r.span().0);
        let Some(base) = base else {
            panic!("a region could not be mapped");
        };
        let flags = vm_flags_at(base).unwrap_or_default();
        assert!(
            flags.split_whitespace().any(|f| f == "hg"),
            "MADV_HUGEPAGE not set on the region: VmFlags {flags:?}"
        );
        // A buffer never straddles a huge page, so each is one DMA segment.
        for b in &bufs {
            let a = b.as_ptr() as usize;
            assert_eq!(a / REGION, (a + b.capacity() - 1) / REGION);
        }
    }

    #[test]
    fn pool_reuses_by_class() {
        let mut p = BufPool::new(2);
        let a = p.get(32768);
        assert_eq!((a.len(), a.capacity()), (32768, 32768));
        let addr = a.as_ptr() as usize;
        p.put(a);
        // 20 KiB and 32 KiB share the 32 KiB class: the same memory comes back.
        let b = p.get(20480);
        assert_eq!(
            (b.len(), b.capacity(), b.as_ptr() as usize),
            (20480, 32768, addr)
        );
        let c = p.get(3 * 32768);
        assert_eq!(c.capacity(), 131072, "rounded up to a power of two");
        p.put(b);
        p.put(c);
        // At most `keep` (or a region's worth) per class are kept of those given
        // back; a buffer of an odd capacity is not kept.
        let mut q = BufPool::new(2);
        for _ in 0..3 {
            q.put(AlignedBuf::new(1 << 20));
        }
        q.put(AlignedBuf::new(12288));
        assert_eq!(q.classes[8].len(), 2);
        for _ in 0..70 {
            q.put(AlignedBuf::new(32768));
        }
        assert_eq!(q.classes[3].len(), 64);
        assert!(q.classes.get(2).is_none_or(Vec::is_empty));
        assert_eq!(q.get(0).capacity(), 0);
    }

    #[test]
    fn prefill_fills_a_class_once_and_get_takes_from_it() {
        let mut p = BufPool::new(4);
        p.prefill(100 * 1024);
        let class = BufPool::class_of(100 * 1024);
        assert_eq!(
            p.classes[class].len(),
            REGION / (128 * 1024),
            "a region's worth"
        );
        let first = p.classes[class].last().map(|b| b.as_ptr() as usize);
        let b = p.get(128 * 1024);
        assert_eq!(
            Some(b.as_ptr() as usize),
            first,
            "served from the prefilled class"
        );
        assert!(b.as_slice().iter().all(|x| *x == 0));
        p.prefill(128 * 1024);
        assert_eq!(
            p.classes[class].len(),
            REGION / (128 * 1024) - 1,
            "a class holding buffers is left as it is"
        );
        p.prefill(0);
    }
}
