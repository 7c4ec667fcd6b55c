//! Giving freed memory back to the system. The allocator keeps what a process freed
//! for reuse; after a mass removal (tens of thousands of peers) that is tens of MiB
//! the operator sees as resident and never gets back. This asks glibc to return it.

/// Blocks at least this large are mapped on their own and unmapped when freed.
const MAPPED_FROM_BYTES: libc::c_int = 128 * 1024;

/// Fixes the size from which glibc maps a block on its own, for a daemon that lives
/// for months. By default glibc raises that size to the largest block ever freed, so
/// after one mass change (a 10,000-peer table, its parse) every later big table lands
/// in the heap among small live blocks, where trimming cannot return it: resident
/// memory then creeps up round after round. A fixed size keeps big tables mapped
/// (one system call each, off the packet path) and their memory returns on free.
pub fn keep_large_blocks_mapped() {
    // SAFETY: mallopt only changes the allocator's tuning; it touches no memory the
    // program holds and is safe to call at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED_FROM_BYTES);
    }
}

/// Returns the heap's free memory to the system (glibc `malloc_trim`). Costs time in
/// proportion to the heap, so call it off the packet path, after a large removal.
pub fn give_back_free_memory() {
    // SAFETY: malloc_trim only walks and releases the allocator's own free lists;
    // it is thread-safe and touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
