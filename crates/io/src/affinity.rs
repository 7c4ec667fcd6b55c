//! Which cores a thread may run on: a worker pinned to its own core, and the
//! control threads (sockets, metrics, key exchange, reload) kept off the workers'
//! cores, so that a control request never preempts a worker in the middle of a
//! run.

/// The cores the calling thread may run on now.
pub fn allowed() -> Result<Vec<usize>, String> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size
    // into it, and CPU_ISSET reads inside it (every index below CPU_SETSIZE).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "reading the thread's cores: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Lets the calling thread run on `cores` only (none: refused).
pub fn run_on(cores: &[usize]) -> Result<(), String> {
    if cores.is_empty() {
        return Err("no core to run on".into());
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (each core below
    // CPU_SETSIZE, checked), and sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cores {
            if core >= libc::CPU_SETSIZE as usize {
                return Err(format!("core {core}: past what this system can name"));
            }
            libc::CPU_SET(core, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "running on cores {cores:?}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Pins the calling thread to `core`.
pub fn pin_to(core: usize) -> Result<(), String> {
    run_on(&[core]).map_err(|e| format!("pinning the worker to core {core}: {e}"))
}

/// The cores for control threads: those of `allowed` no worker is pinned to, or
/// all of `allowed` when the workers take every one (then they share, as before).
pub fn control_cores(allowed: &[usize], workers: &[usize]) -> Vec<usize> {
    let free: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !workers.contains(c))
        .collect();
    if free.is_empty() {
        allowed.to_vec()
    } else {
        free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_threads_keep_off_the_workers_cores_while_one_is_left() {
        assert_eq!(control_cores(&[0, 1, 2, 3], &[0, 1]), [2, 3]);
        assert_eq!(control_cores(&[0, 1], &[0]), [1]);
        assert_eq!(control_cores(&[0, 1], &[0, 1]), [0, 1]);
        assert_eq!(control_cores(&[2, 3], &[]), [2, 3]);
    }

    #[test]
    fn the_allowed_cores_can_be_read_and_set_again() {
        let all = allowed().unwrap();
        assert!(!all.is_empty());
        run_on(&all).unwrap();
        assert_eq!(allowed().unwrap(), all);
        assert!(run_on(&[]).is_err());
    }
}
