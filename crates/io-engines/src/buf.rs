//! Page-aligned heap buffers for O_DIRECT.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// A zeroed heap buffer aligned to [`crate::ALIGN`]. Its address never changes
/// while it lives, so it can be handed to the kernel by pointer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// The buffer is plain owned memory.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

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
        AlignedBuf { ptr, len, cap }
    }

    /// A buffer of no bytes that owns no memory: the placeholder of a buffer lent
    /// to an I/O, and the buffer of an fdatasync.
    pub fn empty() -> AlignedBuf {
        AlignedBuf {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
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

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap == 0 {
            return; // `empty()`: nothing was allocated.
        }
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) }
    }
}

/// Aligned buffers kept for reuse, by capacity class (powers of two times
/// [`crate::ALIGN`]). I/O buffers come back with their completions and are handed
/// out again, so a hot I/O path neither allocates nor zeroes (and page-faults in)
/// fresh memory per I/O. A reused buffer holds the bytes of its last use: callers
/// overwrite it (a read) or fill it (a write).
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
        let mut buf = match self.classes.get_mut(class).and_then(Vec::pop) {
            Some(b) => b,
            None => AlignedBuf::new(crate::ALIGN << class),
        };
        buf.set_len(len);
        buf
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
        if self.classes[class].len() < self.keep {
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
        // At most `keep` per class; a buffer of an odd capacity is not kept.
        for _ in 0..3 {
            p.put(AlignedBuf::new(32768));
        }
        p.put(AlignedBuf::new(12288));
        assert_eq!(p.classes[3].len(), 2);
        assert!(p.classes[2].is_empty());
        assert_eq!(p.get(0).capacity(), 0);
    }
}
