//! Bind the calling thread to one NUMA node, the way `numactl --cpunodebind=N --membind=N`
//! does for a whole process (AzNHC runs its bandwidth checks under it): CPUs with
//! `sched_setaffinity(2)` (pid 0 = this thread), memory with `set_mempolicy(2)` `MPOL_BIND`.
//! Both are per thread, so a helper thread's binding ends with it. Only ever called in the
//! CUDA helper process (`worker.rs`), on the machine it runs on.

/// `MPOL_BIND` (linux/mempolicy.h).
const MPOL_BIND: libc::c_int = 2;

/// Bind this thread to `cpus` and its memory to `node`. `Err` says what could not be bound
/// (the thread then runs unbound: the figure is still measured, and says so).
pub fn bind_thread(node: Option<u32>, cpus: &[u32]) -> Result<(), String> {
    let mut problems = Vec::new();
    if !cpus.is_empty()
        && let Err(e) = bind_cpus(cpus)
    {
        problems.push(format!("cpus: {e}"));
    }
    if let Some(node) = node
        && let Err(e) = bind_memory(node)
    {
        problems.push(format!("memory of node {node}: {e}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn bind_cpus(cpus: &[u32]) -> Result<(), String> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
    let mut any = false;
    for &cpu in cpus {
        if (cpu as usize) < capacity {
            // SAFETY: cpu is below the set's capacity.
            unsafe { libc::CPU_SET(cpu as usize, &mut set) };
            any = true;
        }
    }
    if !any {
        return Err("no cpu below the affinity mask's size".into());
    }
    // SAFETY: pid 0 is the calling thread; the set is a valid cpu_set_t of that size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

fn bind_memory(node: u32) -> Result<(), String> {
    let words = node as usize / 64 + 1;
    let mut mask = vec![0u64; words];
    mask[node as usize / 64] |= 1u64 << (node % 64);
    // The kernel reads maxnode - 1 bits (mm/mempolicy.c get_nodes), as numactl passes them.
    let maxnode = (words * 64 + 1) as libc::c_ulong;
    // SAFETY: set_mempolicy reads `words` longs from a valid buffer and changes only this
    // thread's policy.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, MPOL_BIND, mask.as_ptr(), maxnode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_does_not_exist_is_an_error_not_a_crash() {
        std::thread::spawn(|| {
            let err = bind_thread(Some(4000), &[100_000]).unwrap_err();
            assert!(err.contains("cpus"), "{err}");
            assert!(err.contains("node 4000"), "{err}");
            // Unbound: nothing asked.
            assert!(bind_thread(None, &[]).is_ok());
        })
        .join()
        .unwrap();
    }
}
