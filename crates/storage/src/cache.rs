//! The buffer cache of one instance: frames between a minimum and a maximum
//! count, CLOCK eviction of clean pages, dirty pages ordered by the LSN of their
//! first change (what the checkpoint waits for), write coalescing of neighbours.

use mailbench_io::AlignedBuf;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes page numbers with one multiply (Fibonacci hashing): the page maps are
/// looked up several times per transaction, and page numbers need no defence
/// against chosen keys (the default SipHash costs several times more).
#[derive(Default, Clone, Copy)]
pub(crate) struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// What one pass of the scavenger did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scavenged {
    /// Frames it made available.
    pub freed: usize,
    /// Cold dirty pages it passed: their log is not durable yet.
    pub not_durable: usize,
}

/// A map keyed by page number.
pub(crate) type PageMap<V> = HashMap<u64, V, BuildHasherDefault<PageHasher>>;

/// Databases of at most this many pages find a page's frame by indexing an
/// array by page number (4 bytes per page: 16 MiB at the most, 128 KiB per GiB
/// of 32 KiB pages); larger ones through a hash map. The array costs one
/// memory access per look-up where the hash map's probe costs two dependent
/// ones (its control bytes, then its bucket), and the look-ups (each page a
/// transaction touches, each neighbour of a page written back) are a good
/// share of the engine's own CPU (docs/ARCHITECTURE.md, "Performance notes").
const DIRECT_INDEX_MAX_PAGES: u64 = 1 << 22;

/// Which frame holds a page: an array indexed by page number, or a hash map.
enum PageIndex {
    Direct(Vec<u32>),
    Hashed(PageMap<usize>),
}

/// No frame (in [`PageIndex::Direct`]).
const NO_FRAME: u32 = u32::MAX;

impl PageIndex {
    fn new(page_count: u64, max_frames: usize) -> PageIndex {
        match usize::try_from(page_count) {
            Ok(n) if page_count <= DIRECT_INDEX_MAX_PAGES && max_frames < NO_FRAME as usize => {
                PageIndex::Direct(vec![NO_FRAME; n])
            }
            // Room for every frame without growing, at most half full: no
            // larger, the probes of a bigger table miss the CPU's caches more.
            _ => PageIndex::Hashed(PageMap::with_capacity_and_hasher(
                max_frames,
                Default::default(),
            )),
        }
    }

    #[inline]
    fn get(&self, page: u64) -> Option<usize> {
        match self {
            PageIndex::Direct(v) => {
                let f = *v.get(usize::try_from(page).ok()?)?;
                (f != NO_FRAME).then_some(f as usize)
            }
            PageIndex::Hashed(m) => m.get(&page).copied(),
        }
    }

    /// `page` is one of the database's, `f` one of at most `max_frames`.
    fn insert(&mut self, page: u64, f: usize) {
        match self {
            PageIndex::Direct(v) => v[page as usize] = f as u32,
            PageIndex::Hashed(m) => {
                m.insert(page, f);
            }
        }
    }

