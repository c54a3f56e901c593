//! What every test binary sets in its own environment before libtest starts.
//!
//! - **`TMPDIR` at the scratch base** ([`super::scratch::base`], a RAM file system when there is
//!   a roomy one). The tests replay fixtures in their own process too (`source::open`,
//!   `engine::run`), and replaying an overlay fixture composes it in a temporary directory
//!   (`src/source/overlay.rs`), as unpacking a `.tar.gz` does: on this project's ext4 machines
//!   those files cost system time that grows with every file the suite removed (see
//!   scratch.rs), which made the replay sweeps twice as slow as on tmpfs. Child processes
//!   inherit it. `GPUDOCTOR_TEST_TMPDIR` chooses the directory, as for every scratch tree.
//! - **No variable gpudoctor reads from the caller** (`source::is_read_env`: `CUDA_VISIBLE_DEVICES`,
//!   `NCCL_*`, `KUBERNETES_SERVICE_HOST`, `NODE_NAME`, ...): every gpudoctor a test starts reports them (`driver.gpu_processes`), so a
//!   CI machine's environment would change verdicts. Tests that want one set it on the child.
//! - **More test threads for binaries whose tests mostly wait** ([`tests_mostly_wait!`]): a
//!   test that proves a timeout or a SIGTERM grace period sleeps for seconds on no CPU, and
//!   libtest runs as many tests at once as there are cores, so on two cores those waits were
//!   a minute of the suite one after another. `RUST_TEST_THREADS` or `--test-threads` given by
//!   the caller still wins.
//!
//! Both run from `.init_array` (the ELF constructors the dynamic loader runs before `main`,
//! System V gABI "Initialization and Termination Functions"): libtest reads
//! `RUST_TEST_THREADS` as it starts, before any test could set it, and changing the environment
//! is only sound while the process has one thread, which is the case only before `main`.

/// Runs before `main`; see the module doc.
extern "C" fn scratch_tmpdir() {
    let base = super::scratch::base().to_path_buf();
    // SAFETY: before `main`, the process has a single thread; nothing reads the environment
    // concurrently.
    unsafe { std::env::set_var("TMPDIR", base) };
    // No variable of the shell that runs the tests reaches a gpudoctor they start
    // (`driver.gpu_processes` warns on these): a test that wants one sets it on its command.
    for (name, _) in std::env::vars_os() {
        if let Some(name) = name.to_str()
            && gpudoctor::source::is_read_env(name)
        {
            // SAFETY: as above.
            unsafe { std::env::remove_var(name) };
        }
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static SCRATCH_TMPDIR: extern "C" fn() = scratch_tmpdir;

/// Test threads for a binary whose tests mostly wait: at least [`WAITING_THREADS`], or the
/// cores when there are more.
pub const WAITING_THREADS: usize = 8;

/// Runs before `main` in binaries that ask for it; see the module doc.
pub extern "C" fn more_threads_for_waiting_tests() {
    if std::env::var_os("RUST_TEST_THREADS").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: before `main`, the process has a single thread.
    unsafe { std::env::set_var("RUST_TEST_THREADS", cores.max(WAITING_THREADS).to_string()) };
}

/// Put at the top of a test binary whose tests mostly wait on timeouts or grace periods:
/// libtest then runs [`WAITING_THREADS`] of them at once.
#[allow(unused_macros)]
macro_rules! tests_mostly_wait {
    () => {
        #[used]
        #[unsafe(link_section = ".init_array")]
        static MORE_THREADS_FOR_WAITING_TESTS: extern "C" fn() =
            crate::common::before_main::more_threads_for_waiting_tests;
    };
}
pub(crate) use tests_mostly_wait;
