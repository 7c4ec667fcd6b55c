//! Giving freed memory back to the system. The allocator keeps what a process freed
//! for reuse; after a mass removal (tens of thousands of peers) that is tens of MiB
//! the operator sees as resident and never gets back. This asks glibc to return it.

/// Returns the heap's free memory to the system (glibc `malloc_trim`). Costs time in
/// proportion to the heap, so call it off the packet path, after a large removal.
pub fn give_back_free_memory() {
    // SAFETY: malloc_trim only walks and releases the allocator's own free lists;
    // it is thread-safe and touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