    fn remove(&mut self, page: u64) {
        match self {
            PageIndex::Direct(v) => {
                if let Some(slot) = usize::try_from(page).ok().and_then(|p| v.get_mut(p)) {
                    *slot = NO_FRAME;
                }
            }
            PageIndex::Hashed(m) => {
                m.remove(&page);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameState {
    /// A read into this frame is in flight.
    Reading,
    Clean,
    Dirty,
    /// A write of this frame's page (a snapshot of it, or its own buffer lent
    /// to the write) is in flight.
    Writing,
}

/// A frame is two cache lines, aligned: the fields a cache hit, a row change
/// and the CLOCK hand read share the first (the page buffer, page number,
/// LSN, checksum, pins, state, reference bit), so a page the CPU's caches do
/// not hold costs one miss there, not two as when frames straddled lines.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Frame {
    /// The page; lent to the read that fills it (empty while `Reading`) or to
    /// a one-page write (empty while that write is in flight).
    pub data: AlignedBuf,
    pub page_no: u64,
    /// LSN of the last change applied to the page.
    pub lsn: u64,
    /// The checksum of `data` as it is (header included), when known: set
    /// when a read page passes its check or a page is sealed, patched by each
    /// row change, so sealing a page for its write needs no pass over it. Set
    /// only for a page whose header is as sealing writes it
    /// ([`crate::format::header_is_sealed`]) with `hdr_lsn` as its LSN.
    pub crc: Option<u32>,
    pub pins: u32,
    pub state: FrameState,
    pub referenced: bool,
    // The second line: the header's LSN, write-back and waiters.
    /// The LSN the page's header holds (while `crc` is known).
    pub hdr_lsn: u64,
    /// LSN of the first change not yet on disk (Dirty and Writing frames).
    pub first_dirty_lsn: u64,
    /// First change made while a write was in flight.
    pub redirtied: Option<u64>,
    /// Sessions waiting for this frame's read.
    pub waiters: Vec<u32>,
}

pub struct Cache {
    pub frames: Vec<Frame>,
    /// Page buffers allocated ahead (at setup, in regions of up to 1 GiB) for
    /// frames not yet created.
    spare: Vec<AlignedBuf>,
    max_frames: usize,
    page_size: usize,
    map: PageIndex,
    free: Vec<usize>,
    hand: usize,
    /// Dirty pages as (LSN of the first change not on disk, frame), sorted;
    /// entries of frames no longer dirty with that LSN are left in place
    /// and skipped (see [`Cache::is_dirty_entry`]).
    dirty: VecDeque<(u64, usize)>,
    /// How many entries of `dirty` are live: the dirty page count.
    dirty_live: usize,
    /// Pages being written as (LSN of their first change, frame), sorted.
    writing: Vec<(u64, usize)>,
}

impl Cache {
    /// A cache of `min_frames` to `max_frames` pages of `page_size` bytes
    /// for a database of `page_count` pages.
    pub fn new(min_frames: usize, max_frames: usize, page_size: usize, page_count: u64) -> Cache {
        let mut c = Cache {
            frames: Vec::with_capacity(max_frames),
            spare: Vec::new(),
            max_frames,
            page_size,
            map: PageIndex::new(page_count, max_frames),
            free: Vec::new(),
            hand: 0,
            dirty: VecDeque::new(),
            dirty_live: 0,
            writing: Vec::new(),
        };
        // The memory of every frame up to the maximum, faulted in now: the
        // cache fills to its maximum under load, and paying the kernel's
        // zeroing of its pages at setup keeps it out of the I/O path (a region
        // faulted in while being registered for I/O cost 19 % of a 20 s run's
        // CPU; docs/ARCHITECTURE.md, "Performance notes"). Frames are still
        // created as the cache grows. Wide regions: a read of two neighbouring
        // pages into their frames is one fixed-buffer request.
        c.spare = AlignedBuf::carve_populated_wide(max_frames, page_size);
        c.spare.reverse();
        for _ in 0..min_frames.min(max_frames) {
            c.grow();
        }
        invariant!(
            c.frames.len() >= min_frames.min(max_frames),
            "cache opened with fewer frames than its minimum"
        );
        c
    }

    fn grow(&mut self) -> usize {
        invariant!(
            self.frames.len() < self.max_frames,
            "cache grown past its maximum of {} frames",
            self.max_frames
        );
        if self.spare.is_empty() {
            let per_region = (mailbench_io::buf::REGION / self.page_size).max(1);
            let n = per_region.min(self.max_frames - self.frames.len()).max(1);
            self.spare = AlignedBuf::carve(n, self.page_size);
        }
        let data = match self.spare.pop() {
            Some(b) => b,
            None => AlignedBuf::new(self.page_size),
        };
        self.frames.push(Frame {
            page_no: u64::MAX,
            state: FrameState::Clean,
            data,
            lsn: 0,
            crc: None,
            hdr_lsn: 0,
            first_dirty_lsn: 0,
            redirtied: None,
            pins: 0,
            referenced: false,
            waiters: Vec::new(),
        });
        let i = self.frames.len() - 1;
        self.free.push(i);
        i
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Frames holding a page (read in, being read, changed or being written):
    /// what the database cache holds, as the published tool's "Database Cache
    /// Size" counts it.
    pub fn resident(&self) -> usize {
        self.frames.len() - self.free.len()
    }

    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    pub fn dirty_count(&self) -> usize {
        self.dirty_live
    }

    pub fn writing_count(&self) -> usize {
        self.writing.len()
    }

    pub fn lookup(&mut self, page: u64) -> Option<usize> {
        let f = self.map.get(page)?;
        self.frames[f].referenced = true;
        Some(f)
    }

    /// Loads `page`'s index entry and, if cached, its frame, so that a
    /// look-up soon after finds both in the CPU's caches (the loads of several
    /// pages issued together overlap their misses).
    #[inline]
    pub fn touch_ahead(&self, page: u64) {
        if let Some(f) = self.map.get(page) {
            std::hint::black_box(self.frames[f].pins);
        }
    }

    /// Whether `page` is cached (in any state) without touching its reference bit.
    pub fn contains(&self, page: u64) -> bool {
        self.map.get(page).is_some()
    }

    /// A frame for `page`, to be filled by a read: a free frame, a new one while
    /// under the maximum, or a clean unpinned page evicted by CLOCK. None means
    /// no clean buffer is free: a page-fault stall.
    pub fn allocate(&mut self, page: u64) -> Option<usize> {
        let f = match self.free.pop() {
            Some(f) => f,
            None if self.frames.len() < self.max_frames => {
                self.grow();
                self.free.pop()?
            }
            None => self.evict()?,
        };
        let fr = &mut self.frames[f];
        fr.page_no = page;
        fr.state = FrameState::Reading;
        fr.lsn = 0;
        fr.crc = None;
        fr.pins = 0;
        fr.referenced = true;
        fr.redirtied = None;
        self.map.insert(page, f);
        Some(f)
    }

    fn evict(&mut self) -> Option<usize> {
        let n = self.frames.len();
        for _ in 0..2 * n {
            let f = self.hand;
            self.hand = (self.hand + 1) % n;
            let fr = &mut self.frames[f];
            if fr.state != FrameState::Clean || fr.pins > 0 || !fr.waiters.is_empty() {
                continue;
            }
            if fr.referenced {
                fr.referenced = false;
                continue;
            }
            self.map.remove(fr.page_no);
            fr.page_no = u64::MAX;
            return Some(f);
        }
        None
    }

    /// Lends frame `f`'s page buffer to a read straight into it, or to a write
    /// straight from it; the I/O's completion gives it back with
    /// [`Cache::restore_buf`].
    pub fn lend_buf(&mut self, f: usize) -> AlignedBuf {
        debug_assert!(matches!(
            self.frames[f].state,
            FrameState::Reading | FrameState::Writing
        ));
        std::mem::replace(&mut self.frames[f].data, AlignedBuf::empty())
    }

    /// Gives frame `f` its page buffer back after an I/O with it.
    pub fn restore_buf(&mut self, f: usize, buf: AlignedBuf) {
        assert_eq!(buf.len(), self.page_size, "a frame's buffer is one page");
        self.frames[f].data = buf;
    }

    /// A read failed: the frame goes back to the free list.
    pub fn discard(&mut self, f: usize) {
        let page = self.frames[f].page_no;
        self.map.remove(page);
        let fr = &mut self.frames[f];
        fr.state = FrameState::Clean;
        fr.page_no = u64::MAX;
        fr.pins = 0;
        self.free.push(f);
    }

    /// Records a change to frame `f` by the log record that starts at `begin`
    /// and ends at `lsn` (replay of that record must start at or before `begin`).
    pub fn mark_dirty(&mut self, f: usize, begin: u64, lsn: u64) {
        let fr = &mut self.frames[f];
        fr.lsn = lsn;
        match fr.state {
            FrameState::Clean => {
                fr.state = FrameState::Dirty;
                fr.first_dirty_lsn = begin;
                self.dirty_insert(begin, f);
            }
            FrameState::Writing => {
                fr.redirtied.get_or_insert(begin);
            }
            FrameState::Dirty | FrameState::Reading => {}
        }
    }

    /// Whether `dirty`'s entry `(lsn, f)` is live: frame `f` is dirty and its
    /// first change not on disk is at `lsn`. An entry goes stale when its page
    /// is taken for writing (or its frame freed); a stale entry never comes
    /// back to life with another page or LSN (LSNs only grow, and a page
    /// dirtied again gets a new entry), and when a failed write makes its
    /// page dirty again at the same LSN, the two entries stand for the one
    /// page and either may be taken (the page is live once in `dirty_live`).
    fn is_dirty_entry(frames: &[Frame], (lsn, f): (u64, usize)) -> bool {
        let fr = &frames[f];
        fr.state == FrameState::Dirty && fr.first_dirty_lsn == lsn
    }

    /// Adds frame `f`, dirty from `lsn` on, to the dirty pages: at the end
    /// (a page's first change is nearly always the newest), else in order.
    fn dirty_insert(&mut self, lsn: u64, f: usize) {
        self.dirty_live += 1;
        let key = (lsn, f);
        if self.dirty.back().is_none_or(|&b| b <= key) {
            self.dirty.push_back(key);
        } else {
            let at = self.dirty.partition_point(|&e| e <= key);
            self.dirty.insert(at, key);
        }
        // Stale entries are dropped as they reach the front; one kept behind
        // a page that is not written for long is dropped here.
        if self.dirty.len() > 2 * self.dirty_live + 1024 {
            let frames = &self.frames;
            self.dirty.retain(|&e| Self::is_dirty_entry(frames, e));
        }
    }

    /// A dirty page went to its write (its entry is stale now): counts it out
    /// and drops the stale entries at the front.
    fn dirty_remove(&mut self) {
        self.dirty_live -= 1;
        while let Some(&e) = self.dirty.front() {
            if Self::is_dirty_entry(&self.frames, e) {
                break;
            }
            self.dirty.pop_front();
        }
    }

    fn writing_insert(&mut self, key: (u64, usize)) {
        let at = self.writing.partition_point(|&e| e < key);
        self.writing.insert(at, key);
    }

    fn writing_remove(&mut self, key: (u64, usize)) {
        if let Ok(at) = self.writing.binary_search(&key) {
            self.writing.remove(at);
        }
    }

    /// The oldest change not yet on disk: where replay must start.
    pub fn oldest_unwritten_lsn(&self) -> Option<u64> {
        let a = self
            .dirty
            .iter()
            .find(|&&e| Self::is_dirty_entry(&self.frames, e))
            .map(|x| x.0);
        let b = self.writing.first().map(|x| x.0);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Picks the oldest dirty page whose changes are durable in the log
    /// (write-ahead rule: `lsn <= durable_lsn`) and its dirty neighbours, up to
    /// `max_pages` contiguous pages; marks them Writing and returns the first page
    /// number and frames in page order.
    pub fn take_write_run(
        &mut self,
        durable_lsn: u64,
        max_pages: usize,
    ) -> Option<(u64, Vec<usize>)> {
        let frames = &self.frames;
        let &(_, f) = self.dirty.iter().find(|&&(lsn, f)| {
            Self::is_dirty_entry(frames, (lsn, f)) && frames[f].lsn <= durable_lsn
        })?;
        Some(self.run_around(f, durable_lsn, max_pages))
    }

    /// [`Cache::take_write_run`] around frame `f` (a cold page the scavenger
    /// chose), if it is dirty and its changes are durable.
    pub fn take_write_run_at(
        &mut self,
        f: usize,
        durable_lsn: u64,
        max_pages: usize,
    ) -> Option<(u64, Vec<usize>)> {
        let fr = self.frames.get(f)?;
        (fr.state == FrameState::Dirty && fr.lsn <= durable_lsn)
            .then(|| self.run_around(f, durable_lsn, max_pages))
    }

    /// Frame `f` (dirty, durable) and its dirty, durable neighbours, up to
    /// `max_pages` contiguous pages, marked Writing: the first page number
    /// and the frames in page order.
    fn run_around(&mut self, f: usize, durable_lsn: u64, max_pages: usize) -> (u64, Vec<usize>) {
        let page = self.frames[f].page_no;
        let eligible = |c: &Cache, p: u64| -> Option<usize> {
            let g = c.map.get(p)?;
            let fr = &c.frames[g];
            (fr.state == FrameState::Dirty && fr.lsn <= durable_lsn).then_some(g)
        };
        let mut first = page;
        let mut run = vec![f];
        while run.len() < max_pages && first > 1 {
            match eligible(self, first - 1) {
                Some(g) => {
                    run.insert(0, g);
                    first -= 1;
                }
                None => break,
            }
        }
        let mut last = page;
        while run.len() < max_pages {
            match eligible(self, last + 1) {
                Some(g) => {
                    run.push(g);
                    last += 1;
                }
                None => break,
            }
        }
        for &g in &run {
            let fr = &mut self.frames[g];
            fr.state = FrameState::Writing;
            fr.redirtied = None;
            let key = (fr.first_dirty_lsn, g);
            self.dirty_remove();
            self.writing_insert(key);
        }
        (first, run)
    }

    /// Frames holding no page, the free ones and those the cache may still
    /// create: ESE's available buffers (its avail pool holds no page data).
    pub fn available(&self) -> usize {
        self.free.len() + (self.max_frames - self.frames.len())
    }

    /// One pass of the scavenger over the CLOCK hand, as ESE maintains its
    /// pool of available buffers from the cold end of its LRU-K: at most
    /// `scan` frames, until `want` frames are freed or found to write. A
    /// page no session holds or waits for and not referenced since the hand
    /// last passed is cold: a clean one is evicted (its frame becomes
    /// available), a dirty one whose changes are durable (`durable_lsn`) goes
    /// to `dirty` (at most `max_dirty`) to be written, and becomes available
    /// on a later pass once clean; a referenced page loses its reference
    /// bit. Says how many frames it freed, and how many cold dirty pages it
    /// passed because their changes are not durable yet (they wait for the
    /// log: the write-ahead rule).
    pub fn scavenge(
        &mut self,
        want: usize,
        durable_lsn: u64,
        max_dirty: usize,
        scan: usize,
        dirty: &mut Vec<usize>,
    ) -> Scavenged {
        let n = self.frames.len();
        let mut freed = 0;
        let mut not_durable = 0;
        for _ in 0..scan.min(2 * n) {
            if freed + dirty.len() >= want {
                break;
            }
            let f = self.hand;
            self.hand = (self.hand + 1) % n;
            let fr = &mut self.frames[f];
            if fr.page_no == u64::MAX || fr.pins > 0 || !fr.waiters.is_empty() {
                continue;
            }
            if fr.referenced {
                fr.referenced = false;
                continue;
            }
            match fr.state {
                FrameState::Clean => {
                    self.map.remove(fr.page_no);
                    fr.page_no = u64::MAX;
                    self.free.push(f);
                    freed += 1;
                }
                FrameState::Dirty if fr.lsn > durable_lsn => not_durable += 1,
                FrameState::Dirty if dirty.len() < max_dirty && !dirty.contains(&f) => {
                    dirty.push(f);
                }
                _ => {}
            }
        }
        Scavenged { freed, not_durable }
    }

    /// A write of frame `f` finished (`ok`), or failed (the page stays dirty).
    pub fn write_done(&mut self, f: usize, ok: bool) {
        let fr = &mut self.frames[f];
        let key = (fr.first_dirty_lsn, f);
        let next_first = if ok {
            fr.redirtied.take()
        } else {
            Some(fr.first_dirty_lsn)
        };
        match next_first {
            Some(l) => {
                fr.state = FrameState::Dirty;
                fr.first_dirty_lsn = l;
                self.dirty_insert(l, f);
            }
            None => fr.state = FrameState::Clean,
        }
        self.writing_remove(key);
    }

    /// The frames of every cached page with a state, for tests and shutdown.
    pub fn frame_of(&self, page: u64) -> Option<usize> {
        self.map.get(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Databases small enough for the page index array (64 pages) and too
    /// large for it (the hash map).
    const PAGE_COUNTS: [u64; 2] = [64, DIRECT_INDEX_MAX_PAGES + 1];

    #[test]
    fn page_index_kinds() {
        assert!(matches!(PageIndex::new(64, 8), PageIndex::Direct(_)));
        let big = PageIndex::new(DIRECT_INDEX_MAX_PAGES + 1, 8);
        assert!(matches!(big, PageIndex::Hashed(_)));
        for mut ix in [PageIndex::new(64, 8), big] {
            assert_eq!(ix.get(5), None);
            ix.insert(5, 3);
            ix.insert(0, 0);
            assert_eq!((ix.get(5), ix.get(0), ix.get(6)), (Some(3), Some(0), None));
            assert_eq!(ix.get(64), None, "past the last page");
            ix.remove(5);
            ix.remove(64);
            assert_eq!((ix.get(5), ix.get(0)), (None, Some(0)));
        }
    }

    #[test]
    fn grows_to_max_then_evicts_clean_only() {
        for pages in PAGE_COUNTS {
            grows_to_max_then_evicts_clean_only_in(pages);
        }
    }

    fn grows_to_max_then_evicts_clean_only_in(pages: u64) {
        let mut c = Cache::new(1, 3, 4096, pages);
        let a = c.allocate(10).unwrap();
        let b = c.allocate(11).unwrap();
        let d = c.allocate(12).unwrap();
        assert_eq!(c.len(), 3);
        for f in [a, b, d] {
            c.frames[f].state = FrameState::Clean;
        }
        c.mark_dirty(a, 5, 5);
        c.mark_dirty(b, 6, 6);
        c.frames[d].pins = 1;
        assert!(c.allocate(13).is_none(), "all dirty or pinned: a stall");
        c.frames[d].pins = 0;
        let e = c.allocate(13).unwrap();
        assert_eq!(e, d);
        assert!(c.frame_of(12).is_none());
    }

    #[test]
    fn write_runs_coalesce_neighbours_and_respect_wal() {
        for pages in PAGE_COUNTS {
            write_runs_coalesce_neighbours_and_respect_wal_in(pages);
        }
    }

    fn write_runs_coalesce_neighbours_and_respect_wal_in(pages: u64) {
        let mut c = Cache::new(0, 8, 4096, pages);
        for (p, lsn) in [(5u64, 10u64), (6, 20), (7, 30), (9, 5)] {
            let f = c.allocate(p).unwrap();
            c.frames[f].state = FrameState::Clean;
            c.mark_dirty(f, lsn, lsn);
        }
        assert_eq!(c.oldest_unwritten_lsn(), Some(5));
        // Durable up to 25: page 9 (lsn 5) goes first, alone.
        let (first, run) = c.take_write_run(25, 8).unwrap();
        assert_eq!((first, run.len()), (9, 1));
        // Then 5 and 6 together; 7 (lsn 30) is not durable yet.
        let (first, run) = c.take_write_run(25, 8).unwrap();
        assert_eq!((first, run.len()), (5, 2));
        assert!(c.take_write_run(25, 8).is_none());
        // A change during the write keeps page 5 dirty afterwards.
        c.mark_dirty(run[0], 40, 40);
        c.write_done(run[0], true);
        c.write_done(run[1], true);
        assert_eq!(c.frames[run[0]].state, FrameState::Dirty);
        assert_eq!(c.frames[run[1]].state, FrameState::Clean);
        assert_eq!(c.oldest_unwritten_lsn(), Some(5), "page 9 still writing");
    }

    /// The dirty and writing sets against a plain ordered model (the
    /// `BTreeSet`s they replace): changes, write runs taken at a durable LSN,
    /// writes finishing, failing or redirtied, in a random order.
    #[test]
    fn dirty_order_matches_an_ordered_set() {
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeSet;
        for seed in 0..20u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut c = Cache::new(0, 48, 4096, 64);
            for p in 1..49 {
                let f = c.allocate(p).unwrap();
                c.frames[f].state = FrameState::Clean;
            }
            let mut dirty = BTreeSet::new();
            let mut writing = BTreeSet::new();
            let mut in_flight: Vec<usize> = Vec::new();
            let mut lsn = 1u64;
            for _ in 0..3000 {
                match rng.random_range(0..10) {
                    0..5 => {
                        let f = c.frame_of(rng.random_range(1..49)).unwrap();
                        let st = c.frames[f].state;
                        c.mark_dirty(f, lsn, lsn + 1);
                        if st == FrameState::Clean {
                            dirty.insert((lsn, f));
                        }
                        lsn += 2;
                    }
                    5..7 => {
                        let durable = lsn.saturating_sub(rng.random_range(0..20));
                        let oldest = dirty
                            .iter()
                            .find(|&&(_, f)| c.frames[f].lsn <= durable)
                            .map(|x| x.1);
                        let taken = c.take_write_run(durable, 4);
                        assert_eq!(
                            taken
                                .as_ref()
                                .map(|(_, run)| run.contains(&oldest.unwrap())),
                            oldest.map(|_| true),
                            "the oldest durable dirty page goes first"
                        );
                        if let Some((_, run)) = taken {
                            for g in run {
                                let k = (c.frames[g].first_dirty_lsn, g);
                                assert!(dirty.remove(&k), "{k:?} taken but not dirty");
                                writing.insert(k);
                                in_flight.push(g);
                            }
                        }
                    }
                    _ if !in_flight.is_empty() => {
                        let g = in_flight.swap_remove(rng.random_range(0..in_flight.len()));
                        let ok = rng.random_range(0..4) > 0;
                        let k = (c.frames[g].first_dirty_lsn, g);
                        let redirtied = c.frames[g].redirtied;
                        c.write_done(g, ok);
                        writing.remove(&k);
                        match (ok, redirtied) {
                            (false, _) => dirty.insert(k),
                            (true, Some(l)) => dirty.insert((l, g)),
                            (true, None) => true,
                        };
                    }
                    _ => {}
                }
                assert_eq!(c.dirty_count(), dirty.len());
                assert_eq!(c.writing_count(), writing.len());
                let want = match (dirty.first(), writing.first()) {
                    (Some(a), Some(b)) => Some(a.0.min(b.0)),
                    (a, b) => a.or(b).map(|x| x.0),
                };
                assert_eq!(c.oldest_unwritten_lsn(), want);
                let live: Vec<_> = c
                    .dirty
                    .iter()
                    .copied()
                    .filter(|&e| Cache::is_dirty_entry(&c.frames, e))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                assert_eq!(live, dirty.iter().copied().collect::<Vec<_>>());
            }
        }
    }

    /// The cache never holds more frames than its maximum: growing past it
    /// is a broken invariant, not a bigger cache.
    #[test]
    #[cfg(any(debug_assertions, feature = "invariants"))]
    #[should_panic(expected = "cache grown past its maximum")]
    fn growing_past_the_maximum_breaks_an_invariant() {
        let mut c = Cache::new(1, 2, 4096, 64);
        c.grow();
        c.grow();
    }

    /// The scavenger evicts cold clean pages, hands cold dirty pages whose
    /// changes are durable to be written, and spares referenced ones once.
    #[test]
    fn the_scavenger_frees_cold_clean_pages_and_finds_cold_dirty_ones() {
        let mut c = Cache::new(0, 6, 4096, 64);
        for p in 1..=6u64 {
            let f = c.allocate(p).unwrap();
            c.frames[f].state = FrameState::Clean;
        }
        assert_eq!(c.available(), 0);
        // Pages 1 and 2 dirty (2 not yet durable), 3 pinned.
        let f1 = c.frame_of(1).unwrap();
        let f2 = c.frame_of(2).unwrap();
        c.mark_dirty(f1, 10, 10);
        c.mark_dirty(f2, 20, 20);
        let f3 = c.frame_of(3).unwrap();
        c.frames[f3].pins = 1;
        let mut dirty = Vec::new();
        // First pass: every page was referenced by its allocation.
        assert_eq!(c.scavenge(6, 15, 4, 6, &mut dirty).freed, 0);
        let s = c.scavenge(6, 15, 4, 12, &mut dirty);
        assert_eq!(s.freed, 3, "pages 4, 5 and 6 evicted");
        assert!(s.not_durable >= 1, "page 2 waits for the log");
        assert_eq!(dirty, [f1], "page 1 is durable, page 2 not yet");
        assert_eq!(c.available(), 3);
        assert!(c.contains(2) && c.contains(3) && !c.contains(4));
        let (first, run) = c.take_write_run_at(f1, 15, 8).unwrap();
        assert_eq!((first, run.len()), (1, 1));
        assert!(c.take_write_run_at(f2, 15, 8).is_none(), "write-ahead rule");
    }

    /// The hot fields share a frame's first cache line.
    #[test]
    fn frame_hot_fields_share_its_first_line() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!((align_of::<Frame>(), size_of::<Frame>()), (64, 128));
        for end in [
            offset_of!(Frame, data) + size_of::<AlignedBuf>(),
            offset_of!(Frame, crc) + size_of::<Option<u32>>(),
            offset_of!(Frame, pins) + 4,
            offset_of!(Frame, state) + 1,
            offset_of!(Frame, referenced) + 1,
        ] {
            assert!(end <= 64, "{end}");
        }
    }

    #[test]
    fn resident_counts_frames_holding_a_page() {
        let mut c = Cache::new(4, 8, 4096, 64);
        assert_eq!(
            (c.len(), c.resident()),
            (4, 0),
            "the minimum is allocated, empty"
        );
        let a = c.allocate(1).unwrap();
        let _ = c.allocate(2).unwrap();
        assert_eq!(c.resident(), 2);
        c.discard(a);
        assert_eq!(c.resident(), 1, "a failed read gives its frame back");
        for p in 10..20 {
            if let Some(f) = c.allocate(p) {
                c.frames[f].state = FrameState::Clean;
                c.frames[f].referenced = false;
            }
        }
        assert_eq!((c.len(), c.resident()), (8, 8), "never beyond the maximum");
    }
}
